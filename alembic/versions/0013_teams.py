"""teams: a user's team of agents, its leader and whether it is temporary

Revision ID: 0013
Revises: 0009
Create Date: 2026-12-04
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0013'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'teams',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('user_id', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column('leader', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column('temporary', sa.Boolean(), nullable=False),
        sa.Column('rounds', sa.Integer(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('user_id', 'name', name='uq_teams_user_name'),
    )


def downgrade() -> None:
    op.drop_table('teams')
