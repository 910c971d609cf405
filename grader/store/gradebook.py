"""The gradebook: where every grade of a class is kept (DESIGN.md, principle 6).

A SQLite file by default (WAL, so readers never block the one writer; a busy timeout, so a second
writer waits instead of failing), PostgreSQL by URL (psycopg 3). Opening a gradebook upgrades its
schema in place (Alembic). Grades go in and come out as the pydantic `Grade` of grader.models:
nothing is re-parsed from text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload, sessionmaker

from grader.limits import GRADE_PART_BYTES, MESSAGE_BYTES
from grader.models import Grade
from grader.store import migrate
from grader.store.engine import StoreError, make_engine, normalize_url, redact, sqlite_path
from grader.store.schema import (
    FINAL_STATUSES,
    Batch,
    CheckRow,
    DiagnosisRow,
    ExerciseVersion,
    GradeRun,
    Learner,
    Submission,
    SubmissionFile,
    utcnow,
)
from grader.submission import Incoming as Incoming  # re-exported: where the store's callers import it
from grader.text import cap_bytes

# -- what goes in -------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One grading, as a worker reports it: the Grade and how it went."""

    status: str  # graded, unreadable, error
    grade: Grade
    worker: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass
class StoredSubmission:
    id: int
    learner: str
    name: str | None
    exercise: str
    digest: str
    files: dict[str, bytes] = field(default_factory=dict)
    problem: str | None = None
    current: bool = True  # the learner's latest submission for this exercise


@dataclass
class CurrentGrade:
    learner: str
    name: str | None
    email: str | None
    exercise: str
    version: str
    submission_id: int
    digest: str
    origin: str
    late: bool
    run_id: int
    status: str
    grade: Grade
    graded_at: datetime | None
    worker: str


def _short(text: str | None) -> str | None:
    """A learner's name or email, or where their files came from, as stored: GRADE_PART_BYTES at
    most (the learner's key is never cut: two learners must not become one)."""
    return None if text is None else cap_bytes(str(text), GRADE_PART_BYTES)


# -- the gradebook --------------------------------------------------------------------------------


class Gradebook:
    def __init__(self, db: str, *, create: bool = True):
        """Open (and upgrade) the gradebook `db`; with create=False a SQLite file that does not
        exist is a StoreError instead of a new, empty gradebook (read-only commands)."""
        self.url = normalize_url(db)
        if not create:
            path = sqlite_path(self.url)
            if path is not None and not Path(path).is_file():
                raise StoreError(f"gradebook {db} does not exist")
        self.engine = make_engine(db)
        try:
            migrate.upgrade(self.engine)
        except migrate.SchemaError as exc:
            self.engine.dispose()
            raise StoreError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - failing to open or migrate: a StoreError naming it
            self.engine.dispose()
            raise StoreError(
                f"cannot open the gradebook {redact(self.url)}: {type(exc).__name__}: {exc}"
            ) from None
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- exercises and submissions

    def exercise_version(self, name: str, version: str, points: float, title: str = "") -> int:
        """The id of this exercise version's row, made on first sight."""
        with self.sessions() as s:
            row = s.scalar(select(ExerciseVersion).filter_by(name=name, version=version))
            if row is not None:
                return row.id
            row = ExerciseVersion(name=name, version=version, points=float(points), title=title)
            s.add(row)
            try:
                s.commit()
            except IntegrityError:  # another writer made it first
                s.rollback()
                made = s.scalar(select(ExerciseVersion.id).filter_by(name=name, version=version))
                assert made is not None  # committed by that other writer
                return made
            return row.id

    def versions(self, name: str) -> list[ExerciseVersion]:
        with self.sessions() as s:
            return list(s.scalars(select(ExerciseVersion).filter_by(name=name).order_by(ExerciseVersion.id)))

    def add_submissions(self, exercise: str, incoming: list[Incoming]) -> list[int]:
        """Record learners and their submissions (one transaction); their ids, in order.

        A submission whose files are already stored for that learner is the same submission:
        it is only marked as seen again."""
        with self.sessions() as s:
            ids = [sub.id for sub in store_submissions(s, exercise, incoming)]
            s.commit()
        return ids

    def submissions(
        self, exercise: str, ids: list[int] | None = None, *, with_files: bool = True
    ) -> list[StoredSubmission]:
        """Stored submissions of an exercise (all of them, or these ids), oldest first."""
        with self.sessions() as s:
            q = (
                select(Submission, Learner)
                .join(Learner)
                .where(Submission.exercise == exercise)
                .order_by(Submission.id)
            )
            if with_files:
                q = q.options(selectinload(Submission.files))
            if ids is not None:
                q = q.where(Submission.id.in_(ids))
            rows = s.execute(q).all()
            current = self._current_ids(s, exercise)
            return [
                StoredSubmission(
                    id=sub.id,
                    learner=who.key,
                    name=who.name,
                    exercise=exercise,
                    digest=sub.digest,
                    problem=sub.problem,
                    current=sub.id in current,
                    files={f.name: f.content for f in sub.files} if with_files else {},
                )
                for sub, who in rows
            ]

    @staticmethod
    def _current_ids(s: Session, exercise: str) -> set[int]:
        """Each learner's current submission: the one seen most recently (newest on a tie)."""
        rows = s.execute(
            select(Submission.id, Submission.learner_id, Submission.last_seen_at).where(
                Submission.exercise == exercise
            )
        ).all()
        best: dict[int, tuple] = {}
        for sid, lid, seen in rows:
            if lid not in best or (seen, sid) > best[lid]:
                best[lid] = (seen, sid)
        return {sid for _, sid in best.values()}

    # -- grades

    def graded(self, version_id: int, submission_ids: list[int]) -> set[int]:
        """Which of these submissions already have a final grade for this exercise version."""
        if not submission_ids:
            return set()
        with self.sessions() as s:
            done: set[int] = set()
            for i in range(0, len(submission_ids), 500):
                chunk = submission_ids[i : i + 500]
                done |= set(
                    s.scalars(
                        select(GradeRun.submission_id).where(
                            GradeRun.exercise_id == version_id,
                            GradeRun.submission_id.in_(chunk),
                            GradeRun.status.in_(FINAL_STATUSES),
                        )
                    )
                )
            return done

    def grader_failures(self, submission_id: int, version_id: int) -> int:
        """How many times the grader itself failed on this submission and exercise version (its
        `error` runs) since its last final grade: what `grader batch` counts its retries by."""
        with self.sessions() as s:
            runs = s.execute(
                select(GradeRun.status)
                .where(GradeRun.submission_id == submission_id, GradeRun.exercise_id == version_id)
                .order_by(GradeRun.attempt)
            ).all()
        failures = 0
        for (status,) in runs:
            failures = 0 if status in FINAL_STATUSES else failures + (status == "error")
        return failures

    def record(
        self,
        submission_id: int,
        version_id: int,
        outcome: Outcome,
        *,
        batch_id: int | None = None,
        force: bool = False,
    ) -> int | None:
        """Store one grade run as it arrives (its own transaction). Returns its id, or None when a
        final grade for this submission and version is there already and force is off (a second
        writer got there first): grades are never duplicated."""
        with self.sessions() as s:
            run = store_run(s, submission_id, version_id, outcome, batch_id=batch_id, force=force)
            if run is None:
                return None
            try:
                s.commit()
            except IntegrityError:  # the same attempt, written by another process
                s.rollback()
                return None
            return run.id

    @staticmethod
    def to_grade(run: GradeRun) -> Grade:
        """The Grade as it was recorded (revision 0002 made documents of older grades)."""
        return Grade.model_validate(run.grade)

    def _run_query(self):
        return (
            select(GradeRun, Submission, Learner, ExerciseVersion)
            .join(Submission, GradeRun.submission_id == Submission.id)
            .join(Learner, Submission.learner_id == Learner.id)
            .join(ExerciseVersion, GradeRun.exercise_id == ExerciseVersion.id)
        )

    def current_grades(self, exercise: str | None = None, learner: str | None = None) -> list[CurrentGrade]:
        """Per learner and exercise: the latest final grade of the learner's current submission."""
        with self.sessions() as s:
            exercises = [exercise] if exercise else list(s.scalars(select(Submission.exercise).distinct()))
            current: set[int] = set()
            for ex in exercises:
                current |= self._current_ids(s, ex)
            if not current:
                return []
            latest = (
                select(func.max(GradeRun.id))
                .where(GradeRun.status.in_(FINAL_STATUSES))
                .group_by(GradeRun.submission_id)
            )
            q = self._run_query().where(GradeRun.id.in_(latest))
            if exercise:
                q = q.where(Submission.exercise == exercise)
            if learner:
                q = q.where(Learner.key == learner)
            out = []
            for run, sub, who, ver in s.execute(q).all():
                if sub.id not in current:
                    continue
                out.append(
                    CurrentGrade(
                        learner=who.key,
                        name=who.name,
                        email=who.email,
                        exercise=sub.exercise,
                        version=ver.version,
                        submission_id=sub.id,
                        digest=sub.digest,
                        origin=sub.origin,
                        late=sub.late,
                        run_id=run.id,
                        status=run.status,
                        grade=self.to_grade(run),
                        graded_at=run.finished_at,
                        worker=run.worker,
                    )
                )
            return sorted(out, key=lambda c: (c.exercise, c.learner))

    def latest_runs(self, submission_ids: list[int]) -> dict[int, list[tuple[str, GradeRun]]]:
        """Every final run of these submissions, oldest first, with its exercise version."""
        out: dict[int, list[tuple[str, GradeRun]]] = {i: [] for i in submission_ids}
        if not submission_ids:
            return out
        with self.sessions() as s:
            q = (
                select(GradeRun, ExerciseVersion.version)
                .join(ExerciseVersion)
                .where(GradeRun.submission_id.in_(submission_ids), GradeRun.status.in_(FINAL_STATUSES))
                .order_by(GradeRun.id)
            )
            for run, version in s.execute(q).all():
                out[run.submission_id].append((version, run))
        return out

    def learner(self, key: str) -> dict | None:
        """Everything the gradebook holds on one learner, for `grader gradebook show`."""
        with self.sessions() as s:
            who = s.scalar(select(Learner).where(Learner.key == key))
            if who is None:
                return None
            subs = list(
                s.scalars(
                    select(Submission)
                    .where(Submission.learner_id == who.id)
                    .options(
                        selectinload(Submission.files),
                        selectinload(Submission.runs).selectinload(GradeRun.exercise),
                    )
                    .order_by(Submission.exercise, Submission.id)
                )
            )
            currents = set()
            for ex in {sub.exercise for sub in subs}:
                currents |= self._current_ids(s, ex)
            return {
                "learner": who.key,
                "name": who.name,
                "email": who.email,
                "submissions": [
                    {
                        "id": sub.id,
                        "exercise": sub.exercise,
                        "digest": sub.digest,
                        "current": sub.id in currents,
                        "layout": sub.layout,
                        "origin": sub.origin,
                        "late": sub.late,
                        "problem": sub.problem,
                        "first_seen_at": sub.first_seen_at,
                        "last_seen_at": sub.last_seen_at,
                        "files": {f.name: f.size for f in sub.files},
                        "runs": [
                            {
                                "id": r.id,
                                "version": r.exercise.version,
                                "attempt": r.attempt,
                                "status": r.status,
                                "score": r.score,
                                "max_score": r.max_score,
                                "passed": r.passed,
                                "error_kind": r.error_kind,
                                "error_message": ((r.grade or {}).get("error") or {}).get("message"),
                                "finished_at": r.finished_at,
                                "grader_version": r.grader_version,
                                "isolation": r.isolation,
                                "worker": r.worker,
                                "duration_s": r.duration_s,
                            }
                            for r in sub.runs
                        ],
                    }
                    for sub in subs
                ],
            }

    def counts(self, exercise: str | None = None) -> dict[str, int]:
        """Rows per table and the duplicate check the resumability tests rely on."""
        with self.sessions() as s:

            def n(q):
                return s.scalar(q) or 0

            sub_q = select(Submission.id)
            if exercise:
                sub_q = sub_q.where(Submission.exercise == exercise)
            subs = sub_q.scalar_subquery()
            final = select(GradeRun.submission_id, GradeRun.exercise_id).where(
                GradeRun.status.in_(FINAL_STATUSES), GradeRun.submission_id.in_(subs)
            )
            pairs = final.group_by(GradeRun.submission_id, GradeRun.exercise_id).subquery()
            return {
                "learners": n(select(func.count()).select_from(Learner)),
                "submissions": n(select(func.count()).select_from(sub_q.subquery())),
                "final_runs": n(select(func.count()).select_from(final.subquery())),
                "graded_pairs": n(select(func.count()).select_from(pairs)),
                "error_runs": n(
                    select(func.count())
                    .select_from(GradeRun)
                    .where(GradeRun.status == "error", GradeRun.submission_id.in_(subs))
                ),
            }

    # -- batches

    def start_batch(
        self,
        version_id: int,
        *,
        kind: str = "batch",
        source: str = "",
        executor: str = "",
        forced: bool = False,
        grader_version: str = "",
        submissions: int = 0,
    ) -> int:
        with self.sessions() as s:
            b = Batch(
                kind=kind,
                exercise_id=version_id,
                source=source,
                executor=executor,
                forced=forced,
                grader_version=grader_version,
                submissions=submissions,
            )
            s.add(b)
            s.commit()
            return b.id

    def finish_batch(self, batch_id: int, *, status: str, graded: int, skipped: int, errors: int) -> None:
        with self.sessions() as s:
            b = s.get(Batch, batch_id)
            assert b is not None  # made by start_batch
            b.status, b.graded, b.skipped, b.errors, b.finished_at = status, graded, skipped, errors, utcnow()
            s.commit()


# -- the writes, inside a transaction the caller owns (the server's queue shares them) ------------


def learner_row(s: Session, key: str, name: str | None = None, email: str | None = None) -> Learner:
    """The learner `key`, made if missing (flushed); a name or email given replaces the stored one."""
    learner = s.scalar(select(Learner).where(Learner.key == key))
    name, email = _short(name), _short(email)
    if learner is None:
        learner = Learner(key=key, name=name, email=email)
        s.add(learner)
        s.flush()
    else:
        learner.name = name or learner.name
        learner.email = email or learner.email
    return learner


def store_submissions(s: Session, exercise: str, incoming: list[Incoming]) -> list[Submission]:
    """Add learners and submissions in the session `s` (flushed, not committed): the rows, in order.
    A submission whose files are already stored for that learner is the same row, seen again."""
    now = utcnow()
    out: list[Submission] = []
    keys = {i.learner for i in incoming}
    learners = (
        {row.key: row for row in s.scalars(select(Learner).where(Learner.key.in_(keys)))} if keys else {}
    )
    for inc in incoming:
        name, email, origin = _short(inc.name), _short(inc.email), _short(inc.origin) or ""
        problem = None if inc.problem is None else cap_bytes(str(inc.problem), MESSAGE_BYTES)
        learner = learners.get(inc.learner)
        if learner is None:
            learner = learners[inc.learner] = Learner(key=inc.learner, name=name, email=email)
            s.add(learner)
            s.flush()
        else:
            learner.name = name or learner.name
            learner.email = email or learner.email
        digest = inc.digest
        sub = s.scalar(select(Submission).filter_by(learner_id=learner.id, exercise=exercise, digest=digest))
        if sub is None:
            sub = Submission(
                learner_id=learner.id,
                exercise=exercise,
                digest=digest,
                layout=inc.layout,
                origin=origin,
                late=inc.late,
                problem=problem,
                submitted_at=inc.submitted_at,
                first_seen_at=now,
                last_seen_at=now,
                files=[
                    SubmissionFile(name=n, content=data, size=len(data))
                    for n, data in sorted(inc.files.items())
                ],
            )
            s.add(sub)
            s.flush()
        else:
            sub.last_seen_at = now
            sub.origin, sub.late = origin or sub.origin, inc.late
            sub.submitted_at = inc.submitted_at or sub.submitted_at
        out.append(sub)
    return out


def store_run(
    s: Session,
    submission_id: int,
    version_id: int,
    outcome: Outcome,
    *,
    batch_id: int | None = None,
    force: bool = False,
) -> GradeRun | None:
    """Add one grade run in the session `s` (flushed, not committed); None when a final grade for
    this submission and version is there already and force is off. Two writers of the same attempt
    meet the unique constraint (an IntegrityError at flush or commit)."""
    g = outcome.grade
    runs = s.execute(
        select(GradeRun.attempt, GradeRun.status).where(
            GradeRun.submission_id == submission_id, GradeRun.exercise_id == version_id
        )
    ).all()
    if not force and outcome.status in FINAL_STATUSES and any(st in FINAL_STATUSES for _, st in runs):
        return None
    run = GradeRun(
        submission_id=submission_id,
        exercise_id=version_id,
        attempt=max((a for a, _ in runs), default=0) + 1,
        batch_id=batch_id,
        status=outcome.status,
        passed=g.passed,
        score=g.score,
        max_score=g.max_score,
        error_kind=g.error.kind if g.error else None,
        grade=g.model_dump(),
        isolation=g.isolation,
        grader_version=g.grader_version,
        worker=outcome.worker,
        duration_s=g.duration_s,
        started_at=outcome.started_at,
        finished_at=outcome.finished_at or utcnow(),
        checks=[
            CheckRow(
                position=i,
                check_id=c.id,
                passed=c.passed,
                points=c.points,
                max_points=c.max_points,
                rule=c.rule,
                day=c.day,
            )
            for i, c in enumerate(g.checks)
        ],
        diagnoses=[
            DiagnosisRow(position=i, rule=d.rule, day=d.day, mutant=d.mutant, check_id=d.check)
            for i, d in enumerate(g.diagnosis)
        ],
    )
    s.add(run)
    return run
