"""leases keep their holder's heartbeat (a pass whose holder went silent is taken over after a
short grace, not at expiry); dream_runs count the calls whose cost the server never reported
(their bill is a floor)

Revision ID: 0016
Revises: 0014
Create Date: 2026-12-05
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0016'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('leases', schema=None) as batch_op:
        batch_op.add_column(sa.Column('heartbeat_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
    with op.batch_alter_table('dream_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('unbilled_calls', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    op.drop_column('dream_runs', 'unbilled_calls')
    op.drop_column('leases', 'heartbeat_at')
