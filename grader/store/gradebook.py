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

from grader.intake.incoming import Incoming as Incoming  # re-exported: where the store's callers import it
from grader.limits import GRADE_PART_BYTES, MESSAGE_BYTES
from grader.models import Grade
from grader.policy.adjust import (
    LmsLateness,
    OverrideFact,
    StoredUpload,
    adjusted,
    counted_submission,
    lms_lateness,
    received_at,
)
from grader.policy.course import CoursePolicy, deadlines
from grader.store import migrate
from grader.store.engine import StoreError, make_engine, normalize_url, redact, sqlite_path
from grader.store.schema import (
    FINAL_STATUSES,
    AuditEntry,
    Batch,
    CheckRow,
    DiagnosisRow,
    ExerciseVersion,
    Extension,
    GradeRun,
    Learner,
    Override,
    Submission,
    SubmissionFile,
    utcnow,
)
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
    current: bool = True  # the one that counts for the learner (Gradebook.submissions)
    removed: bool = False  # the submission or its learner is removed from the gradebook


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
    # the grade as graded, before the adjustments `grade` carries (its score is the final one)
    graded_score: float | None = None
    graded_passed: bool | None = None
    submitted_at: datetime | None = None  # as the LMS said, where it did
    late_minutes: float = 0.0  # by the course policy, from the LMS's evidence (grader.policy.adjust)
    late_days: int = 0
    penalty: float = 0.0  # fraction of max_score taken for lateness
    override: OverrideFact | None = None  # the instructor's override that applies, if any


@dataclass
class _Standing:
    submission: Submission
    learner: Learner
    run: GradeRun | None  # None only for `ungraded` standings
    version: ExerciseVersion | None
    lateness: LmsLateness
    override: OverrideFact | None


def _light_grade(exercise: str, run: GradeRun) -> Grade:
    """A run's score and verdict, all `counted` compares, without reading the whole Grade."""
    return Grade(exercise=exercise, passed=run.passed, score=run.score, max_score=run.max_score)


def _extensions(s: Session) -> dict[tuple[str, str], tuple[datetime, datetime | None]]:
    """(learner, exercise) -> (due, closes) of the newest extension the server granted (course.toml's
    own extensions are in the policy)."""
    rows = s.execute(
        select(Learner.key, Extension.exercise, Extension.due, Extension.closes)
        .join(Learner, Extension.learner_id == Learner.id)
        .order_by(Extension.id)
    ).all()
    return {(key, ex): (due, closes) for key, ex, due, closes in rows}


def _overrides(s: Session) -> dict[tuple[int, str], OverrideFact]:
    """(learner id, exercise) -> the newest override not revoked."""
    rows = s.scalars(select(Override).where(Override.revoked_at.is_(None)).order_by(Override.id))
    return {(o.learner_id, o.exercise): OverrideFact(o.score, o.reason, o.author, o.created_at) for o in rows}


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
        self,
        exercise: str,
        ids: list[int] | None = None,
        *,
        with_files: bool = True,
        policy: CoursePolicy | None = None,
    ) -> list[StoredSubmission]:
        """Stored submissions of an exercise (all of them, or these ids), oldest first; `current`
        marks the one that counts for its learner (by `policy`, see current_grades), `removed`
        those left out of the gradebook (the submission's or the learner's removal)."""
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
            current = self._counted_ids(s, exercise, policy)
            return [
                StoredSubmission(
                    id=sub.id,
                    learner=who.key,
                    name=who.name,
                    exercise=exercise,
                    digest=sub.digest,
                    problem=sub.problem,
                    current=sub.id in current,
                    removed=sub.removed_at is not None or who.removed_at is not None,
                    files={f.name: f.content for f in sub.files} if with_files else {},
                )
                for sub, who in rows
            ]

    def _counted_ids(self, s: Session, exercise: str, policy: CoursePolicy | None) -> set[int]:
        """The submission that counts for each learner not removed (see current_grades); a learner
        with no graded submission yet: the one seen most recently."""
        return {st.submission.id for st in self._standings(s, exercise, None, policy, ungraded=True)}

    def _standings(
        self,
        s: Session,
        exercise: str | None,
        learner: str | None,
        policy: CoursePolicy | None,
        *,
        ungraded: bool = False,
    ) -> list[_Standing]:
        """Per learner and exercise (neither removed): the submission that counts, its latest final
        run, its lateness by the LMS's evidence and the override that applies. Grades are read
        whole only for the counted submissions (the others by their score columns)."""
        q = (
            select(Submission, Learner)
            .join(Learner)
            .where(Submission.removed_at.is_(None), Learner.removed_at.is_(None))
        )
        if exercise:
            q = q.where(Submission.exercise == exercise)
        if learner:
            q = q.where(Learner.key == learner)
        rows = s.execute(q).all()
        if not rows:
            return []
        latest = select(func.max(GradeRun.id)).where(GradeRun.status.in_(FINAL_STATUSES))
        if exercise:
            latest = latest.where(
                GradeRun.submission_id.in_(select(Submission.id).where(Submission.exercise == exercise))
            )
        latest = latest.group_by(GradeRun.submission_id)
        run_of: dict[int, tuple[GradeRun, ExerciseVersion]] = {
            run.submission_id: (run, ver)
            for run, ver in s.execute(
                select(GradeRun, ExerciseVersion)
                .join(ExerciseVersion, GradeRun.exercise_id == ExerciseVersion.id)
                .where(GradeRun.id.in_(latest))
            ).all()
        }
        extensions = _extensions(s)
        overrides = _overrides(s)
        rule = policy or CoursePolicy()
        groups: dict[tuple[str, str], list[tuple[Submission, Learner]]] = {}
        for sub, who in rows:
            groups.setdefault((who.key, sub.exercise), []).append((sub, who))
        out = []
        for (key, ex), members in sorted(groups.items()):
            uploads = [
                StoredUpload(
                    id=sub.id,
                    received_at=received_at(sub.submitted_at, sub.first_seen_at),
                    chosen=sub.chosen,
                    grade=_light_grade(ex, run_of[sub.id][0]) if sub.id in run_of else None,
                )
                for sub, _ in members
            ]
            when = deadlines(rule, ex, key, extensions)
            sid = counted_submission(
                policy, ex, uploads, when, last_seen={sub.id: sub.last_seen_at for sub, _ in members}
            )
            if sid is None and ungraded:
                sid = max(members, key=lambda m: (m[0].last_seen_at, m[0].id))[0].id
            if sid is None or (sid not in run_of and not ungraded):
                continue
            sub, who = next(m for m in members if m[0].id == sid)
            run, ver = run_of.get(sid, (None, None))
            found = lms_lateness(rule, ex, when, submitted_at=sub.submitted_at, flagged_late=sub.late)
            out.append(_Standing(sub, who, run, ver, found, overrides.get((who.id, ex))))
        return out

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

    def current_grades(
        self, exercise: str | None = None, learner: str | None = None, policy: CoursePolicy | None = None
    ) -> list[CurrentGrade]:
        """Per learner and exercise, neither removed: the latest final grade of the submission that
        counts, adjusted (grader.policy.adjust.adjusted): `grade.score` is the final score and
        `grade.adjustments` says how (the late penalty by `policy`, then the override that applies,
        which survives every regrade); `graded_score` is the score as graded.

        Which submission counts: by `policy`'s `counts` rule (last-on-time, best, chosen), the
        function the server uses, a submission received when the LMS says, else when first seen;
        without a policy, the one seen most recently unless an instructor chose one. Lateness is
        measured against `policy` (none: no due date, so no penalty)."""
        with self.sessions() as s:
            standings = self._standings(s, exercise, learner, policy)
            out = []
            for st in standings:
                assert st.run is not None and st.version is not None  # graded standings only
                raw = self.to_grade(st.run)
                grade = adjusted(raw, st.lateness, st.override)
                late = st.lateness.late
                out.append(
                    CurrentGrade(
                        learner=st.learner.key,
                        name=st.learner.name,
                        email=st.learner.email,
                        exercise=st.submission.exercise,
                        version=st.version.version,
                        submission_id=st.submission.id,
                        digest=st.submission.digest,
                        origin=st.submission.origin,
                        late=st.submission.late or not late.on_time,
                        run_id=st.run.id,
                        status=st.run.status,
                        grade=grade,
                        graded_at=st.run.finished_at,
                        worker=st.run.worker,
                        graded_score=raw.score,
                        graded_passed=raw.passed,
                        submitted_at=st.submission.submitted_at,
                        late_minutes=late.minutes,
                        late_days=late.days,
                        penalty=late.penalty,
                        override=st.override,
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
            currents = {st.submission.id for st in self._standings(s, None, key, None, ungraded=True)}
            return {
                "learner": who.key,
                "name": who.name,
                "email": who.email,
                "removed_at": who.removed_at,
                "submissions": [
                    {
                        "id": sub.id,
                        "exercise": sub.exercise,
                        "digest": sub.digest,
                        "current": sub.id in currents,
                        "layout": sub.layout,
                        "origin": sub.origin,
                        "late": sub.late,
                        "submitted_at": sub.submitted_at,
                        "chosen": sub.chosen,
                        "removed_at": sub.removed_at,
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

    # -- corrections: overrides, removals, the chosen submission (each audited, in one transaction)

    @staticmethod
    def _learner_or_fail(s: Session, key: str) -> Learner:
        who = s.scalar(select(Learner).where(Learner.key == key))
        if who is None:
            raise GradebookInputError("LEARNER", f"no learner {key!r} in the gradebook")
        return who

    @staticmethod
    def _submission_or_fail(s: Session, who: Learner, submission_id: int, exercise: str | None) -> Submission:
        sub = s.get(Submission, submission_id)
        if sub is None or sub.learner_id != who.id or (exercise is not None and sub.exercise != exercise):
            of = f" for {exercise}" if exercise else ""
            raise GradebookInputError(
                "--submission", f"learner {who.key!r} has no submission {submission_id}{of}"
            )
        return sub

    def override(self, learner: str, exercise: str, score: float, reason: str, author: str) -> int:
        """An instructor's score for LEARNER's EXERCISE (validated by the caller against its
        max_score); it applies from now, over every grade run, until revoked. Its id."""
        reason = reason.strip()
        if not reason:
            raise GradebookInputError("--reason", "a reason is required and may not be empty")
        with self.sessions() as s:
            who = self._learner_or_fail(s, learner)
            if (
                s.scalar(select(Submission.id).filter_by(learner_id=who.id, exercise=exercise).limit(1))
                is None
            ):
                raise GradebookInputError("EXERCISE", f"learner {learner!r} has no submission of {exercise}")
            row = Override(learner_id=who.id, exercise=exercise, score=score, reason=reason, author=author)
            s.add(row)
            s.flush()
            audit_entry(
                s, author, "override", learner, exercise, {"id": row.id, "score": score, "reason": reason}
            )
            s.commit()
            return row.id

    def revoke_override(self, learner: str, exercise: str, author: str) -> OverrideFact | None:
        """Revoke the newest override in force; the override that applies now (an older one not
        revoked), if any."""
        with self.sessions() as s:
            who = self._learner_or_fail(s, learner)
            live = list(
                s.scalars(
                    select(Override)
                    .filter_by(learner_id=who.id, exercise=exercise, revoked_at=None)
                    .order_by(Override.id)
                )
            )
            if not live:
                raise GradebookInputError(
                    "EXERCISE", f"learner {learner!r} has no override of {exercise} to revoke"
                )
            newest = live[-1]
            newest.revoked_at, newest.revoked_by = utcnow(), author
            audit_entry(s, author, "revoke", learner, exercise, {"id": newest.id, "score": newest.score})
            s.commit()
            if len(live) > 1:
                o = live[-2]
                return OverrideFact(o.score, o.reason, o.author, o.created_at)
            return None

    def remove(
        self,
        learner: str,
        reason: str,
        author: str,
        *,
        exercise: str | None = None,
        submission: int | None = None,
        restore: bool = False,
    ) -> int:
        """Remove (or, with `restore`, bring back) a learner, their submissions of an exercise, or
        one submission; nothing is deleted, the rows keep `removed_at`. Removing an exercise's
        submissions marks those not removed yet with one time, and restoring it clears exactly
        those of the newest such removal, so an undo brings back what it removed and no more.
        How many rows changed."""
        reason = reason.strip()
        if not reason:
            raise GradebookInputError("--reason", "a reason is required and may not be empty")
        action = "restore" if restore else "remove"
        with self.sessions() as s:
            who = self._learner_or_fail(s, learner)
            now = utcnow()
            if submission is not None:
                sub = self._submission_or_fail(s, who, submission, exercise)
                rows: list[Submission] = [sub] if (sub.removed_at is not None) == restore else []
                exercise = sub.exercise
                scope: dict = {"submission": submission}
            elif exercise is not None:
                subs = list(s.scalars(select(Submission).filter_by(learner_id=who.id, exercise=exercise)))
                if not subs:
                    raise GradebookInputError(
                        "--exercise", f"learner {learner!r} has no submission of {exercise}"
                    )
                if restore:
                    newest = max((x.removed_at for x in subs if x.removed_at is not None), default=None)
                    rows = [x for x in subs if newest is not None and x.removed_at == newest]
                else:
                    rows = [x for x in subs if x.removed_at is None]
                scope = {"submissions": [x.id for x in rows]}
            else:
                changed = (who.removed_at is not None) == restore
                who.removed_at = None if restore else (who.removed_at or now)
                audit_entry(
                    s, author, action, learner, None, {"reason": reason, "learner": True, "changed": changed}
                )
                s.commit()
                return int(changed)
            for x in rows:
                x.removed_at = None if restore else now
            audit_entry(s, author, action, learner, exercise, {"reason": reason, **scope})
            s.commit()
            return len(rows)

    def choose(self, learner: str, exercise: str, submission: int, author: str) -> None:
        """Make SUBMISSION the learner's chosen one for EXERCISE (what `counts = "chosen"` takes)."""
        with self.sessions() as s:
            who = self._learner_or_fail(s, learner)
            sub = self._submission_or_fail(s, who, submission, exercise)
            for other in s.scalars(select(Submission).filter_by(learner_id=who.id, exercise=exercise)):
                other.chosen = other.id == sub.id
            audit_entry(s, author, "choose", learner, exercise, {"submission": submission})
            s.commit()

    def audit(
        self, actor: str, action: str, learner: str | None, exercise: str | None, details: dict
    ) -> None:
        """Record one action that is not a correction (a batch, a regrade, a publication)."""
        with self.sessions() as s:
            audit_entry(s, actor, action, learner, exercise, details)
            s.commit()

    def audit_log(self, learner: str | None = None, exercise: str | None = None) -> list[dict]:
        """The audit, oldest first, as plain values."""
        with self.sessions() as s:
            q = select(AuditEntry).order_by(AuditEntry.id)
            if learner:
                q = q.where(AuditEntry.learner == learner)
            if exercise:
                q = q.where(AuditEntry.exercise == exercise)
            return [
                {
                    "id": e.id,
                    "at": e.at,
                    "actor": e.actor,
                    "action": e.action,
                    "learner": e.learner,
                    "exercise": e.exercise,
                    "details": e.details or {},
                }
                for e in s.scalars(q)
            ]

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


class GradebookInputError(StoreError):
    """A correction that names what is not there (a learner, a submission) or gives no reason:
    `argument` is the command-line argument it came from, for the exit-2 message."""

    def __init__(self, argument: str, message: str):
        super().__init__(f"{argument}: {message}")
        self.argument = argument


def os_user() -> str:
    """Who runs the command: the audit's author, and an override's (the OS account)."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "unknown"


def audit_entry(
    s: Session, actor: str, action: str, learner: str | None, exercise: str | None, details: dict
) -> None:
    s.add(AuditEntry(actor=actor, action=action, learner=learner, exercise=exercise, details=details))


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
        else:  # a name SOURCE gives (a Canvas file's slug, a Moodle display name) never replaces
            # the one stored (the roster's, a token's): `chenmeiling` does not undo `陳美玲`
            learner.name = learner.name or name
            learner.email = learner.email or email
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
