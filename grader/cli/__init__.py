"""The `grader` command: small click functions that parse, call the core, and render.

One module per command group, each importing only grader.cli.common (exit codes, usage errors,
--lang, --db), never this package, so there is no import cycle; every command is registered on
`main` here, in one place. Exit codes: 0 passed or done; 1 graded but failing, or done with
grader-side failures; 2 usage or input error (`error: ...` on stderr, also for a GraderError a
command lets through, with that error's exit code; click's own usage errors also exit 2).
"""

from __future__ import annotations

import sys

import click

from grader.cli import batch, doctor, grade, gradebook, mutants, serve, tokens
from grader.cli.common import EXIT_FAIL, EXIT_PASS, EXIT_USAGE, echo, get_exercise, usage_error
from grader.errors import GraderError


class GraderCommands(click.Group):
    """A GraderError that a command lets through is `error: ...` and the error's exit code
    (grader/errors.py), never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GraderError as exc:
            echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=GraderCommands)
@click.version_option(package_name="gpt-bughunt-grader")
def main():
    """Grade learners' transformer code and answers against a trusted reference."""


main.add_command(grade.list_exercises)
main.add_command(grade.starter)
main.add_command(grade.grade)
main.add_command(mutants.mutants)
main.add_command(doctor.doctor)
main.add_command(batch.batch)
main.add_command(batch.regrade)
main.add_command(gradebook.gradebook)
main.add_command(serve.serve)
main.add_command(tokens.tokens)

__all__ = ["EXIT_FAIL", "EXIT_PASS", "EXIT_USAGE", "get_exercise", "main", "usage_error"]
