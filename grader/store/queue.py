"""The grading server's queue, kept in the gradebook itself: no broker, nothing lost with a process.

An upload is stored with its Submission and its Job in one transaction, so a submission the
server answered 202 to is always queued. A grading process leases jobs (PostgreSQL: SELECT ...
FOR UPDATE SKIP LOCKED, so several servers on one gradebook never take the same job; SQLite: a
BEGIN IMMEDIATE transaction, so two processes on one file take turns), renews its leases with
heartbeats, and completes a job by recording the grade run and marking the job done in one
transaction, only while it still holds the lease: a late result of a lost lease is dropped.

Attempts: every lease counts one, and a job whose lease ran out (expire) or whose grading failed
on the server's side (fail) is queued again, up to JOB_ATTEMPTS; then it is dead, a dead letter an
instructor may retry, its upload `failed` and refunded (a server-side failure never costs the
learner a submission). A restart is no failure: resume() puts back this host's jobs of processes
that are gone without counting the attempt they had taken.

Every write that reads first runs in `_writing`: on SQLite a BEGIN IMMEDIATE transaction (WAL
lets a deferred reader that then writes fail with SQLITE_BUSY instead of waiting its turn).
"""

from __future__ import annotations

import dataclasses
import heapq
import os
import secrets
import socket
import threading
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from grader.limits import (
    IDEMPOTENCY_KEY_CHARS,
    JOB_ATTEMPTS,
    LEASE_SECONDS,
    MESSAGE_BYTES,
    QUEUE_DEPTH,
    QUEUE_RETRY_SECONDS,
    SUBMISSIONS_PER_EXERCISE,
)
from grader.models import Grade
from grader.store.gradebook import Gradebook, Incoming, Outcome, learner_row, store_run, store_submissions
from grader.store.schema import (
    FINAL_STATUSES,
    ExerciseVersion,
    Extension,
    GradeRun,
    Job,
    LateDay,
    Learner,
    Release,
    Submission,
    SubmissionFile,
    UploadRow,
    utcnow,
)
from grader.text import cap_bytes

# what a learner sees of a job's status
UPLOAD_STATUS = {"queued": "queued", "running": "grading", "done": "graded", "dead": "failed"}
WRITE_TRIES = 3  # a write that met another writer's new row (same learner, files, key or attempt): again


class QueueFull(Exception):
    """As many jobs are queued as the queue takes: try again after `retry_after` seconds."""

    def __init__(self, depth: int, retry_after: int = QUEUE_RETRY_SECONDS):
        super().__init__(f"the grading queue is full ({depth} jobs queued); retry in {retry_after} s")
        self.depth = depth
        self.retry_after = retry_after


class TooManyUploads(Exception):
    """The learner has `stored` uploads of this exercise, SUBMISSIONS_PER_EXERCISE or more."""

    def __init__(self, stored: int):
        super().__init__(f"{stored} uploads of this exercise are stored, the most one learner may have")
        self.stored = stored


@dataclass(frozen=True)
class RunSummary:
    """What a list shows of a grade run, from its columns (the grade document, up to a MiB with its
    evidence, is read only for one upload: Queue.grade)."""

    run_id: int
    status: str  # a final status: graded, unreadable, given-up
    score: float
    max_score: float
    passed: bool
    recorded_at: datetime


@dataclass
class Upload:
    """What the API shows about one upload (no file contents)."""

    id: int
    learner: str
    exercise: str
    submission_id: int
    version_id: int
    digest: str
    files: dict[str, int]  # name -> size
    received_at: datetime
    use_late_day: bool
    late_days_spent: int
    chosen: bool
    refunded: bool
    status: str  # 'queued' | 'grading' | 'graded' | 'failed' (the job is dead: a server-side failure)
    run_id: int | None
    # the newest final run of (submission, version), summarised; Queue.grade(run_id) is the Grade
    grade: RunSummary | None
    created: bool = True  # False: an idempotent replay, or a repeat, returned the upload made before
    repeat: bool = False  # the learner's latest upload had these very files and exercise version


@dataclass
class Lease:
    """One leased job: what a worker needs to grade it, and the token that proves the lease."""

    job_id: int
    upload_id: int
    submission_id: int
    version_id: int
    attempt: int
    token: str
    learner: str
    exercise: str
    version: str
    files: dict[str, bytes]


def valid_key(key: str) -> bool:
    """An idempotency key is stored and looked up as it is: printable ASCII, no spaces."""
    return 0 < len(key) <= IDEMPOTENCY_KEY_CHARS and all("!" <= ch <= "~" for ch in key)


def make_owner() -> str:
    """A lease owner: host:pid:random (the random part tells two queues of one process apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _owner_host_pid(owner: str | None) -> tuple[str, int] | None:
    parts = (owner or "").rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


def fair_share(
    running: Mapping[int, int], queued: Sequence[tuple[int, int]], limit: int, start: int
) -> list[int]:
    """Which queued jobs to lease, up to `limit`, in the order they should start: round-robin by
    learner. running: learner -> their jobs running now (leased, by any server); queued: (job id,
    learner), oldest first.

    Each pick goes to the learner with the fewest jobs running or picked, and of those to the one
    whose next job is oldest: every learner with nothing running gets a job before anyone gets a
    second. Only the first `start` picks (they start at once, on free workers) may be a learner's
    second or later job; the rest are held ahead of a worker, and a learner's second job held so
    would go before a learner who uploads meanwhile, so it waits in the queue instead.

    >>> fair_share({}, [(1, 7), (2, 7), (3, 8), (4, 9)], limit=3, start=3)
    [1, 3, 4]
    >>> fair_share({8: 1}, [(1, 7), (2, 7), (3, 8)], limit=3, start=3)
    [1, 2, 3]
    >>> fair_share({8: 1}, [(1, 7), (2, 7), (3, 8)], limit=3, start=1)
    [1]
    """
    waiting: dict[int, deque[int]] = {}
    for job, learner in queued:
        waiting.setdefault(learner, deque()).append(job)
    turns = [(running.get(learner, 0), jobs[0], learner) for learner, jobs in waiting.items()]
    heapq.heapify(turns)
    picked: list[int] = []
    while turns and len(picked) < limit:
        held, job, learner = heapq.heappop(turns)
        if held and len(picked) >= start:
            break  # everyone left has a job running: none of theirs is held ahead
        picked.append(job)
        jobs = waiting[learner]
        jobs.popleft()
        if jobs:
            heapq.heappush(turns, (held + 1, jobs[0], learner))
    return picked


# PostgreSQL: the advisory lock under which leases take turns (SQLite's BEGIN IMMEDIATE does the
# same): a fair share reads every server's leases, which a lease in flight elsewhere would miss
LEASE_LOCK = 0x6C65617365


def summary_of(run) -> RunSummary:
    """A GradeRun (or a row of its columns) as a list shows it."""
    return RunSummary(
        run_id=run.id,
        status=run.status,
        score=run.score,
        max_score=run.max_score,
        passed=run.passed,
        recorded_at=run.recorded_at,
    )


# Parsed grades a Queue keeps, by grade run id (a few MB): a run's grade is never rewritten, and
# parsing one (every string bounded again, grader/text.py) was ~3 ms, most of what a learner's
# status, history or poll cost, read again for each of their uploads on every request
GRADE_CACHE_RUNS = 2048


class Queue:
    def __init__(self, gradebook: Gradebook, owner: str | None = None, lease_seconds: float = LEASE_SECONDS):
        self.gradebook = gradebook
        self.owner = owner or make_owner()
        self.lease_seconds = lease_seconds
        self._grades: OrderedDict[int, Grade] = OrderedDict()
        self._grades_lock = threading.Lock()

    def grade(self, run_id: int | None) -> Grade | None:
        """The whole Grade of a run (None: no run), parsed once per GRADE_CACHE_RUNS most recent."""
        if run_id is None:
            return None
        with self._grades_lock:
            grade = self._grades.get(run_id)
            if grade is not None:
                self._grades.move_to_end(run_id)
                return grade
        with self.gradebook.sessions() as s:
            run = s.get(GradeRun, run_id)
            return None if run is None else self._grade(run)

    def _grade(self, run: GradeRun) -> Grade:
        """The run's Grade, parsed once per GRADE_CACHE_RUNS most recent (callers copy before
        changing one: policy.visible_view works on a deep copy)."""
        with self._grades_lock:
            grade = self._grades.get(run.id)
            if grade is not None:
                self._grades.move_to_end(run.id)
                return grade
        grade = Gradebook.to_grade(run)
        with self._grades_lock:
            self._grades[run.id] = grade
            while len(self._grades) > GRADE_CACHE_RUNS:
                self._grades.popitem(last=False)
        return grade

    # -- transactions

    @contextmanager
    def _writing(self) -> Iterator[Session]:
        """A session whose transaction takes the write lock first on SQLite (BEGIN IMMEDIATE);
        PostgreSQL locks rows as it goes (FOR UPDATE where it matters)."""
        with self.gradebook.sessions() as s:
            if self.gradebook.backend == "sqlite":
                s.connection().exec_driver_sql("BEGIN IMMEDIATE")
            yield s

    def _any(self, *where) -> bool:
        """Whether a job matches, read without the write lock: a dispatcher polls lease() and
        expire() on every wake-up, and an idle poll must not queue behind (or block) a submit."""
        with self.gradebook.sessions() as s:
            return s.scalar(select(Job.id).where(*where).limit(1)) is not None

    # -- submitting

    def submit(
        self,
        learner: str,
        exercise: str,
        version_id: int,
        incoming: Incoming,
        *,
        idempotency_key: str | None = None,
        received_at: datetime | None = None,
        use_late_day: bool = False,
        late_days_spent: int = 0,
        max_depth: int = QUEUE_DEPTH,
        max_stored: int = SUBMISSIONS_PER_EXERCISE,
    ) -> Upload:
        """Store the Submission (deduplicated by content), the Upload and its Job in ONE transaction.

        The same learner and idempotency key again: the upload made then, `created=False`, and
        nothing new. The same files and exercise version as the learner's latest upload of this
        exercise (one the server did not fail): that upload, `created=False, repeat=True`, and
        nothing new. When (submission, version) already has a final grade the job is done at once
        with it (no regrade). A full queue (max_depth jobs queued) raises QueueFull, and max_stored
        uploads of this exercise TooManyUploads, storing nothing; a key that is not 1 to
        IDEMPOTENCY_KEY_CHARS printable ASCII characters, a ValueError."""
        if idempotency_key is not None and not valid_key(idempotency_key):
            raise ValueError(
                f"an idempotency key is 1 to {IDEMPOTENCY_KEY_CHARS} printable ASCII characters, no spaces"
            )
        incoming = dataclasses.replace(incoming, learner=learner)
        for attempt in range(WRITE_TRIES):
            try:
                with self._writing() as s:
                    upload_id, made, repeat = self._submit_in(
                        s,
                        learner,
                        exercise,
                        version_id,
                        incoming,
                        idempotency_key=idempotency_key,
                        received_at=received_at or utcnow(),
                        use_late_day=use_late_day,
                        late_days_spent=late_days_spent,
                        max_depth=max_depth,
                        max_stored=max_stored,
                    )
                    s.commit()
                break
            except IntegrityError:  # a concurrent writer made the same learner, submission or key
                if attempt == WRITE_TRIES - 1:
                    raise
        if made is not None:
            return made
        replay = self.upload(upload_id)
        assert replay is not None  # committed before
        replay.created, replay.repeat = False, repeat
        return replay

    def _submit_in(
        self,
        s: Session,
        learner: str,
        exercise: str,
        version_id: int,
        incoming: Incoming,
        *,
        idempotency_key: str | None,
        received_at: datetime,
        use_late_day: bool,
        late_days_spent: int,
        max_depth: int,
        max_stored: int,
    ) -> tuple[int, Upload | None, bool]:
        """The new upload's id and the Upload (built from what was just written, not read back),
        or an earlier upload's id, None, and whether it is a repeat (else an idempotent replay)."""
        if idempotency_key is not None:
            replay = s.scalar(
                select(UploadRow.id)
                .join(Learner, UploadRow.learner_id == Learner.id)
                .where(Learner.key == learner, UploadRow.idempotency_key == idempotency_key)
            )
            if replay is not None:
                return replay, None, False
        repeat = self._repeat_in(s, learner, exercise, version_id, incoming.digest)
        if repeat is not None:
            return repeat, None, True
        stored = self._stored_in(s, learner, exercise)
        if stored >= max_stored:
            raise TooManyUploads(stored)
        depth = s.scalar(select(func.count()).select_from(Job).where(Job.status == "queued")) or 0
        if depth >= max_depth:
            raise QueueFull(depth)
        (sub,) = store_submissions(s, exercise, [incoming])
        row = UploadRow(
            learner_id=sub.learner_id,
            exercise=exercise,
            submission_id=sub.id,
            version_id=version_id,
            idempotency_key=idempotency_key,
            received_at=received_at,
            use_late_day=use_late_day,
            late_days_spent=late_days_spent,
        )
        s.add(row)
        s.flush()
        final = self._final_run_id(s, sub.id, version_id)
        now = utcnow()
        s.add(
            Job(
                upload_id=row.id,
                submission_id=sub.id,
                version_id=version_id,
                status="queued" if final is None else "done",
                enqueued_at=now,
                finished_at=None if final is None else now,
                run_id=final,
            )
        )
        if late_days_spent:
            s.add(
                LateDay(
                    learner_id=sub.learner_id,
                    exercise=exercise,
                    upload_id=row.id,
                    days=late_days_spent,
                    reason="spent",
                )
            )
        s.flush()
        run = None if final is None else s.get(GradeRun, final)
        return (
            row.id,
            Upload(
                id=row.id,
                learner=learner,
                exercise=exercise,
                submission_id=sub.id,
                version_id=version_id,
                digest=sub.digest,
                files={name: len(data) for name, data in sorted(incoming.files.items())},
                received_at=received_at.replace(tzinfo=UTC)
                if received_at.tzinfo is None
                else received_at.astimezone(UTC),
                use_late_day=use_late_day,
                late_days_spent=late_days_spent,
                chosen=False,
                refunded=False,
                status="queued" if run is None else "graded",
                run_id=final,
                grade=None if run is None else summary_of(run),
            ),
            False,
        )

    @staticmethod
    def _repeat_in(s: Session, learner: str, exercise: str, version_id: int, digest: str) -> int | None:
        """The learner's latest upload of `exercise` that the server did not fail, when it holds
        these very files for this version: sending it again changes nothing, not even which upload
        counts. Only the latest: an older one sent again is the newest now ('last-on-time'), and a
        dead letter is graded again by a new upload."""
        latest = s.execute(
            select(UploadRow.id, UploadRow.version_id, Submission.digest)
            .join(Learner, UploadRow.learner_id == Learner.id)
            .join(Job, Job.upload_id == UploadRow.id)
            .join(Submission, UploadRow.submission_id == Submission.id)
            .where(Learner.key == learner, UploadRow.exercise == exercise, Job.status != "dead")
            .order_by(UploadRow.id.desc())
            .limit(1)
        ).first()
        if latest is None or latest.version_id != version_id or latest.digest != digest:
            return None
        return latest.id

    @staticmethod
    def _stored_in(s: Session, learner: str, exercise: str) -> int:
        """The learner's uploads of `exercise` that count towards SUBMISSIONS_PER_EXERCISE: all but
        dead letters (the server's failure never costs the learner)."""
        return (
            s.scalar(
                select(func.count())
                .select_from(UploadRow)
                .join(Learner, UploadRow.learner_id == Learner.id)
                .join(Job, Job.upload_id == UploadRow.id)
                .where(Learner.key == learner, UploadRow.exercise == exercise, Job.status != "dead")
            )
            or 0
        )

    def repeat_of(self, learner: str, exercise: str, version_id: int, digest: str) -> Upload | None:
        """The upload an upload of these files would repeat (see _repeat_in), `repeat=True`; or None."""
        with self.gradebook.sessions() as s:
            found = self._repeat_in(s, learner, exercise, version_id, digest)
        upload = None if found is None else self.upload(found)
        if upload is not None:
            upload.created, upload.repeat = False, True
        return upload

    def stored(self, learner: str, exercise: str) -> int:
        """How many of the learner's uploads of `exercise` count towards SUBMISSIONS_PER_EXERCISE."""
        with self.gradebook.sessions() as s:
            return self._stored_in(s, learner, exercise)

    def pending(self, learner: str) -> int:
        """The learner's uploads queued or being graded, every exercise."""
        with self.gradebook.sessions() as s:
            return (
                s.scalar(
                    select(func.count())
                    .select_from(UploadRow)
                    .join(Learner, UploadRow.learner_id == Learner.id)
                    .join(Job, Job.upload_id == UploadRow.id)
                    .where(Learner.key == learner, Job.status.in_(("queued", "running")))
                )
                or 0
            )

    @staticmethod
    def _final_run_id(s: Session, submission_id: int, version_id: int) -> int | None:
        return s.scalar(
            select(func.max(GradeRun.id)).where(
                GradeRun.submission_id == submission_id,
                GradeRun.exercise_id == version_id,
                GradeRun.status.in_(FINAL_STATUSES),
            )
        )

    # -- grading

    def lease(self, limit: int = 1, start: int | None = None) -> list[Lease]:
        """Take up to `limit` queued jobs, a fair share by learner (fair_share) in the order they
        should start: each gets attempts + 1 and a new token. Only the first `start` (default: all)
        may be the second job of a learner with one running; those start now on free workers."""
        start = limit if start is None else min(start, limit)
        now = utcnow()
        expires = now + timedelta(seconds=self.lease_seconds)
        if limit < 1 or not self._any(Job.status == "queued"):
            return []
        with self.gradebook.sessions() as s:  # read first, as _any: a poll that leases nothing (the
            # queued jobs are all second jobs and no worker is free) takes no write lock
            if not fair_share(*self._candidates(s, limit, start), limit=limit, start=start):
                return []
        with self._writing() as s:
            if self.gradebook.backend == "postgresql":
                s.execute(select(func.pg_advisory_xact_lock(LEASE_LOCK)))
            picked = fair_share(*self._candidates(s, limit, start), limit=limit, start=start)
            locked = {
                job.id: job
                for job in s.scalars(
                    select(Job)
                    .where(Job.id.in_(picked), Job.status == "queued")
                    .with_for_update(skip_locked=True)  # a job another transaction requeues: next time
                )
            }
            jobs = [locked[job_id] for job_id in picked if job_id in locked]
            if not jobs:
                return []
            for job in jobs:
                job.status = "running"
                job.attempts += 1
                job.lease_owner = self.owner
                job.lease_token = secrets.token_hex(16)
                job.lease_expires_at = expires
                job.heartbeat_at = now
                job.started_at = now
            s.flush()
            leases = self._leases(s, jobs)
            s.commit()
        return leases

    @staticmethod
    def _candidates(s: Session, limit: int, start: int) -> tuple[dict[int, int], list[tuple[int, int]]]:
        """What fair_share picks from: learner -> their jobs running, and queued (job id, learner)
        oldest first: the oldest job of each learner with nothing running, up to `limit` of them;
        when there are fewer and a second job may start, each learner's first `start` jobs."""
        learner, of_upload = UploadRow.learner_id, Job.upload_id == UploadRow.id
        running: dict[int, int] = {
            who: n
            for who, n in s.execute(
                select(learner, func.count())
                .select_from(Job)
                .join(UploadRow, of_upload)
                .where(Job.status == "running")
                .group_by(learner)
            )
        }
        oldest = func.min(Job.id)
        heads = [
            (job_id, who)
            for job_id, who in s.execute(
                select(oldest, learner)
                .select_from(Job)
                .join(UploadRow, of_upload)
                .where(Job.status == "queued", learner.not_in(list(running)))
                .group_by(learner)
                .order_by(oldest)
                .limit(limit)
            )
        ]
        if len(heads) >= start:  # they are picked first, and no second job may come after `start`
            return running, heads
        rank = func.row_number().over(partition_by=learner, order_by=Job.id).label("rank")
        ranked = (
            select(Job.id.label("job_id"), learner.label("learner"), rank)
            .join(UploadRow, of_upload)
            .where(Job.status == "queued")
            .subquery()
        )
        rows = s.execute(
            select(ranked.c.job_id, ranked.c.learner).where(ranked.c.rank <= start).order_by(ranked.c.job_id)
        )
        return running, [(job_id, who) for job_id, who in rows]

    @staticmethod
    def _leases(s: Session, jobs: list[Job]) -> list[Lease]:
        sub_ids = [j.submission_id for j in jobs]
        files: dict[int, dict[str, bytes]] = {i: {} for i in sub_ids}
        for sid, name, content in s.execute(
            select(SubmissionFile.submission_id, SubmissionFile.name, SubmissionFile.content).where(
                SubmissionFile.submission_id.in_(sub_ids)
            )
        ):
            files[sid][name] = content
        info = {
            sid: (key, ex)
            for sid, key, ex in s.execute(
                select(Submission.id, Learner.key, Submission.exercise)
                .join(Learner, Submission.learner_id == Learner.id)
                .where(Submission.id.in_(sub_ids))
            )
        }
        versions = dict(
            s.execute(
                select(ExerciseVersion.id, ExerciseVersion.version).where(
                    ExerciseVersion.id.in_({j.version_id for j in jobs})
                )
            ).all()
        )
        out = []
        for job in jobs:
            assert job.lease_token is not None  # just leased
            learner, exercise = info[job.submission_id]
            out.append(
                Lease(
                    job_id=job.id,
                    upload_id=job.upload_id,
                    submission_id=job.submission_id,
                    version_id=job.version_id,
                    attempt=job.attempts,
                    token=job.lease_token,
                    learner=learner,
                    exercise=exercise,
                    version=versions[job.version_id],
                    files=files[job.submission_id],
                )
            )
        return out

    @staticmethod
    def _held(lease: Lease):
        """The WHERE of every write a lease allows: still running, still under this token."""
        return (Job.id == lease.job_id, Job.lease_token == lease.token, Job.status == "running")

    def heartbeat(self, leases: list[Lease]) -> list[int]:
        """Renew these leases; the ids of the jobs whose lease was lost (expired and requeued,
        or taken by another process): their grading should stop, its result would be dropped."""
        if not leases:
            return []
        now = utcnow()
        lost = []
        with self.gradebook.sessions() as s:
            for lease in leases:
                done = s.execute(
                    update(Job)
                    .where(*self._held(lease))
                    .values(heartbeat_at=now, lease_expires_at=now + timedelta(seconds=self.lease_seconds))
                    .execution_options(synchronize_session=False)
                )
                if done.rowcount != 1:  # type: ignore[attr-defined]  # a CursorResult
                    lost.append(lease.job_id)
            s.commit()
        return lost

    def complete(self, lease: Lease, outcome: Outcome) -> int | None:
        """Record the grade run and mark the job done, in ONE transaction, only while the job is
        still running under this lease: the run's id, or None for a lost lease (nothing written).
        When another job of the same files graded them first, this job is done with that run."""
        if outcome.status not in FINAL_STATUSES:
            raise ValueError(f"complete() takes a final outcome, not {outcome.status!r}: call fail()")
        for attempt in range(WRITE_TRIES):
            try:
                with self._writing() as s:
                    now = utcnow()
                    held = s.execute(
                        update(Job)
                        .where(*self._held(lease))
                        .values(status="done", finished_at=now, lease_expires_at=None, last_error=None)
                        .execution_options(synchronize_session=False)
                    )
                    if held.rowcount != 1:  # type: ignore[attr-defined]  # a CursorResult
                        s.rollback()
                        return None
                    run = store_run(s, lease.submission_id, lease.version_id, outcome)
                    if run is not None:
                        s.flush()
                        run_id: int | None = run.id
                    else:
                        run_id = self._final_run_id(s, lease.submission_id, lease.version_id)
                    s.execute(
                        update(Job)
                        .where(Job.id == lease.job_id)
                        .values(run_id=run_id)
                        .execution_options(synchronize_session=False)
                    )
                    s.commit()
                    return run_id
            except IntegrityError:  # `grader batch` wrote the same attempt meanwhile: count again
                if attempt == WRITE_TRIES - 1:
                    raise
        return None  # not reached

    def fail(self, lease: Lease, message: str) -> str:
        """The grading failed on the server's side: the job's new status, 'queued' again or 'dead'
        after JOB_ATTEMPTS attempts (its upload then refunded and shown 'failed'); 'lost' when the
        lease was lost already (nothing written)."""
        with self._writing() as s:
            job = s.scalar(select(Job).where(*self._held(lease)).with_for_update())
            if job is None:
                return "lost"
            self._requeue_or_kill(s, job, message)
            s.commit()
            return job.status

    def _requeue_or_kill(self, s: Session, job: Job, message: str) -> None:
        job.last_error = cap_bytes(str(message), MESSAGE_BYTES)  # a worker's traceback can be long
        job.lease_owner = job.lease_token = job.lease_expires_at = None
        if job.attempts < JOB_ATTEMPTS:
            job.status = "queued"
            return
        job.status = "dead"
        job.finished_at = utcnow()
        upload = s.get(UploadRow, job.upload_id)
        assert upload is not None  # the job's own upload (jobs cascade with it)
        upload.refunded = True
        if upload.late_days_spent:
            s.add(
                LateDay(
                    learner_id=upload.learner_id,
                    exercise=upload.exercise,
                    upload_id=upload.id,
                    days=-upload.late_days_spent,
                    reason="refunded: the server failed to grade it",
                )
            )

    def expire(self) -> int:
        """Jobs whose lease ran out (their process hung or died elsewhere): queued again, or dead
        at JOB_ATTEMPTS (the lost attempt counts). How many."""
        now = utcnow()
        if not self._any(Job.status == "running", Job.lease_expires_at < now):
            return 0
        with self._writing() as s:
            jobs = list(
                s.scalars(
                    select(Job)
                    .where(Job.status == "running", Job.lease_expires_at < now)
                    .order_by(Job.id)
                    .with_for_update(skip_locked=True)
                )
            )
            for job in jobs:
                self._requeue_or_kill(s, job, f"lease of {job.lease_owner} expired")
            s.commit()
        return len(jobs)

    def resume(self) -> int:
        """On start: this host's running jobs whose process is gone back to 'queued', without the
        attempt they had taken (a restart never fails a job). How many."""
        host = socket.gethostname()
        with self._writing() as s:
            jobs = list(
                s.scalars(select(Job).where(Job.status == "running").with_for_update(skip_locked=True))
            )
            gone = []
            for job in jobs:
                owner = _owner_host_pid(job.lease_owner)
                if owner is not None and owner[0] == host and not _pid_alive(owner[1]):
                    gone.append(job)
            for job in gone:
                job.status = "queued"
                job.attempts = max(0, job.attempts - 1)
                job.last_error = f"resumed: {job.lease_owner} is gone"
                job.lease_owner = job.lease_token = job.lease_expires_at = None
            s.commit()
        return len(gone)

    # -- the instructor's view of the queue

    def stats(self) -> dict:
        with self.gradebook.sessions() as s:
            counts = dict(s.execute(select(Job.status, func.count()).group_by(Job.status)).all())
            oldest = s.scalar(select(func.min(Job.enqueued_at)).where(Job.status == "queued"))
        return {
            "queued": counts.get("queued", 0),
            "running": counts.get("running", 0),
            "dead": counts.get("dead", 0),
            "oldest_queued_at": oldest.isoformat() if oldest else None,
        }

    def dead_letters(self) -> list[dict]:
        with self.gradebook.sessions() as s:
            rows = s.execute(
                select(Job, UploadRow.exercise, Learner.key)
                .join(UploadRow, Job.upload_id == UploadRow.id)
                .join(Learner, UploadRow.learner_id == Learner.id)
                .where(Job.status == "dead")
                .order_by(Job.id)
            ).all()
            return [
                {
                    "job": job.id,
                    "upload": job.upload_id,
                    "learner": key,
                    "exercise": exercise,
                    "attempts": job.attempts,
                    "last_error": job.last_error,
                    "enqueued_at": job.enqueued_at.isoformat(),
                    "finished_at": job.finished_at.isoformat() if job.finished_at else None,
                }
                for job, exercise, key in rows
            ]

    def retry(self, job_id: int) -> bool:
        """A dead job queued again with attempts=0 (False: no such dead job)."""
        with self._writing() as s:
            job = s.scalar(select(Job).where(Job.id == job_id, Job.status == "dead").with_for_update())
            if job is None:
                return False
            job.status, job.attempts, job.finished_at = "queued", 0, None
            job.enqueued_at = utcnow()
            upload = s.get(UploadRow, job.upload_id)
            assert upload is not None
            if upload.late_days_spent:  # refunded when it died; graded now after all
                s.add(
                    LateDay(
                        learner_id=upload.learner_id,
                        exercise=upload.exercise,
                        upload_id=upload.id,
                        days=upload.late_days_spent,
                        reason="spent again: retried by an instructor",
                    )
                )
            s.commit()
            return True

    # -- uploads

    def upload(self, upload_id: int, learner: str | None = None) -> Upload | None:
        """One upload by id; with `learner`, only if it is theirs (one query either way)."""
        where = [UploadRow.id == upload_id]
        if learner is not None:
            where.append(Learner.key == learner)
        found = self._uploads(*where)
        return found[0] if found else None

    def uploads(self, learner: str | None = None, exercise: str | None = None) -> list[Upload]:
        """Uploads, oldest first: all, or a learner's, or of one exercise (each grade a summary).
        Unpaged: for what must see a learner's every upload of an exercise (which counts, the rate
        limit), SUBMISSIONS_PER_EXERCISE of them at most; a list for people is `page`."""
        return self._uploads(*self._whose(learner, exercise))

    def page(
        self,
        learner: str | None = None,
        exercise: str | None = None,
        *,
        after: int | None = None,
        limit: int,
        newest_first: bool = False,
    ) -> tuple[list[Upload], bool]:
        """At most `limit` uploads by id, oldest first (newest_first: newest first), from just past
        the upload id `after` (keyset: the same cost on every page, and an upload made meanwhile
        never shifts one into the next page twice); and whether more follow."""
        where = self._whose(learner, exercise)
        if after is not None:
            where.append(UploadRow.id < after if newest_first else UploadRow.id > after)
        order = UploadRow.id.desc() if newest_first else UploadRow.id
        found = self._uploads(*where, order_by=(order,), limit=limit + 1)
        return found[:limit], len(found) > limit

    def siblings(self, pairs: set[tuple[str, str]]) -> dict[tuple[str, str], list[Upload]]:
        """(learner, exercise) -> every upload of that learner and exercise, oldest first: what
        decides which of a page's uploads counts."""
        out: dict[tuple[str, str], list[Upload]] = {pair: [] for pair in pairs}
        ordered = sorted(pairs)
        for i in range(0, len(ordered), 200):
            chunk = ordered[i : i + 200]
            for u in self._uploads(tuple_(Learner.key, UploadRow.exercise).in_(chunk)):
                out[u.learner, u.exercise].append(u)
        return out

    @staticmethod
    def _whose(learner: str | None, exercise: str | None) -> list:
        where = []
        if learner is not None:
            where.append(Learner.key == learner)
        if exercise is not None:
            where.append(UploadRow.exercise == exercise)
        return where

    def upload_by_key(self, learner: str, idempotency_key: str) -> Upload | None:
        """The upload `learner` made with this idempotency key, if any (a replay is answered with it
        before the course policy is asked, so a replay never spends a submission)."""
        found = self._uploads(Learner.key == learner, UploadRow.idempotency_key == idempotency_key)
        return found[0] if found else None

    def _uploads(self, *where, order_by=None, limit: int | None = None) -> list[Upload]:
        """The uploads that match, each with its newest final run as a RunSummary: the grade's
        columns, never its document."""
        with self.gradebook.sessions() as s:
            query = (
                select(UploadRow, Job.status, Learner.key, Submission.digest)
                .join(Job, Job.upload_id == UploadRow.id)
                .join(Learner, UploadRow.learner_id == Learner.id)
                .join(Submission, UploadRow.submission_id == Submission.id)
                .where(*where)
                .order_by(*(order_by or (UploadRow.received_at, UploadRow.id)))
            )
            rows = s.execute(query if limit is None else query.limit(limit)).all()
            if not rows:
                return []
            sub_ids = list({u.submission_id for u, *_ in rows})
            files: dict[int, dict[str, int]] = {i: {} for i in sub_ids}
            runs: dict[tuple[int, int], RunSummary] = {}
            for i in range(0, len(sub_ids), 500):
                chunk = sub_ids[i : i + 500]
                for sid, name, size in s.execute(
                    select(SubmissionFile.submission_id, SubmissionFile.name, SubmissionFile.size)
                    .where(SubmissionFile.submission_id.in_(chunk))
                    .order_by(SubmissionFile.name)
                ):
                    files[sid][name] = size
                for run in s.execute(
                    select(
                        GradeRun.id,
                        GradeRun.submission_id,
                        GradeRun.exercise_id,
                        GradeRun.status,
                        GradeRun.score,
                        GradeRun.max_score,
                        GradeRun.passed,
                        GradeRun.recorded_at,
                    )
                    .where(GradeRun.submission_id.in_(chunk), GradeRun.status.in_(FINAL_STATUSES))
                    .order_by(GradeRun.id)
                ):
                    runs[(run.submission_id, run.exercise_id)] = summary_of(run)  # the newest final run wins
            out = []
            for u, job_status, key, digest in rows:
                summary = runs.get((u.submission_id, u.version_id))
                out.append(
                    Upload(
                        id=u.id,
                        learner=key,
                        exercise=u.exercise,
                        submission_id=u.submission_id,
                        version_id=u.version_id,
                        digest=digest,
                        files=files[u.submission_id],
                        received_at=u.received_at,
                        use_late_day=u.use_late_day,
                        late_days_spent=u.late_days_spent,
                        chosen=u.chosen,
                        refunded=u.refunded,
                        status=UPLOAD_STATUS[job_status],
                        run_id=summary.run_id if summary is not None else None,
                        grade=summary,
                    )
                )
            return out

    def choose(self, upload_id: int) -> None:
        """This upload is the one that counts for its learner and exercise (counts = "chosen")."""
        with self._writing() as s:
            row = s.get(UploadRow, upload_id)
            if row is None:
                raise KeyError(upload_id)
            s.execute(
                update(UploadRow)
                .where(UploadRow.learner_id == row.learner_id, UploadRow.exercise == row.exercise)
                .values(chosen=UploadRow.id == upload_id)
                .execution_options(synchronize_session=False)
            )
            s.commit()

    def refund(self, upload_id: int) -> None:
        """Give the upload's rate-limit token back (it was unreadable, or the server failed it)."""
        with self.gradebook.sessions() as s:
            s.execute(
                update(UploadRow)
                .where(UploadRow.id == upload_id)
                .values(refunded=True)
                .execution_options(synchronize_session=False)
            )
            s.commit()

    # -- extensions, releases, the late-day ledger

    def add_extension(
        self,
        learner: str,
        exercise: str,
        due: datetime,
        closes: datetime | None = None,
        reason: str = "",
        author: str = "",
    ) -> None:
        with self._writing() as s:
            who = learner_row(s, learner)
            s.add(
                Extension(
                    learner_id=who.id, exercise=exercise, due=due, closes=closes, reason=reason, author=author
                )
            )
            s.commit()

    def extensions(self) -> dict[tuple[str, str], tuple[datetime, datetime | None]]:
        """(learner, exercise) -> (due, closes) of the newest extension of each."""
        with self.gradebook.sessions() as s:
            rows = s.execute(
                select(Learner.key, Extension.exercise, Extension.due, Extension.closes)
                .join(Learner, Extension.learner_id == Learner.id)
                .order_by(Extension.id)
            ).all()
        return {(key, ex): (due, closes) for key, ex, due, closes in rows}

    def release(self, exercise: str, author: str = "") -> datetime:
        """Release an exercise now: its `after_release` checks show from now on. When."""
        now = utcnow()
        with self.gradebook.sessions() as s:
            s.add(Release(exercise=exercise, released_at=now, author=author))
            s.commit()
        return now

    def releases(self) -> dict[str, datetime]:
        """exercise -> when it was first released (a second release changes nothing shown)."""
        with self.gradebook.sessions() as s:
            rows = s.execute(select(Release.exercise, Release.released_at).order_by(Release.id)).all()
        out: dict[str, datetime] = {}
        for exercise, at in rows:
            out.setdefault(exercise, at)
        return out

    def late_days_spent(self, learner: str) -> int:
        """The learner's late days spent: the ledger's sum."""
        with self.gradebook.sessions() as s:
            total = s.scalar(
                select(func.coalesce(func.sum(LateDay.days), 0))
                .join(Learner, LateDay.learner_id == Learner.id)
                .where(Learner.key == learner)
            )
        return int(total or 0)
