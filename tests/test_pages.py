"""The browser pages of the grading server (grader/service/pages.py), on a bare FastAPI app.

The pages call only the Service methods of the contract; here a small `PagesService` stands in
for the real one: real accounts in a real gradebook (grader.store.accounts: tokens, revocation,
the session secret) and canned uploads whose grades are real ones, `grader grade --format json`
of the day45-attention solution and of its no-causal-mask mutant. tests/test_service*.py run the
same pages on the real Service.
"""

from __future__ import annotations

import re
import tempfile
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
import grade_store
from conftest import EXERCISES
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.catalog.exercises import load_exercise
from grader.limits import REQUEST_BYTES, SESSION_SECONDS
from grader.models import Grade
from grader.catalog.mutants import apply_mutant, load_mutants
from grader.service import pages
from grader.service.pages import (
    SECURITY_HEADERS,
    SESSION_COOKIE,
    SessionRecord,
    choose_lang,
    read_session,
    same_origin,
    sign_session,
)
from grader.policy.course import CoursePolicy
from grader.store import accounts
from grader.store.gradebook import Gradebook

EXERCISE = "day45-attention"
EVIL = "<script>alert('id')</script>"
EVIL_NAME = "<script>alert('name')</script><img src=https://evil.example/x.png>"
T0 = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)


# -- real grades --------------------------------------------------------------------------------


@cache
def solution_grade() -> Grade:
    code, data = grade_store.shared().cli_json(EXERCISE, EXERCISES / EXERCISE / "solution")
    assert code == 0
    return Grade.model_validate(data)


@cache
def mutant_grade() -> Grade:
    mutant = next(m for m in load_mutants() if m.id == "no-causal-mask")
    with tempfile.TemporaryDirectory() as tmp:
        code, data = grade_store.shared().cli_json(
            EXERCISE, apply_mutant(mutant, EXERCISE, Path(tmp) / "sub")
        )
    assert code == 1
    return Grade.model_validate(data)


# -- the stand-in Service -----------------------------------------------------------------------


def upload(id, learner, grade: Grade | None, status="graded", minutes=0.0, counted=False):
    return {
        "id": id,
        "exercise": EXERCISE,
        "learner": learner,
        "status": status,
        "received_at": (T0 + timedelta(minutes=id)).isoformat(),
        "digest": f"{id:064x}",
        "files": [{"name": "attention.py", "size": 1234}],
        "late": {
            "minutes": minutes,
            "days": int(minutes // 1440) + (minutes > 0),
            "penalty": 0.1 * (minutes > 0),
        },
        "late_days_spent": 0,
        "counted": counted,
        "score": grade.score if grade else None,
        "max_score": grade.max_score if grade else None,
        "passed": grade.passed if grade else None,
        "grade": None,
    }


class PagesService:
    """The contract's Service methods over canned uploads; accounts are the gradebook's own."""

    def __init__(self, gradebook: Gradebook):
        self.gradebook = gradebook
        self.now = T0
        self.clock = lambda: self.now
        self.exercises = {EXERCISE: load_exercise(EXERCISE)}
        self.policy = CoursePolicy.model_validate(
            {"name": "LLM <from> scratch", "timezone": "Asia/Taipei", "exercises": {EXERCISE: {"counts": "chosen"}}}
        )
        self.grades: dict[int, Grade] = {}
        self.uploads: dict[int, dict] = {}

    def add(self, id, learner, grade, **kw):
        self.uploads[id] = upload(id, learner, grade, **kw)
        if grade is not None:
            self.grades[id] = grade

    def authenticate(self, token):
        return accounts.authenticate(self.gradebook, token)

    def _mine(self, account, upload_id):
        found = self.uploads.get(upload_id)
        if found is None or (account.role != "instructor" and found["learner"] != account.learner):
            return None
        return found

    def submission(self, account, upload_id):
        return self._mine(account, upload_id)

    def submissions(self, account, exercise=None, learner=None, *, limit=50, cursor=None, newest_first=False):
        """One page, as Service.submissions answers (the stand-in has only a few)."""
        who = learner if account.role == "instructor" else account.learner
        items = [
            u
            for u in self.uploads.values()
            if (who is None or u["learner"] == who) and exercise in (None, u["exercise"])
        ]
        return {"items": (items[::-1] if newest_first else items)[:limit], "next": None}

    def choose(self, account, upload_id):
        chosen = self.uploads[upload_id]
        for u in self.uploads.values():
            if u["learner"] == chosen["learner"] and u["exercise"] == chosen["exercise"]:
                u["counted"] = u is chosen
        return chosen

    def visible_grade(self, account, upload_id):
        found = self._mine(account, upload_id)
        if found is None or found["status"] != "graded":
            return None
        return self.grades[upload_id].model_copy(update={"student": found["learner"]})

    def status(self, account, exercise=None):
        mine = self.submissions(account, EXERCISE)["items"]
        counted = next((u for u in mine if u["counted"]), None)
        return [
            {
                "exercise": EXERCISE,
                "deadlines": {"opens": None, "due": "2026-11-08T15:59:00+00:00", "closes": None},  # the API's UTC
                "submissions": len(mine),
                "counted": counted["id"] if counted else None,
                "score": counted["score"] if counted else None,
                "max_score": counted["max_score"] if counted else None,
                "tokens_left": 3,
                "next_submission_at": None,
            }
        ]

    def class_grades(self, exercise):
        rows = []
        for learner, name in (("alice", "Alice"), ("bob", None), (EVIL, EVIL_NAME)):
            mine = [u for u in self.uploads.values() if u["learner"] == learner]
            counted = next((u for u in mine if u["counted"]), None)
            rows.append(
                {
                    "learner": learner,
                    "name": name,
                    "submission": counted and counted["id"],
                    "score": counted and counted["score"],
                    "max_score": counted and counted["max_score"],
                    "late": counted and counted["late"],
                }
            )
        return rows


@pytest.fixture
def course(tmp_path):
    """A gradebook with alice, bob, a learner whose id and name are markup, and an instructor;
    the stand-in service; a client of the pages on a bare app."""
    gradebook = Gradebook(str(tmp_path / "gradebook.sqlite"))
    service = PagesService(gradebook)
    tokens = {
        "alice": accounts.issue_token(gradebook, "alice", name="Alice"),
        "bob": accounts.issue_token(gradebook, "bob"),
        "evil": accounts.issue_token(gradebook, EVIL, name=EVIL_NAME),
        "prof": accounts.issue_token(gradebook, "prof", role="instructor", name="Prof"),
    }
    service.add(1, "alice", solution_grade(), counted=True)
    service.add(2, "alice", mutant_grade(), minutes=90.0)
    service.add(3, "bob", mutant_grade(), counted=True)
    service.add(4, EVIL, solution_grade(), counted=True)
    service.add(5, "alice", None, status="queued")
    app = FastAPI()
    app.include_router(pages.router)
    app.state.service = service
    yield SimpleNamespace(
        app=app,
        service=service,
        tokens=tokens,
        gradebook=gradebook,
        client=lambda **kw: TestClient(app, follow_redirects=False, **kw),
    )
    gradebook.close()


def form_csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def sign_in(client, token, **headers):
    """GET the form, POST it back with its CSRF token: the response of POST /login."""
    form = client.get("/")
    return client.post("/login", data={"csrf": form_csrf(form.text), "token": token}, headers=headers)


def signed_in(course, who):
    client = course.client()
    assert sign_in(client, course.tokens[who]).status_code == 303
    return client


def set_cookies(response) -> dict[str, str]:
    return {h.split("=", 1)[0]: h for h in response.headers.get_list("set-cookie")}


# -- signing in and out -------------------------------------------------------------------------


def test_the_sign_in_form_when_not_signed_in(course):
    page = course.client().get("/")
    assert page.status_code == 200
    assert '<form class="signin" method="post" action="/login">' in page.text
    assert 'name="token" type="password"' in page.text and form_csrf(page.text)
    assert SESSION_COOKIE not in set_cookies(page)
    for name, value in SECURITY_HEADERS.items():
        assert page.headers[name] == value
    assert (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'"
        in (page.headers["content-security-policy"])
    )


def test_signing_in_sets_a_strict_http_only_session_cookie(course):
    client = course.client()
    response = sign_in(client, course.tokens["alice"])
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = set_cookies(response)[SESSION_COOKIE]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert f"Max-Age={SESSION_SECONDS}" in cookie and "Secure" not in cookie
    home = client.get("/")
    assert home.status_code == 200 and "/submissions/1" in home.text and 'action="/login"' not in home.text


def test_over_https_the_cookie_is_secure(course):
    client = course.client(base_url="https://testserver")
    cookie = set_cookies(sign_in(client, course.tokens["alice"]))[SESSION_COOKIE]
    assert "Secure" in cookie


def test_a_wrong_token_is_the_form_again_with_one_message_and_no_cookie(course):
    accounts.revoke_tokens(course.gradebook, "bob")
    client = course.client()
    bodies = []
    for token in ("not-a-token", course.tokens["bob"], course.tokens["alice"] + "x", "x" * 5000):
        response = sign_in(client, token)
        assert response.status_code == 401
        assert SESSION_COOKIE not in set_cookies(response)
        assert "That token is not valid. Check it and try again." in response.text
        bodies.append(response.text)
    assert len(set(bodies)) == 1  # unknown, revoked, near miss, junk: nothing tells them apart
    assert 'action="/login"' in bodies[0]


def test_signing_out_ends_the_session(course):
    client = signed_in(course, "alice")
    home = client.get("/")
    response = client.post("/logout", data={"csrf": form_csrf(home.text)})
    assert response.status_code == 303
    assert 'Max-Age=0' in set_cookies(response)[SESSION_COOKIE]
    assert 'action="/login"' in client.get("/").text
    assert client.get("/submissions/1").status_code == 303


def tamper(cookie: str, key: bytes) -> list[str]:
    """The cookie changed in every way a visitor could: a byte, the payload, the signature, a
    payload signed by another server's key."""
    payload, signature = cookie.split(".")
    other = pages._b64(b'[1, "0000000000000000", 9999999999]')
    flip = lambda s, i: s[:i] + ("A" if s[i] != "A" else "B") + s[i + 1 :]  # noqa: E731
    return [
        flip(cookie, 0),
        flip(cookie, len(payload) - 1),
        flip(cookie, len(cookie) - 1),
        f"{other}.{signature}",
        payload,
        "",
        cookie + "." + signature,
        f"{payload}.{signature[:-2]}",
        sign_session(b"another server's key", read_session(key, cookie, T0.timestamp())),
    ]


def test_a_tampered_cookie_is_signed_out(course):
    client = signed_in(course, "alice")
    cookie = client.cookies[SESSION_COOKIE]
    key = pages.signing_key(SimpleNamespace(app=course.app))
    assert read_session(key, cookie, T0.timestamp()) is not None
    for forged in tamper(cookie, key):
        fresh = course.client()
        fresh.cookies.set(SESSION_COOKIE, forged)
        home = fresh.get("/")
        assert home.status_code == 200 and 'action="/login"' in home.text, forged
        assert "Max-Age=0" in set_cookies(home)[SESSION_COOKIE]  # the bad cookie is cleared
        assert fresh.get("/submissions/1").status_code == 303


def test_an_expired_session_is_signed_out(course):
    client = signed_in(course, "alice")
    course.service.now = T0 + timedelta(seconds=SESSION_SECONDS - 1)
    assert "/submissions/1" in client.get("/").text
    course.service.now = T0 + timedelta(seconds=SESSION_SECONDS + 1)
    assert 'action="/login"' in client.get("/").text


def test_revoking_the_token_ends_the_session(course):
    client = signed_in(course, "alice")
    assert client.get("/submissions/1").status_code == 200
    assert accounts.revoke_tokens(course.gradebook, "alice") == 1
    assert client.get("/submissions/1").status_code == 303
    assert 'action="/login"' in client.get("/").text
    # a new token for alice is a new account row: the old session stays ended
    accounts.issue_token(course.gradebook, "alice")
    assert 'action="/login"' in client.get("/").text


# -- CSRF ---------------------------------------------------------------------------------------


def test_login_without_its_csrf_token_is_refused(course):
    client = course.client()
    client.get("/")
    token = course.tokens["alice"]
    assert client.post("/login", data={"token": token}).status_code == 403
    assert client.post("/login", data={"token": token, "csrf": "x" * 43}).status_code == 403
    stranger = course.client()  # a token from another browser's form: no matching cookie
    their_csrf = form_csrf(client.get("/").text)
    assert stranger.post("/login", data={"token": token, "csrf": their_csrf}).status_code == 403
    response = sign_in(course.client(), token, origin="https://evil.example")
    assert response.status_code == 403 and SESSION_COOKIE not in set_cookies(response)
    assert sign_in(course.client(), token, referer="https://evil.example/form").status_code == 403
    assert sign_in(course.client(), token, origin="null").status_code == 403
    assert sign_in(course.client(), token, origin="http://testserver").status_code == 303


def test_logout_without_its_csrf_token_is_refused(course):
    client = signed_in(course, "alice")
    assert client.post("/logout", data={}).status_code == 403
    assert client.post("/logout", data={"csrf": "forged"}).status_code == 403
    home = client.get("/")
    csrf = form_csrf(home.text)
    elsewhere = {"origin": "https://evil.example"}
    assert client.post("/logout", data={"csrf": csrf}, headers=elsewhere).status_code == 403
    assert client.get("/submissions/1").status_code == 200  # still signed in
    other = signed_in(course, "bob")  # bob's form's token is not alice's
    assert client.post("/logout", data={"csrf": form_csrf(other.get("/").text)}).status_code == 403


def test_an_oversized_form_is_refused(course):
    client = course.client()
    csrf = form_csrf(client.get("/").text)
    response = client.post("/login", data={"csrf": csrf, "token": "x" * (REQUEST_BYTES + 1)})
    assert response.status_code == 413


# -- what a learner sees ------------------------------------------------------------------------


def test_a_learners_home_lists_their_exercises_and_submissions(course):
    home = signed_in(course, "alice").get("/")
    assert home.status_code == 200
    links = set(re.findall(r'href="(/submissions/\d+)"', home.text))
    assert links == {"/submissions/1", "/submissions/2", "/submissions/5"}
    assert "Scaled dot-product attention" in home.text or EXERCISE in home.text
    # the course's clock (timezone = "Asia/Taipei") for the API's UTC time, and the course's name
    assert "2026-11-08 23:59 +08:00" in home.text and "15:59" not in home.text and " UTC" not in home.text
    assert "LLM &lt;from&gt; scratch</a>" in home.text
    received = (T0 + timedelta(minutes=1)).astimezone(ZoneInfo("Asia/Taipei")).strftime("%Y-%m-%d %H:%M +08:00")
    assert received in home.text  # a submission's time too
    assert "35 / 35" in home.text and "queued" in home.text


def test_a_learners_report_is_the_html_report_of_the_visible_view(course):
    client = signed_in(course, "alice")
    page = client.get("/submissions/2")
    assert page.status_code == 200
    assert 'class="site-bar"' in page.text and 'id="checks"' in page.text
    assert 'data-mutant="no-causal-mask"' in page.text or "future" in page.text
    for check in mutant_grade().checks:
        assert f'data-check="{check.id}"' in page.text
    assert '<html lang="en">' in page.text
    zh = client.get("/submissions/2?lang=zh-TW")
    assert '<html lang="zh-Hant-TW">' in zh.text and "登出" in zh.text
    assert 'href="/?lang=zh-TW"' in zh.text  # the links keep the language
    accept = client.get("/submissions/2", headers={"accept-language": "zh-TW,zh;q=0.9,en;q=0.8"})
    assert '<html lang="zh-Hant-TW">' in accept.text
    french = client.get("/submissions/2", headers={"accept-language": "fr, en;q=0.5"})
    assert '<html lang="en">' in french.text


def test_a_submission_not_graded_yet_says_so(course):
    page = signed_in(course, "alice").get("/submissions/5")
    assert page.status_code == 200 and 'data-status="queued"' in page.text and 'id="checks"' not in page.text


def test_a_learner_counts_the_submission_they_choose(course):
    client = signed_in(course, "alice")
    page = client.get("/submissions/2")
    assert 'action="/submissions/2/choose"' in page.text
    assert 'action="/submissions/1/choose"' not in client.get("/submissions/1").text  # counted already
    assert 'action="/submissions/5/choose"' not in client.get("/submissions/5").text  # not graded
    csrf = form_csrf(page.text)
    assert client.post("/submissions/2/choose", data={}).status_code == 403
    assert (
        client.post(
            "/submissions/2/choose", data={"csrf": csrf}, headers={"origin": "https://evil.example"}
        ).status_code
        == 403
    )
    assert not course.service.uploads[2]["counted"]
    bob = signed_in(course, "bob")
    bobs = form_csrf(bob.get("/").text)
    assert bob.post("/submissions/2/choose", data={"csrf": bobs}).status_code == 404  # not his
    prof = signed_in(course, "prof")
    assert 'action="/submissions/2/choose"' not in prof.get("/submissions/2").text
    assert prof.post("/submissions/2/choose", data={"csrf": form_csrf(prof.get("/").text)}).status_code == 404
    assert not course.service.uploads[2]["counted"]
    response = client.post("/submissions/2/choose", data={"csrf": csrf})
    assert response.status_code == 303 and response.headers["location"] == "/submissions/2"
    assert course.service.uploads[2]["counted"] and not course.service.uploads[1]["counted"]


def test_another_learners_submission_is_the_same_404_as_a_missing_one(course):
    client = signed_in(course, "bob")
    assert client.get("/submissions/3").status_code == 200
    missing = client.get("/submissions/999")
    assert missing.status_code == 404
    for other in (
        "/submissions/1",
        "/submissions/2",
        "/submissions/5",
        "/submissions/4",
        "/submissions/x",
        "/submissions/-1",
        "/submissions/99999999999999999999999",
        "/submissions/%C2%B2",
        "/submissions/%EF%BC%91",
    ):  # ² and a full-width 1: str.isdigit says yes
        response = client.get(other)
        assert (response.status_code, response.text) == (404, missing.text), other


def test_a_student_on_an_instructor_page_is_refused(course):
    client = signed_in(course, "alice")
    for path in (f"/class/{EXERCISE}", f"/class/{EXERCISE}/bob", "/class/nope", "/class/nope/bob"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert "bob" not in response.text.replace("/class/nope/bob", "")


def test_not_signed_in_the_pages_send_you_to_sign_in(course):
    client = course.client()
    for path in ("/submissions/1", f"/class/{EXERCISE}", f"/class/{EXERCISE}/alice"):
        response = client.get(path)
        assert response.status_code == 303 and response.headers["location"] == "/"


# -- what an instructor sees --------------------------------------------------------------------


def test_an_instructors_home_links_the_class_report_and_each_learner(course):
    home = signed_in(course, "prof").get("/")
    assert home.status_code == 200
    assert f'href="/class/{EXERCISE}"' in home.text
    assert f'href="/class/{EXERCISE}/alice"' in home.text and f'href="/class/{EXERCISE}/bob"' in home.text
    assert "instructor" in home.text


def test_the_class_report_and_a_learners_grades(course):
    client = signed_in(course, "prof")
    report = client.get(f"/class/{EXERCISE}")
    assert report.status_code == 200
    assert 'data-stat="submissions" data-value="3"' in report.text  # alice, bob, evil counted
    assert 'data-stat="passed" data-value="2"' in report.text
    assert report.text.count('class="submission"') == 3
    alice = client.get(f"/class/{EXERCISE}/alice")
    assert alice.status_code == 200
    assert set(re.findall(r'href="(/submissions/\d+)"', alice.text)) == {
        "/submissions/1",
        "/submissions/2",
        "/submissions/5",
    }
    assert client.get("/submissions/3").status_code == 200  # an instructor sees the class
    assert client.get("/class/no-such-exercise").status_code == 404


# -- escaping and self-containment --------------------------------------------------------------


def every_page(course) -> dict[str, str]:
    pages_seen = {"/ (signed out)": course.client().get("/").text}
    learner, prof = signed_in(course, "evil"), signed_in(course, "prof")
    for path in ("/", "/submissions/4", "/submissions/4?lang=zh-TW", "/submissions/999"):
        pages_seen[f"{path} (learner)"] = learner.get(path).text
    pages_seen["/class (learner)"] = learner.get(f"/class/{EXERCISE}").text
    evil = pages.quote(EVIL, safe="")
    for path in ("/", f"/class/{EXERCISE}", f"/class/{EXERCISE}/{evil}", "/submissions/4", "/submissions/5"):
        response = prof.get(path)
        assert response.status_code == 200, path
        pages_seen[f"{path} (instructor)"] = response.text
    return pages_seen


def test_a_learner_id_or_name_with_markup_is_shown_as_text(course):
    seen = every_page(course)
    for where, html in seen.items():
        assert "<script" not in html.lower(), where
        assert "evil.example" not in html or "&lt;img src=https://evil.example" in html, where
    assert "&lt;script&gt;alert(&#39;id&#39;)&lt;/script&gt;" in seen["/ (instructor)"]
    assert "&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;" in seen["/ (instructor)"]
    assert "&lt;script&gt;alert(&#39;id&#39;)&lt;/script&gt;" in seen["/ (learner)"]  # signed in as ...


class Tags(HTMLParser):
    """Every tag of a page and its attributes, as a browser's parser sees them."""

    def __init__(self, html: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def test_every_page_is_self_contained(course):
    for where, html in every_page(course).items():
        tags = Tags(html).tags
        fetching = {"script", "link", "iframe", "object", "embed", "base", "img", "audio", "video"}
        assert {tag for tag, _ in tags} & fetching == set(), where
        for tag, attrs in tags:
            for attr in ("src", "href", "action", "srcset", "data", "poster", "formaction", "xlink:href"):
                url = attrs.get(attr, "").strip().lower()
                assert not re.match(r"(https?:)?//|javascript:|data:text", url), (where, tag, attr, url)
            assert not any(a.startswith("on") for a in attrs), (where, tag, attrs)
        assert not re.search(r"(?i)url\(\s*['\"]?\s*(https?:)?//", html), where
        assert "@import" not in html, where
        assert any(tag == "style" for tag, _ in tags), where  # its CSS is inline


def test_every_response_carries_the_security_headers(course):
    learner = signed_in(course, "alice")
    for response in (
        learner.get("/"),
        learner.get("/submissions/1"),
        learner.get("/submissions/999"),
        learner.get(f"/class/{EXERCISE}"),
        course.client().get("/submissions/1"),
        learner.post("/logout", data={}),
    ):
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["content-security-policy"] == SECURITY_HEADERS["Content-Security-Policy"]
        assert response.headers["cache-control"] == "no-store"


# -- the pure core ------------------------------------------------------------------------------


def test_a_session_record_round_trips_until_it_expires():
    key = b"k" * 32
    record = SessionRecord(7, "0123456789abcdef", 1000)
    cookie = sign_session(key, record)
    assert read_session(key, cookie, 999) == record
    assert read_session(key, cookie, 1000) is None
    assert read_session(b"j" * 32, cookie, 999) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=0, max_value=400))
def test_no_altered_cookie_is_read(junk, at):
    key = b"k" * 32
    cookie = sign_session(key, SessionRecord(7, "0123456789abcdef", 10**10))
    altered = cookie[: at % (len(cookie) + 1)] + junk + cookie[at % (len(cookie) + 1) + len(junk) :]
    if altered != cookie:
        assert read_session(key, altered, 0) is None
    assert read_session(key, junk, 0) is None


def test_origin_checks():
    assert same_origin(None, None, "a:8000")
    assert same_origin("http://a:8000", None, "a:8000")
    assert same_origin(None, "http://a:8000/x?y", "A:8000")
    assert not same_origin("http://b:8000", "http://a:8000/", "a:8000")
    assert not same_origin("null", None, "a:8000")
    assert not same_origin("http://a:8000", None, None)


def test_the_language_of_a_request():
    assert choose_lang("zh-TW", "en") == "zh-TW"
    assert choose_lang(None, "zh-TW,zh;q=0.9") == "zh-TW"
    assert choose_lang(None, "en-US,en;q=0.9,zh-TW;q=0.8") == "en"
    assert choose_lang(None, "fr-FR, zh;q=0.5") == "zh-TW"
    assert choose_lang(None, "de, fr;q=0.9") == "en"
    assert choose_lang(None, "zh;q=abc, en;q=0.1") == "en"
    assert choose_lang(None, None) == "en"
