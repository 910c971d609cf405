"""The browser pages on the real server: `create_app(Service.open(...))`, its gradebook, queue
and course policy, with real grades recorded through the queue (lease, complete) as the
dispatcher records them, so no jail runs here (tests/test_service.py grades through it).

The course makes day45-attention's causal-attention-has-no-future-leak check `after_due`, due
tomorrow on the service's clock: alice's page of her no-causal-mask upload shows that check's
title and verdict and not what it found; the instructor's shows everything.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from test_pages import EVIL, EXERCISE, form_csrf, mutant_grade, solution_grade

from grader.service.app import create_app
from grader.service.pages import SESSION_COOKIE
from grader.service.service import Service
from grader.store.accounts import issue_token, revoke_tokens
from grader.store.gradebook import Incoming, Outcome

NOW = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)
HIDDEN = "causal-attention-has-no-future-leak"


def course_toml() -> str:
    stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    return f"""
[exercises.{EXERCISE}]
opens = {stamp(NOW - timedelta(days=1))}
due = {stamp(NOW + timedelta(days=1))}
[exercises.{EXERCISE}.visibility.checks]
{HIDDEN} = "after_due"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages-service")
    (root / "course.toml").write_text(course_toml(), encoding="utf-8")
    service = Service.open(str(root / "gradebook.sqlite"), root / "course.toml", clock=lambda: NOW)
    tokens = {who: issue_token(service.gradebook, who) for who in ("alice", "bob", EVIL)}
    tokens["prof"] = issue_token(service.gradebook, "prof", role="instructor")
    uploads = {}
    for key, learner, text, grade in (
        ("alice-mutant", "alice", b"# the mutant\n", mutant_grade()),
        ("alice-solution", "alice", b"# the solution\n", solution_grade()),
        ("bob-mutant", "bob", b"# bob's mutant\n", mutant_grade()),
        ("evil", EVIL, b"# evil's\n", solution_grade()),
    ):
        upload = service.queue.submit(
            learner, EXERCISE, service.versions[EXERCISE],
            Incoming(learner, {"attention.py": text}), received_at=NOW - timedelta(hours=1),
        )
        (lease,) = service.queue.lease()
        assert service.queue.complete(lease, Outcome("graded", grade)) is not None
        uploads[key] = upload.id
    app = create_app(service)
    yield app, tokens, uploads, service
    service.close()


def signed_in(app, token) -> TestClient:
    client = TestClient(app, follow_redirects=False)
    form = client.get("/")
    response = client.post("/login", data={"csrf": form_csrf(form.text), "token": token})
    assert response.status_code == 303, response.text[:500]
    return client


def hidden_message() -> str:
    check = next(c for c in mutant_grade().checks if c.id == HIDDEN)
    assert not check.passed and check.message
    return html.escape(check.message[:40], quote=True)


def test_a_learner_sees_their_uploads_and_the_visible_view_of_each(server):
    app, tokens, uploads, _ = server
    alice = signed_in(app, tokens["alice"])
    home = alice.get("/")
    assert home.status_code == 200
    assert set(re.findall(r'href="/submissions/(\d+)"', home.text)) == {
        str(uploads["alice-mutant"]), str(uploads["alice-solution"])}
    page = alice.get(f"/submissions/{uploads['alice-mutant']}")
    assert page.status_code == 200 and f'data-check="{HIDDEN}"' in page.text
    assert hidden_message() not in page.text              # after_due: title and verdict only
    assert "/choose" not in page.text                     # the course counts the last on time
    prof = signed_in(app, tokens["prof"])
    assert hidden_message() in prof.get(f"/submissions/{uploads['alice-mutant']}").text


def test_another_learners_upload_is_the_missing_page(server):
    app, tokens, uploads, _ = server
    alice = signed_in(app, tokens["alice"])
    missing = alice.get("/submissions/99999")
    other = alice.get(f"/submissions/{uploads['bob-mutant']}")
    assert missing.status_code == other.status_code == 404 and missing.text == other.text


def test_the_instructor_pages_on_the_real_class(server):
    app, tokens, uploads, _ = server
    prof = signed_in(app, tokens["prof"])
    home = prof.get("/")
    assert f'href="/class/{EXERCISE}"' in home.text and f'href="/class/{EXERCISE}/bob"' in home.text
    report = prof.get(f"/class/{EXERCISE}")
    assert report.status_code == 200 and 'data-stat="submissions" data-value="3"' in report.text
    assert "&lt;script&gt;" in report.text and "<script" not in report.text
    bob = prof.get(f"/class/{EXERCISE}/bob")
    assert re.findall(r'href="/submissions/(\d+)"', bob.text) == [str(uploads["bob-mutant"])]
    student = signed_in(app, tokens["bob"])
    assert student.get(f"/class/{EXERCISE}").status_code == 403


def test_revoking_ends_the_session_and_the_api_reads_with_it_but_never_writes(server):
    app, _, uploads, service = server
    token = issue_token(service.gradebook, "bob")
    client = signed_in(app, token)
    assert client.get(f"/submissions/{uploads['bob-mutant']}").status_code == 200
    assert SESSION_COOKIE in client.cookies
    assert client.get("/api/v1/me").json()["learner"] == "bob"         # a GET reads with the cookie
    upload = client.post(f"/api/v1/exercises/{EXERCISE}/submissions", content=b"PK\x05\x06" + bytes(18),
                         headers={"content-type": "application/zip"})
    assert upload.status_code == 401                                   # a write needs the token
    revoke_tokens(service.gradebook, "bob")
    assert client.get(f"/submissions/{uploads['bob-mutant']}").status_code == 303
    assert client.get("/api/v1/me").status_code == 401
