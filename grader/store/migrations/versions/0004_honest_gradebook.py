"""The honest gradebook: instructors' overrides (with reason and author), removals that can be
undone, the submission a person chose to count, the learner's report language (from the roster),
and an append-only audit of every change. Only new tables and nullable or defaulted columns: an
existing gradebook upgrades in place, its grades untouched.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'audit',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('actor', sa.String(length=300), nullable=False),
        sa.Column('action', sa.String(length=40), nullable=False),
        sa.Column('learner', sa.String(length=200), nullable=True),
        sa.Column('exercise', sa.String(length=100), nullable=True),
        sa.Column('details', sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_audit')),
    )
    with op.batch_alter_table('audit', schema=None) as batch_op:
        batch_op.create_index('ix_audit_learner_exercise', ['learner', 'exercise'], unique=False)

    op.create_table(
        'overrides',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('learner_id', sa.Integer(), nullable=False),
        sa.Column('exercise', sa.String(length=100), nullable=False),
        sa.Column('score', sa.Float(), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('author', sa.String(length=300), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('revoked_by', sa.String(length=300), nullable=True),
        sa.ForeignKeyConstraint(
            ['learner_id'], ['learners.id'], name=op.f('fk_overrides_learner_id_learners'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_overrides')),
    )
    with op.batch_alter_table('overrides', schema=None) as batch_op:
        batch_op.create_index('ix_overrides_learner_exercise', ['learner_id', 'exercise'], unique=False)

    # plain ALTER TABLE ADD COLUMN, never a batch "move and copy": on SQLite that drops the old
    # table, and the drop cascades to every grade run of its submissions
    op.add_column('learners', sa.Column('lang', sa.String(length=10), nullable=True))
    op.add_column('learners', sa.Column('removed_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('submissions', sa.Column('chosen', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column('submissions', sa.Column('removed_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    for table, column in (
        ('submissions', 'removed_at'),
        ('submissions', 'chosen'),
        ('learners', 'removed_at'),
        ('learners', 'lang'),
    ):
        op.drop_column(table, column)  # SQLite >= 3.35 drops a column in place (see upgrade)
    op.drop_index('ix_overrides_learner_exercise', table_name='overrides')
    op.drop_table('overrides')
    op.drop_index('ix_audit_learner_exercise', table_name='audit')
    op.drop_table('audit')
