"""Reading a submission from disk, before anything of it runs: which files, are they usable.

Runs in the trusted process and never executes learner code: Python files are only parsed with
`ast` (to report a syntax error with its line), TOML files with tomllib.
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
from grader.limits import LEARNER_FILE_BYTES as MAX_FILE_BYTES
from grader.locale import Message, msg
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

    @property
    def digest(self) -> str:
        return files_digest(self.files, self.problem)


def read_submission(exercise: Exercise, path: Path) -> SubmittedFiles:
    """The learner files of `path` (a folder, or a single file). Raises UsageError/InvalidSubmission."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise UsageError(f"PATH: {path} does not exist")
    if path.is_symlink():
        raise InvalidSubmission(msg("{path} is a symbolic link; submit the file itself", path=str(path)))
    if path.is_file():
        candidates = (
            {path.name: path}
            if path.name in exercise.files
            else {f: path for f in exercise.files if Path(f).suffix == path.suffix}
        )
        if len(candidates) != 1:
            raise InvalidSubmission(
                msg(
                    "{name} is not one of this exercise's files: {files}",
                    name=path.name,
                    files=", ".join(exercise.files),
                )
            )
        located = candidates
    else:
        located = {name: path / name for name in exercise.files}
    missing = [name for name, p in located.items() if not p.exists() and not p.is_symlink()]
    if missing:
        names, files = ", ".join(missing), ", ".join(exercise.files)
        if len(missing) > 1:
            raise InvalidSubmission(
                msg("missing files: {missing} (this exercise needs {files})", missing=names, files=files)
            )
        raise InvalidSubmission(
            msg("missing file: {missing} (this exercise needs {files})", missing=names, files=files)
        )
    submitted = SubmittedFiles()
    for name, p in located.items():
        if p.is_symlink():
            raise InvalidSubmission(msg("{name} is a symbolic link; symbolic links are refused", name=name))
        if not p.is_file():
            raise InvalidSubmission(msg("{name} is not a regular file", name=name))
        data = p.read_bytes()[: MAX_FILE_BYTES + 1]
        if len(data) > MAX_FILE_BYTES:
            raise InvalidSubmission(
                msg("{name} is larger than {size} KiB", name=name, size=MAX_FILE_BYTES // 1024)
            )
        submitted.files[name] = data
        if name.endswith(".py"):
            check_python(name, data)
        elif name.endswith(".toml"):
            submitted.toml[name] = parse_toml(name, data)
    return submitted


def check_python(name: str, data: bytes) -> None:
    try:
        ast.parse(data.decode("utf-8"), filename=name)
    except UnicodeDecodeError as exc:
        raise InvalidSubmission(
            msg("{name} is not UTF-8 text (byte {byte})", name=name, byte=exc.start)
        ) from None
    except SyntaxError as exc:
        raise InvalidSubmission(
            msg(
                "{name} line {line}, column {column}: syntax error: {error}",
                name=name,
                line=exc.lineno,
                column=exc.offset,
                error=exc.msg,
            )
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise InvalidSubmission(
            msg("{name} cannot be parsed: {type}", name=name, type=type(exc).__name__)
        ) from None


def parse_toml(name: str, data: bytes) -> dict:
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(msg("{name}: not UTF-8 text (byte {byte})", name=name, byte=exc.start)) from None
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line L, column C)"
        raise UsageError(msg("{name}: malformed TOML: {error}", name=name, error=str(exc))) from None
    except RecursionError:
        raise UsageError(msg("{name}: TOML nested too deeply", name=name)) from None
