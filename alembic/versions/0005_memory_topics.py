"""memories keep the slot they fill (topic) and whether it holds one value or many
(cardinality), indexed with the scope so a new value finds the one it replaces

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('memories', schema=None) as batch_op:
        batch_op.add_column(sa.Column('topic', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('cardinality', sa.String(length=8), nullable=True))
        batch_op.create_index('ix_memories_scope_topic', ['user_id', 'agent_id', 'project', 'topic'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_memories_scope_topic', table_name='memories')
    for name in ('cardinality', 'topic'):  # in place (SQLite >= 3.35): a copied table would break the events' keys
        op.drop_column('memories', name)
