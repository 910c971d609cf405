"""Reading a submission from disk, before anything of it runs: which files, are they usable.

Runs in the trusted process and never executes learner code: Python files are only parsed with
`ast` (to report a syntax error with its line), TOML files with tomllib. The files are found by
grader.intake.sources.match_files, the one rule grade, batch, submit and the server share. A file
assembled from a notebook (grader.intake.notebooks) is located as the notebook's `cell N, line M`, and the
notes it carries (what the assembly left out) become the grade's warnings.

`precheck` is what the student client refuses to send (`grader submit`: a submission that could
only fail is never spent): a syntax error, a notebook's magic left in a .py file, a get_ipython()
call, a name the exercise needs that the file does not define at its top level, an answer sheet
that is not TOML.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import InvalidSubmission, SourceError, UsageError
from grader.intake import notebooks
from grader.intake.incoming import files_digest
from grader.intake.sources import read_learner
from grader.locale import N_, Message, message_of, msg
from grader.models import Exercise


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


def read_submission(exercise: Exercise, path: Path) -> SubmittedFiles:
    """The learner files at `path`, found as `grader batch` finds one learner's (a folder, a nested
    folder, one file, a zip of the work: grader.intake.sources.read_learner), then checked (check_files).
    Raises UsageError for a missing PATH (and a quiz sheet that is not TOML: SPEC's exit 2),
    InvalidSubmission when nothing of it can be graded."""
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


def check_files(exercise: Exercise, files: Mapping[str, bytes], warnings=()) -> SubmittedFiles:
    """What can be used of a learner's files, without running them: each exercise file that is
    missing or unreadable gets its located problem (the checks that need it fail with it, the
    others run). Raises InvalidSubmission when no exercise file is usable at all."""
    submitted = SubmittedFiles(files=dict(files), warnings=list(warnings))
    for name in sorted(files):  # what assembling a notebook left out (one file carries it)
        found = notebooks.origin(files[name]) if name.endswith((".py", ".toml")) else None
        submitted.warnings += list(found.notes) if found else []
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
    CPython reads a file: a UTF-8 BOM, a PEP 263 coding line and CRLF endings are all fine.
    A line of a file assembled from a notebook is named as the notebook's cell and line; a
    notebook's magic or shell command left in a .py file is called what it is."""
    try:
        ast.parse(data, filename=name)
    except SyntaxError as exc:
        if not exc.lineno:  # e.g. an unknown encoding in the coding line
            return msg("{name} cannot be read as Python source: {error}", name=name, error=exc.msg)
        where = line_of(name, data, exc.lineno)
        magic = notebooks.magic_kind((exc.text or "").strip("\r\n"))
        if magic:
            return msg(
                '{where}: "{text}" is {kind}, which only a notebook runs, not Python: delete the '
                "line, or submit the notebook (.ipynb) itself",
                where=where,
                text=(exc.text or "").strip()[:200],
                kind=Message(notebooks.WHY[magic], {}),
            )
        if isinstance(where, Message) and where.msgid == IN_CELL:
            return msg(
                "{where}, column {column}: syntax error: {error} ({name} line {line})",
                where=where,
                column=exc.offset,
                error=exc.msg,
                name=name,
                line=exc.lineno,
            )
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


IN_CELL = N_("{notebook} cell {cell}, line {line}")
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # their bodies do not run at import


def line_of(name: str, data: bytes, line: int) -> Message:
    """Where line `line` of learner file `name` is, as the learner sees it: `nb.ipynb cell 7,
    line 3` for a file assembled from a notebook, else `attention.py line 57`."""
    found = notebooks.located(data, line)
    if found is not None:
        notebook, cell, cell_line = found
        return Message(IN_CELL, {"notebook": notebook, "cell": cell, "line": cell_line})
    return msg("{name} line {line}", name=name, line=line)


def precheck(exercise: Exercise, files: Mapping[str, bytes]) -> list[Message]:
    """What would make a grade fail before anything of it runs, found without running the code
    (`grader submit` refuses to send it: a submission that could only fail is never spent): a
    .py file Python cannot parse (a notebook's magic left in is named so), a top-level call of
    get_ipython() (an nbconvert export's magics), an exercise name a learner file does not define
    at its top level (Exercise.names), an exercise's TOML file that does not parse. Each names
    where it is and what to do."""
    problems: list[Message] = []
    order = [n for n in exercise.files if n in files] + sorted(n for n in files if n not in exercise.files)
    for name in order:
        data = files[name]
        if name.endswith(".toml") and name in exercise.files:
            parsed = parse_toml(name, data)
            if not isinstance(parsed, dict):
                problems.append(parsed)
            continue
        if not name.endswith(".py"):
            continue
        problem = python_problem(name, data)
        if problem is not None:
            problems.append(problem)
            continue
        try:
            module = ast.parse(data, filename=name)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # python_problem said so
        for node in module.body:
            kind = notebooks.calls_get_ipython(node)
            if kind is not None and not isinstance(node, DEFINITIONS):
                problems.append(
                    msg(
                        "{where} calls get_ipython(), which only a notebook has (it is how nbconvert "
                        "writes {kind}): delete the line, or submit the notebook (.ipynb) itself",
                        where=line_of(name, data, node.lineno),
                        kind=Message(notebooks.WHY[kind], {}),
                    )
                )
                break
        needs = exercise.names.get(name, [])
        bound, star = notebooks.bound_names(module.body)
        missing = [n for n in needs if n not in bound]
        if missing and not star:
            found = notebooks.origin(data)
            if found is not None:
                problems.append(
                    msg(
                        "{notebook} defines no {missing} in code that is sent as {name} (it needs "
                        "{names}): define each at the top level of a cell (not inside a function, a "
                        "loop or an if __name__ == \"__main__\" block), spelled so",
                        notebook=found.notebook,
                        missing=", ".join(missing),
                        name=name,
                        names=", ".join(needs),
                    )
                )
            else:
                problems.append(
                    msg(
                        "{name} defines no {missing} at its top level (it needs {names}): define "
                        "each there (not inside a function, a loop or an if __name__ == "
                        "\"__main__\" block), spelled so",
                        name=name,
                        missing=", ".join(missing),
                        names=", ".join(needs),
                    )
                )
    return problems


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
