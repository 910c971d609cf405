"""How the server's refusals and failures reach the learner: three classes, three exit codes.

grader/errors.py draws them in the grader's one tree. The server's error JSON is
`{"error": {"code", "message", "field"}}` (contract section 3); `from_answer` turns an answer
that is not a success into one of these, by its code, else by its HTTP status.
"""

from __future__ import annotations

import email.utils
import json
from datetime import UTC, datetime, timedelta, tzinfo

from grader.errors import EXIT_REFUSED, EXIT_SERVER, GraderError, UsageError
from grader.limits import SHORT_CHARS
from grader.locale import msg

REFUSED_CODES = ("not-open", "closed", "rate-limited", "no-late-days")
SERVER_CODES = ("server-error", "queue-full")
MAX_RETRY_DAYS = 366  # a Retry-After further away than this is a broken header, not a time


class _Answered:
    """What the server said with a refusal: its error code, the field it names, when to retry."""

    def __init__(
        self, message, *, code: str | None = None, field: str | None = None, retry_at=None, hint=None
    ):
        super().__init__(message)  # type: ignore[call-arg]  # Exception's, after the mixin
        self.message, self.code, self.field = message, code, field
        self.retry_at: datetime | None = retry_at
        self.hint = hint  # what to do about it, shown under the error (a Message)
        self.zone: tzinfo | None = None  # the course's time zone, for `retry_at` (the CLI sets it)


class ClientError(_Answered, UsageError):
    """The client cannot ask (no server, no token, a token over plain http://) or the server
    refused the request as such: 401, 403, 404, 413, 422 (exit 2)."""


class Refused(_Answered, GraderError):
    """Not now: the exercise is closed or not open yet, or the submission limit is reached
    (exit 3); `retry_at` says when the next submission is possible, when the server said."""

    exit_code = EXIT_REFUSED


class ServerFailure(_Answered, GraderError):
    """The server's side failed: a 5xx, no answer, a grading that failed, a full queue (exit 4).
    Never the learner's fault, and never counted against them."""

    exit_code = EXIT_SERVER


def from_answer(status: int, body: bytes, headers, now: datetime | None = None) -> GraderError:
    """The exception for an answer that is not a success. Its message is the server's own (the
    CLI sanitises it when it is shown); a body that is not the error JSON (a proxy's HTML page)
    is said by its status alone."""
    now = now or datetime.now(UTC)
    error = _error_object(body)
    code = _short(error.get("code"))
    field = _short(error.get("field"))
    message = error.get("message") if isinstance(error.get("message"), str) else None
    message = message or msg("the server answered HTTP {status}", status=status)
    retry_at = _when(error.get("retry_at")) or retry_after(headers.get("retry-after"), now)
    if code in REFUSED_CODES or (code is None and status in (409, 429)):
        cls: type[_Answered] = Refused
    elif code in SERVER_CODES or status >= 500:
        cls = ServerFailure
    elif status == 429:  # a code this client does not know, over a limit
        cls = Refused
    else:
        cls = ClientError
    return cls(message, code=code, field=field, retry_at=retry_at)  # type: ignore[return-value]


def token_refused(server: str) -> ClientError:
    """A 401: the token was not accepted. Said as such, naming the server, and not as "log in
    again" (the learner may have just done so): it is mistyped, revoked, or another course's."""
    return ClientError(
        msg(
            "{server} did not accept the token: it is mistyped, revoked, or another course's",
            server=server,
        ),
        code="unauthorized",
        hint=msg(
            "ask your instructor for your token, then run: grader login --server {server}", server=server
        ),
    )


def retry_after(value: str | None, now: datetime) -> datetime | None:
    """A Retry-After header (seconds, or an HTTP date) as a time; None when absent or absurd."""
    if not value:
        return None
    value = value.strip()[:SHORT_CHARS]
    if value.isdigit():
        seconds = int(value[:12])
        return now + timedelta(seconds=seconds) if seconds <= MAX_RETRY_DAYS * 86400 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return when if abs(when - now) <= timedelta(days=MAX_RETRY_DAYS) else None


def _error_object(body: bytes) -> dict:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else {}


def _short(value) -> str | None:
    return value[:SHORT_CHARS] if isinstance(value, str) and value else None


def _when(value) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value[:SHORT_CHARS])
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
