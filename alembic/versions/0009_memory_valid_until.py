"""memories keep when what they say is over (valid_until): a dated fact ("the interview is next
Tuesday") is labelled past after it

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('memories', schema=None) as batch_op:
        batch_op.add_column(sa.Column('valid_until', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column('memories', 'valid_until')  # in place (SQLite >= 3.35): a copied table would break the events' keys
