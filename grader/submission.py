"""Reading a submission from disk, before anything of it runs: which files, are they usable.

Runs in the trusted process and never executes learner code: Python files are only parsed with
`ast` (to report a syntax error with its line), TOML files with tomllib. The files are found by
grader.sources.match_files, the one rule grade, batch, submit and the server share.
"""

from __future__ import annotations

import ast
import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from grader.errors import InvalidSubmission, UsageError
from grader.locale import Message, message_of, msg
from grader.models import Exercise


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
class SubmittedFiles:
    """What the jail receives and what grading knows about it before anything runs."""

    # the exercise files found plus the learner's helper modules (other .py files beside them);
    # all go to the jail, a helper is imported only if a learner file imports it
    files: dict[str, bytes] = field(default_factory=dict)
    toml: dict[str, dict] = field(default_factory=dict)  # the learner TOML files that parsed
    # learner file name -> the located reason THAT file cannot be used (syntax error, undecodable
    # text, malformed TOML, missing file): its checks fail with it, the others still run
    problems: dict[str, Message] = field(default_factory=dict)
    warnings: list[Message] = field(default_factory=list)  # carried into Grade.warnings

    @property
    def digest(self) -> str:
        return files_digest(self.files)


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
    # how SOURCE held the files (grader.sources.Listing; never stored: `batch --dry-run` prints
    # them, the wrong-exercise warning reads them): exercise file -> its path, every name handed in
    found: dict[str, str] = field(default_factory=dict)
    names: frozenset[str] = frozenset()

    @property
    def digest(self) -> str:
        return files_digest(self.files, self.problem)


def read_submission(exercise: Exercise, path: Path) -> SubmittedFiles:
    """The learner files at `path`, found as `grader batch` finds one learner's (a folder, a nested
    folder, one file, a zip of the work: grader.sources.read_learner), then checked (check_files).
    Raises UsageError for a missing PATH (and a quiz sheet that is not TOML: SPEC's exit 2),
    InvalidSubmission when nothing of it can be graded."""
    from grader.errors import SourceError
    from grader.sources import read_learner

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise UsageError(f"PATH: {path} does not exist")
    if path.is_symlink():
        raise InvalidSubmission(msg("{path} is a symbolic link; submit the file itself", path=str(path)))
    try:
        files, problem, warnings = read_learner(path, exercise)
    except SourceError as exc:
        raise InvalidSubmission(message_of(exc)) from None
    if problem is not None:
        raise InvalidSubmission(problem)
    if path.is_file() and not files:
        raise InvalidSubmission(
            msg(
                "{name} is not one of this exercise's files: {files}",
                name=path.name,
                files=", ".join(exercise.files),
            )
        )
    return check_files(exercise, files, warnings)


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


def check_files(exercise: Exercise, files: Mapping[str, bytes], warnings=()) -> SubmittedFiles:
    """What can be used of a learner's files, without running them: each exercise file that is
    missing or unreadable gets its located problem (the checks that need it fail with it, the
    others run). Raises InvalidSubmission when no exercise file is usable at all."""
    submitted = SubmittedFiles(files=dict(files), warnings=list(warnings))
    needs = ", ".join(exercise.files)
    missing = [name for name in exercise.files if name not in files]
    if len(missing) == len(exercise.files):
        if len(missing) > 1:
            raise InvalidSubmission(
                msg("missing files: {missing} (this exercise needs {files})", missing=needs, files=needs)
            )
        raise InvalidSubmission(
            msg("missing file: {missing} (this exercise needs {files})", missing=needs, files=needs)
        )
    for name in exercise.files:
        problem: Message | None
        if name not in files:
            problem = msg("missing file: {missing} (this exercise needs {files})", missing=name, files=needs)
        elif name.endswith(".py"):
            problem = python_problem(name, files[name])
        elif name.endswith(".toml"):
            parsed = parse_toml(name, files[name])
            if isinstance(parsed, dict):
                submitted.toml[name] = parsed
                problem = None
            else:
                problem = parsed
        else:
            problem = None
        if problem is not None:
            submitted.problems[name] = problem
    if len(submitted.problems) == len(exercise.files):  # nothing left to grade
        # the first file that was found: its problem is the one to fix first
        name = next(n for n in exercise.files if n not in missing)
        if exercise.kind == "quiz":
            raise UsageError(submitted.problems[name])  # `grader grade` exits 2 (SPEC)
        raise InvalidSubmission(submitted.problems[name])
    return submitted


def python_problem(name: str, data: bytes) -> Message | None:
    """Why Python could not import this file (located), or None. Parsed from the bytes, as
    CPython reads a file: a UTF-8 BOM, a PEP 263 coding line and CRLF endings are all fine."""
    try:
        ast.parse(data, filename=name)
    except SyntaxError as exc:
        if not exc.lineno:  # e.g. an unknown encoding in the coding line
            return msg("{name} cannot be read as Python source: {error}", name=name, error=exc.msg)
        return msg(
            "{name} line {line}, column {column}: syntax error: {error}",
            name=name,
            line=exc.lineno,
            column=exc.offset,
            error=exc.msg,
        )
    except (ValueError, RecursionError, MemoryError) as exc:
        return msg("{name} cannot be parsed: {type}", name=name, type=type(exc).__name__)
    return None


def parse_toml(name: str, data: bytes) -> dict | Message:
    """The parsed TOML file, or the located reason it cannot be read. A UTF-8 BOM is dropped."""
    try:
        return tomllib.loads(data.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except UnicodeDecodeError as exc:
        return msg("{name}: not UTF-8 text (byte {byte})", name=name, byte=exc.start)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line L, column C)"
        return msg("{name}: malformed TOML: {error}", name=name, error=str(exc))
    except RecursionError:
        return msg("{name}: TOML nested too deeply", name=name)
