"""provider_breakers: the external memory provider's circuit breaker as its process last changed
it, so that `dreamer status` in any shell reads it

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'provider_breakers',
        sa.Column('provider', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('breaker', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('reason', sa.Text(), nullable=True),
        sa.Column('changes', sa.JSON(), nullable=False),
        sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('provider'),
    )


def downgrade() -> None:
    op.drop_table('provider_breakers')
