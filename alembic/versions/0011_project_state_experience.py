"""project_states, experience_entries and experience_events: memory for code work (the state of
each unit with its evidence, lessons that earn trust, and the history of both)

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-04
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def _s(n: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=n)


def _when(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sqlmodel.sql.sqltypes.UTCDateTime(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        'project_states',
        sa.Column('id', _s(32), nullable=False),
        sa.Column('user_id', _s(255), nullable=False),
        sa.Column('project', _s(255), nullable=False),
        sa.Column('branch', _s(255), nullable=False),
        sa.Column('unit', _s(255), nullable=False),
        sa.Column('field', _s(255), nullable=False),
        sa.Column('value', sa.JSON(), nullable=True),
        sa.Column('status', _s(24), nullable=False),
        sa.Column('evidence', sa.JSON(), nullable=False),
        sa.Column('depends_on', sa.JSON(), nullable=False),
        sa.Column('reason', sa.Text(), nullable=True),
        _when('created_at'),
        _when('updated_at'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('user_id', 'project', 'branch', 'unit', 'field', name='uq_project_states_field'),
    )
    op.create_index('ix_project_states_scope', 'project_states', ['user_id', 'project', 'branch'])
    op.create_table(
        'experience_entries',
        sa.Column('id', _s(32), nullable=False),
        sa.Column('user_id', _s(255), nullable=False),
        sa.Column('project', _s(255), nullable=False),
        sa.Column('branch', _s(255), nullable=False),
        sa.Column('unit', _s(255), nullable=True),
        sa.Column('text', sa.Text(), nullable=False),
        sa.Column('basis', _s(16), nullable=False),
        sa.Column('origin', _s(16), nullable=False),
        sa.Column('status', _s(24), nullable=False),
        *(sa.Column(name, sa.JSON(), nullable=False) for name in (
            'conditions', 'counterexamples', 'unverified', 'source_tasks', 'verified_units',
            'versions', 'depends_on', 'keywords', 'evidence')),
        sa.Column('ever_verified', sa.Boolean(), nullable=False),
        sa.Column('untrusted', sa.Boolean(), nullable=False),
        sa.Column('note', sa.Text(), nullable=True),
        sa.Column('reason', sa.Text(), nullable=True),
        sa.Column('confirmed_by', _s(255), nullable=True),
        _when('last_confirmed', nullable=True),
        _when('created_at'),
        _when('updated_at'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_experience_entries_scope', 'experience_entries', ['user_id', 'project', 'branch', 'status'])
    op.create_table(
        'experience_events',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('user_id', _s(255), nullable=False),
        sa.Column('project', _s(255), nullable=False),
        sa.Column('branch', _s(255), nullable=False),
        sa.Column('subject', _s(8), nullable=False),
        sa.Column('subject_id', _s(32), nullable=False),
        sa.Column('event', _s(24), nullable=False),
        sa.Column('status_before', _s(24), nullable=True),
        sa.Column('status_after', _s(24), nullable=False),
        sa.Column('reason', sa.Text(), nullable=True),
        sa.Column('data', sa.JSON(), nullable=True),
        _when('created_at'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_experience_events_subject', 'experience_events', ['subject_id'])


def downgrade() -> None:
    op.drop_index('ix_experience_events_subject', table_name='experience_events')
    op.drop_table('experience_events')
    op.drop_index('ix_experience_entries_scope', table_name='experience_entries')
    op.drop_table('experience_entries')
    op.drop_index('ix_project_states_scope', table_name='project_states')
    op.drop_table('project_states')
