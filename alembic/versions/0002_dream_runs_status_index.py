"""index dream_runs by status (the sweep for abandoned runs reads the running ones)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""
from alembic import op


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('dream_runs', schema=None) as batch_op:
        batch_op.create_index('ix_dream_runs_status', ['status'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('dream_runs', schema=None) as batch_op:
        batch_op.drop_index('ix_dream_runs_status')
