"""The instructor's endpoints of the server's API (contract section 3), as `grader course` calls them.

The same Api as the student's commands (one request code: the token rules, retries, caps and the
error classes of grader.client.api and .errors), with the five endpoints only an instructor's
token may call; a student's token gets the server's 403 `forbidden` (a ClientError, exit 2).
Answers are read into the models below, as untrusted as every answer of the server.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

from pydantic import Field

from grader.client.api import Api
from grader.client.models import Answer, Deadlines, Late


class Extension(Answer):
    """The answer to POST /api/v1/extensions: the learner's dates for the exercise, from now on."""

    learner: str
    exercise: str
    deadlines: Deadlines = Deadlines()


class Release(Answer):
    exercise: str
    released_at: datetime


class ClassGrade(Answer):
    """One row of GET /api/v1/class/{ex}/grades: the learner's upload that counts and its grade."""

    learner: str
    name: str | None = None
    submission: int | None = None
    submissions: int = 0
    score: float | None = None
    max_score: float | None = None
    passed: bool | None = None
    late: Late | None = None


class DeadLetter(Answer):
    job: int
    upload: int | None = None
    learner: str = ""
    exercise: str = ""
    attempts: int = 0
    last_error: str | None = None
    enqueued_at: datetime | None = None
    finished_at: datetime | None = None


class QueueState(Answer):
    queued: int = 0
    running: int = 0
    dead: int = 0
    oldest_queued_at: datetime | None = None
    dead_letters: list[DeadLetter] = Field(default_factory=list)


class Retried(Answer):
    job: int
    status: str


def _ex(exercise: str) -> str:
    return quote(exercise, safe="")


class CourseApi(Api):
    def extend(
        self, learner: str, exercise: str, due: datetime, closes: datetime | None, reason: str
    ) -> Extension:
        body = {"learner": learner, "exercise": exercise, "due": due.isoformat(), "reason": reason}
        if closes is not None:
            body["closes"] = closes.isoformat()
        return self._model(Extension, "POST", "/extensions", json=body)

    def release(self, exercise: str) -> Release:
        return self._model(Release, "POST", f"/exercises/{_ex(exercise)}/release")

    def grades_path(self, exercise: str) -> str:
        return f"/class/{_ex(exercise)}/grades"

    def class_grades(self, exercise: str) -> list[ClassGrade]:
        return self._model(list[ClassGrade], "GET", self.grades_path(exercise))

    def queue(self) -> QueueState:
        return self._model(QueueState, "GET", "/queue")

    def retry(self, job: int) -> Retried:
        return self._model(Retried, "POST", f"/queue/{int(job)}/retry")
