"""Each grade run keeps its Grade whole, as one JSON document (`grade_runs.grade`).

Until now a grade was copied into columns field by field and rebuilt from them, which dropped
message ids and params, zh-TW titles, the training curve and more. From here on the document is
what reports and exports read; the score, status, error kind and the check and diagnosis rows
stay as columns for queries. Grades stored before this revision are turned into documents from
the columns they had (so they read back with what they had), then the copied columns go.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

CHUNK = 500

# the tables as revision 0001 left them, for the data move only (plain types: forever the same)
runs = sa.table(
    'grade_runs',
    sa.column('id', sa.Integer),
    sa.column('submission_id', sa.Integer),
    sa.column('passed', sa.Boolean),
    sa.column('score', sa.Float),
    sa.column('max_score', sa.Float),
    sa.column('error_kind', sa.String),
    sa.column('error_message', sa.Text),
    sa.column('symptoms', sa.JSON),
    sa.column('warnings', sa.JSON),
    sa.column('output', sa.Text),
    sa.column('isolation', sa.String),
    sa.column('grader_version', sa.String),
    sa.column('duration_s', sa.Float),
    sa.column('grade', sa.JSON),
)
checks = sa.table(
    'check_results',
    sa.column('run_id', sa.Integer),
    sa.column('position', sa.Integer),
    sa.column('check_id', sa.String),
    sa.column('passed', sa.Boolean),
    sa.column('points', sa.Float),
    sa.column('max_points', sa.Float),
    sa.column('rule', sa.String),
    sa.column('day', sa.Integer),
    sa.column('title', sa.Text),
    sa.column('message', sa.Text),
    sa.column('symptoms', sa.JSON),
    sa.column('evidence', sa.JSON),
)
diagnoses = sa.table(
    'diagnoses',
    sa.column('run_id', sa.Integer),
    sa.column('position', sa.Integer),
    sa.column('rule', sa.String),
    sa.column('day', sa.Integer),
    sa.column('mutant', sa.String),
    sa.column('check_id', sa.String),
    sa.column('message', sa.Text),
)
submissions = sa.table(
    'submissions',
    sa.column('id', sa.Integer),
    sa.column('learner_id', sa.Integer),
    sa.column('exercise', sa.String),
)
learners = sa.table('learners', sa.column('id', sa.Integer), sa.column('key', sa.String))

# (name, type, server default) of the columns copied until now
RUN_COLUMNS: list[tuple[str, sa.types.TypeEngine, str | None]] = [
    ('error_message', sa.Text(), None),
    ('symptoms', sa.JSON(), '[]'),
    ('warnings', sa.JSON(), '[]'),
    ('output', sa.Text(), ''),
]
CHECK_COLUMNS: list[tuple[str, sa.types.TypeEngine, str]] = [
    ('title', sa.Text(), ''),
    ('message', sa.Text(), ''),
    ('symptoms', sa.JSON(), '[]'),
    ('evidence', sa.JSON(), '{}'),
]


def _rows_by_run(conn, table, run_ids):
    out: dict[int, list] = {i: [] for i in run_ids}
    for row in conn.execute(
        sa.select(table).where(table.c.run_id.in_(run_ids)).order_by(table.c.run_id, table.c.position)
    ).mappings():
        out[row['run_id']].append(row)
    return out


def upgrade() -> None:
    op.add_column('grade_runs', sa.Column('grade', sa.JSON(), nullable=True))
    conn = op.get_bind()
    ids = list(conn.scalars(sa.select(runs.c.id).order_by(runs.c.id)))
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        q = (
            sa.select(runs, submissions.c.exercise, learners.c.key)
            .join(submissions, submissions.c.id == runs.c.submission_id)
            .join(learners, learners.c.id == submissions.c.learner_id)
            .where(runs.c.id.in_(chunk))
        )
        by_run = _rows_by_run(conn, checks, chunk)
        diag_by_run = _rows_by_run(conn, diagnoses, chunk)
        for r in conn.execute(q).mappings():
            grade = {
                'exercise': r['exercise'],
                'passed': r['passed'],
                'score': r['score'],
                'max_score': r['max_score'],
                'checks': [
                    {
                        'id': c['check_id'],
                        'passed': c['passed'],
                        'points': c['points'],
                        'max_points': c['max_points'],
                        'rule': c['rule'],
                        'day': c['day'],
                        'title': c['title'] or '',
                        'message': c['message'] or '',
                        'symptoms': c['symptoms'] or [],
                        'evidence': c['evidence'] or {},
                    }
                    for c in by_run[r['id']]
                ],
                'symptoms': r['symptoms'] or [],
                'diagnosis': [
                    {
                        'rule': d['rule'],
                        'day': d['day'],
                        'mutant': d['mutant'],
                        'message': d['message'] or '',
                        'check': d['check_id'],
                    }
                    for d in diag_by_run[r['id']]
                ],
                'error': (
                    {'kind': r['error_kind'], 'message': r['error_message'] or ''}
                    if r['error_kind']
                    else None
                ),
                'isolation': r['isolation'],
                'warnings': r['warnings'] or [],
                'output': r['output'] or '',
                'duration_s': r['duration_s'],
                'grader_version': r['grader_version'],
                'student': r['key'],
            }
            conn.execute(runs.update().where(runs.c.id == r['id']).values(grade=grade))
    # SQLite (3.35 and newer) and PostgreSQL both drop a plain column in place
    for name, _type, _default in RUN_COLUMNS:
        op.drop_column('grade_runs', name)
    for name, _type, _default in CHECK_COLUMNS:
        op.drop_column('check_results', name)
    op.drop_column('diagnoses', 'message')


def downgrade() -> None:
    for name, type_, default in RUN_COLUMNS:
        op.add_column('grade_runs', sa.Column(name, type_, nullable=default is None, server_default=default))
    for name, type_, default in CHECK_COLUMNS:
        op.add_column('check_results', sa.Column(name, type_, nullable=False, server_default=default))
    op.add_column('diagnoses', sa.Column('message', sa.Text(), nullable=False, server_default=''))
    conn = op.get_bind()
    for run_id, grade in conn.execute(sa.select(runs.c.id, runs.c.grade)).all():
        grade = grade or {}
        error = grade.get('error') or {}
        output = grade.get('output') or {}
        conn.execute(
            runs.update()
            .where(runs.c.id == run_id)
            .values(
                error_message=error.get('message'),
                symptoms=grade.get('symptoms', []),
                warnings=[
                    w.get('message', '') if isinstance(w, dict) else w for w in grade.get('warnings', [])
                ],
                output=output if isinstance(output, str) else output.get('start', '') + output.get('end', ''),
            )
        )
        for i, c in enumerate(grade.get('checks', [])):
            conn.execute(
                checks.update()
                .where(checks.c.run_id == run_id, checks.c.position == i)
                .values(
                    title=c.get('title', ''),
                    message=c.get('message', ''),
                    symptoms=c.get('symptoms', []),
                    evidence=c.get('evidence', {}),
                )
            )
        for i, d in enumerate(grade.get('diagnosis', [])):
            conn.execute(
                diagnoses.update()
                .where(diagnoses.c.run_id == run_id, diagnoses.c.position == i)
                .values(message=d.get('message', ''))
            )
    op.drop_column('grade_runs', 'grade')
