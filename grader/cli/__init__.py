"""The `grader` command: small click functions that parse, call the core, and render.

One module per command group, each importing only grader.cli.common (exit codes, usage errors,
--lang, --db), never this package, so there is no import cycle. Every command is named in
COMMANDS, in one place, and its module is imported only when that command is asked for:
`grader submit` on the student install loads grader/cli/client.py and nothing that grades, and
`grader --help` imports each module's light top (their heavy imports are inside the commands).
On the student's install (the `gpt-bughunt-grader` distribution alone, client/pyproject.toml) a
grading command says which install it needs (exit 2) instead of a ModuleNotFoundError traceback.

Exit codes: 0 passed or done; 1 graded but failing, or done with grader-side failures; 2 usage or
input error (`error: ...` on stderr, also for a GraderError a command lets through, with that
error's exit code; click's own usage errors also exit 2); the student client adds 3 (refused for
now: closed, not open, over the limit) and 4 (a failure on the server's side).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from grader.cli.common import EXIT_FAIL, EXIT_PASS, EXIT_USAGE, echo, get_exercise, usage_error
from grader.errors import GraderError
from grader.locale import lang_from_env, msg

# command name -> (module, attribute); the module is imported when the command is asked for
COMMANDS: dict[str, tuple[str, str]] = {
    "exercises": ("grader.cli.grade", "list_exercises"),
    "starter": ("grader.cli.grade", "starter"),
    "grade": ("grader.cli.grade", "grade"),
    "mutants": ("grader.cli.mutants", "mutants"),
    "exercise": ("grader.cli.exercise", "exercise"),
    "doctor": ("grader.cli.doctor", "doctor"),
    "batch": ("grader.cli.batch", "batch"),
    "regrade": ("grader.cli.batch", "regrade"),
    "gradebook": ("grader.cli.gradebook", "gradebook"),
    "gradescope": ("grader.cli.gradescope", "gradescope"),
    "serve": ("grader.cli.serve", "serve"),
    "tokens": ("grader.cli.tokens", "tokens"),
    "login": ("grader.cli.client", "login"),
    "submit": ("grader.cli.client", "submit"),
    "status": ("grader.cli.client", "status"),
    "history": ("grader.cli.client", "history"),
    "report": ("grader.cli.client", "report"),
    "course": ("grader.cli.course", "course"),  # the instructor's client: light, not in GRADING_COMMANDS
}

# The commands that grade, or open a gradebook: only the grading install has what they import.
GRADING_COMMANDS = frozenset(
    {
        "grade",
        "batch",
        "regrade",
        "mutants",
        "exercise",
        "doctor",
        "gradebook",
        "gradescope",
        "serve",
        "tokens",
    }
)

# The grading install is the `gpt-bughunt-grader-server` distribution (pyproject.toml), on top of
# the student's `gpt-bughunt-grader` (client/pyproject.toml). The import names of its requirements
# (tests/test_client.py holds the two equal): a grading command first checks that they are all
# there ...
GRADING_IMPORTS = (
    "torch",
    "numpy",
    "jinja2",
    "pytest",
    "hypothesis",
    "msgpack",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "distributed",
    "tqdm",
    "yaml",
    "charset_normalizer",
    "babel",
    "fastapi",
    "uvicorn",
    "packaging",
    "einops",
    "jaxtyping",
    "copydetect",
)
# ... and a ModuleNotFoundError for one of these (or what they bring) still means that install
GRADING_MODULES = frozenset(
    {*GRADING_IMPORTS, "markupsafe", "_pytest", "pluggy", "dask", "starlette", "pygments"}
)
# Of the grader's own packages the student's wheel has the client's alone; this one, that grades, is
# the grading distribution's: its absence is that install's. A package, not a module in it: the
# finder looks a submodule up by importing its package, which raises where the package is absent.
GRADING_PROBE = "grader.grading"


def grading_installed() -> bool:
    try:
        return all(importlib.util.find_spec(name) is not None for name in (*GRADING_IMPORTS, GRADING_PROBE))
    except ImportError:  # a finder that refuses the name outright
        return False


def needs_grading_install(exc: BaseException) -> bool:
    if not isinstance(exc, ModuleNotFoundError):
        return False
    top = (exc.name or "").split(".")[0]
    if top in GRADING_MODULES:
        return True
    # a module of ours the student's wheel leaves out (`starter` without --server reads the
    # exercises); with the grading distribution there, a missing module of ours is a bug to show
    return top in ("grader", "reports") and importlib.util.find_spec(GRADING_PROBE) is None


def grading_install_error():
    """Exit 2: the command needs what only `pip install gpt-bughunt-grader-server` installs."""
    from grader.client.show import say

    usage_error(
        say(
            msg("this command needs the grading install: pip install gpt-bughunt-grader-server"),
            lang_from_env(),
        )
    )


class GraderCommands(click.Group):
    """The commands of COMMANDS, each imported when asked for. A GraderError that a command lets
    through is `error: ...` and the error's exit code (grader/errors.py), never a traceback."""

    def list_commands(self, ctx) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx, cmd_name):
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        if cmd_name in GRADING_COMMANDS and not grading_installed():
            return _needs_grading(cmd_name)
        module_name, attribute = COMMANDS[cmd_name]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # not in this checkout (a command another branch adds)
                return None
            if not needs_grading_install(exc):
                raise
            return _needs_grading(cmd_name)
        return getattr(module, attribute)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GraderError as exc:
            echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except ModuleNotFoundError as exc:
            if not needs_grading_install(exc):
                raise
            grading_install_error()


def _needs_grading(name: str) -> click.Command:
    return click.Command(
        name,
        callback=grading_install_error,
        help="(needs the grading install: pip install gpt-bughunt-grader-server)",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


@click.group(cls=GraderCommands)
@click.version_option(package_name="gpt-bughunt-grader")
def main():
    """Grade learners' transformer code and answers against a trusted reference; submit to the
    course's grading server (login, submit, status, history)."""


__all__ = [
    "COMMANDS",
    "EXIT_FAIL",
    "EXIT_PASS",
    "EXIT_USAGE",
    "GRADING_COMMANDS",
    "GRADING_IMPORTS",
    "GRADING_MODULES",
    "get_exercise",
    "main",
    "usage_error",
]
