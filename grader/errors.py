"""The grader's errors, in one hierarchy. Each says what went wrong and whose it is.

    Exception
    ├── GraderError                 exit_code 1: the base; what the command line reports as
    │   │                           `error: ...` with the class's exit code, never as a traceback
    │   ├── UsageError              exit_code 2: grading cannot start: a bad argument, a path
    │   │   │                       that does not exist, a learner TOML file that does not parse
    │   │   ├── UnknownExercise     an exercise id with no folder (also a LookupError)
    │   │   ├── ExerciseFileError   a course file is malformed: exercise.toml, key.toml, a mutant
    │   │   │   │                   (also a ValueError); names the file, the table and the key
    │   │   │   └── MutantError     mutants/*.toml
    │   │   ├── SourceError         a class's SOURCE cannot be read (missing, unsafe, too big)
    │   │   ├── NotebookError       a learner's notebook (.ipynb) cannot be read: too large, not
    │   │   │                       JSON, not nbformat 4, a %%writefile to a path (grader.intake.notebooks);
    │   │   │                       grader.intake.sources makes it that learner's problem, never the batch's
    │   │   ├── BatchError          a batch cannot run: SOURCE, gradebook, scheduler, the jail
    │   │   ├── store.StoreError    the gradebook cannot be opened or used (also a RuntimeError)
    │   │   │   ├── store.migrate.SchemaError   its schema is newer than this grader
    │   │   │   └── store.gradebook.GradebookInputError  a correction naming what is not
    │   │   │                       there, or without a reason; `argument` names the option
    │   │   ├── policy.roster.RosterError   a roster CSV that cannot be read (file, row, column)
    │   │   ├── policy.course.PolicyError   course.toml is malformed; names the file and the
    │   │   │                       field path (exercises.day45-attention.due: ...)
    │   │   ├── JailUnsound         the jail failed a canary attack: grading must not start
    │   │   └── client.ClientError  the student client cannot ask: no server or token, a token
    │   │                           over plain http://, an answer 401/403/404/413/422
    │   ├── client.Refused          exit_code 3: the server refused the submission for now
    │   │                           (closed, not open, rate-limited); `retry_at` when known
    │   ├── client.ServerFailure    exit_code 4: the server's side failed (5xx, unreachable, a
    │   │                           grading that failed, a full queue): never the learner's
    │   ├── InvalidSubmission       the submission can be read but not graded as it is (a missing
    │   │                           file or name, a syntax error): it fails, kind
    │   │                           "invalid-submission"
    │   ├── JailError               the jail could not answer; `kind` and `symptom` go in the grade
    │   │   ├── JailTimeout         kind "timeout": a deadline or the CPU limit
    │   │   ├── JailMemory          kind "memory": the memory limit
    │   │   ├── JailCrash           kind "crash": died, exited, broke the protocol
    │   │   └── JailSandbox         kind "sandbox": a forbidden system call, or no jail at all
    │   ├── LearnerError            the learner's code raised; its type and message, as data
    │   ├── ZygoteError             the zygote (the warm process forking jails) could not start or
    │   │                           stopped answering
    │   └── Refused                 the grading server refuses a request: its HTTP status, error
    │                               code, the field at fault and when to retry (grader/service)
    │
    │   Not under GraderError:
    ├── AssertionError
    │   └── testkit.CheckFailure    a hidden check failed: pytest reports it as the check's result
    │       └── testkit.Unusable    ... on an unusable file or a missing name: never shrunk
    ├── store.queue.QueueFull       the grading queue is at its depth: the server answers 429
    ├── store.queue.TooManyUploads  the learner stored SUBMISSIONS_PER_EXERCISE uploads: 409 closed
    ├── budgets.TimingStopped       a BaseException raised into a reference call timed too long
    ├── jail.wire.WireError         a frame that breaks the format        } the jail's own side: it
    ├── jail.sandbox.SandboxError   a step of building the jail failed    } imports only its folder
    └── RuntimeError                                                        (grader/jail/*.py), so
        └── store.pgtemp.PostgresUnavailable   no PostgreSQL to test with  not this module

    Private to one module, never raised past it: explore._Abort and _Failed (hypothesis's
    control flow), replay._Stopped (a replay out of time), answers._Refused (a ParseError inside).

Exit codes (DESIGN.md): 0 pass, 1 graded but failing, 2 usage or input error; the student client
adds 3 (refused for now: closed, not open, over the limit) and 4 (a failure on the server's side).
Each class carries its code as `exit_code`; a command that lets a GraderError through exits with it.

Every class is importable from here and, as before, from the module that raises it
(grader.intake.submission.UsageError, grader.jail.client.JailError, grader.jail.doctor.JailUnsound, ...).
"""

from __future__ import annotations

from grader.limits import MESSAGE_CHARS, SHORT_CHARS
from grader.locale import msg

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
EXIT_REFUSED, EXIT_SERVER = 3, 4  # the student client's (grader.client.errors)


class GraderError(Exception):
    """The base of the grader's errors."""

    exit_code = EXIT_FAIL


# -- grading cannot start (exit 2) ------------------------------------------------------------
class UsageError(GraderError):
    """Grading cannot start (exit code 2): a path that does not exist, a malformed TOML file."""

    exit_code = EXIT_USAGE


class UnknownExercise(UsageError, LookupError):
    """No exercise folder has this id."""


class ExerciseFileError(UsageError, ValueError):
    """A course file (exercise.toml, key.toml, a mutant's TOML) is malformed; the message names
    the file, the table and the key."""

    @classmethod
    def from_validation(cls, path, error, model) -> ExerciseFileError:
        """The file's pydantic ValidationError (of `model`), as one line per problem:
        `exercises/x/exercise.toml: [limits]: unknown key 'wall_second'; known keys: ...`."""
        return cls(
            "\n".join(f"{shown_path(path)}: {problem}" for problem in validation_problems(error, model))
        )

    @classmethod
    def from_toml(cls, path, error) -> ExerciseFileError:
        """A file that is not TOML (tomllib.TOMLDecodeError)."""
        return cls(f"{shown_path(path)}: not valid TOML: {error}")


class MutantError(ExerciseFileError):
    """A mutant's TOML file is malformed, or its id differs from its file name."""


class SourceError(UsageError):
    """SOURCE cannot be read as a class (exit code 2): missing, not a folder or zip, unsafe, too big."""


class NotebookError(UsageError):
    """A learner's notebook cannot be read or assembled (grader.intake.notebooks); names the notebook."""


class BatchError(UsageError):
    """The batch cannot run (exit code 2): a bad SOURCE, gradebook or scheduler, or a refusing jail."""


class JailUnsound(UsageError):
    """The jail failed a canary attack: grading must not start."""


# -- the submission fails ---------------------------------------------------------------------
class InvalidSubmission(GraderError):
    """The submission can be read but not graded as it is: a missing file or name, a syntax error."""


class JailError(GraderError):
    """The jail could not answer: it died, ran out of time or memory, or broke the protocol.

    Raised with a Message (`msg(...)`): `message` is what the learner is told, in any language;
    str(exc) is its English text."""

    kind = "crash"
    symptom = "exception"

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class JailTimeout(JailError):
    """`where`: for a wait the grader stopped, the learner's stack frames at that moment,
    innermost first, each (function, file, line), from the jail's stack sample (parsed and capped:
    grader.jail.client; [] when none came); None for a timeout no wait ended (CPU time, wall)."""

    kind, symptom = "timeout", "timeout"

    def __init__(self, message, where: list[tuple[str, str, int]] | None = None):
        super().__init__(message)
        self.where = list(where) if where is not None else None


class JailMemory(JailError):
    kind, symptom = "memory", "memory-limit"


class JailCrash(JailError):
    kind, symptom = "crash", "exception"


class JailSandbox(JailError):
    """The submission did something the jail forbids (a denied system call), or no jail could be built."""

    kind, symptom = "sandbox", "exception"


class LearnerError(GraderError):
    """The learner's code raised an exception; its type and message came back as data."""

    def __init__(self, info: dict):
        self.type_name = jail_name(info.get("type", "Exception"))
        mro = info.get("mro")
        self.mro = [jail_name(n) for n in mro[:64]] if isinstance(mro, list) else []
        self.learner_message = learner_text(info)
        self.where = jail_name(info["where"]) if info.get("where") else None
        self.memory = bool(info.get("memory"))
        super().__init__(f"{self.type_name}: {self.learner_message}")

    def is_a(self, type_name: str) -> bool:
        return type_name in self.mro or self.type_name == type_name


def learner_text(info: dict):
    """The message of a learner's exception, from the plain data the worker sent: the text
    itself, or a Message where the worker only said what happened (its flags are checked to be
    exactly True: the data comes from the jail, so the text is capped here too)."""
    text = jail_text(info.get("message", ""))
    if info.get("unreadable") is True:
        return msg("<the exception's message could not be read>")
    if info.get("unsendable") is True:
        return msg("what your code returned cannot be sent to the grader: {detail}", detail=text)
    if info.get("too_large") is True:
        return msg(
            "{message} (the jail limits what a submission may write, its printed output "
            "included; this submission wrote more than that)",
            message=text,
        )
    return text


def jail_text(value, limit: int = MESSAGE_CHARS) -> str:
    """Text from the jail, cut to `limit` characters before any other work is done on it (the
    models cap it again, in bytes, with the rest of the message: grader.models.Said)."""
    return (value if isinstance(value, str) else str(value))[:limit]


def jail_name(value) -> str:
    """A type name or a `file.py:12` location from the jail: SHORT_CHARS at most."""
    return jail_text(value, SHORT_CHARS)


# -- the grader's own machinery ---------------------------------------------------------------
class ZygoteError(GraderError):
    """The zygote could not start or stopped answering."""


# -- the grading server ----------------------------------------------------------------------
class Refused(GraderError):
    """A request the grading server refuses (grader/service): the HTTP `status`, the API's error
    `code` (`not-found`, `rate-limited`, ...), the `field` at fault, and `retry_after` seconds
    when a retry will be accepted. `message` is a Message: the learner reads it in their language."""

    def __init__(
        self, status: int, code: str, message, field: str | None = None, retry_after: int | None = None
    ):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.field, self.retry_after = field, retry_after


# -- how a course file's problems are named ---------------------------------------------------
def shown_path(path) -> str:
    """`path` relative to the current folder where it lies inside it, else as given."""
    from pathlib import Path

    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def table_name(loc: tuple) -> str:
    """A pydantic location as the TOML table it is in: ("limits",) -> "[limits]", ("edit", 0) ->
    "[[edit]] #1" (the first of the array of tables), () -> "(top level)"."""
    names = [str(p) for p in loc if not isinstance(p, int)]
    numbers = [p + 1 for p in loc if isinstance(p, int)]
    if not names:
        return "(top level)"
    if loc and isinstance(loc[-1], int):
        return f"[[{'.'.join(names)}]] #{numbers[-1]}"
    return f"[{'.'.join(names)}]" + (f" (#{numbers[-1]})" if numbers else "")


def known_keys(model, loc: tuple) -> list[str] | None:
    """The keys the table at `loc` of `model` may hold, or None where that is not a model."""
    import types
    import typing

    from pydantic import BaseModel

    def models_in(annotation):
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        if typing.get_origin(annotation) in (
            typing.Union,
            types.UnionType,
            list,
            tuple,
            dict,
            typing.Annotated,
        ):
            return [m for arg in typing.get_args(annotation) for m in models_in(arg)]
        return []

    for part in loc:
        if isinstance(part, int):
            continue
        fields = {(f.alias or name): f for name, f in model.model_fields.items()}
        field = fields.get(part) or model.model_fields.get(part)
        found = models_in(field.annotation) if field is not None else []
        if not found:
            return None
        model = found[0]
    return sorted((f.alias or name) for name, f in model.model_fields.items())


def validation_problems(error, model) -> list[str]:
    problems = []
    for e in error.errors():
        loc = tuple(e["loc"])
        table, key = loc[:-1], loc[-1] if loc else ""
        if e["type"] == "extra_forbidden":
            known = known_keys(model, table)
            problems.append(
                f"{table_name(table)}: unknown key {str(key)!r}"
                + (f"; known keys: {', '.join(known)}" if known is not None else "")
            )
        elif e["type"] == "missing":
            problems.append(f"{table_name(table)}: missing key {str(key)!r}")
        else:
            where = f"{table_name(table)}: {key}" if loc else table_name(table)
            problems.append(f"{where}: {e['msg']} (got {e.get('input')!r})"[:500])
    return problems
