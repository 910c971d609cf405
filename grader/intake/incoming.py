"""A learner's files as they arrived, before anything checks them: the `Incoming` record a batch
or the server makes of one learner, the digest that names a set of files, and "no files at all".

Light by design (no torch, no SQLAlchemy): the student client computes the same digest."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from grader.locale import Message, msg


def files_digest(files: Mapping[str, bytes], problem: str | None = None) -> str:
    """The SHA-256 of a submission's files (and of the problem that stops it being graded): the
    gradebook deduplicates by it, the grader and the student client show it. One rule, here,
    because this module is light enough for the client (no torch, no SQLAlchemy)."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    if problem:
        h.update(b"problem\0" + problem.encode("utf-8", "replace"))
    return h.hexdigest()


@dataclass
class Incoming:
    """One learner's submission as a batch found it in SOURCE (or the server received it)."""

    learner: str
    files: dict[str, bytes]
    name: str | None = None
    email: str | None = None
    layout: str = "folder"
    origin: str = ""
    late: bool = False
    problem: str | None = None  # why it cannot be graded (symlink, too large, ...)
    submitted_at: datetime | None = None
    warnings: tuple = ()  # Messages: helper modules left out (never stored: batch prints them)
    # how SOURCE held the files (grader.intake.sources.Listing; never stored: `batch --dry-run` prints
    # them, the wrong-exercise warning reads them): exercise file -> its path, every name handed in
    found: dict[str, str] = field(default_factory=dict)
    names: frozenset[str] = frozenset()

    @property
    def digest(self) -> str:
        return files_digest(self.files, self.problem)


def no_files_submitted(files) -> Message:
    """The problem of a learner who handed in nothing at all (an empty Moodle submission folder),
    naming the exercise's `files`: graded 0 as invalid-submission with this message, which
    is_no_submission recognises."""
    return msg("no files were submitted (this exercise needs {files})", files=", ".join(files))


NO_FILES_SUBMITTED = no_files_submitted(()).msgid


def is_no_submission(grade) -> bool:
    """Is this Grade that of a learner who submitted no file (no_files_submitted)? The class
    report and the exports count such grades as "no submission", apart from invalid ones."""
    error = grade.error
    return error is not None and error.kind == "invalid-submission" and error.message_id == NO_FILES_SUBMITTED
