"""sessions keep the context meter's running state (token_total, meter_cycle, meter_figure,
meter_base), so the meter reads in O(1) instead of scanning the session's messages

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

from dreamer.core.meter import METER_KEY, MeterState, advance


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

COLUMNS = ('token_total', 'meter_cycle', 'meter_figure', 'meter_base')

sessions = sa.table('sessions', sa.column('id', sa.Integer), *(sa.column(c, sa.Integer) for c in COLUMNS))
messages = sa.table(
    'messages', sa.column('session_id', sa.Integer), sa.column('seq', sa.Integer),
    sa.column('token_count', sa.Integer), sa.column('meta', sa.JSON),
)


def upgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        for name in COLUMNS:
            batch_op.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default='0'))
    conn = op.get_bind()
    summed = (sa.select(sa.func.coalesce(sa.func.sum(messages.c.token_count), 0))
              .where(messages.c.session_id == sessions.c.id).scalar_subquery())
    conn.execute(sa.update(sessions).values(token_total=summed))
    _backfill_marked(conn)


def _backfill_marked(conn) -> None:
    """The meter state of every session whose messages carry marks, replayed from its messages."""
    marked = sa.select(messages.c.session_id).where(
        sa.cast(messages.c.meta, sa.String).like(f'%"{METER_KEY}"%')).distinct()
    for sid in [row[0] for row in conn.execute(marked)]:
        rows = conn.execute(sa.select(messages.c.token_count, messages.c.meta)
                            .where(messages.c.session_id == sid).order_by(messages.c.seq)).all()
        state = advance(MeterState(), ((tokens or 0, meta) for tokens, meta in rows))
        conn.execute(sa.update(sessions).where(sessions.c.id == sid).values(**state.columns()))


def downgrade() -> None:
    for name in reversed(COLUMNS):  # in place (SQLite >= 3.35): a copied table would break the messages' keys
        op.drop_column('sessions', name)
