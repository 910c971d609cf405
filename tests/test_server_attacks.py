"""A hostile student against a real `grader serve` on loopback (tests/test_service.py's fixtures).

Each test is one attack that must be refused: a JSON error that is never a 500, nothing of
another learner's or of the hidden edition in the answer, nothing stored that should not be.
The known limit, left alone: a submission may print what a hidden test passes it (its inputs);
printed output is hidden from the learner while any check is hidden, and shown after.
"""

from __future__ import annotations

import io
import socket
import zipfile
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import test_service
from test_service import PLANTED, ROOT, error_of, quiz_sheet, zip_of

from grader.limits import SUBMISSIONS_PAGE_MAX, UPLOAD_BYTES

course, clients = test_service.course, test_service.clients  # its module-scoped fixtures, used by name

JUNK_IDS = ["-1", "0", "1e3", "١٢", "99999999999999999999999999", str(2**63), "%2e%2e", "1.0", " 1"]


def raw(url: str, head: bytes, body_chunks=()) -> tuple[int, bytes]:
    """One HTTP/1.1 request as bytes over a socket (for what httpx refuses to send); the status
    and what came back before the server closed. Bounded by the socket's timeout."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as s:
        s.sendall(head)
        try:
            for chunk in body_chunks:
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):  # refused mid-body: its answer is there
            pass
        got = b""
        try:
            while len(got) < 1 << 20 and (part := s.recv(65536)):
                got += part
        except ConnectionResetError:
            pass
    status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1 ") else 0
    return status, got


def assert_refusal(r: httpx.Response, *statuses: int) -> dict:
    assert r.status_code in statuses, (r.request.url, r.status_code, r.text[:500])
    return error_of(r)


@pytest.mark.parametrize("junk", JUNK_IDS)
def test_junk_ids_in_every_path_are_404_or_422_never_500(clients, junk):
    for who, method, path in (
        ("bob", "get", f"/submissions/{junk}"),
        ("bob", "get", f"/submissions/{junk}/report"),
        ("bob", "post", f"/submissions/{junk}/choose"),
        ("prof", "post", f"/queue/{junk}/retry"),
        ("prof", "get", f"/submissions/{junk}"),
    ):
        assert_refusal(getattr(clients[who], method)(path), 404, 422)


def test_path_tricks_and_methods_are_json_errors(course, clients):
    url = course["server"].url
    token = course["tokens"]["bob"]
    auth = {"Authorization": f"Bearer {token}"}
    for path in (
        "/api/v1/submissions/%2e%2e/queue",
        "/api/v1//queue",
        "/api/v1/queue/",
        "/api/v1/class/%2e%2e/grades",
        "/api/v1/exercises/..%2f..%2fetc/starter",
    ):
        r = httpx.get(url + path, headers=auth)
        assert r.status_code in (403, 404, 307, 422), (path, r.status_code, r.text[:300])
        if r.status_code != 307:
            error_of(r)
    for method in ("HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"):
        r = httpx.request(method, url + "/api/v1/queue", headers=auth)
        assert r.status_code in (403, 404, 405), (method, r.status_code)


@pytest.mark.parametrize(
    "header",
    [
        "bearer {t}",
        "BEARER {t}",
        "Bearer  {t}",
        "Bearer {t} ",
        "Bearer\t{t}",
        "Bearer {t}\x00",
        "Bearer \x00{t}",
        "Bearer " + "x" * 6000,
        "Bearer",
        "Bearer ",
        "{t}",
        "Bearer {t}x",
        "Bearer \xe9\xe9",
    ],
)
def test_authorization_variants_read_only_their_own_or_are_refused(course, header):
    url, token = course["server"].url, course["tokens"]["bob"]
    value = header.format(t=token).encode("latin-1")
    status, got = raw(
        url,
        b"GET /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: " + value + b"\r\nConnection: close\r\n\r\n",
    )
    assert status in (200, 400, 401, 431), got[:300]
    if status == 200:
        assert b'"learner":"bob"' in got


def test_two_authorization_headers_never_mix_two_learners(course):
    url, tokens = course["server"].url, course["tokens"]
    two = httpx.get(
        f"{url}/api/v1/me",
        headers=[
            ("Authorization", f"Bearer {tokens['bob']}"),
            ("Authorization", f"Bearer {tokens['alice']}"),
        ],
    )
    assert two.status_code in (200, 400, 401)
    if two.status_code == 200:
        assert two.json()["learner"] in ("bob", "alice")


def test_a_student_cannot_ask_for_another_learners_list_or_an_instructor_route(clients):
    for params in (
        {"learner": "alice"},
        {"learner": "prof"},
        {"learner": ""},
        {"learner": "%"},
        {"exercise": "%"},
        {"learner": "alice", "exercise": "day45-quiz"},
    ):
        r = clients["frank"].get("/submissions", params=params)
        assert r.status_code in (200, 422), r.text
        if r.status_code == 200:
            assert all(s["learner"] == "frank" for s in r.json()["items"])
    assert clients["frank"].get("/status", params={"exercise": "%"}).status_code == 404


# -- uploads ------------------------------------------------------------------------------------------


def raw_zip(entries: list[tuple[str, bytes]], symlink: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries:
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo("attention.py")
            info.external_attr = 0o120777 << 16
            zf.writestr(info, symlink)
    return buf.getvalue()


ATTENTION = (ROOT / "exercises" / "day45-attention" / "solution" / "attention.py").read_bytes()
SHADOWS = [
    [("attention.py", ATTENTION), ("conftest.py", b"import os; os._exit(0)\n")],
    [("attention.py", ATTENTION), ("test_attention.py", b"def test_ok(): pass\n")],
    [("attention.py", ATTENTION), ("__init__.py", b"raise SystemExit\n"), ("key.toml", b"x")],
    [("attention.py", ATTENTION), ("inner.zip", zip_of({"conftest.py": b"x"}))],
]


@pytest.mark.parametrize("entries", SHADOWS)
def test_files_named_like_the_graders_are_never_stored(clients, entries):
    r = clients["erin"].upload("day45-attention", raw_zip(entries))
    if r.status_code in (200, 202):  # 200: the same learner files as the case before, a repeat
        assert [f["name"] for f in r.json()["files"]] == ["attention.py"], r.json()["files"]
    else:
        assert error_of(r)["code"] == "bad-upload"


@pytest.mark.parametrize(
    "body",
    [
        raw_zip([("/attention.py", ATTENTION)]),
        raw_zip([("attention.py", ATTENTION), ("attention.py", b"x = 1\n")]),
        raw_zip([], symlink="/etc/passwd"),
        raw_zip([("attention.py", ATTENTION)])[:-30],  # a central directory cut short
        raw_zip([("attention.py", ATTENTION)]).replace(b"attention.py", b"attention.pz", 1),  # it lies
    ],
)
def test_archives_that_lie_are_refused_or_read_as_the_grader_would(clients, body):
    r = clients["erin"].upload("day45-attention", body)
    assert r.status_code in (202, 422), r.text
    if r.status_code == 202:
        assert [f["name"] for f in r.json()["files"]] == ["attention.py"]
        assert r.json()["files"][0]["size"] != len("/etc/passwd"), "a symlink is never followed"


def test_a_chunked_body_over_the_cap_is_413_and_stores_nothing(course, clients):
    url, token = course["server"].url, course["tokens"]["bob"]
    before = len(clients["bob"].get("/submissions").json()["items"])
    head = (
        b"POST /api/v1/exercises/day45-attention/submissions HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\nContent-Type: application/zip\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"\0" * 65536
    chunks = [b"%x\r\n" % len(piece) + piece + b"\r\n"] * (UPLOAD_BYTES // len(piece) + 2) + [b"0\r\n\r\n"]
    status, got = raw(url, head, chunks)
    assert status == 413 and b'"too-large"' in got, got[:300]
    status, got = raw(url, head.replace(b"Transfer-Encoding: chunked", b"Content-Length: -1"))
    assert status in (400, 413), got[:300]
    assert len(clients["bob"].get("/submissions").json()["items"]) == before


def test_a_content_type_lie_is_still_read_as_a_zip_or_refused(clients):
    r = clients["bob"].post(
        "/exercises/day45-attention/submissions",
        content=b'{"a": 1}',
        headers={"Content-Type": "application/json"},
    )
    assert_refusal(r, 422)


@pytest.mark.parametrize("key", ["x" * 201, "two words", "ü", "a\tb"])
def test_a_bad_idempotency_key_is_422_naming_it(clients, key):
    r = clients["bob"].post(
        "/exercises/day45-attention/submissions",
        content=zip_of({"attention.py": ATTENTION}),
        headers=[("Content-Type", "application/zip"), ("Idempotency-Key", key.encode("utf-8"))],
    )
    assert assert_refusal(r, 422)["field"] == "Idempotency-Key"


def test_an_idempotency_key_never_returns_another_learners_or_exercises_upload(clients):
    first = clients["dave"].upload("day45-attention", {"attention.py": ATTENTION}, key="shared-key")
    assert first.status_code == 202, first.text
    theirs = clients["frank"].upload("day45-attention", {"attention.py": ATTENTION + b"\n"}, key="shared-key")
    assert theirs.status_code == 202 and theirs.json()["learner"] == "frank"
    assert theirs.json()["id"] != first.json()["id"]
    elsewhere = clients["dave"].upload(
        "day45-quiz", {"answers.toml": quiz_sheet(wrong=False)}, key="shared-key"
    )
    assert elsewhere.status_code != 200 or elsewhere.json()["exercise"] == "day45-quiz", (
        "a key used for one exercise answered an upload to another with the first exercise's upload"
    )
    assert_refusal(elsewhere, 422)
    # different files under one key: the first upload (a replay), never a second submission
    other = clients["dave"].upload(
        "day45-attention", {"attention.py": ATTENTION + b"# changed\n"}, key="shared-key"
    )
    assert other.status_code == 200 and other.json()["id"] == first.json()["id"]


# -- the policy ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["2", "-1", "yes please", "1e3", ""])
def test_use_late_day_takes_only_a_boolean(clients, value):
    r = clients["frank"].upload("day49-data", {"data.py": b"x = 1\n"}, use_late_day=value)
    assert r.status_code in (409, 422), r.text
    error_of(r)
    assert clients["frank"].get("/me").json()["late_days"]["spent"] == 0


def test_ten_parallel_uploads_at_the_rate_limit_take_at_most_its_capacity(course):
    url, token = course["server"].url, course["tokens"]["frank"]

    def one(i: int) -> int:
        body = zip_of({"answers.toml": quiz_sheet(wrong=bool(i % 2)) + f"# {i}\n".encode()})
        with httpx.Client(timeout=60) as http:
            return http.post(
                f"{url}/api/v1/exercises/day45-quiz/submissions",
                content=body,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/zip"},
            ).status_code

    with ThreadPoolExecutor(10) as pool:
        codes = list(pool.map(one, range(10)))
    assert codes.count(202) == 2 and codes.count(429) == 8, codes  # capacity 2, due already passed


@pytest.mark.parametrize(
    "fmt,lang",
    [
        ("junit", "en"),
        ("gradescope", "en"),
        ("csv", "en"),
        ("text", "fr"),
        ("text", "zh-TW\x00"),
        ("../json", "en"),
    ],
)
def test_report_format_and_lang_junk_is_422(clients, fmt, lang):
    r = clients["bob"].get("/submissions/1/report", params={"format": fmt, "lang": lang})
    assert_refusal(r, 404, 422)


# -- the jail, seen from a server's grading -------------------------------------------------------------


def test_a_submission_that_reads_the_private_edition_finds_nothing(course, clients):
    hidden = course["exercises"] / "day45-attention" / "hidden" / "test_attention.py"
    key = course["exercises"] / "day45-quiz" / "key.toml"
    probe = f"""
import os as _os
for _path in ({str(hidden)!r}, {str(key)!r}, {str(course['db'])!r}):
    try:
        print("PROBE-READ", _path, open(_path).read())
    except Exception as _exc:
        print("PROBE-DENIED", _path, type(_exc).__name__)
print("PROBE-ENV", _os.environ.get("GRADER_EXERCISES_DIR"))
""".encode()
    r = clients["erin"].upload("day45-attention", {"attention.py": ATTENTION + probe}, key="probe")
    assert r.status_code in (200, 202), r.text
    sub = clients["erin"].wait(r.json()["id"])
    assert sub["status"] == "graded"
    full = clients["prof"].get(f"/submissions/{sub['id']}/report").text  # every check and the output shown
    assert "PROBE-DENIED" in full, full[-2000:]  # the probe ran and its output reached the report
    assert "PROBE-READ" not in full
    assert "PROBE-ENV None" in full
    for planted in PLANTED.values():
        assert planted not in full
    for fmt in ("text", "json", "html", "markdown"):
        mine = clients["erin"].get(f"/submissions/{sub['id']}/report", params={"format": fmt}).text
        assert "PROBE-" not in mine, "printed output stays hidden while a check is (after_due)"


# -- sessions, tokens and slow callers ----------------------------------------------------------------


def test_a_token_revoked_mid_session_is_401_at_its_next_request(course):
    from grader.store import Gradebook
    from grader.store.accounts import issue_token, revoke_tokens

    with Gradebook(course["db"]) as gb:
        token = issue_token(gb, "gina")
    url = course["server"].url
    with httpx.Client(base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {token}"}) as gina:
        assert gina.get("/me").json()["learner"] == "gina"
        with Gradebook(course["db"]) as gb:
            assert revoke_tokens(gb, "gina") == 1
        for path in ("/me", "/submissions", "/status"):
            assert error_of(gina.get(path))["code"] == "unauthorized"
        r = gina.post(
            "/exercises/day45-attention/submissions",
            content=zip_of({"attention.py": ATTENTION}),
            headers={"Content-Type": "application/zip"},
        )
        assert error_of(r)["code"] == "unauthorized"


def test_a_students_session_cookie_never_opens_an_instructor_route(course):
    import re

    url = course["server"].url
    with httpx.Client(base_url=url, timeout=60) as browser:
        csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/").text)[1]
        r = browser.post(
            "/login", data={"token": course["tokens"]["bob"], "csrf": csrf}, headers={"Origin": url}
        )
        assert r.status_code == 303
        for path in (
            "/api/v1/queue",
            "/api/v1/class/day45-quiz/grades",
            "/class/day45-quiz",
            "/class/day45-quiz/alice",
        ):
            r = browser.get(path)
            assert r.status_code in (403, 404), (path, r.status_code)
            assert "Alice" not in r.text, "nothing of another learner's"


def test_a_slow_body_does_not_stall_the_server_for_others(course, clients):
    url, token = course["server"].url, course["tokens"]["bob"]
    host, port = url.removeprefix("http://").split(":")
    stalled = []
    try:
        for _ in range(8):  # callers that announce a body and never send it
            s = socket.create_connection((host, int(port)), timeout=20)
            s.sendall(
                b"POST /api/v1/exercises/day45-attention/submissions HTTP/1.1\r\nHost: x\r\n"
                b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: 100000\r\n\r\nPK"
            )
            stalled.append(s)
        with httpx.Client(timeout=10) as other:  # bounded: an answer within 10 s, or the test fails
            assert other.get(f"{url}/api/v1/health").status_code == 200
        assert clients["alice"].get("/me").json()["learner"] == "alice"
    finally:
        for s in stalled:
            s.close()


# -- late days on what is closed or not open -------------------------------------------------------------


@pytest.mark.parametrize("exercise,code", [("day49-data", "closed"), ("day49-quiz", "not-open")])
def test_a_late_day_never_opens_what_is_closed_or_not_open_and_is_not_spent(clients, exercise, code):
    files = (
        {"answers.toml": quiz_sheet(wrong=False)} if exercise.endswith("quiz") else {"data.py": b"x = 1\n"}
    )
    for value in ("true", "1", "on"):
        r = clients["frank"].upload(exercise, files, use_late_day=value)
        assert r.status_code == 409 and error_of(r)["code"] == code, r.text
    assert clients["frank"].get("/me").json()["late_days"]["spent"] == 0


def test_a_late_day_asked_for_at_the_rate_limit_is_not_spent(clients):
    for i in range(4):  # erin's day45-quiz tokens go (frank's are the parallel test's)
        clients["erin"].upload("day45-quiz", {"answers.toml": quiz_sheet(wrong=True) + b"# %d\n" % i})
    r = clients["erin"].upload("day45-quiz", {"answers.toml": quiz_sheet(wrong=False)}, use_late_day="true")
    assert r.status_code == 429 and error_of(r)["code"] == "rate-limited"
    assert clients["erin"].get("/me").json()["late_days"]["spent"] == 0


# -- visibility through every route ------------------------------------------------------------------------


def test_an_after_due_checks_diagnosis_reaches_the_student_by_no_route(course, clients, tmp_path):
    import html
    import re

    from grader.course.sampleclass import make_class

    kinds = make_class("day45-attention", tmp_path, 1, only=("mutant:no-causal-mask",))
    (learner,) = kinds
    files = {p.name: p.read_bytes() for p in (tmp_path / learner).iterdir()}
    r = clients["dave"].upload("day45-attention", files)
    assert r.status_code == 202, r.text
    sub = clients["dave"].wait(r.json()["id"])
    full = clients["prof"].get(f"/submissions/{sub['id']}").json()["grade"]
    secrets = []
    for check in full["checks"]:
        if (
            check["id"] in ("mha-has-no-future-leak", "causal-attention-has-no-future-leak")
            and not check["passed"]
        ):
            secrets += [check["message"], *map(str, check.get("symptoms") or [])]
    secrets = [s for s in secrets if len(s) >= 12]
    assert secrets, "the mutant fails an after_due check with a diagnosis the instructor sees"
    answers = [
        clients["dave"].get(f"/submissions/{sub['id']}").text,
        clients["dave"].get("/submissions", params={"exercise": "day45-attention"}).text,
        clients["dave"].get("/status").text,
    ]
    for fmt in ("text", "json", "html", "markdown"):
        for lang in ("en", "zh-TW"):
            answers.append(
                clients["dave"]
                .get(f"/submissions/{sub['id']}/report", params={"format": fmt, "lang": lang})
                .text
            )
    url = course["server"].url
    with httpx.Client(base_url=url, timeout=60) as browser:
        csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/").text)[1]
        browser.post(
            "/login", data={"token": course["tokens"]["dave"], "csrf": csrf}, headers={"Origin": url}
        )
        page = browser.get(f"/submissions/{sub['id']}")
        assert page.status_code == 200
        answers += [html.unescape(page.text), browser.get("/").text]
    for answer in answers:
        for secret in secrets:
            assert secret not in answer and json_quoted(secret) not in answer, secret[:80]


def json_quoted(text: str) -> str:
    import json

    return json.dumps(text)[1:-1]


@pytest.mark.parametrize("lang", ["\x00", "zh-TW;q=" + "9" * 5000, "../../etc", "ｚｈ", "*", "zh-Hant-TW"])
def test_junk_languages_on_errors_and_reports_are_never_500(clients, lang):
    for path in ("/no-such-route", "/submissions/999999", "/exercises/nope/starter"):
        r = clients["bob"].get(path, params={"lang": lang})
        assert_refusal(r, 404, 422)
        if "\x00" not in lang:  # httpx refuses to send a NUL in a header
            r = clients["bob"].get(path, headers={"Accept-Language": lang.encode("utf-8")})
            assert_refusal(r, 404, 422)


# last: its flood keeps the workers busy for a while after it
def test_one_learner_cannot_fill_the_queue_ahead_of_everyone(course, clients):
    """day45-attention has no rate limit in this course: a flood of distinct uploads is capped at
    LEARNER_PENDING waiting (plus what was graded meanwhile), and another learner still gets in."""
    from grader.limits import LEARNER_PENDING
    from grader.store import Gradebook
    from grader.store.accounts import issue_token

    with Gradebook(course["db"]) as gb:
        hank = test_service.Client(course["server"].url, issue_token(gb, "hank"))
    codes = []
    for i in range(LEARNER_PENDING + 40):
        r = hank.upload("day45-attention", {"attention.py": ATTENTION + b"# %d\n" % i})
        codes.append(r.status_code)
        if r.status_code == 429:
            assert error_of(r)["code"] == "rate-limited" and int(r.headers["Retry-After"]) > 0
    mine = hank.get("/submissions", params={"limit": SUBMISSIONS_PAGE_MAX}).json()  # all hank's: 90 at most
    finished = sum(s["status"] in ("graded", "failed") for s in mine["items"])
    assert codes.count(202) <= LEARNER_PENDING + finished, (codes.count(202), finished)
    r = clients["bob"].upload("day45-attention", {"attention.py": ATTENTION + b"# bob\n"})
    assert r.status_code == 202, r.text
