"""views_due: users whose Markdown view is behind SQL (a dream pass renders them once, at its end)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'views_due',
        sa.Column('user_id', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column('token', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('user_id'),
    )


def downgrade() -> None:
    op.drop_table('views_due')
