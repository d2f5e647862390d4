"""llm_endpoints: the structured-output mode and context window learnt per endpoint and model

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'llm_endpoints',
        sa.Column('base_url', sqlmodel.sql.sqltypes.AutoString(length=512), nullable=False),
        sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column('mode', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column('context_window', sa.Integer(), nullable=True),
        sa.Column('window_source', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column('checked_seconds', sa.Float(), nullable=True),
        sa.Column('checked_tokens', sa.Integer(), nullable=True),
        sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('base_url', 'model'),
    )


def downgrade() -> None:
    op.drop_table('llm_endpoints')
