"""Access tokens of the grading server: issued once, kept only as their SHA-256.

A token is `secrets.token_urlsafe(TOKEN_BYTES)`; the gradebook stores its SHA-256 (hex), so a
copy of the gradebook never lets anyone sign in. Authenticating hashes the token and looks the
hash up by its unique index (the lookup compares hashes, never the token, so its timing tells
nothing about the token), then compares the row's hash with hmac.compare_digest. A revoked token
never authenticates. An instructor is an account with role 'instructor'; its learner row is the
instructor's key. A browser session (grader/service/pages.py) names its account's session epoch;
`end_sessions` moves the epoch on, so a signed-out cookie is refused by the server, not only
forgotten by the browser.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from grader.errors import UsageError
from grader.limits import TOKEN_BYTES
from grader.store.gradebook import Gradebook, learner_row
from grader.store.schema import ROLES, AccountRow, Learner, Setting, utcnow

TOKEN_CHARS = 200  # longer than any token issued here: refused before hashing


@dataclass(frozen=True)
class Account:
    id: int
    learner: str
    name: str | None
    role: str  # 'student' | 'instructor'
    session_epoch: int = 0  # the browser sessions this token may open now (end_sessions)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh token that never starts with '-': it is pasted after `--token` on a command line
    and into spreadsheets, where a leading '-' reads as an option or a formula."""
    while True:
        token = secrets.token_urlsafe(TOKEN_BYTES)
        if not token.startswith("-"):
            return token


def issue_tokens(gradebook: Gradebook, people: list[tuple[str, str, str | None, str | None]]) -> list[str]:
    """One new token per (learner, role, name, email), all in one transaction; the tokens, in
    order. A learner row is made for whoever has none."""
    for _, role, _, _ in people:
        if role not in ROLES:
            raise UsageError(f"--role: {role!r} is not one of {', '.join(ROLES)}")
    tokens = [new_token() for _ in people]
    with gradebook.sessions() as s:
        for (learner, role, name, email), token in zip(people, tokens, strict=True):
            who = learner_row(s, learner, name, email)
            s.add(AccountRow(learner_id=who.id, role=role, token_hash=token_hash(token)))
        s.commit()
    return tokens


def issue_token(gradebook: Gradebook, learner: str, role: str = "student", name: str | None = None) -> str:
    """A new token for `learner` (made if missing), printed once by the caller: only its hash stays."""
    return issue_tokens(gradebook, [(learner, role, name, None)])[0]


def revoke_tokens(gradebook: Gradebook, learner: str) -> int:
    """Revoke every live token of `learner`; how many were revoked."""
    with gradebook.sessions() as s:
        ids = select(Learner.id).where(Learner.key == learner).scalar_subquery()
        done = s.execute(
            update(AccountRow)
            .where(AccountRow.learner_id == ids, AccountRow.revoked_at.is_(None))
            .values(revoked_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        s.commit()
    return int(done.rowcount)  # type: ignore[attr-defined]  # a CursorResult


def authenticate(gradebook: Gradebook, token: str) -> Account | None:
    """The account of a live token; None for an unknown, revoked or malformed one."""
    if not isinstance(token, str) or not 0 < len(token) <= TOKEN_CHARS or not token.isascii():
        return None
    wanted = token_hash(token)
    with gradebook.sessions() as s:
        found = s.execute(
            select(AccountRow, Learner)
            .join(Learner, AccountRow.learner_id == Learner.id)
            .where(AccountRow.token_hash == wanted)
        ).first()
    if found is None:
        return None
    row, who = found
    if not hmac.compare_digest(row.token_hash, wanted) or row.revoked_at is not None:
        return None
    return Account(id=row.id, learner=who.key, name=who.name, role=row.role, session_epoch=row.session_epoch)


def end_sessions(gradebook: Gradebook, account_id: int) -> None:
    """Sign out every browser session of this account (its token): their epoch is past."""
    with gradebook.sessions() as s:
        s.execute(
            update(AccountRow)
            .where(AccountRow.id == account_id)
            .values(session_epoch=AccountRow.session_epoch + 1)
            .execution_options(synchronize_session=False)
        )
        s.commit()


def secret(gradebook: Gradebook, key: str = "session") -> bytes:
    """The server's secret `key` (e.g. for signing session cookies): made once, kept in `settings`,
    the same for every server process on this gradebook."""
    name = f"secret:{key}"
    with gradebook.sessions() as s:
        value = s.scalar(select(Setting.value).where(Setting.key == name))
        if value is None:
            s.add(Setting(key=name, value=secrets.token_hex(32)))
            try:
                s.commit()
            except IntegrityError:  # another process made it first: theirs is the one
                s.rollback()
            value = s.scalar(select(Setting.value).where(Setting.key == name))
    assert value is not None  # committed by us or by the other process
    return bytes.fromhex(value)
