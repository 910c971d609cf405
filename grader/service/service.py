"""The grading server's imperative shell: what the HTTP routes (app.py) and pages (pages.py) call.

`Service` holds the gradebook, its queue, the course policy and the exercises this server
grades; each method takes the caller's Account and answers with plain data (the API's JSON) or
raises `Refused` (grader.errors: status, code, field, Retry-After). No FastAPI here, and no
learner code: uploads are read as data (grader/intake/sources.py's archive rules) and stored with their
job in one transaction; the dispatcher grades them in worker processes.

Who sees what: a student sees only their own uploads (another learner's id is `None`, which the
routes answer 404 exactly like a missing one) and each grade as policy.visible_view makes it now;
an instructor sees every upload and the full grade (the lateness penalty applied, nothing hidden).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from grader.errors import Refused, SourceError
from grader.limits import (
    LEARNER_PENDING,
    QUEUE_RETRY_SECONDS,
    SUBMISSION_BYTES,
    SUBMISSIONS_PAGE,
    SUBMISSIONS_PAGE_MAX,
    SUBMISSIONS_PER_EXERCISE,
    UPLOAD_BYTES,
    UPLOAD_FILES,
)
from grader.locale import Message, message_of, msg
from grader.models import Exercise, Grade
from grader.service.waiting import Waiters

if TYPE_CHECKING:
    from grader.policy.course import CoursePolicy, Deadlines, Lateness
    from grader.store import Gradebook
    from grader.store.accounts import Account
    from grader.store.queue import Queue, Upload

INSTRUCTOR = "instructor"
FAR_FUTURE = datetime.max.replace(tzinfo=UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(UTC).isoformat()


def not_found(message: Message | None = None, field: str | None = None) -> Refused:
    """The one answer for a missing id and for another learner's: nothing tells them apart."""
    return Refused(404, "not-found", message or msg("no such submission"), field)


def forbidden() -> Refused:
    return Refused(403, "forbidden", msg("this needs an instructor's token"))


def retry_seconds(at: datetime | None, now: datetime) -> int | None:
    """Whole seconds from now until `at` (at least 1), for a Retry-After header."""
    return None if at is None else max(1, math.ceil((at - now).total_seconds()))


CURSOR_PREFIX = "after:"
MAX_ROW_ID = 2**63 - 1  # what the gradebook's ids hold (SQLite's INTEGER, PostgreSQL's BIGINT)


def page_cursor(upload_id: int) -> str:
    """The cursor of the page after `upload_id`: opaque to a client, which sends it back as it is."""
    return base64.urlsafe_b64encode(f"{CURSOR_PREFIX}{upload_id}".encode("ascii")).decode("ascii").rstrip("=")


def cursor_id(cursor: str | None) -> int | None:
    """The upload id a cursor of page_cursor names (None: the first page); Refused 422 otherwise."""
    if cursor is None:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError):  # not base64, or not ASCII inside
        text = ""
    digits = text.removeprefix(CURSOR_PREFIX)
    if text == digits or not digits.isdigit() or int(digits) > MAX_ROW_ID:
        raise Refused(
            422,
            "invalid",
            msg("this cursor is not one the server gave; start again from the first page"),
            "cursor",
        )
    return int(digits)


def too_many_uploads(stored: int, exercise: str) -> Refused:
    """409, not 429: waiting does not lift this cap, so no Retry-After; `closed` is the code every
    client already reads as "no more submissions for you here" (exit 3)."""
    return Refused(
        409,
        "closed",
        msg(
            "you have {count} submissions of {exercise} stored, the most the server keeps for one "
            "learner; it takes no more of them (your instructor can help)",
            count=stored,
            exercise=exercise,
        ),
    )


def _upload_fields(upload: Upload, late, counts: int | None) -> dict:
    """What the whole view and a list's summary both say of an upload (neither says its grade)."""
    return {
        "id": upload.id,
        "exercise": upload.exercise,
        "learner": upload.learner,
        "status": upload.status,
        "received_at": iso(upload.received_at),
        "digest": upload.digest,
        "files": [{"name": n, "size": s} for n, s in sorted(upload.files.items())],
        "late": {"minutes": late.minutes, "days": late.days, "penalty": late.penalty},
        "use_late_day": upload.use_late_day,
        "late_days_spent": upload.late_days_spent,
        "chosen": upload.chosen,
        "counted": counts == upload.id,
    }


@dataclass
class Service:
    gradebook: Gradebook
    queue: Queue
    policy: CoursePolicy
    exercises: dict[str, Exercise]
    versions: dict[str, int]  # exercise -> the id of the version this server grades
    clock: Callable[[], datetime] = utcnow
    notify: Callable[[], None] = lambda: None  # the dispatcher's wake(): an upload was queued
    waiters: Waiters = field(default_factory=Waiters)  # GETs waiting for a grade (the dispatcher notifies)
    _admitting: dict[str, threading.Lock] = field(default_factory=dict)  # learner -> its lock
    _locks_lock: threading.Lock = field(default_factory=threading.Lock)

    # -- opening

    @classmethod
    def open(cls, db: str, course: Path | None = None, *, clock=utcnow) -> Service:
        """The gradebook at `db` (created when missing), the course policy (None: open, no limits),
        and every exercise of GRADER_EXERCISES_DIR with its version registered in the gradebook."""
        from grader.catalog.exercises import all_exercises
        from grader.course.batch import exercise_version
        from grader.policy.course import check_learners, load_policy
        from grader.store import Gradebook
        from grader.store.queue import Queue

        exercises = {e.id: e for e in all_exercises()}
        policy = load_policy(course, exercises)
        gradebook = Gradebook(db)
        try:
            versions = {
                e.id: gradebook.exercise_version(e.id, exercise_version(e.id), e.points, e.title.en)
                for e in exercises.values()
            }
            queue = Queue(gradebook)  # owner host:pid:random, which resume() reads
            service = cls(gradebook, queue, policy, exercises, versions, clock=clock)
            if course is not None and policy.extensions:  # an extension for a mistyped id extends nobody
                check_learners(policy, course, service._learner_keys())
        except BaseException:
            gradebook.close()
            raise
        return service

    def close(self) -> None:
        self.gradebook.close()

    # -- accounts

    def authenticate(self, token: str):
        from grader.store.accounts import authenticate

        return authenticate(self.gradebook, token) if token else None

    def me(self, account: Account) -> dict:
        spent = self.queue.late_days_spent(account.learner)
        total = self.policy.late_days
        return {
            "learner": account.learner,
            "name": account.name,
            "role": account.role,
            "late_days": {"total": total, "spent": spent, "left": max(0, total - spent)},
            # the course's clock: the client shows every time in this zone (grader.policy.clock)
            "course": {"name": self.policy.name, "timezone": self.policy.timezone},
        }

    # -- exercises

    def exercise(self, exercise_id: str) -> Exercise:
        found = self.exercises.get(exercise_id)
        if found is None:
            raise not_found(msg("no such exercise"), "exercise")
        return found

    def _deadlines(self, exercise: str, learner: str, extensions=None):
        from grader.policy.course import deadlines

        extensions = self.queue.extensions() if extensions is None else extensions
        return deadlines(self.policy, exercise, learner, extensions)

    def exercise_list(self, account: Account) -> list[dict]:
        now, extensions = self.clock(), self.queue.extensions()
        out = []
        for ex in self.exercises.values():
            d = self._deadlines(ex.id, account.learner, extensions)
            out.append(
                {
                    "id": ex.id,
                    "kind": ex.kind,
                    "title": {"en": ex.title.en, "zh-TW": ex.title.zh_TW},
                    "day": ex.day,
                    "files": list(ex.files),
                    # the names each learner file must define: the client checks them before it
                    # sends anything (grader.intake.submission.precheck); public, as the starter is
                    "names": {f: list(n) for f, n in ex.names.items()},
                    "points": ex.points,
                    "opens": iso(d.opens),
                    "due": iso(d.due),
                    "closes": iso(d.closes),
                    "open": (d.opens is None or d.opens <= now) and (d.closes is None or now < d.closes),
                }
            )
        return out

    def starter(self, account: Account, exercise_id: str) -> bytes:
        """The starter files as a zip; a quiz's sheet is the caller's own variant."""
        from grader.catalog.exercises import exercise_dir

        ex = self.exercise(exercise_id)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for name in ex.files:
                if ex.kind == "quiz":  # its variants are drawn with the reference model: torch
                    from grader.catalog.quiz import starter_text

                    zf.writestr(name, starter_text(ex, account.learner))
                else:
                    zf.writestr(name, (exercise_dir(ex.id) / "starter" / name).read_bytes())
        return buf.getvalue()

    # -- uploads

    def read_upload(self, exercise: Exercise, body: bytes | Path) -> dict[str, bytes]:
        """The learner files of an uploaded zip (its bytes, or the file the app spooled it to), by
        grader/intake/sources.py's rules (UPLOAD_FILES members, counted in its central directory before
        any is read, inflating to SUBMISSION_BYTES at most: what one submission may send the jail);
        Refused 422 `bad-upload` (field "body") naming the reason when it cannot be graded as sent."""
        from grader.intake.sources import match_files, read_zip

        def bad(reason) -> Refused:
            return Refused(
                422, "bad-upload", msg("the upload cannot be read: {reason}", reason=reason), "body"
            )

        size = body.stat().st_size if isinstance(body, Path) else len(body)
        if size > UPLOAD_BYTES:  # the app stops reading sooner; a caller that is not the app
            raise Refused(413, "too-large", too_large(UPLOAD_BYTES), "body")
        try:
            tree = read_zip(
                body, exercise, max_total=SUBMISSION_BYTES, max_members=UPLOAD_FILES, label="the upload"
            )
        except SourceError as exc:
            raise bad(message_of(exc)) from None
        files, problem, _ = match_files(exercise, tree)
        if problem is not None:
            raise bad(problem)
        if not files:
            raise bad(msg("it holds none of the files {files}", files=", ".join(exercise.files)))
        return files

    def _lock(self, learner: str) -> threading.Lock:
        with self._locks_lock:
            return self._admitting.setdefault(learner, threading.Lock())

    def submit(
        self,
        account,
        exercise_id: str,
        body: bytes | Path,
        *,
        idempotency_key: str | None = None,
        use_late_day: bool = False,
    ) -> tuple[dict, bool]:
        """Store one upload and queue its grading; (the Submission JSON, whether it is new).

        In this order, each refusal leaving nothing stored and no rate-limit token spent: the
        archive (422), a replay of the same Idempotency-Key (the first upload, 200, whatever the
        limit says now; a key used for another exercise, 422), a repeat (the same files and
        exercise version as the learner's latest upload of it, which the server did not fail:
        that upload, 200, `repeat: true`, nothing stored, no token or late day spent), the
        learner's stored uploads of the exercise (SUBMISSIONS_PER_EXERCISE, 409 closed), the
        course policy (409 closed / not-open, 429 rate-limited), the learner's uploads still
        waiting (LEARNER_PENDING, 429 rate-limited), the queue's depth (429 queue-full). One
        learner's uploads are admitted one at a time in this process, so two at once cannot both
        take the last token (several servers: docs/admins.md, Scaling out)."""
        from grader.policy.course import PastUpload, admit
        from grader.store import Incoming
        from grader.store.queue import QueueFull, TooManyUploads

        if account.role == INSTRUCTOR:
            raise Refused(403, "forbidden", msg("submissions are made with a student's token"))
        ex = self.exercise(exercise_id)
        files = self.read_upload(ex, body)
        with self._lock(account.learner):
            if idempotency_key is not None:
                earlier = self.queue.upload_by_key(account.learner, idempotency_key)
                if earlier is not None and earlier.exercise != ex.id:  # not a replay of this upload
                    raise Refused(
                        422,
                        "invalid",
                        msg("this Idempotency-Key was used for another exercise; send a new one"),
                        "Idempotency-Key",
                    )
                if earlier is not None:
                    return self._submit_answer(account, earlier), False
            incoming = Incoming(learner=account.learner, files=files, name=account.name, layout="server")
            repeated = self.queue.repeat_of(account.learner, ex.id, self.versions[ex.id], incoming.digest)
            if repeated is not None:
                return self._submit_answer(account, repeated), False
            stored = self.queue.stored(account.learner, ex.id)
            if stored >= SUBMISSIONS_PER_EXERCISE:
                raise too_many_uploads(stored, ex.id)
            now = self.clock()
            extensions = self.queue.extensions()
            past = [
                PastUpload(received_at=u.received_at, refunded=u.refunded, late_days_spent=u.late_days_spent)
                for u in self.queue.uploads(account.learner, ex.id)
            ]
            left = max(0, self.policy.late_days - self.queue.late_days_spent(account.learner))
            admission = admit(
                self.policy,
                ex.id,
                account.learner,
                now,
                past,
                extensions=extensions,
                late_days_left=left,
                use_late_day=use_late_day,
            )
            if not admission.admitted:
                raise self._refusal(admission, now)
            pending = self.queue.pending(account.learner)
            if pending >= LEARNER_PENDING:  # every exercise, rate-limited or not: the queue is shared
                raise Refused(
                    429,
                    "rate-limited",
                    msg(
                        "{count} of your submissions are waiting to be graded; send more once they are",
                        count=pending,
                    ),
                    retry_after=QUEUE_RETRY_SECONDS,
                )
            try:
                upload = self.queue.submit(
                    account.learner,
                    ex.id,
                    self.versions[ex.id],
                    incoming,
                    idempotency_key=idempotency_key,
                    received_at=now,
                    use_late_day=use_late_day,
                    late_days_spent=admission.late_days_spent,
                )
            except QueueFull as exc:
                raise Refused(
                    429,
                    "queue-full",
                    msg("the grading queue is full ({depth} waiting); try again shortly", depth=exc.depth),
                    retry_after=getattr(exc, "retry_after", QUEUE_RETRY_SECONDS),
                ) from None
            except TooManyUploads as exc:  # another server stored the last one meanwhile
                raise too_many_uploads(exc.stored, ex.id) from None
        if upload.created:
            self.notify()
        return self._submit_answer(account, upload), upload.created

    def _submit_answer(self, account: Account, upload: Upload) -> dict:
        """A submission's JSON, saying whether the upload repeated the learner's latest one."""
        return {**self._submission_json(account, upload), "repeat": upload.repeat}

    @staticmethod
    def _refusal(admission, now: datetime) -> Refused:
        status = {"rate-limited": 429}.get(admission.reason or "", 409)
        message = admission.message or msg("this submission is not accepted now")
        return Refused(
            status,
            admission.reason or "closed",
            message,
            retry_after=retry_seconds(admission.retry_at, now),
        )

    # -- reading uploads

    def _own_upload(self, account: Account, upload_id: int) -> Upload | None:
        """The upload if the caller may see it, else None. A student's is looked up by id and owner
        in one query, so another's and a missing one take the same path and the same time (one
        empty result): the answer's timing tells nothing of which ids exist."""
        owner = None if account.role == INSTRUCTOR else account.learner
        return self.queue.upload(upload_id, learner=owner)

    def _view(
        self, account: Account, upload: Upload, deadlines: Deadlines, lateness: Lateness
    ) -> Grade | None:
        """The grade as the caller may see it now: a student's through policy.visible_view; an
        instructor's with every check shown (the lateness penalty applied to both)."""
        from grader.policy.course import visible_view

        grade = self.queue.grade(upload.run_id)
        if grade is None:
            return None
        released_at: datetime | None
        if account.role == INSTRUCTOR:  # every visibility has applied for a reader in the far future
            now, released_at = FAR_FUTURE, datetime.min.replace(tzinfo=UTC)
        else:
            now, released_at = self.clock(), self.queue.releases().get(upload.exercise)
        return visible_view(
            grade,
            self.policy,
            upload.exercise,
            now=now,
            deadlines=deadlines,
            released_at=released_at,
            lateness=lateness,
        )

    def _sealed(self, account: Account, exercise: str, deadlines: Deadlines) -> bool:
        """Whether a sealed check of `exercise` still hides its result from this caller (never
        from an instructor): policy.sealed_now."""
        from grader.policy.course import sealed_now

        if account.role == INSTRUCTOR or not self.policy.exercise(exercise).visibility.seals:
            return False
        released_at = self.queue.releases().get(exercise)
        return sealed_now(
            self.policy, exercise, now=self.clock(), deadlines=deadlines, released_at=released_at
        )

    def _submission_json(self, account: Account, upload: Upload, *, siblings=None, extensions=None) -> dict:
        from grader.policy.course import counted, lateness
        from reports import render

        d = self._deadlines(upload.exercise, upload.learner, extensions)
        late = lateness(self.policy, upload.exercise, upload.received_at, d, upload.late_days_spent)
        view = self._view(account, upload, d, late)
        if upload.grade is None:  # only a graded upload can count: a poll needs no siblings
            counts = None
        else:
            if siblings is None:
                siblings = self.queue.uploads(upload.learner, upload.exercise)
            sealed = self._sealed(account, upload.exercise, d)
            counts = counted(self.policy, upload.exercise, siblings, d, sealed=sealed)
        return {
            **_upload_fields(upload, late, counts),
            "score": view.score if view else None,
            "max_score": view.max_score
            if view
            else self.exercises[upload.exercise].points
            if upload.exercise in self.exercises
            else None,
            "passed": view.passed if view else None,
            "grade": json.loads(render(view, "json")) if view else None,
        }

    def submission(self, account: Account, upload_id: int) -> dict | None:
        upload = self._own_upload(account, upload_id)
        return None if upload is None else self._submission_json(account, upload)

    def submissions(
        self,
        account: Account,
        exercise: str | None = None,
        learner: str | None = None,
        *,
        limit: int = SUBMISSIONS_PAGE,
        cursor: str | None = None,
        newest_first: bool = False,
    ) -> dict:
        """One page of uploads, oldest first by id (newest_first: newest first):
        `{"items": [summary, ...], "next": cursor or None}`, at most `limit` (SUBMISSIONS_PAGE_MAX)
        items, each a summary (submission_summary: no checks, no report). A student's own only,
        whatever they ask for."""
        if account.role != INSTRUCTOR:
            learner = account.learner
        after = cursor_id(cursor)
        uploads, more = self.queue.page(
            learner,
            exercise,
            after=after,
            limit=max(1, min(limit, SUBMISSIONS_PAGE_MAX)),
            newest_first=newest_first,
        )
        extensions = self.queue.extensions()
        siblings = self.queue.siblings({(u.learner, u.exercise) for u in uploads})
        items = [self._summary_json(account, u, siblings[u.learner, u.exercise], extensions) for u in uploads]
        return {"items": items, "next": page_cursor(uploads[-1].id) if more else None}

    def _summary_json(self, account: Account, upload: Upload, siblings: list[Upload], extensions) -> dict:
        """What a list shows of an upload: _submission_json's fields without the grade itself (its
        score after the late penalty, as the whole view has it, from the run's columns; none while
        a sealed check hides it from this caller)."""
        from grader.policy.course import counted, lateness, score_after_penalty

        d = self._deadlines(upload.exercise, upload.learner, extensions)
        late = lateness(self.policy, upload.exercise, upload.received_at, d, upload.late_days_spent)
        sealed = self._sealed(account, upload.exercise, d)
        run = None if sealed else upload.grade
        counts = (
            None
            if upload.grade is None
            else counted(self.policy, upload.exercise, siblings, d, sealed=sealed)
        )
        points = self.exercises[upload.exercise].points if upload.exercise in self.exercises else None
        return {
            **_upload_fields(upload, late, counts),
            "graded_at": iso(upload.grade.recorded_at) if upload.grade else None,
            "score": score_after_penalty(run, late.penalty) if run else None,
            "max_score": run.max_score if run else points,
            "passed": run.passed if run else None,
        }

    def visible_grade(self, account: Account, upload_id: int) -> Grade | None:
        """The grade a report renders for this caller now; None: no such upload for them, or not graded."""
        from grader.policy.course import lateness

        upload = self._own_upload(account, upload_id)
        if upload is None or upload.grade is None:
            return None
        d = self._deadlines(upload.exercise, upload.learner)
        late = lateness(self.policy, upload.exercise, upload.received_at, d, upload.late_days_spent)
        return self._view(account, upload, d, late)

    def report(self, account: Account, upload_id: int, fmt: str = "text", lang: str = "en") -> str:
        """reports.render of the visible grade; 404 for no such upload, 409 `not-graded` before its grade."""
        from reports import render

        upload = self._own_upload(account, upload_id)
        if upload is None:
            raise not_found()
        view = self.visible_grade(account, upload_id)
        if view is None and upload.status == "failed":
            raise Refused(
                409,
                "not-graded",
                msg(
                    "the server could not grade this submission; it does not count against you, "
                    "and an instructor can grade it again"
                ),
            )
        if view is None:
            raise Refused(409, "not-graded", msg("this submission is not graded yet"))
        return render(view, fmt, lang, learner=account.role != INSTRUCTOR)

    def choose(self, account: Account, upload_id: int) -> dict:
        upload = self._own_upload(account, upload_id)
        if upload is None or upload.learner != account.learner:
            raise not_found()
        self.queue.choose(upload_id)
        return self.submission(account, upload_id) or {}

    # -- status and the class

    def status(self, account: Account, exercise: str | None = None) -> list[dict]:
        """Per exercise: the caller's dates, uploads, the one that counts and its score, the
        rate limit's tokens left (None: no limit) and when the next upload would be taken."""
        from grader.policy.course import PastUpload, admit, counted, tokens_left

        if exercise is not None:
            self.exercise(exercise)
        now, extensions = self.clock(), self.queue.extensions()
        mine = self.queue.uploads(account.learner, exercise)
        left_days = max(0, self.policy.late_days - self.queue.late_days_spent(account.learner))
        out = []
        for ex in [exercise] if exercise else list(self.exercises):
            uploads = [u for u in mine if u.exercise == ex]
            d = self._deadlines(ex, account.learner, extensions)
            counts = counted(self.policy, ex, uploads, d, sealed=self._sealed(account, ex, d))
            chosen = next((u for u in uploads if u.id == counts), None)
            view = (
                self._submission_json(account, chosen, siblings=uploads, extensions=extensions)
                if chosen
                else None
            )
            past = [PastUpload(u.received_at, u.refunded, u.late_days_spent) for u in uploads]
            left, _refill = tokens_left(self.policy, ex, account.learner, now, past, due=d.due)
            admission = admit(
                self.policy,
                ex,
                account.learner,
                now,
                past,
                extensions=extensions,
                late_days_left=left_days,
                use_late_day=False,
            )
            out.append(
                {
                    "exercise": ex,
                    "deadlines": {"opens": iso(d.opens), "due": iso(d.due), "closes": iso(d.closes)},
                    "submissions": len(uploads),
                    "counted": counts,
                    "late": view["late"] if view else None,  # of the upload that counts
                    "score": view["score"] if view else None,
                    "max_score": self.exercises[ex].points,
                    "tokens_left": left,
                    "next_submission_at": iso(now) if admission.admitted else iso(admission.retry_at),
                }
            )
        return out

    def class_grades(self, exercise: str) -> list[dict]:
        """Per learner who uploaded: the upload that counts and its grade (penalty applied); then
        each learner with a student token (from the roster) and no upload: "no submission", no
        upload (`submissions` 0) and no score. Removed learners are left out."""
        from grader.policy.course import counted, lateness
        from grader.store.accounts import Account

        self.exercise(exercise)
        extensions = self.queue.extensions()
        by_learner: dict[str, list] = {}
        for u in self.queue.uploads(None, exercise):
            by_learner.setdefault(u.learner, []).append(u)
        staff = Account(id=0, learner="", name=None, role=INSTRUCTOR)
        names = self._names(list(by_learner))
        out = []
        for learner, uploads in sorted(by_learner.items()):
            d = self._deadlines(exercise, learner, extensions)
            counts = counted(self.policy, exercise, uploads, d)
            chosen = next((u for u in uploads if u.id == counts), None)
            late = view = None
            if chosen is not None:
                late = lateness(self.policy, exercise, chosen.received_at, d, chosen.late_days_spent)
                view = self._view(staff, chosen, d, late)
            out.append(
                {
                    "learner": learner,
                    "name": names.get(learner),
                    "submission": counts,
                    "submissions": len(uploads),
                    "score": view.score if view else None,
                    "max_score": self.exercises[exercise].points,
                    "passed": view.passed if view else None,
                    "late": {"minutes": late.minutes, "days": late.days, "penalty": late.penalty}
                    if late
                    else None,
                }
            )
        for learner, name in self._students_without(set(by_learner)):
            out.append(
                {
                    "learner": learner,
                    "name": name,
                    "submission": None,
                    "submissions": 0,
                    "score": None,
                    "max_score": self.exercises[exercise].points,
                    "passed": None,
                    "late": None,
                }
            )
        return out

    def _students_without(self, uploaded: set[str]) -> list[tuple[str, str | None]]:
        """(learner, name) of each learner with a student token, not removed, not in `uploaded`."""
        from sqlalchemy import select

        from grader.store.schema import AccountRow, Learner

        with self.gradebook.sessions() as s:
            rows = s.execute(
                select(Learner.key, Learner.name)
                .join(AccountRow, AccountRow.learner_id == Learner.id)
                .where(AccountRow.role == "student", Learner.removed_at.is_(None))
                .distinct()
                .order_by(Learner.key)
            ).all()
        return [(key, name) for key, name in rows if key not in uploaded]

    def _names(self, learners: list[str]) -> dict[str, str | None]:
        """learner -> the name the gradebook has for them (from the roster or a token's --name)."""
        from sqlalchemy import select

        from grader.store.schema import Learner

        out: dict[str, str | None] = {}
        with self.gradebook.sessions() as s:
            for i in range(0, len(learners), 500):
                rows = s.execute(
                    select(Learner.key, Learner.name).where(Learner.key.in_(learners[i : i + 500]))
                )
                out.update({key: name for key, name in rows})
        return out

    def _learner_keys(self) -> set[str]:
        """Every learner the gradebook knows (from the roster, a token, a graded upload)."""
        from sqlalchemy import select

        from grader.store.schema import Learner

        with self.gradebook.sessions() as s:
            return set(s.scalars(select(Learner.key)))

    # -- instructors

    def add_extension(
        self, account, learner: str, exercise: str, due: datetime, closes=None, reason=""
    ) -> dict:
        self.exercise(exercise)
        if learner not in self._names([learner]):  # adding it would make the learner, extending nobody
            raise not_found(
                msg("no learner {learner} in the gradebook or roster", learner=learner[:200]), "learner"
            )
        if closes is not None and closes < due:
            raise Refused(422, "invalid", msg("closes must not be before due"), "closes")
        self.queue.add_extension(learner, exercise, due, closes, reason=reason, author=account.learner)
        d = self._deadlines(exercise, learner)
        return {
            "learner": learner,
            "exercise": exercise,
            "deadlines": {"opens": iso(d.opens), "due": iso(d.due), "closes": iso(d.closes)},
        }

    def release(self, account: Account, exercise: str) -> dict:
        self.exercise(exercise)
        when = self.queue.release(exercise, author=account.learner)
        return {"exercise": exercise, "released_at": iso(when)}

    def queue_info(self) -> dict:
        stats = dict(self.queue.stats())
        return {**stats, "dead_letters": self.queue.dead_letters()}

    def retry(self, job_id: int) -> dict:
        if not self.queue.retry(job_id):
            raise not_found(msg("no such job waiting for a retry"), "job")
        self.notify()
        return {"job": job_id, "status": "queued"}


def too_large(limit: int) -> Message:
    return msg("the request body is larger than {size} KiB", size=limit // 1024)
