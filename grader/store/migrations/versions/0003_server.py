"""The grading server's tables: accounts (token hashes), uploads, the job queue, extensions, the
late-day ledger, releases and settings. Only new tables: an existing gradebook upgrades in place,
its learners, submissions and grades untouched.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'releases',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('exercise', sa.String(length=100), nullable=False),
        sa.Column('released_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('author', sa.String(length=300), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_releases')),
    )
    with op.batch_alter_table('releases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_releases_exercise'), ['exercise'], unique=False)

    op.create_table(
        'settings',
        sa.Column('key', sa.String(length=100), nullable=False),
        sa.Column('value', sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint('key', name=op.f('pk_settings')),
    )
    op.create_table(
        'accounts',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('learner_id', sa.Integer(), nullable=False),
        sa.Column('role', sa.String(length=20), nullable=False),
        sa.Column('token_hash', sa.String(length=64), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ['learner_id'], ['learners.id'], name=op.f('fk_accounts_learner_id_learners'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_accounts')),
        sa.UniqueConstraint('token_hash', name=op.f('uq_accounts_token_hash')),
    )
    with op.batch_alter_table('accounts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_accounts_learner_id'), ['learner_id'], unique=False)

    op.create_table(
        'extensions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('learner_id', sa.Integer(), nullable=False),
        sa.Column('exercise', sa.String(length=100), nullable=False),
        sa.Column('due', sa.DateTime(timezone=True), nullable=False),
        sa.Column('closes', sa.DateTime(timezone=True), nullable=True),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('author', sa.String(length=300), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['learner_id'],
            ['learners.id'],
            name=op.f('fk_extensions_learner_id_learners'),
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_extensions')),
    )
    with op.batch_alter_table('extensions', schema=None) as batch_op:
        batch_op.create_index('ix_extensions_learner_exercise', ['learner_id', 'exercise'], unique=False)

    op.create_table(
        'uploads',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('learner_id', sa.Integer(), nullable=False),
        sa.Column('exercise', sa.String(length=100), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('version_id', sa.Integer(), nullable=False),
        sa.Column('idempotency_key', sa.String(length=200), nullable=True),
        sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('use_late_day', sa.Boolean(), nullable=False),
        sa.Column('late_days_spent', sa.Integer(), nullable=False),
        sa.Column('chosen', sa.Boolean(), nullable=False),
        sa.Column('refunded', sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ['learner_id'], ['learners.id'], name=op.f('fk_uploads_learner_id_learners'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['submission_id'],
            ['submissions.id'],
            name=op.f('fk_uploads_submission_id_submissions'),
            ondelete='CASCADE',
        ),
        sa.ForeignKeyConstraint(
            ['version_id'], ['exercises.id'], name=op.f('fk_uploads_version_id_exercises')
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_uploads')),
        sa.UniqueConstraint('learner_id', 'idempotency_key', name='uq_uploads_idempotency'),
    )
    with op.batch_alter_table('uploads', schema=None) as batch_op:
        batch_op.create_index('ix_uploads_learner_exercise', ['learner_id', 'exercise'], unique=False)
        batch_op.create_index(batch_op.f('ix_uploads_submission_id'), ['submission_id'], unique=False)

    op.create_table(
        'jobs',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('upload_id', sa.Integer(), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('version_id', sa.Integer(), nullable=False),
        sa.Column('status', sa.String(length=20), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('lease_owner', sa.String(length=300), nullable=True),
        sa.Column('lease_token', sa.String(length=64), nullable=True),
        sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('enqueued_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('last_error', sa.Text(), nullable=True),
        sa.Column('run_id', sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ['run_id'], ['grade_runs.id'], name=op.f('fk_jobs_run_id_grade_runs'), ondelete='SET NULL'
        ),
        sa.ForeignKeyConstraint(
            ['submission_id'],
            ['submissions.id'],
            name=op.f('fk_jobs_submission_id_submissions'),
            ondelete='CASCADE',
        ),
        sa.ForeignKeyConstraint(
            ['upload_id'], ['uploads.id'], name=op.f('fk_jobs_upload_id_uploads'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(['version_id'], ['exercises.id'], name=op.f('fk_jobs_version_id_exercises')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs')),
        sa.UniqueConstraint('upload_id', name=op.f('uq_jobs_upload_id')),
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_status', ['status', 'id'], unique=False)

    op.create_table(
        'late_days',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('learner_id', sa.Integer(), nullable=False),
        sa.Column('exercise', sa.String(length=100), nullable=False),
        sa.Column('upload_id', sa.Integer(), nullable=True),
        sa.Column('days', sa.Integer(), nullable=False),
        sa.Column('reason', sa.String(length=300), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['learner_id'], ['learners.id'], name=op.f('fk_late_days_learner_id_learners'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['upload_id'], ['uploads.id'], name=op.f('fk_late_days_upload_id_uploads'), ondelete='SET NULL'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_late_days')),
    )
    with op.batch_alter_table('late_days', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_late_days_learner_id'), ['learner_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('late_days', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_late_days_learner_id'))

    op.drop_table('late_days')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_status')

    op.drop_table('jobs')
    with op.batch_alter_table('uploads', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_uploads_submission_id'))
        batch_op.drop_index('ix_uploads_learner_exercise')

    op.drop_table('uploads')
    with op.batch_alter_table('extensions', schema=None) as batch_op:
        batch_op.drop_index('ix_extensions_learner_exercise')

    op.drop_table('extensions')
    with op.batch_alter_table('accounts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_accounts_learner_id'))

    op.drop_table('accounts')
    op.drop_table('settings')
    with op.batch_alter_table('releases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_releases_exercise'))

    op.drop_table('releases')
