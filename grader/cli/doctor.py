"""`grader doctor`: canary attacks in the jail."""

from __future__ import annotations

import sys

import click

from grader.cli.common import EXIT_FAIL, EXIT_PASS


@click.command()
@click.option("--quick", is_flag=True, help="Only the checks `grader grade` runs before grading.")
def doctor(quick):
    """Run canary attacks in the jail; exit 1, refusing, if any of them succeeds."""
    from grader.jail.doctor import run
    from grader.jail.launcher import ZygoteError

    try:
        report = run(quick=quick)
    except ZygoteError as exc:
        click.echo(f"error: no jail could be started: {exc}", err=True)
        sys.exit(EXIT_FAIL)
    click.echo(report.render(), nl=False)
    sys.exit(EXIT_PASS if report.ok else EXIT_FAIL)
