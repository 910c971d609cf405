"""The grading server's HTTP API: `create_app(service)`, everything under /api/v1 (FastAPI).

The routes parse, authorize and call grader.service.service.Service; they never decide a grade
and never import learner code. Every answer that is not a success is the JSON
`{"error": {"code": ..., "message": ..., "field": ...}}` (validation errors, unknown routes and
the server's own failures too), in the caller's language (`?lang=`, else Accept-Language), with
`Retry-After` on 429 and on a 409 whose reopening time is known.

Request bodies are capped before any route sees them (`BodyLimit`, a plain ASGI middleware): an
upload at UPLOAD_BYTES, anything else at REQUEST_BYTES. A Content-Length over the cap is refused
at once with 413 `too-large`; a body without one is counted as it streams in and refused the
moment it passes the cap, the rest left unread. An upload's token is checked before the first
byte of its body is read (401, its body unread, the connection closed), and the body streams into
memory up to UPLOAD_MEMORY_BYTES, then into a temporary file (`Spool`): a slow or stalled upload
holds a file, not the process's memory. How long a connection may take to send a request, and
how many one address may hold open, is grader/service/edge.py's part.

Auth: `Authorization: Bearer TOKEN` (grader tokens issue), or, for GET only, the browser pages'
signed session cookie (grader/service/pages.py): a signed-in browser may read its own JSON and
reports, but every write of the API needs the token itself, so no other site can make a browser
write through it (the pages' own forms carry CSRF tokens).
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path as FilePath
from typing import IO, Annotated, Literal

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from grader import __version__
from grader.client.models import FINISHED
from grader.errors import Refused
from grader.limits import (
    LEARNER_ID_CHARS,
    LONG_POLL_RECHECK_SECONDS,
    LONG_POLL_SECONDS,
    REQUEST_BYTES,
    SHORT_CHARS,
    SUBMISSIONS_PAGE,
    SUBMISSIONS_PAGE_MAX,
    UPLOAD_BYTES,
    UPLOAD_MEMORY_BYTES,
)
from grader.locale import msg, normalize_lang
from grader.service import pages
from grader.service.service import INSTRUCTOR, Service, forbidden, not_found, too_large
from grader.service.waiting import wait_for
from grader.store.accounts import Account

log = logging.getLogger("grader.service")

PREFIX = "/api/v1"
UPLOAD_PATH = re.compile(rf"^{PREFIX}/exercises/[^/]+/submissions/?$")
REPORT_TYPES = {
    "text": "text/plain; charset=utf-8",
    "json": "application/json",
    "html": "text/html; charset=utf-8",
    "markdown": "text/markdown; charset=utf-8",
}
# a report is a document of its own: nothing in it may load or run anything
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"
# an id a path names: positive, and at most what the gradebook's ids hold (SQLite's INTEGER, PostgreSQL's
# BIGINT); a larger one would overflow the query (a 500), and is refused as invalid instead
RowId = Annotated[int, Path(ge=1, le=2**63 - 1)]
CODES = {401: "unauthorized", 403: "forbidden", 404: "not-found", 413: "too-large", 422: "invalid"}


# -- errors -------------------------------------------------------------------------------------


def request_lang(request) -> str:
    """The caller's language: ?lang=, else the first of Accept-Language."""
    lang = request.query_params.get("lang") or request.headers.get("accept-language", "").split(",")[0]
    return normalize_lang(lang.split(";")[0].strip())


def error_response(
    status: int, code: str, message: str, field: str | None = None, headers=None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "field": field}}, status_code=status, headers=headers
    )


def refused_response(request, exc: Refused) -> JSONResponse:
    headers = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(int(exc.retry_after))
    if exc.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    message = (
        exc.message.render(request_lang(request)) if hasattr(exc.message, "render") else str(exc.message)
    )
    return error_response(exc.status, exc.code, message, exc.field, headers)


def validation_response(request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    loc = [str(p) for p in first.get("loc", ())]
    field = ".".join(loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc) or None
    if loc and loc[0] == "header" and field:
        field = field.replace("_", "-").title()  # idempotency_key -> Idempotency-Key
    text = msg("{field}: {problem}", field=field or "request", problem=str(first.get("msg", ""))[:500])
    return error_response(422, "invalid", text.render(request_lang(request)), field)


def http_error_response(request, exc: StarletteHTTPException) -> JSONResponse:
    code = CODES.get(exc.status_code, "server-error" if exc.status_code >= 500 else "invalid")
    text = {
        404: msg("no such page: {path}", path=request.url.path[:SHORT_CHARS]),
        405: msg("{method} is not allowed here", method=request.method),
    }.get(exc.status_code, msg("the request cannot be answered ({status})", status=exc.status_code))
    return error_response(exc.status_code, code, text.render(request_lang(request)), None, exc.headers)


def server_error_response(request, exc: Exception) -> JSONResponse:
    log.exception("%s %s failed", request.method, request.url.path[:SHORT_CHARS], exc_info=exc)
    text = msg("the server failed to answer; this is not your fault, and nothing you sent is lost")
    return error_response(500, "server-error", text.render(request_lang(request)))


# -- body limits ----------------------------------------------------------------------------------


def body_cap(method: str, path: str) -> int:
    """How many bytes a request's body may have: an upload's zip, or a JSON body."""
    return UPLOAD_BYTES if is_upload(method, path) else REQUEST_BYTES


def is_upload(method: str, path: str) -> bool:
    return method == "POST" and UPLOAD_PATH.match(path) is not None


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header; None for another scheme or none."""
    scheme, _, token = (header or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


class Spool:
    """A request body as it streams in: in memory up to `memory` bytes, then in a temporary file
    (read_zip takes either); `body()` is what was received, `discard()` removes the file."""

    def __init__(self, memory: int = UPLOAD_MEMORY_BYTES):
        self.memory, self.size = memory, 0
        self.chunks: list[bytes] = []
        self.file: IO[bytes] | None = None

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.file is None and self.size > self.memory:
            self.file = tempfile.NamedTemporaryFile(prefix="grader-upload-", suffix=".zip", delete=False)  # noqa: SIM115 - discard() removes it
            self.file.write(b"".join(self.chunks))
            self.chunks = []
        if self.file is not None:
            self.file.write(chunk)
        else:
            self.chunks.append(chunk)

    def body(self) -> bytes | FilePath:
        if self.file is None:
            return b"".join(self.chunks)
        self.file.close()
        return FilePath(self.file.name)

    def discard(self) -> None:
        self.chunks = []
        if self.file is not None:
            self.file.close()
            try:
                os.unlink(self.file.name)
            except FileNotFoundError:
                pass
            self.file = None


class BodyLimit:
    """Reads each request's body up to its cap (body_cap) before the app sees it, and answers 413
    `too-large` at once for more: a Content-Length over the cap is refused without reading a byte.
    An upload is read only for a valid token (`authenticate`, the Service's; 401 unread), into a
    Spool handed to the route as `request.state.upload` with the caller as `request.state.caller`.
    Also marks every answer `nosniff` and, for the API, `no-store` (it is one learner's data)."""

    def __init__(self, app, authenticate: Callable[[str], Account | None]):
        self.app = app
        self.authenticate = authenticate

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_marked(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                have = {name.lower() for name, _ in headers}
                if b"x-content-type-options" not in have:
                    headers.append((b"x-content-type-options", b"nosniff"))
                if scope["path"].startswith(PREFIX) and b"cache-control" not in have:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        cap = body_cap(scope["method"], scope["path"])
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > cap):
            return await self._too_large(scope, send_marked, cap)
        if is_upload(scope["method"], scope["path"]):
            return await self._upload(scope, receive, send_marked, cap)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                return await self._too_large(scope, send_marked, cap)
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send_marked)

    async def _upload(self, scope, receive, send, cap: int):
        from starlette.requests import Request

        token = bearer_token(Request(scope).headers.get("authorization"))
        caller = await run_in_threadpool(self.authenticate, token) if token else None
        if caller is None:
            return await _closing(scope, send, refused_response(Request(scope), unauthorized()))
        spool = Spool()
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":  # the client went away
                    return
                spool.add(message.get("body", b""))
                if spool.size > cap:
                    return await self._too_large(scope, send, cap)
                if not message.get("more_body"):
                    break
            state = scope.setdefault("state", {})
            state["caller"], state["upload"] = caller, spool.body()
            return await self.app(scope, _no_more_body, send)
        finally:
            spool.discard()

    @staticmethod
    async def _too_large(scope, send, cap: int):
        from starlette.requests import Request

        request = Request(scope)
        response = error_response(413, "too-large", too_large(cap).render(request_lang(request)), "body")
        await _closing(scope, send, response)


async def _closing(scope, send, response: Response):
    """`response`, sent before the request's body is read: the connection closes after it."""
    response.headers["Connection"] = "close"
    await response(scope, _no_body, send)


async def _no_body():  # a response that is sent never reads the request
    return {"type": "http.disconnect"}


async def _no_more_body():  # the body was read (and spooled) before the app was called
    return {"type": "http.request", "body": b"", "more_body": False}


# -- auth -----------------------------------------------------------------------------------------


def _service(request: Request) -> Service:
    return request.app.state.service


SAFE_METHODS = ("GET", "HEAD")


def unauthorized() -> Refused:
    return Refused(
        401,
        "unauthorized",
        msg("a valid token is needed (Authorization: Bearer TOKEN); `grader login` stores one"),
    )


def account(request: Request) -> Account:
    """The caller's Account from `Authorization: Bearer TOKEN` (or, to read, the pages' session
    cookie); 401 for none, unknown or revoked. An upload's was found by BodyLimit already."""
    found = getattr(request.state, "caller", None)
    if found is not None:
        return found
    header = request.headers.get("authorization")
    if header is None and request.method in SAFE_METHODS:
        found = pages.account_of(request)
    else:
        token = bearer_token(header)
        found = _service(request).authenticate(token) if token is not None else None
    if found is None:
        raise unauthorized()
    return found


def instructor(caller: Annotated[Account, Depends(account)]) -> Account:
    if caller.role != INSTRUCTOR:
        raise forbidden()
    return caller


Caller = Annotated[Account, Depends(account)]  # any valid token
Staff = Annotated[Account, Depends(instructor)]


class ExtensionIn(BaseModel):
    """POST /api/v1/extensions: one learner's own dates for one exercise."""

    model_config = ConfigDict(extra="forbid")
    learner: str = Field(min_length=1, max_length=LEARNER_ID_CHARS)
    exercise: str = Field(min_length=1, max_length=SHORT_CHARS)
    due: AwareDatetime
    closes: AwareDatetime | None = None
    reason: str = Field("", max_length=2000)


# -- the routes -----------------------------------------------------------------------------------


def api_router() -> APIRouter:
    api = APIRouter(prefix=PREFIX)

    @api.get("/health")
    def health():
        return {"status": "ok", "version": __version__}

    @api.get("/me")
    def me(request: Request, caller: Caller):
        return _service(request).me(caller)

    @api.get("/exercises")
    def exercises(request: Request, caller: Caller):
        return _service(request).exercise_list(caller)

    @api.get("/exercises/{exercise}/starter", response_class=Response)
    def starter(request: Request, exercise: str, caller: Caller):
        data = _service(request).starter(caller, exercise)
        return Response(
            data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{exercise}-starter.zip"'},
        )

    @api.post(
        "/exercises/{exercise}/submissions",
        status_code=202,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
    )
    async def submit(
        request: Request,
        exercise: str,
        caller: Caller,
        use_late_day: bool = False,
        idempotency_key: Annotated[str | None, Header(max_length=200, pattern=r"^[\x21-\x7e]+$")] = None,
    ):
        data, created = await run_in_threadpool(
            _service(request).submit,
            caller,
            exercise,
            request.state.upload,  # read, capped and spooled by BodyLimit
            idempotency_key=idempotency_key,
            use_late_day=use_late_day,
        )
        return JSONResponse(data, status_code=202 if created else 200)

    @api.get("/submissions")
    def submissions(
        request: Request,
        caller: Caller,
        exercise: Annotated[str | None, Query(max_length=SHORT_CHARS)] = None,
        learner: Annotated[str | None, Query(max_length=LEARNER_ID_CHARS)] = None,
        limit: Annotated[int, Query(ge=1, le=SUBMISSIONS_PAGE_MAX)] = SUBMISSIONS_PAGE,
        cursor: Annotated[str | None, Query(max_length=SHORT_CHARS)] = None,
        order: Literal["oldest", "newest"] = "oldest",
    ):
        """A page of submissions, oldest first (`order=newest`: newest first, as `grader report`
        finds the latest): `{"items": [...], "next": CURSOR or null}`; the next page is
        `?cursor=CURSOR` with the same filters. Each item is a summary (score, status, times,
        digest); the checks and the report are on `/submissions/{id}` alone."""
        return _service(request).submissions(
            caller, exercise, learner, limit=limit, cursor=cursor, newest_first=order == "newest"
        )

    @api.get("/submissions/{upload_id}")
    async def submission(
        request: Request,
        upload_id: RowId,
        caller: Caller,
        wait: Annotated[float, Query(ge=0, le=LONG_POLL_SECONDS)] = 0,
    ):
        """One submission; with `wait`, answered once it is graded or failed, or after `wait` seconds
        (grader/service/waiting.py): a waiting client hears of its grade the moment it is recorded."""
        service = _service(request)
        deadline = time.monotonic() + wait
        while True:
            with service.waiters.listen(upload_id) as recorded:
                found = await run_in_threadpool(service.submission, caller, upload_id)
                if found is None:
                    raise not_found()
                left = deadline - time.monotonic()
                if found["status"] in FINISHED or left <= 0:
                    return found
                await wait_for(recorded, min(left, LONG_POLL_RECHECK_SECONDS))

    @api.get("/submissions/{upload_id}/report", response_class=Response)
    def report(
        request: Request,
        upload_id: RowId,
        caller: Caller,
        format: Literal["text", "json", "html", "markdown"] = "text",
        lang: Literal["en", "zh-TW"] = "en",
    ):
        text = _service(request).report(caller, upload_id, format, lang)
        return Response(
            text, media_type=REPORT_TYPES[format], headers={"Content-Security-Policy": REPORT_CSP}
        )

    @api.post("/submissions/{upload_id}/choose")
    def choose(request: Request, upload_id: RowId, caller: Caller):
        return _service(request).choose(caller, upload_id)

    @api.get("/status")
    def status(
        request: Request,
        caller: Caller,
        exercise: Annotated[str | None, Query(max_length=SHORT_CHARS)] = None,
    ):
        return _service(request).status(caller, exercise)

    @api.get("/class/{exercise}/grades")
    def class_grades(request: Request, exercise: str, caller: Staff):
        return _service(request).class_grades(exercise)

    @api.post("/extensions")
    def extension(request: Request, body: ExtensionIn, caller: Staff):
        return _service(request).add_extension(
            caller, body.learner, body.exercise, body.due, body.closes, body.reason
        )

    @api.post("/exercises/{exercise}/release")
    def release(request: Request, exercise: str, caller: Staff):
        return _service(request).release(caller, exercise)

    @api.get("/queue")
    def queue(request: Request, caller: Staff):
        return _service(request).queue_info()

    @api.post("/queue/{job_id}/retry")
    def retry(request: Request, job_id: RowId, caller: Staff):
        return _service(request).retry(job_id)

    return api


def create_app(service: Service) -> FastAPI:
    """The server's ASGI app over `service`: the API, the browser pages, JSON errors, body caps."""
    app = FastAPI(
        title="gpt-bughunt grading server",
        version=__version__,
        openapi_url=f"{PREFIX}/openapi.json",
        docs_url=None,  # FastAPI's docs pages load their scripts from a CDN: nothing external here
        redoc_url=None,
    )
    app.state.service = service
    app.add_exception_handler(Refused, refused_response)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, validation_response)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http_error_response)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, server_error_response)
    app.include_router(api_router())
    app.include_router(pages.router)
    app.add_middleware(BodyLimit, authenticate=service.authenticate)
    return app


__all__ = ["create_app"]
