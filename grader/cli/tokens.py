"""`grader tokens issue|revoke`: the grading server's access tokens (grader/store/accounts.py).

A token is printed once and only its hash is stored: `issue LEARNER` prints the token alone on
stdout (so `TOKEN=$(grader tokens issue alice)` works); `issue --roster FILE --out FILE` issues one
per learner of a Canvas or Moodle roster and writes them to a new CSV, readable by its owner
only, to hand out (grader/policy/roster.py). A malformed roster stores nothing. An LMS test
account on the roster (Canvas' "Test Student") is issued none, and said so.
"""

from __future__ import annotations

from pathlib import Path

import click

from grader.cli.common import db_option, echo, open_gradebook, usage_error

ROLE_CHOICE = click.Choice(["student", "instructor"])


@click.group()
def tokens():
    """Issue and revoke the grading server's access tokens."""


@tokens.command("issue")
@click.argument("learner", required=False)
@click.option("--role", type=ROLE_CHOICE, default="student", show_default=True)
@click.option("--name", help="The learner's name, as the server shows it.")
@click.option(
    "--roster",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A Canvas gradebook export or Moodle grading worksheet: one token per learner.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --roster: the CSV to write (learner,name,email,token); must not exist.",
)
@db_option
def tokens_issue(learner, role, name, roster, out, db):
    """Issue a token for LEARNER (printed once: only its hash is kept), or for every learner of --roster."""
    from grader.intake.sources import canonical_name
    from grader.store.accounts import issue_tokens

    if roster is None:
        if learner is None:
            usage_error("give a LEARNER, or --roster FILE --out FILE")
        if out is not None:
            usage_error("--out goes with --roster")
        gb = open_gradebook(db, create=True)
        try:
            (token,) = issue_tokens(gb, [(canonical_name(learner), role, name, None)])
        finally:
            gb.close()
        click.echo(token)
        return
    if learner is not None or name is not None:
        usage_error("--roster issues for the roster's learners: no LEARNER or --name with it")
    if out is None:
        usage_error("--roster needs --out FILE, the CSV the tokens are written to")
    from grader.policy.roster import create_private, read_roster_accounts
    from reports.gradebook import render_tokens

    rows, tests = read_roster_accounts(roster)  # a RosterError (exit 2) before anything is stored
    handle = create_private(out)
    try:
        gb = open_gradebook(db, create=True)
        try:
            issued = issue_tokens(gb, [(r.learner, role, r.name, r.email) for r in rows])
        finally:
            gb.close()
    except BaseException:
        handle.close()
        out.unlink()  # empty: nothing was issued
        raise
    with handle:
        handle.write(render_tokens(list(zip(rows, issued, strict=True))))
    echo(f"issued {len(issued)} {role} tokens; written to {out} (readable by you only)", err=True)
    if tests:
        echo(
            f"skipped {len(tests)} LMS test account{'s' if len(tests) != 1 else ''} (no token): "
            + ", ".join(f"{r.name} ({r.learner})" for r in tests[:5]),
            err=True,
        )
    no_email = [r for r in rows if not r.email]
    if no_email:
        echo(
            f"{len(no_email)} learners have no email on the roster: hand their tokens out yourself "
            "(docs/instructors.md, 'The roster and the tokens'), or add an Email column to the roster",
            err=True,
        )


@tokens.command("revoke")
@click.argument("learner")
@db_option
def tokens_revoke(learner, db):
    """Revoke every token of LEARNER: none of them signs in again."""
    from grader.intake.sources import canonical_name
    from grader.store.accounts import revoke_tokens

    gb = open_gradebook(db)
    try:
        n = revoke_tokens(gb, canonical_name(learner))
    finally:
        gb.close()
    echo(f"revoked {n} token{'s' if n != 1 else ''} of {canonical_name(learner)}")
