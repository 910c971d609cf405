"""The initial gradebook schema: learners, exercise versions, submissions (with their source),
batches, grade runs, check results and diagnoses.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 11:48:10.164898
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'exercises',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=100), nullable=False),
        sa.Column('version', sa.String(length=64), nullable=False),
        sa.Column('title', sa.String(length=300), nullable=False),
        sa.Column('points', sa.Float(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_exercises')),
        sa.UniqueConstraint('name', 'version', name='uq_exercises_name_version'),
    )
    with op.batch_alter_table('exercises', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_exercises_name'), ['name'], unique=False)

    op.create_table(
        'learners',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('key', sa.String(length=200), nullable=False),
        sa.Column('name', sa.String(length=300), nullable=True),
        sa.Column('email', sa.String(length=300), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_learners')),
        sa.UniqueConstraint('key', name=op.f('uq_learners_key')),
    )
    op.create_table(
        'batches',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=20), nullable=False),
        sa.Column('exercise_id', sa.Integer(), nullable=False),
        sa.Column('source', sa.Text(), nullable=False),
        sa.Column('executor', sa.String(length=300), nullable=False),
        sa.Column('forced', sa.Boolean(), nullable=False),
        sa.Column('status', sa.String(length=20), nullable=False),
        sa.Column('grader_version', sa.String(length=40), nullable=False),
        sa.Column('submissions', sa.Integer(), nullable=False),
        sa.Column('graded', sa.Integer(), nullable=False),
        sa.Column('skipped', sa.Integer(), nullable=False),
        sa.Column('errors', sa.Integer(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ['exercise_id'], ['exercises.id'], name=op.f('fk_batches_exercise_id_exercises')
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_batches')),
    )
    op.create_table(
        'submissions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('learner_id', sa.Integer(), nullable=False),
        sa.Column('exercise', sa.String(length=100), nullable=False),
        sa.Column('digest', sa.String(length=64), nullable=False),
        sa.Column('layout', sa.String(length=20), nullable=False),
        sa.Column('origin', sa.Text(), nullable=False),
        sa.Column('late', sa.Boolean(), nullable=False),
        sa.Column('problem', sa.Text(), nullable=True),
        sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['learner_id'],
            ['learners.id'],
            name=op.f('fk_submissions_learner_id_learners'),
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_submissions')),
        sa.UniqueConstraint('learner_id', 'exercise', 'digest', name='uq_submissions_content'),
    )
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.create_index('ix_submissions_exercise_learner', ['exercise', 'learner_id'], unique=False)

    op.create_table(
        'grade_runs',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('exercise_id', sa.Integer(), nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('batch_id', sa.Integer(), nullable=True),
        sa.Column('status', sa.String(length=20), nullable=False),
        sa.Column('passed', sa.Boolean(), nullable=False),
        sa.Column('score', sa.Float(), nullable=False),
        sa.Column('max_score', sa.Float(), nullable=False),
        sa.Column('error_kind', sa.String(length=40), nullable=True),
        sa.Column('error_message', sa.Text(), nullable=True),
        sa.Column('symptoms', sa.JSON(), nullable=False),
        sa.Column('warnings', sa.JSON(), nullable=False),
        sa.Column('output', sa.Text(), nullable=False),
        sa.Column('isolation', sa.String(length=100), nullable=False),
        sa.Column('grader_version', sa.String(length=40), nullable=False),
        sa.Column('worker', sa.String(length=300), nullable=False),
        sa.Column('duration_s', sa.Float(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('recorded_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['batch_id'], ['batches.id'], name=op.f('fk_grade_runs_batch_id_batches'), ondelete='SET NULL'
        ),
        sa.ForeignKeyConstraint(
            ['exercise_id'], ['exercises.id'], name=op.f('fk_grade_runs_exercise_id_exercises')
        ),
        sa.ForeignKeyConstraint(
            ['submission_id'],
            ['submissions.id'],
            name=op.f('fk_grade_runs_submission_id_submissions'),
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_grade_runs')),
        sa.UniqueConstraint('submission_id', 'exercise_id', 'attempt', name='uq_grade_runs_attempt'),
    )
    with op.batch_alter_table('grade_runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_grade_runs_batch_id'), ['batch_id'], unique=False)
        batch_op.create_index('ix_grade_runs_pair', ['submission_id', 'exercise_id'], unique=False)

    op.create_table(
        'submission_files',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('content', sa.LargeBinary(), nullable=False),
        sa.Column('size', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ['submission_id'],
            ['submissions.id'],
            name=op.f('fk_submission_files_submission_id_submissions'),
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_submission_files')),
        sa.UniqueConstraint('submission_id', 'name', name='uq_submission_files_name'),
    )
    op.create_table(
        'check_results',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('position', sa.Integer(), nullable=False),
        sa.Column('check_id', sa.String(length=200), nullable=False),
        sa.Column('passed', sa.Boolean(), nullable=False),
        sa.Column('points', sa.Float(), nullable=False),
        sa.Column('max_points', sa.Float(), nullable=False),
        sa.Column('rule', sa.String(length=40), nullable=False),
        sa.Column('day', sa.Integer(), nullable=False),
        sa.Column('title', sa.Text(), nullable=False),
        sa.Column('message', sa.Text(), nullable=False),
        sa.Column('symptoms', sa.JSON(), nullable=False),
        sa.Column('evidence', sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ['run_id'], ['grade_runs.id'], name=op.f('fk_check_results_run_id_grade_runs'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_check_results')),
        sa.UniqueConstraint('run_id', 'position', name='uq_check_results_position'),
    )
    op.create_table(
        'diagnoses',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('position', sa.Integer(), nullable=False),
        sa.Column('rule', sa.String(length=40), nullable=False),
        sa.Column('day', sa.Integer(), nullable=False),
        sa.Column('mutant', sa.String(length=100), nullable=True),
        sa.Column('check_id', sa.String(length=200), nullable=True),
        sa.Column('message', sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ['run_id'], ['grade_runs.id'], name=op.f('fk_diagnoses_run_id_grade_runs'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_diagnoses')),
        sa.UniqueConstraint('run_id', 'position', name='uq_diagnoses_position'),
    )


def downgrade() -> None:
    op.drop_table('diagnoses')
    op.drop_table('check_results')
    op.drop_table('submission_files')
    with op.batch_alter_table('grade_runs', schema=None) as batch_op:
        batch_op.drop_index('ix_grade_runs_pair')
        batch_op.drop_index(batch_op.f('ix_grade_runs_batch_id'))

    op.drop_table('grade_runs')
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_index('ix_submissions_exercise_learner')

    op.drop_table('submissions')
    op.drop_table('batches')
    op.drop_table('learners')
    with op.batch_alter_table('exercises', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_exercises_name'))

    op.drop_table('exercises')
