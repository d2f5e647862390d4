"""dream_runs.held: the supersedes and forgets the guard held for a person (`review_required`)

Revision ID: 0006
Revises: 0004
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('dream_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('held', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    op.drop_column('dream_runs', 'held')  # in place (SQLite >= 3.35): a copied table would break the events' keys
