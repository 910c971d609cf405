"""The gradebook's tables, as typed SQLAlchemy 2 ORM classes.

learners ──< submissions ──< submission_files
                  │
                  └──< grade_runs >── exercises (one row per exercise *version*)
                          │  ├──< check_results   (copies, for queries: rule counts, pass rates)
                          │  └──< diagnoses
                          └── batches

The grading server (migration 0003) adds, beside them:

learners ──< accounts              (access tokens: only their SHA-256 is kept)
learners ──< uploads >── submissions   (what a learner sent the server: the same files twice are
                │                     one submission and two uploads)
                └── jobs >── grade_runs (the queue, in the gradebook itself: one job per upload)
learners ──< extensions, late_days (the append-only late-day ledger), and releases, settings.

A grade run is one grading of one submission against one exercise version. Its `status` says
whether it is final: `graded` (a Grade, passing or not, errors such as a timeout included) and
`unreadable` (the submission could not be read, e.g. malformed TOML) are final and are never
repeated unless forced; `error` (the grader itself failed: a worker died, an internal error) is
kept for the record and retried by the next batch, limits.GRADER_ATTEMPTS times in all: the last
failure is recorded as `given-up`, final too, its Grade a `crash` that names the cause.
(submission, exercise version, attempt) is unique, so two writers can never both record attempt 1.

The schema is owned by the Alembic migrations in migrations/versions: change a class here, then
add a migration (tests/test_store.py fails while the two disagree).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from grader.limits import IDEMPOTENCY_KEY_CHARS, LEARNER_ID_CHARS
from grader.models import clean_text

FINAL_STATUSES = ("graded", "unreadable", "given-up")
STATUSES = (*FINAL_STATUSES, "error")
JOB_STATUSES = ("queued", "running", "done", "dead")
ROLES = ("student", "instructor")


class CleanText(TypeDecorator):
    """Text that learner output may have filled: stored the same way on every backend."""

    impl: type[String] = Text  # Text is a String; CleanString below is the short kind
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else clean_text(str(value))


class CleanString(CleanText):
    impl = String
    cache_ok = True


def _encode(value: Any) -> Any:
    """JSON without NaN/inf (PostgreSQL refuses them): tagged, and restored on load."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$float"}:
            return float(value["$float"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


class SafeJSON(TypeDecorator):
    impl = JSON
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else _encode(value)

    def process_result_value(self, value, dialect):
        return None if value is None else _decode(value)


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes in and out, whether or not the backend keeps the zone (SQLite does not)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)  # the same constraint names on every backend


class Learner(Base):
    __tablename__ = "learners"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # the id the LMS gives them, canonical (grader.intake.sources); migration 0001 made it String(200)
    key: Mapped[str] = mapped_column(CleanString(LEARNER_ID_CHARS), unique=True)
    name: Mapped[str | None] = mapped_column(CleanString(300))
    email: Mapped[str | None] = mapped_column(CleanString(300))
    lang: Mapped[str | None] = mapped_column(String(10))  # the report language the roster gives (0004)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # set: left out everywhere (0004)

    submissions: Mapped[list[Submission]] = relationship(back_populates="learner")


class ExerciseVersion(Base):
    """One version of an exercise: a content hash of its exercise.toml, hidden tests, key and solution."""

    __tablename__ = "exercises"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_exercises_name_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), index=True)
    version: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(CleanString(300), default="")
    points: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Submission(Base):
    """What one learner handed in for one exercise, identified by the hash of its learner files."""

    __tablename__ = "submissions"
    __table_args__ = (
        UniqueConstraint("learner_id", "exercise", "digest", name="uq_submissions_content"),
        Index("ix_submissions_exercise_learner", "exercise", "learner_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    exercise: Mapped[str] = mapped_column(String(100))
    digest: Mapped[str] = mapped_column(String(64))
    layout: Mapped[str] = mapped_column(String(20), default="folder")  # folder, canvas, moodle, gradescope
    origin: Mapped[str] = mapped_column(CleanText, default="")  # where in SOURCE it was found
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    problem: Mapped[str | None] = mapped_column(CleanText)  # why it cannot be graded as is
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # as the LMS says, where it does
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    chosen: Mapped[bool] = mapped_column(Boolean, default=False)  # the one that counts, by a person (0004)
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # set: never counts (0004)

    learner: Mapped[Learner] = relationship(back_populates="submissions")
    files: Mapped[list[SubmissionFile]] = relationship(
        back_populates="submission", cascade="all, delete-orphan", order_by="SubmissionFile.name"
    )
    runs: Mapped[list[GradeRun]] = relationship(back_populates="submission", order_by="GradeRun.id")


class SubmissionFile(Base):
    """The source is kept: a regrade needs nothing but the gradebook."""

    __tablename__ = "submission_files"
    __table_args__ = (UniqueConstraint("submission_id", "name", name="uq_submission_files_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(CleanString(255))
    content: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(Integer)

    submission: Mapped[Submission] = relationship(back_populates="files")


class Batch(Base):
    """One `grader batch` or `grader regrade` run."""

    __tablename__ = "batches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(20), default="batch")  # batch, regrade
    exercise_id: Mapped[int] = mapped_column(ForeignKey("exercises.id"))
    source: Mapped[str] = mapped_column(CleanText, default="")
    executor: Mapped[str] = mapped_column(CleanString(300), default="")
    forced: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(20), default="running")  # running, finished, aborted
    grader_version: Mapped[str] = mapped_column(String(40), default="")
    submissions: Mapped[int] = mapped_column(Integer, default=0)
    graded: Mapped[int] = mapped_column(Integer, default=0)
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    errors: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    exercise: Mapped[ExerciseVersion] = relationship()


class GradeRun(Base):
    __tablename__ = "grade_runs"
    __table_args__ = (
        UniqueConstraint("submission_id", "exercise_id", "attempt", name="uq_grade_runs_attempt"),
        Index("ix_grade_runs_pair", "submission_id", "exercise_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    exercise_id: Mapped[int] = mapped_column(ForeignKey("exercises.id"))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    batch_id: Mapped[int | None] = mapped_column(ForeignKey("batches.id", ondelete="SET NULL"), index=True)
    status: Mapped[str] = mapped_column(String(20))  # graded, unreadable, given-up, error
    passed: Mapped[bool] = mapped_column(Boolean, default=False)
    score: Mapped[float] = mapped_column(Float, default=0.0)
    max_score: Mapped[float] = mapped_column(Float, default=0.0)
    error_kind: Mapped[str | None] = mapped_column(String(40))
    # the Grade itself, whole (grader.models.Grade, dumped): what every report and export reads.
    # The columns beside it and the check and diagnosis rows are copies for queries only.
    grade: Mapped[dict | None] = mapped_column(SafeJSON)
    isolation: Mapped[str] = mapped_column(CleanString(100), default="")
    grader_version: Mapped[str] = mapped_column(String(40), default="")
    worker: Mapped[str] = mapped_column(CleanString(300), default="")  # host:pid that graded it
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)  # the grade itself
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    submission: Mapped[Submission] = relationship(back_populates="runs")
    exercise: Mapped[ExerciseVersion] = relationship()
    checks: Mapped[list[CheckRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="CheckRow.position"
    )
    diagnoses: Mapped[list[DiagnosisRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="DiagnosisRow.position"
    )

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES


class CheckRow(Base):
    __tablename__ = "check_results"
    __table_args__ = (UniqueConstraint("run_id", "position", name="uq_check_results_position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("grade_runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    check_id: Mapped[str] = mapped_column(CleanString(200))
    passed: Mapped[bool] = mapped_column(Boolean)
    points: Mapped[float] = mapped_column(Float)
    max_points: Mapped[float] = mapped_column(Float)
    rule: Mapped[str] = mapped_column(String(40))
    day: Mapped[int] = mapped_column(Integer)

    run: Mapped[GradeRun] = relationship(back_populates="checks")


class DiagnosisRow(Base):
    __tablename__ = "diagnoses"
    __table_args__ = (UniqueConstraint("run_id", "position", name="uq_diagnoses_position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("grade_runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    rule: Mapped[str] = mapped_column(String(40))
    day: Mapped[int] = mapped_column(Integer)
    mutant: Mapped[str | None] = mapped_column(CleanString(100))
    check_id: Mapped[str | None] = mapped_column(CleanString(200))

    run: Mapped[GradeRun] = relationship(back_populates="diagnoses")


# -- the grading server (migration 0003) ----------------------------------------------------------


class AccountRow(Base):
    """One access token of a learner or instructor: its SHA-256 only, never the token."""

    __tablename__ = "accounts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(20), default="student")  # ROLES
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # a browser session names the epoch it was opened in; signing out moves it on, which ends
    # every session of this token on the server at once (0005)
    session_epoch: Mapped[int] = mapped_column(Integer, default=0)

    learner: Mapped[Learner] = relationship()


class UploadRow(Base):
    """What one learner sent the server once (the id students see as their "submission id")."""

    __tablename__ = "uploads"
    __table_args__ = (
        # NULL keys are distinct on both backends: uploads without a key never collide
        UniqueConstraint("learner_id", "idempotency_key", name="uq_uploads_idempotency"),
        Index("ix_uploads_learner_exercise", "learner_id", "exercise"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    exercise: Mapped[str] = mapped_column(String(100))
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("exercises.id"))
    idempotency_key: Mapped[str | None] = mapped_column(CleanString(IDEMPOTENCY_KEY_CHARS))
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)  # the server's clock
    use_late_day: Mapped[bool] = mapped_column(Boolean, default=False)
    late_days_spent: Mapped[int] = mapped_column(Integer, default=0)
    chosen: Mapped[bool] = mapped_column(Boolean, default=False)
    refunded: Mapped[bool] = mapped_column(Boolean, default=False)  # its rate-limit token given back


class Job(Base):
    """One upload's grading, queued in the gradebook; leased by a grading process at a time."""

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_status", "status", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    upload_id: Mapped[int] = mapped_column(ForeignKey("uploads.id", ondelete="CASCADE"), unique=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    version_id: Mapped[int] = mapped_column(ForeignKey("exercises.id"))
    status: Mapped[str] = mapped_column(String(20), default="queued")  # JOB_STATUSES
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(CleanString(300))  # host:pid:random
    lease_token: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    enqueued_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(CleanText)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("grade_runs.id", ondelete="SET NULL"))


class Extension(Base):
    """A learner's own dates for one exercise; the newest row for a learner and exercise applies."""

    __tablename__ = "extensions"
    __table_args__ = (Index("ix_extensions_learner_exercise", "learner_id", "exercise"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    exercise: Mapped[str] = mapped_column(String(100))
    due: Mapped[datetime] = mapped_column(UTCDateTime)
    closes: Mapped[datetime | None] = mapped_column(UTCDateTime)
    reason: Mapped[str] = mapped_column(CleanText, default="")
    author: Mapped[str] = mapped_column(CleanString(300), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LateDay(Base):
    """The late-day ledger, append-only: +days spent on an upload, -days given back."""

    __tablename__ = "late_days"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), index=True)
    exercise: Mapped[str] = mapped_column(String(100))
    upload_id: Mapped[int | None] = mapped_column(ForeignKey("uploads.id", ondelete="SET NULL"))
    days: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(CleanString(300), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Release(Base):
    """An instructor released an exercise: its `after_release` checks show from then on."""

    __tablename__ = "releases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    exercise: Mapped[str] = mapped_column(String(100), index=True)
    released_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    author: Mapped[str] = mapped_column(CleanString(300), default="")


class Setting(Base):
    """The server's own values, e.g. its session-signing secret (made on first use)."""

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


# -- the honest gradebook (migration 0004) --------------------------------------------------------


class Override(Base):
    """An instructor's score for a learner's exercise, with the reason and who gave it. The newest
    one not revoked applies, whatever grade run is current: it survives every regrade."""

    __tablename__ = "overrides"
    __table_args__ = (Index("ix_overrides_learner_exercise", "learner_id", "exercise"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    exercise: Mapped[str] = mapped_column(String(100))
    score: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(CleanText)
    author: Mapped[str] = mapped_column(CleanString(300))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_by: Mapped[str | None] = mapped_column(CleanString(300))


class AuditEntry(Base):
    """One change a person (or a command) made to the gradebook, append-only: an override, a
    removal and its undoing, a chosen submission, a batch or regrade, a publication."""

    __tablename__ = "audit"
    __table_args__ = (Index("ix_audit_learner_exercise", "learner", "exercise"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(CleanString(300), default="")
    action: Mapped[str] = mapped_column(String(40))
    learner: Mapped[str | None] = mapped_column(CleanString(LEARNER_ID_CHARS))
    exercise: Mapped[str | None] = mapped_column(String(100))
    details: Mapped[dict | None] = mapped_column(SafeJSON)
