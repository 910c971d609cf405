"""The server's answers (contract section 3) as the client reads them.

A server's JSON is untrusted input like any other: it is read into these models (unknown fields
ignored, so a newer server still works), names that become file or member names are checked, and
every text is sanitised where it is shown (grader.client.show). Only what the client uses is here.
"""

from __future__ import annotations

import keyword
from datetime import datetime, tzinfo

from pydantic import BaseModel, ConfigDict, Field, field_validator

from grader.limits import SHORT_CHARS, SUBMISSIONS_PAGE_MAX, UPLOAD_FILES
from grader.policy import clock

FINISHED = ("graded", "failed")  # a submission's statuses that no longer change (the server's too)


LEARNER_SUFFIXES = (".py", ".toml")  # a module, an answer sheet: what grader.intake.submission reads


def learner_file_name(name: str) -> bool:
    """Could an exercise declare this learner file? A Python module (`attention.py`) or an answer
    sheet (`answers.toml`, `diagnosis.toml`), its stem a name Python can import (as
    grader.intake.sources.helper_name reads a module), ASCII, not a dunder. Nothing else: a server that
    names `id_ed25519` or `notes.txt` as an exercise's file gets no such file packed."""
    stem, dot, suffix = name.rpartition(".")
    return (
        f"{dot}{suffix}" in LEARNER_SUFFIXES
        and stem.isascii()
        and stem.isidentifier()
        and not keyword.iskeyword(stem)
        and not stem.startswith("__")
    )


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Course(Answer):
    """The course's name and clock (course.toml): the client shows every time in `timezone`."""

    name: str = Field("", max_length=SHORT_CHARS)
    timezone: str = Field("UTC", max_length=SHORT_CHARS)

    @property
    def zone(self) -> tzinfo | None:
        """The course's zone; None when this machine cannot load it (no tz database, or a name a
        server should not have sent): times are then shown in this machine's own zone."""
        try:
            return clock.zone(self.timezone)
        except ValueError:
            return None


class Me(Answer):
    learner: str
    name: str | None = None
    role: str = "student"
    late_days: dict[str, int] = {}  # total, spent, left: the course's bank
    course: Course | None = None  # a server of before the course's clock names none


class ExerciseInfo(Answer):
    """One entry of GET /api/v1/exercises: what packing needs is `files`."""

    id: str = Field(max_length=SHORT_CHARS)
    kind: str = "code"
    title: dict[str, str] = {}
    day: int | None = None
    files: list[str] = Field(max_length=UPLOAD_FILES)
    # learner file -> the names it must define: `grader submit` checks them before it sends
    # (grader.intake.submission.precheck); names of files the exercise does not have are ignored
    names: dict[str, list[str]] = Field(default={}, max_length=UPLOAD_FILES)
    points: float | None = None
    opens: datetime | None = None
    due: datetime | None = None
    closes: datetime | None = None
    open: bool = True

    @field_validator("files")
    @classmethod
    def plain_file_names(cls, files: list[str]) -> list[str]:
        """A learner file's name becomes a zip member and a file `grader starter` writes: a plain
        name in its folder, nothing that could climb out of it or act on a terminal, and a name
        an exercise may declare (learner_file_name): `grader submit` packs no other file."""
        for name in files:
            if (
                not name
                or len(name) > SHORT_CHARS
                or name in (".", "..")
                or any(c in name for c in "/\\:")
                or not name.isprintable()
            ):
                raise ValueError(f"not a plain file name: {name[:SHORT_CHARS]!r}")
            if not learner_file_name(name):
                raise ValueError(
                    f"not a learner file an exercise may name (a .py module or a .toml answer "
                    f"sheet): {name!r}"
                )
        if len(set(files)) != len(files):
            raise ValueError("a file name appears twice")
        return files

    @field_validator("names")
    @classmethod
    def identifiers(cls, names: dict[str, list[str]]) -> dict[str, list[str]]:
        """Only names Python could define (a hostile server's text is never echoed as a name),
        at most UPLOAD_FILES of them a file."""
        for file, listed in names.items():
            if len(listed) > UPLOAD_FILES or not all(
                isinstance(n, str) and n.isidentifier() and len(n) <= SHORT_CHARS for n in listed
            ):
                raise ValueError(f"not a list of Python names for {file[:SHORT_CHARS]!r}")
        return names

    def exercise(self):
        """As grader.models.Exercise, the type grader.intake.sources matches files for."""
        from grader.models import Exercise

        en = self.title.get("en") or self.id
        return Exercise.model_validate(
            {
                "id": self.id,
                "kind": self.kind if self.kind in ("code", "quiz") else "code",
                "title": {"en": en, "zh-TW": self.title.get("zh-TW") or en},
                "day": self.day or 0,
                "files": self.files,
                "names": {f: n for f, n in self.names.items() if f in self.files},
                "points": self.points or 0.0,
            }
        )


class FileInfo(Answer):
    name: str
    size: int


class Late(Answer):
    minutes: float = 0.0
    days: int = 0
    penalty: float = 0.0


class Submission(Answer):
    """A Submission (an upload, in the store's words): `status` is queued, grading, graded or failed."""

    id: int
    exercise: str = ""
    learner: str = ""
    status: str
    received_at: datetime | None = None
    digest: str = ""
    files: list[FileInfo] = Field(default=[], max_length=UPLOAD_FILES)
    late: Late | None = None
    late_days_spent: int = 0
    counted: bool = False
    score: float | None = None
    max_score: float | None = None
    passed: bool | None = None
    graded_at: datetime | None = None  # in a list's summary
    repeat: bool = False  # the answer to an upload: it repeated the latest one, which it is

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


class SubmissionPage(Answer):
    """One page of GET /api/v1/submissions; `next` is the cursor of the page after it."""

    items: list[Submission] = Field(max_length=SUBMISSIONS_PAGE_MAX)
    next: str | None = Field(None, max_length=SHORT_CHARS)


class Deadlines(Answer):
    opens: datetime | None = None
    due: datetime | None = None
    closes: datetime | None = None


class ExerciseStatus(Answer):
    """One row of GET /api/v1/status."""

    exercise: str
    deadlines: Deadlines = Deadlines()
    submissions: int = 0
    counted: int | None = None
    late: Late | None = None  # of the submission that counts
    score: float | None = None
    max_score: float | None = None
    tokens_left: int | None = None
    next_submission_at: datetime | None = None
