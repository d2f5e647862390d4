"""Alembic environment: runs against the engine handed in by dreamer.db, or alembic.ini's URL."""

from sqlalchemy import engine_from_config, pool
from sqlmodel import SQLModel

import dreamer.core.models  # noqa: F401  (registers the tables)
from alembic import context

config = context.config
target_metadata = SQLModel.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        engine = engine_from_config(
            config.get_section(config.config_ini_section, {}),
            prefix="sqlalchemy.",
            poolclass=pool.NullPool,
        )
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
