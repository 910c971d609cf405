"""The server's HTTP API (contract section 3), as the student client calls it.

Every request carries `Authorization: Bearer TOKEN`, only to a server `config.check_token_url`
allows, and never follows a redirect (a redirect could take the token somewhere else). One
request waits CLIENT_TIMEOUT_SECONDS; after a network error or timeout, or a gateway's 502/503/504,
it is tried again up to CLIENT_RETRIES times, a little later each time, unchanged: an upload keeps
its Idempotency-Key, so the server stores it once however many times it arrives. An answer is
read up to CLIENT_RESPONSE_BYTES; one that is not a success raises grader.client.errors' class
for it. A JSON answer's shape is bounded before it is parsed (json_shape: CLIENT_JSON_VALUES,
CLIENT_JSON_CONTAINERS) and a list answer's length before it is read into models
(CLIENT_LIST_ITEMS): whatever the server sends, the client's memory stays within a few times
the answer's bytes.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from grader import __version__
from grader.client.config import check_token, check_token_url, normalize_server, save_login
from grader.client.errors import ClientError, Refused, ServerFailure, from_answer, token_refused
from grader.client.models import ExerciseInfo, ExerciseStatus, Me, Submission, SubmissionPage
from grader.client.show import course_zone, status_text
from grader.limits import (
    CLIENT_JSON_CONTAINERS,
    CLIENT_JSON_VALUES,
    CLIENT_LIST_ITEMS,
    CLIENT_RESPONSE_BYTES,
    CLIENT_RETRIES,
    CLIENT_TIMEOUT_SECONDS,
    HISTORY_SUBMISSIONS,
    LONG_POLL_SECONDS,
    SUBMISSIONS_PAGE_MAX,
    WAIT_SECONDS,
)
from grader.locale import Message, msg

API = "/api/v1"
GATEWAY_STATUSES = (502, 503, 504)  # a proxy that lost the server for a moment: worth a retry
BACKOFF_SECONDS = 0.5  # the first pause before a retry; doubled each time (0.5, 1, 2)
JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # one JSON string, its escapes included


def json_shape(body: bytes) -> tuple[int, int]:
    """The most values and containers (objects, arrays) `body` can parse into, counted in its
    bytes without parsing: each container is a value, and every value after the first of a
    container follows a comma. Commas and brackets inside strings are counted too, unless that
    comes over a cap: then they are counted again with the strings taken out."""

    def count(text: bytes) -> tuple[int, int]:
        containers = text.count(b"{") + text.count(b"[")
        return text.count(b",") + containers + 1, containers

    values, containers = count(body)
    if values > CLIENT_JSON_VALUES or containers > CLIENT_JSON_CONTAINERS:
        values, containers = count(JSON_STRING.sub(b'""', body))
    return values, containers


@dataclass
class History:
    """What `Api.submissions` read: the submissions, the server's JSON of each (`grader history
    --format json` prints it as it came), and whether these are all of them."""

    items: list[Submission] = field(default_factory=list)
    raw: list = field(default_factory=list)
    complete: bool = True

    def add(self, items: list[Submission], raw: list, most: int) -> None:
        room = most - len(self.items)
        self.items += items[:room]
        self.raw += raw[:room]


@dataclass(frozen=True)
class Reply:
    status: int
    headers: httpx.Headers
    body: bytes

    def json(self):
        values, containers = json_shape(self.body)
        if values > CLIENT_JSON_VALUES or containers > CLIENT_JSON_CONTAINERS:
            raise ServerFailure(
                msg(
                    "the server's answer holds more than {values} values or {containers} objects "
                    "and lists; refusing to read it",
                    values=f"{CLIENT_JSON_VALUES:,}",
                    containers=f"{CLIENT_JSON_CONTAINERS:,}",
                )
            )
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            raise ServerFailure(msg("the server's answer is not JSON")) from None


class Api:
    def __init__(
        self,
        server: str,
        token: str | None,
        *,
        insecure: bool = False,
        timeout: float = CLIENT_TIMEOUT_SECONDS,
        retries: int = CLIENT_RETRIES,
        backoff: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        lang: str = "en",
    ):
        self.server = normalize_server(server)
        if token is not None:
            check_token_url(self.server, insecure=insecure)
            token = check_token(token)
        # the server words its errors in the learner's language (Accept-Language)
        headers = {"User-Agent": f"gpt-bughunt-grader/{__version__}", "Accept-Language": lang}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(
            base_url=self.server + API, headers=headers, timeout=timeout, follow_redirects=False
        )
        self.retries, self.sleep = retries, sleep
        self.backoff = BACKOFF_SECONDS if backoff is None else backoff

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- one request, with its retries -----------------------------------------------------------

    def request(self, method: str, path: str, **kw) -> Reply:
        """`method path`, tried up to 1 + retries times on a network error, a timeout or a
        gateway's 502/503/504; the same request each time (headers and body unchanged)."""
        last: Exception | Reply | None = None
        for attempt in range(1 + self.retries):
            if attempt:
                self.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                reply = self._once(method, path, **kw)
            except httpx.TransportError as exc:
                last = exc
                continue
            if reply.status in GATEWAY_STATUSES:
                last = reply
                continue
            break
        else:
            if isinstance(last, Reply):
                raise from_answer(last.status, last.body, last.headers)
            raise ServerFailure(
                msg(
                    "cannot reach {server}: {error} (tried {tries} times)",
                    server=self.server,
                    error=f"{type(last).__name__}: {last}"[:500],
                    tries=1 + self.retries,
                )
            )
        if reply.status == 401:
            raise token_refused(self.server)
        if not 200 <= reply.status < 300:
            raise from_answer(reply.status, reply.body, reply.headers)
        return reply

    def _once(self, method: str, path: str, **kw) -> Reply:
        with self.http.stream(method, path, **kw) as r:
            body = bytearray()
            for chunk in r.iter_bytes():
                body += chunk
                if len(body) > CLIENT_RESPONSE_BYTES:
                    raise ServerFailure(
                        msg(
                            "the server's answer is larger than {mb} MiB; refusing to read it",
                            mb=CLIENT_RESPONSE_BYTES >> 20,
                        )
                    )
            return Reply(r.status_code, r.headers, bytes(body))

    def _model(self, model, method: str, path: str, **kw):
        return self._valid(model, self.request(method, path, **kw).json(), path)

    @staticmethod
    def _valid(model, data, path: str, most: int = CLIENT_LIST_ITEMS):
        """`data` as `model`, or ServerFailure: an answer this client does not understand, or a
        list of more than `most` rows (refused before any row is read into a model)."""
        if isinstance(data, list) and len(data) > most:
            raise ServerFailure(
                msg(
                    "the server's answer to {path} lists {count} items, more than the {most} this "
                    "client reads",
                    path=path,
                    count=f"{len(data):,}",
                    most=f"{most:,}",
                )
            )
        try:
            return TypeAdapter(model).validate_python(data)
        except ValidationError as exc:
            raise ServerFailure(
                msg(
                    "the server's answer to {path} is not what this client understands: {error}",
                    path=path,
                    error=str(exc)[:500],
                )
            ) from None

    # -- the endpoints -----------------------------------------------------------------------

    def me(self) -> Me:
        return self._model(Me, "GET", "/me")

    def exercises(self) -> list[ExerciseInfo]:
        return self._model(list[ExerciseInfo], "GET", "/exercises")

    def exercise(self, exercise: str) -> ExerciseInfo:
        found = [e for e in self.exercises() if e.id == exercise]
        if not found:
            raise ClientError(msg("EXERCISE: the server has no exercise {exercise}", exercise=exercise))
        return found[0]

    def starter(self, exercise: str) -> bytes:
        return self.request("GET", f"/exercises/{quote(exercise, safe='')}/starter").body

    def submit(self, exercise: str, archive: bytes, key: str, *, use_late_day: bool = False) -> Submission:
        return self._model(
            Submission,
            "POST",
            f"/exercises/{quote(exercise, safe='')}/submissions",
            params={"use_late_day": "true" if use_late_day else "false"},
            content=archive,
            headers={"Content-Type": "application/zip", "Idempotency-Key": key},
        )

    def submission(self, upload_id: int, wait: float = 0) -> Submission:
        """The submission now; with `wait` (at most LONG_POLL_SECONDS), once it is finished or
        `wait` seconds have passed, whichever is first: the server answers the moment it is graded."""
        params = {"wait": f"{min(wait, LONG_POLL_SECONDS):g}"} if wait > 0 else {}
        return self._model(Submission, "GET", f"/submissions/{int(upload_id)}", params=params)

    def submissions(self, exercise: str | None = None, most: int = HISTORY_SUBMISSIONS) -> History:
        """Your submissions (of `exercise`), oldest first, read page by page: at most `most` of
        them, each page shape-checked. A server of before the pages answers one list: all of them."""
        params: dict[str, str | int] = {"exercise": exercise} if exercise else {}
        history = History()
        cursor: str | None = None
        while len(history.items) < most:
            query = {**params, "limit": min(SUBMISSIONS_PAGE_MAX, most - len(history.items))}
            if cursor is not None:
                query["cursor"] = cursor
            data = self.request("GET", "/submissions", params=query).json()
            page = self._valid(SubmissionPage | list[Submission], data, "/submissions")
            if isinstance(page, list):  # a list is all there is
                history.add(page, data, most)
                history.complete = len(page) <= most
                return history
            history.add(page.items, data["items"], most)
            cursor = page.next
            if cursor is None or not page.items:  # an empty page that names another would loop
                history.complete = cursor is None
                return history
        history.complete = False
        return history

    def latest(self, exercise: str | None = None, most: int = SUBMISSIONS_PAGE_MAX) -> list[Submission]:
        """Your latest submissions (of `exercise`), newest first: one page asked for newest first.
        A server that lists oldest first whatever it is asked is read whole (`submissions`)."""
        params: dict[str, str | int] = {"order": "newest", "limit": most}
        if exercise:
            params["exercise"] = exercise
        data = self.request("GET", "/submissions", params=params).json()
        page = self._valid(SubmissionPage | list[Submission], data, "/submissions")
        items, more = (page, False) if isinstance(page, list) else (page.items, page.next is not None)
        ids = [s.id for s in items]
        if more and ids != sorted(ids, reverse=True):  # not newest first: the newest may be further on
            items = self.submissions(exercise).items
        return sorted(items, key=lambda s: s.id, reverse=True)

    def report(self, upload_id: int, fmt: str, lang: str) -> str:
        reply = self.request(
            "GET", f"/submissions/{int(upload_id)}/report", params={"format": fmt, "lang": lang}
        )
        return reply.body.decode("utf-8", "replace")

    def status(self, exercise: str | None = None) -> list[ExerciseStatus]:
        params = {"exercise": exercise} if exercise else {}
        return self._model(list[ExerciseStatus], "GET", "/status", params=params)

    def raw(self, path: str, **params) -> object:
        """The server's JSON for `path`, as it sent it (`--format json`)."""
        return self.request("GET", path, params=params).json()


def logged_in_as(server: str, token: str, *, insecure: bool, lang: str) -> Me:
    """Who `token` is on `server` (its /me), the check a login makes before it keeps the token:
    a token the server refuses is said to be just given, not to log in again."""
    try:
        with Api(server, check_token(token), insecure=insecure, lang=lang) as api:
            return api.me()
    except ClientError as exc:
        if exc.code != "unauthorized":
            raise
        raise ClientError(msg("{error}; nothing was kept", error=exc.message), code=exc.code) from None


def log_in(
    server: str,
    token: str | None,
    ask: Callable[[], str],
    *,
    insecure: bool,
    lang: str,
    keep_lang: str | None = None,
) -> Message:
    """`grader login` and the notebook's login, one way: the server's URL checked before a token is
    even asked for (`ask`, when none is given), the token checked with the server (logged_in_as),
    then kept, with `keep_lang` as the reports' language. What to tell the learner."""
    server = normalize_server(server)
    check_token_url(server, insecure=insecure)
    token = check_token(ask() if token is None else token)
    me = logged_in_as(server, token, insecure=insecure, lang=lang)
    path = save_login(server, token, lang=keep_lang)
    return msg(
        "logged in to {server} as {learner} ({role}); token kept in {path}",
        server=server,
        learner=me.learner,
        role=me.role,
        path=str(path),
    )


def upload(api: Api, exercise: str, archive: bytes, *, use_late_day: bool) -> Submission:
    """`grader submit`'s and the notebook's upload: one idempotency key, however many times the
    network makes the client send it; a refusal or failure carries the course's time zone, so its
    hint's time is on the course's clock."""
    try:
        return api.submit(exercise, archive, str(uuid.uuid4()), use_late_day=use_late_day)
    except (Refused, ServerFailure) as exc:
        exc.zone = course_zone(api)
        raise


def graded(sub: Submission) -> Submission:
    """The submission a wait ended with, if it was graded: ServerFailure when the server could
    not grade it, or when it is still queued or grading after WAIT_SECONDS."""
    if sub.status == "failed":
        raise ServerFailure(
            msg("the server could not grade submission {id}; it does not count against you", id=sub.id)
        )
    if not sub.finished:
        raise ServerFailure(
            msg(
                "submission {id} is still {status} after {seconds:g} s; it will be graded: "
                "its report then: grader report {id}",
                id=sub.id,
                status=status_text(sub.status),
                seconds=WAIT_SECONDS,
            )
        )
    return sub
