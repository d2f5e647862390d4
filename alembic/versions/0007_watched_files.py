"""watched_files: how far each transcript file of a watched source (or a hook's) was read

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'watched_files',
        sa.Column('path_key', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('path', sa.Text(), nullable=False),
        sa.Column('format', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('user_id', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column('offset_bytes', sa.BigInteger(), nullable=False),
        sa.Column('size_bytes', sa.BigInteger(), nullable=False),
        sa.Column('mtime_ns', sa.BigInteger(), nullable=False),
        sa.Column('head_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('messages', sa.Integer(), nullable=False),
        sa.Column('sessions', sa.Integer(), nullable=False),
        sa.Column('last_seen_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('ingested_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column('problem', sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint('path_key'),
    )


def downgrade() -> None:
    op.drop_table('watched_files')
