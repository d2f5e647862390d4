"""offloaded_bodies: message bodies a compaction took out of an agent's active context, kept
so that a marker's id restores them

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'offloaded_bodies',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('user_id', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column('agent_id', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
        sa.Column('project', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
        sa.Column('team', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
        sa.Column('session_id', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
        sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('tool', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
        sa.Column('tool_call_id', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('tokens', sa.Integer(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_offloaded_bodies_user', 'offloaded_bodies', ['user_id', 'created_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_offloaded_bodies_user', table_name='offloaded_bodies')
    op.drop_table('offloaded_bodies')
