"""The grading server's browser pages: a learner's submissions and reports, an instructor's class.

    GET  /                         the sign-in form, or the home page of who is signed in
    POST /login                    token -> a signed session cookie
    POST /logout                   the cookie goes
    GET  /submissions/{id}         the report of the visible view (another learner's id: 404)
    POST /submissions/{id}/choose  count this upload (an exercise whose policy says "chosen")
    GET  /class/{ex}               instructor: the class report of the counted grades
    GET  /class/{ex}/{learner}     instructor: one learner's submissions of one exercise

Every page is rendered here, server-side, from jinja2 templates (these under templates/, the
reports' under reports/templates: the same CSS; a submission's page is the very HTML report the
API's `/report?format=html` serves, with a bar on top). Nothing is fetched from elsewhere and no
script runs: `Content-Security-Policy: default-src 'none'` says so to the browser too.

The session cookie is `payload.signature`: payload = base64url JSON {account id, the first
hex digits of the token's SHA-256, expiry, the account's session epoch}, signature = HMAC-SHA256
under the server's secret (`accounts.secret`). It names the token, not only the account, so
revoking the token ends the session at its next request; it holds no token, so a stolen cookie
dies with its expiry, or at once when its learner signs out: sign-out moves the account's epoch
on (`accounts.end_sessions`), and a cookie of an earlier epoch is refused by the server. Every
POST carries a CSRF token: HMAC of the session cookie (sign out, choose), or of a random login cookie
(the sign-in form, a signed double-submit cookie); an Origin or Referer of another host is
refused as well.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import cache
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from grader.limits import HOME_SUBMISSIONS, REQUEST_BYTES, SESSION_SECONDS, SUBMISSIONS_PAGE_MAX
from grader.locale import LANGS, N_, normalize_lang
from grader.policy import clock
from grader.text import shown
from reports.html import HTML_LANG, translator
from reports.html import TEMPLATES as REPORT_TEMPLATES
from reports.view import MAX_SHORT, exercise_title, fmt_points, t

router = APIRouter()

SESSION_COOKIE = "grader_session"
LOGIN_COOKIE = "grader_login"  # the sign-in form's double-submit nonce
TOKEN_PREFIX_CHARS = 16  # hex digits of the token's SHA-256 a session keeps (64 bits)
FORM_FIELDS = 8  # fields parsed from a form; ours have at most three
ID_DIGITS = 18  # an upload id in a URL: more digits than a 64-bit column holds is no upload

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",  # grades are private: no shared cache keeps a copy
}

STATUS_LABELS = {
    "queued": N_("queued"),
    "grading": N_("grading"),
    "graded": N_("graded"),
    "failed": N_("failed on the server (not counted against you)"),
}


# -- the functional core: sessions, CSRF tokens, languages -------------------------------------


@dataclass(frozen=True)
class SessionRecord:
    account: int  # accounts.id
    token: str  # the first TOKEN_PREFIX_CHARS hex digits of the token's SHA-256
    expires: int  # unix seconds
    epoch: int = 0  # the account's session epoch when it signed in (accounts.end_sessions)


def token_fingerprint(token: str) -> str:
    """What a session keeps of its token: the first digits of the SHA-256 the gradebook stores."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:TOKEN_PREFIX_CHARS]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, purpose: bytes, data: bytes) -> str:
    return _b64(hmac.new(key, purpose + b"\0" + data, hashlib.sha256).digest())


def _same(a: str, b: str) -> bool:
    """Constant-time equality of two texts (compare_digest takes str only when it is ASCII)."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def sign_session(key: bytes, record: SessionRecord) -> str:
    payload = _b64(json.dumps([record.account, record.token, record.expires, record.epoch]).encode())
    return f"{payload}.{_mac(key, b'session', payload.encode())}"


def read_session(key: bytes, cookie: str | None, now: float) -> SessionRecord | None:
    """The record of a cookie this server signed and that has not expired; else None."""
    if not cookie or len(cookie) > 512 or cookie.count(".") != 1:
        return None
    payload, signature = cookie.split(".")
    if not _same(signature, _mac(key, b"session", payload.encode())):
        return None
    try:
        account, token, expires, epoch = json.loads(_unb64(payload))
    except (ValueError, TypeError):  # not four values (a cookie of before the epochs, too)
        return None
    if not all(isinstance(n, int) for n in (account, epoch, expires)) or not isinstance(token, str):
        return None
    if expires <= now:
        return None
    return SessionRecord(account, token, expires, epoch)


def csrf_token(key: bytes, purpose: str, cookie: str) -> str:
    """The token a form of this cookie carries: an attacker's page can read neither."""
    return _mac(key, b"csrf-" + purpose.encode(), cookie.encode())


def csrf_ok(key: bytes, purpose: str, cookie: str | None, sent: str | None) -> bool:
    return bool(cookie and sent) and _same(str(sent), csrf_token(key, purpose, str(cookie)))


def same_origin(origin: str | None, referer: str | None, host: str | None) -> bool:
    """False when the request says it comes from a page of another host (Origin first, else
    Referer); a request that says nothing is judged by its CSRF token alone."""
    claimed = origin if origin is not None else referer
    if claimed is None:
        return True
    if not host or claimed == "null":
        return False
    return urlsplit(claimed).netloc.lower() == host.lower()


def choose_lang(query: str | None, accept_language: str | None) -> str:
    """?lang= first, then the browser's Accept-Language (highest q among ours), else English."""
    if query:
        return normalize_lang(query)
    best, best_q = "en", 0.0
    for part in (accept_language or "").split(",")[:20]:
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                continue
        lang = normalize_lang(tag.strip())
        if tag.strip() and q > best_q and (lang != "en" or tag.strip().lower().startswith("en")):
            best, best_q = lang, q
    return best


def when(value, tz: tzinfo | None = None) -> str:
    """An ISO time of the API as a person reads it, in the course's zone `tz`: grader.policy.clock.shown."""
    if not value:
        return ""
    try:
        moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    except ValueError:
        return shown(value, MAX_SHORT)
    return clock.shown(moment, tz)


def with_bar(report: str, bar: str) -> str:
    """A report page with the site's bar on top. `report` is reports.render's HTML, whose first
    `<body>` is its template's: learner text in it is escaped, so it holds no `<`."""
    head, marker, rest = report.partition("<body>")
    if not marker:
        raise ValueError("not an HTML report: no <body>")
    return head + marker + bar + rest


# -- templates ----------------------------------------------------------------------------------

TEMPLATES = Path(__file__).with_name("templates")


@cache
def environment() -> Environment:
    return Environment(
        loader=ChoiceLoader([FileSystemLoader(str(TEMPLATES)), FileSystemLoader(str(REPORT_TEMPLATES))]),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_page(
    name: str,
    lang: str,
    keep_lang: bool = False,
    zone: tzinfo | None = None,
    course_name: str = "",
    **context,
) -> str:
    """A template of ours in `lang`; with keep_lang the links carry ?lang= on (it was asked for).
    Times are shown in the course's `zone`; the site's bar names the course (`course_name`)."""
    suffix = f"?lang={lang}" if keep_lang else ""
    return (
        environment()
        .get_template(name)
        .render(
            _=translator(lang),
            lang=lang,
            langs=LANGS,
            html_lang=HTML_LANG[lang],
            fmt=fmt_points,
            when=lambda value: when(value, zone),
            course_name=course_name,
            name=lambda text: shown(text or "", MAX_SHORT),
            status_label=lambda status: t(STATUS_LABELS.get(str(status), str(status)), lang),
            title_of=lambda ex: exercise_title(ex, lang),
            link=lambda path: path + suffix,
            quoted=lambda part: quote(str(part), safe=""),
            **context,
        )
    )


# -- the imperative shell: requests and responses ----------------------------------------------


def secured(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def html_page(html: str, status: int = 200) -> Response:
    return secured(HTMLResponse(html, status_code=status))


def see(url: str) -> Response:
    return secured(RedirectResponse(url, status_code=303))


def service_of(request: Request):
    return request.app.state.service


def signing_key(request: Request) -> bytes:
    """The server's session secret, read from the gradebook once per app."""
    state = request.app.state
    key = getattr(state, "session_key", None)
    if key is None:
        from grader.store.accounts import secret

        key = state.session_key = secret(service_of(request).gradebook)
    return key


def now(request: Request) -> float:
    return service_of(request).clock().timestamp()


def account_of(request: Request):
    """The account of the request's session cookie, or None (no cookie, tampered, expired, or
    its token revoked). The API reads it too, for GET only (grader/service/app.py)."""
    record = read_session(signing_key(request), request.cookies.get(SESSION_COOKIE), now(request))
    return None if record is None else live_account(service_of(request).gradebook, record)


def live_account(gradebook, record: SessionRecord):
    """The account a session names, while the token it was opened with stands: the same account
    row (one token each), not revoked, its hash starting with the session's digits, and not
    signed out since (the row's session epoch is the session's)."""
    from sqlalchemy import select

    from grader.store.accounts import Account
    from grader.store.schema import AccountRow, Learner

    with gradebook.sessions() as s:
        found = s.execute(
            select(AccountRow, Learner)
            .join(Learner, AccountRow.learner_id == Learner.id)
            .where(AccountRow.id == record.account)
        ).first()
    if found is None:
        return None
    row, who = found
    if row.revoked_at is not None or not _same(row.token_hash[:TOKEN_PREFIX_CHARS], record.token):
        return None
    if row.session_epoch != record.epoch:
        return None
    return Account(id=row.id, learner=who.key, name=who.name, role=row.role, session_epoch=row.session_epoch)


def lang_of(request: Request) -> str:
    return choose_lang(request.query_params.get("lang"), request.headers.get("accept-language"))


def chrome(request: Request) -> dict:
    """What every template of a request needs: its language, whether links keep it, and the
    course's clock and name (course.toml)."""
    policy = service_of(request).policy
    return {
        "lang": lang_of(request),
        "keep_lang": "lang" in request.query_params,
        "zone": policy.zone,
        "course_name": policy.name,
    }


def cookie_args(request: Request) -> dict:
    return dict(httponly=True, samesite="strict", path="/", secure=request.url.scheme == "https")


def session_csrf(request: Request) -> str:
    """The CSRF token of every form of a signed-in page (sign out, count this submission)."""
    return csrf_token(signing_key(request), "session", request.cookies.get(SESSION_COOKIE, ""))


def session_form_ok(request: Request, form: dict[str, str] | None) -> bool:
    cookie = request.cookies.get(SESSION_COOKIE)
    return (
        form is not None
        and from_here(request)
        and csrf_ok(signing_key(request), "session", cookie, form.get("csrf"))
    )


def bar(request: Request, account) -> Markup:
    """The site's bar: home, who is signed in, the languages, sign out."""
    return Markup(
        render_page(
            "_bar.html.j2",
            **chrome(request),
            account=account,
            csrf=session_csrf(request),
        )
    )


def rendered(request: Request, account, template: str, **context) -> str:
    return render_page(template, **chrome(request), bar=bar(request, account), account=account, **context)


def page(request: Request, account, template: str, status: int = 200, **context) -> Response:
    return html_page(rendered(request, account, template, **context), status)


def not_found(request: Request, account) -> Response:
    """One page for every id that is missing or not the caller's: nothing tells them apart."""
    return page(
        request, account, "message.html.j2", 404, heading=N_("Not found"), text=N_("There is no such page.")
    )


def forbidden(
    request: Request, account, text: str = N_("This page is for the course's instructors.")
) -> Response:
    return page(request, account, "message.html.j2", 403, heading=N_("Not allowed"), text=text)


def sign_in_page(request: Request, status: int = 200, error: str | None = None) -> Response:
    """The sign-in form, with a fresh login nonce cookie when there is none yet."""
    nonce = request.cookies.get(LOGIN_COOKIE)
    if not nonce or len(nonce) > 64:
        nonce = secrets.token_urlsafe(16)
    from grader.store.accounts import TOKEN_CHARS

    csrf = csrf_token(signing_key(request), "login", nonce)
    response = page(request, None, "signin.html.j2", status, csrf=csrf, error=error, token_chars=TOKEN_CHARS)
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=SESSION_SECONDS, **cookie_args(request))
    if request.cookies.get(SESSION_COOKIE) is not None:
        response.delete_cookie(SESSION_COOKIE, **cookie_args(request))  # tampered, expired or revoked
    return response


async def form_of(request: Request) -> dict[str, str] | None:
    """The fields of a url-encoded form within REQUEST_BYTES (None: larger than that)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > REQUEST_BYTES:
            return None
    try:
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=FORM_FIELDS, keep_blank_values=True)
    except ValueError:  # more fields than any form of ours has: none is read
        return {}
    return {k: v[0] for k, v in fields.items()}


def from_here(request: Request) -> bool:
    return same_origin(
        request.headers.get("origin"), request.headers.get("referer"), request.headers.get("host")
    )


def refused(request: Request) -> Response:
    return page(
        request,
        None,
        "message.html.j2",
        403,
        heading=N_("Not allowed"),
        text=N_("The form was not sent from this site's own page. Go back, reload it and try again."),
    )


def student_home(request: Request, account) -> Response:
    """The learner's exercises and their newest HOME_SUBMISSIONS submissions (`grader history EX`
    lists every one): the page costs the same whatever they have sent."""
    service = service_of(request)
    status = service.status(account)
    newest = service.submissions(account, limit=HOME_SUBMISSIONS, newest_first=True)
    return page(
        request, account, "learner.html.j2", status=200, exercises=status, submissions=newest["items"]
    )


def instructor_home(request: Request, account) -> Response:
    service = service_of(request)
    exercises = [(ex, service.class_grades(ex)) for ex in sorted(service.exercises)]
    return page(request, account, "instructor.html.j2", exercises=exercises)


@router.get("/", include_in_schema=False)
def home(request: Request) -> Response:
    account = account_of(request)
    if account is None:
        return sign_in_page(request)
    if account.role == "instructor":
        return instructor_home(request, account)
    return student_home(request, account)


# The POST routes are async only to read their form; the rest (the gradebook, rendering) runs in
# the thread pool as the GET routes do, so a slow database never stalls the event loop.


@router.post("/login", include_in_schema=False)
async def login(request: Request) -> Response:
    return await run_in_threadpool(sign_in, request, await form_of(request))


def sign_in(request: Request, form: dict[str, str] | None) -> Response:
    if form is None:
        return page(
            request,
            None,
            "message.html.j2",
            413,
            heading=N_("Too large"),
            text=N_("The form was larger than the server takes."),
        )
    key = signing_key(request)
    if not from_here(request) or not csrf_ok(
        key, "login", request.cookies.get(LOGIN_COOKIE), form.get("csrf")
    ):
        return refused(request)
    token = form.get("token", "").strip()
    account = service_of(request).authenticate(token) if token else None
    if account is None:
        # one message and status for an unknown, revoked or empty token: nothing to probe
        return sign_in_page(request, 401, N_("That token is not valid. Check it and try again."))
    record = SessionRecord(
        account.id, token_fingerprint(token), int(now(request)) + SESSION_SECONDS, account.session_epoch
    )
    response = see("/")
    response.set_cookie(
        SESSION_COOKIE, sign_session(key, record), max_age=SESSION_SECONDS, **cookie_args(request)
    )
    response.delete_cookie(LOGIN_COOKIE, **cookie_args(request))
    return response


@router.post("/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    return await run_in_threadpool(sign_out, request, await form_of(request))


def sign_out(request: Request, form: dict[str, str] | None) -> Response:
    if not session_form_ok(request, form):
        return refused(request)
    record = read_session(signing_key(request), request.cookies.get(SESSION_COOKIE), now(request))
    if record is not None:  # a copy of the cookie (another tab, a thief) is refused from now on
        from grader.store.accounts import end_sessions

        end_sessions(service_of(request).gradebook, record.account)
    response = see("/")
    response.delete_cookie(SESSION_COOKIE, **cookie_args(request))
    return response


@router.get("/submissions/{upload_id}", include_in_schema=False)
def submission_page(request: Request, upload_id: str) -> Response:
    account = account_of(request)
    if account is None:
        return see("/")
    if not (upload_id.isascii() and upload_id.isdigit()) or len(upload_id) > ID_DIGITS:
        return not_found(request, account)
    service = service_of(request)
    submission = service.submission(account, int(upload_id))
    if submission is None:
        return not_found(request, account)
    grade = service.visible_grade(account, int(upload_id))
    can_choose = (
        submission["learner"] == account.learner
        and submission["status"] == "graded"
        and service.policy.exercise(submission["exercise"]).counts == "chosen"
    )
    context = dict(s=submission, can_choose=can_choose, csrf=session_csrf(request))
    if grade is None:  # queued, grading, or failed on the server's side
        return page(request, account, "pending.html.j2", **context)
    from reports import render

    report = render(grade, "html", lang_of(request), learner=account.role != "instructor")
    return html_page(with_bar(report, rendered(request, account, "_report_top.html.j2", **context)))


@router.post("/submissions/{upload_id}/choose", include_in_schema=False)
async def choose(request: Request, upload_id: str) -> Response:
    return await run_in_threadpool(count_this, request, upload_id, await form_of(request))


def count_this(request: Request, upload_id: str, form: dict[str, str] | None) -> Response:
    """Count this upload (an exercise whose policy counts the one its learner chose)."""
    account = account_of(request)
    if account is None or not session_form_ok(request, form):
        return refused(request)
    if not (upload_id.isascii() and upload_id.isdigit()) or len(upload_id) > ID_DIGITS:
        return not_found(request, account)
    service = service_of(request)
    submission = service.submission(account, int(upload_id))
    if submission is None or submission["learner"] != account.learner:
        return not_found(request, account)  # an instructor chooses for nobody
    service.choose(account, int(upload_id))
    return see(f"/submissions/{int(upload_id)}")


@router.get("/class/{exercise}", include_in_schema=False)
def class_page(request: Request, exercise: str) -> Response:
    account = account_of(request)
    if account is None:
        return see("/")
    if account.role != "instructor":
        return forbidden(request, account)
    service = service_of(request)
    if exercise not in service.exercises:
        return not_found(request, account)
    from reports.class_report import render_class_html

    rows = service.class_grades(exercise)
    grades = []
    for row in rows:
        if row.get("submission") is None:
            continue
        grade = service.visible_grade(account, row["submission"])
        if grade is not None:
            grades.append(grade.model_copy(update={"student": row["learner"]}))
    report = render_class_html(grades, lang_of(request))
    top = rendered(request, account, "_class_top.html.j2", exercise=exercise, rows=rows)
    return html_page(with_bar(report, top))


@router.get("/class/{exercise}/{learner:path}", include_in_schema=False)  # an id may hold a "/"
def learner_page(request: Request, exercise: str, learner: str) -> Response:
    account = account_of(request)
    if account is None:
        return see("/")
    if account.role != "instructor":
        return forbidden(request, account)
    service = service_of(request)
    if exercise not in service.exercises:
        return not_found(request, account)
    # one learner's of one exercise: SUBMISSIONS_PER_EXERCISE at most, the newest page of them
    submissions = service.submissions(
        account, exercise=exercise, learner=learner, limit=SUBMISSIONS_PAGE_MAX, newest_first=True
    )["items"]
    return page(
        request,
        account,
        "learner_grades.html.j2",
        exercise=exercise,
        learner=learner,
        submissions=submissions,
    )
