"""The grading server over real HTTP on loopback: `python -m grader serve` as a subprocess.

The server grades a private edition of the exercises (GRADER_EXERCISES_DIR: a copy of exercises/
in which a unique string is planted in a hidden test's comment, in the quiz key's comment and in
both solutions' comments) under a course.toml written relative to the real clock:

- day45-quiz: due an hour ago, closes in two days, every check `after_due`, a rate limit of 2
  per learner, a 10 % late penalty per day. carol has an extension (due in two days), so the same
  wrong answers read before her due (hidden diagnosis) and after alice's (everything, penalised).
- day45-attention: open, due tomorrow; its no-future-leak checks are `after_due`.
- day49-quiz: opens tomorrow (409 not-open); day49-data: closed yesterday (409 closed).

Learners and the instructor get their tokens from grader.store.accounts before the server starts.
Every response a student receives in this module is recorded, and the planted strings must be in
none of them (bodies and headers; the starter zips are unpacked). The kill -9 test runs its own
server on its own gradebook with day49-data slowed by a one-second hidden check.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from grader.limits import REQUEST_BYTES, SUBMISSION_BYTES, UPLOAD_BYTES, UPLOAD_FILES
from grader.course.sampleclass import make_class
from grader.store import Gradebook
from grader.store.accounts import issue_token, revoke_tokens
from tests.server_harness import zipped as zip_of  # the one zip maker of the server tests

ROOT = Path(__file__).resolve().parents[1]
EDITION = ("day45-quiz", "day45-attention", "day49-quiz", "day49-data")
PLANTED = {name: f"PLANTED-{name}-{uuid.uuid4().hex}" for name in ("hidden", "key", "solution")}
STUDENTS = ("alice", "bob", "carol", "dave", "erin", "frank")
WAIT = 150  # seconds any one wait for grades may take, at most

# -- the private edition and the course --------------------------------------------------------------


def private_edition(dest: Path) -> Path:
    for name in EDITION:
        shutil.copytree(ROOT / "exercises" / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    with open(dest / "day45-attention" / "hidden" / "test_attention.py", "a") as f:
        f.write(f"\n# {PLANTED['hidden']}\n")
    with open(dest / "day45-quiz" / "key.toml", "a") as f:
        f.write(f"\n# {PLANTED['key']}\n")
    with open(dest / "day45-attention" / "solution" / "attention.py", "a") as f:
        f.write(f"\n# {PLANTED['solution']}\n")
    with open(dest / "day45-quiz" / "solution" / "answers.toml", "a") as f:
        f.write(f"\n# {PLANTED['solution']}\n")
    with open(dest / "day49-data" / "exercise.toml", "a") as f:  # a hostile loop costs seconds
        f.write("\n[limits]\nwall_seconds = 30\ncall_seconds = 4\n")
    return dest


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def course_toml(now: datetime) -> str:
    h, d = timedelta(hours=1), timedelta(days=1)
    return f"""
late_days = 2
[exercises.day45-quiz]
opens = {stamp(now - 2 * d)}
due = {stamp(now - h)}
closes = {stamp(now + 2 * d)}
late = {{ grace_minutes = 0, penalty_per_day = 0.10, max_penalty = 0.50 }}
rate = {{ capacity = 2, refill_minutes = 600 }}
visibility = {{ default = "after_due" }}

[exercises.day45-attention]
opens = {stamp(now - d)}
due = {stamp(now + d)}
closes = {stamp(now + 2 * d)}
[exercises.day45-attention.visibility.checks]
mha-has-no-future-leak = "after_due"
causal-attention-has-no-future-leak = "after_due"

[exercises.day49-quiz]
opens = {stamp(now + d)}
due = {stamp(now + 2 * d)}

[exercises.day49-data]
opens = {stamp(now - 3 * d)}
due = {stamp(now - 2 * d)}
closes = {stamp(now - d)}

[[extensions]]
learner = "carol"
exercise = "day45-quiz"
due = {stamp(now + 2 * d)}
"""


# -- the server as a subprocess ---------------------------------------------------------------------


class Server:
    """`python -m grader serve --port 0` on loopback; its log is a file, its port read from it."""

    def __init__(self, root: Path, db: str, exercises: Path, course: Path | None = None, workers: int = 1):
        self.root, self.db, self.exercises, self.course, self.workers = root, db, exercises, course, workers
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.url = ""

    def start(self) -> Server:
        self.starts += 1
        self.log = self.root / f"serve-{self.starts}.log"
        argv = [sys.executable, "-m", "grader", "serve", "--db", self.db, "--port", "0",
                "--workers", str(self.workers)]
        if self.course is not None:
            argv += ["--course", str(self.course)]
        env = {**os.environ, "GRADER_EXERCISES_DIR": str(self.exercises)}
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", self.log.read_text())
            if found:
                self.url = found[1]
                break
            if self.proc.poll() is not None:
                pytest.fail(f"grader serve exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)
        else:
            pytest.fail(f"grader serve did not start:\n{self.log.read_text()[-3000:]}")
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/api/v1/health", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.1)
        pytest.fail("grader serve did not answer /health")

    def kill9(self) -> None:
        """SIGKILL the server process alone: its workers must die with it (PR_SET_PDEATHSIG)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
                if sig == signal.SIGTERM:  # the group's stragglers (workers, jails), if any
                    os.killpg(self.proc.pid, signal.SIGKILL)
                break
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                break
        self.proc = None


SERVER_PID: list[int] = []  # the kill -9 test's server
SEEN: list[tuple[str, httpx.Response]] = []  # every response a student received here


class Client:
    """One learner's (or the instructor's) httpx client; a student's responses are recorded."""

    def __init__(self, url: str, token: str | None, student: bool = True):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        hooks = {"response": [self._record]} if student else {}
        self.http = httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=60, event_hooks=hooks)

    @staticmethod
    def _record(response: httpx.Response) -> None:
        response.read()
        SEEN.append((f"{response.request.method} {response.request.url}", response))

    def get(self, path, **kw):
        return self.http.get(path, **kw)

    def post(self, path, **kw):
        return self.http.post(path, **kw)

    def upload(self, exercise: str, files: dict[str, bytes] | bytes, key: str | None = None, **params):
        body = files if isinstance(files, bytes) else zip_of(files)
        headers = {"Content-Type": "application/zip", **({"Idempotency-Key": key} if key else {})}
        return self.post(f"/exercises/{exercise}/submissions", content=body, headers=headers, params=params)

    def wait(self, upload_id: int) -> dict:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            sub = self.get(f"/submissions/{upload_id}").json()
            if sub["status"] in ("graded", "failed"):
                return sub
            time.sleep(0.2)
        pytest.fail(f"upload {upload_id} not graded within {WAIT} s")


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]


# -- fixtures -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("server")
    exercises = private_edition(root / "exercises")
    db = str(root / "gradebook.db")
    with Gradebook(db) as gb:
        tokens = {name: issue_token(gb, name, name=name.title()) for name in STUDENTS}
        tokens["prof"] = issue_token(gb, "prof", role="instructor", name="Prof")
        tokens["revoked"] = issue_token(gb, "mallory")
        revoke_tokens(gb, "mallory")
    (root / "course.toml").write_text(course_toml(datetime.now(UTC)))
    server = Server(root, db, exercises, root / "course.toml", workers=2).start()
    yield {"root": root, "server": server, "tokens": tokens, "db": db, "exercises": exercises}
    server.stop()


@pytest.fixture(scope="module")
def clients(course):
    url, tokens = course["server"].url, course["tokens"]
    made = {name: Client(url, tokens[name]) for name in STUDENTS}
    made["prof"] = Client(url, tokens["prof"], student=False)
    made["anonymous"] = Client(url, None)
    made["revoked"] = Client(url, tokens["revoked"])
    return made


def quiz_sheet(wrong: bool) -> bytes:
    text = (ROOT / "exercises" / "day45-quiz" / "solution" / "answers.toml").read_text()
    if wrong:
        text = text.replace("d4_h2_d_k = 2\n", "d4_h2_d_k = 3\n")
        text = text.replace("fp32_exp_overflow_z = 88.7", "fp32_exp_overflow_z = 50")
    return text.encode()


@pytest.fixture(scope="module")
def graded(course, clients, tmp_path_factory):
    """alice and carol send the same wrong quiz sheet; alice the attention solution and a mutant."""
    subs = {}
    for who in ("alice", "carol"):
        r = clients[who].upload("day45-quiz", {"answers.toml": quiz_sheet(wrong=True)}, key=f"{who}-quiz")
        assert r.status_code == 202, r.text
        subs[f"{who}-quiz"] = r.json()["id"]
    folder = tmp_path_factory.mktemp("attention")
    kinds = make_class("day45-attention", folder, 2, only=("solution", "mutant:no-causal-mask"))
    for learner, kind in kinds.items():
        files = {p.name: p.read_bytes() for p in (folder / learner).iterdir()}
        r = clients["alice"].upload("day45-attention", files)
        assert r.status_code == 202, r.text
        subs["alice-" + kind] = r.json()["id"]
    for name, upload_id in subs.items():
        owner = name.split("-")[0]
        subs[name] = clients[owner].wait(upload_id)
    return subs


# -- accounts and authorization -------------------------------------------------------------------------


def test_health_and_openapi_need_no_token(clients):
    r = clients["anonymous"].get("/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    schema = clients["anonymous"].get("/openapi.json").json()
    assert "/api/v1/exercises/{exercise}/submissions" in schema["paths"]
    assert clients["anonymous"].get("/docs").status_code == 404, "no page that loads a CDN's scripts"


@pytest.mark.parametrize("who", ["anonymous", "revoked"])
def test_no_token_or_a_revoked_one_is_401(clients, who):
    for path in ("/me", "/exercises", "/submissions", "/status"):
        r = clients[who].get(path)
        assert r.status_code == 401, (path, r.text)
        assert error_of(r)["code"] == "unauthorized" and r.headers["WWW-Authenticate"] == "Bearer"
    me = str(clients["alice"].http.base_url).rstrip("/") + "/me"
    assert httpx.get(me, headers={"Authorization": "Bearer nonsense"}).status_code == 401
    assert httpx.get(me, headers={"Authorization": f"Basic {'x' * 40}"}).status_code == 401


def test_me_and_exercises_show_the_callers_own_dates(clients):
    me = clients["carol"].get("/me").json()
    assert me == {"learner": "carol", "name": "Carol", "role": "student",
                  "late_days": {"total": 2, "spent": 0, "left": 2},
                  "course": {"name": "", "timezone": "UTC"}}  # course.toml names neither
    mine = {e["id"]: e for e in clients["carol"].get("/exercises").json()}
    theirs = {e["id"]: e for e in clients["alice"].get("/exercises").json()}
    assert set(mine) == set(EDITION)
    assert mine["day45-quiz"]["due"] > theirs["day45-quiz"]["due"], "carol's extension moves her due"
    assert mine["day49-quiz"]["open"] is False and mine["day49-data"]["open"] is False
    assert mine["day45-quiz"]["open"] is True and mine["day45-quiz"]["title"]["zh-TW"]


def test_the_instructor_endpoints_are_403_for_a_student_and_reveal_nothing(clients):
    calls = [("get", "/queue", {}), ("get", "/class/day45-quiz/grades", {}),
             ("get", "/class/no-such-exercise/grades", {}), ("post", "/queue/1/retry", {}),
             ("post", "/exercises/day45-quiz/release", {}),
             ("post", "/extensions", {"json": {"learner": "alice", "exercise": "day45-quiz",
                                               "due": "2030-01-01T00:00:00Z"}})]
    bodies = set()
    for method, path, kw in calls:
        r = getattr(clients["bob"], method)(path, **kw)
        assert r.status_code == 403, (path, r.text)
        assert error_of(r)["code"] == "forbidden"
        bodies.add(r.content)
    assert len(bodies) == 1, "every 403 is the same answer, whatever exists"


def test_another_learners_upload_is_404_exactly_like_a_missing_one(clients, graded):
    alices = graded["alice-quiz"]["id"]
    missing = clients["bob"].get("/submissions/999999")
    assert missing.status_code == 404 and error_of(missing)["code"] == "not-found"
    for method, path in (("get", f"/submissions/{alices}"), ("get", f"/submissions/{alices}/report"),
                         ("get", f"/submissions/{alices}/report?format=html"),
                         ("post", f"/submissions/{alices}/choose")):
        r = getattr(clients["bob"], method)(path)
        other = getattr(clients["bob"], method)(path.replace(str(alices), "999999"))
        assert r.status_code == other.status_code == 404, path
        assert r.content == other.content, path
    nothing = {"items": [], "next": None}
    assert clients["bob"].get("/submissions", params={"learner": "alice"}).json() == nothing
    assert [s["learner"] for s in clients["alice"].get("/submissions").json()["items"]] == ["alice"] * 3
    everyone = clients["prof"].get("/submissions", params={"exercise": "day45-quiz"}).json()["items"]
    assert {s["learner"] for s in everyone} >= {"alice", "carol"}


def test_a_browser_session_reads_the_api_but_never_writes_through_it(course, clients, graded):
    url = course["server"].url
    with httpx.Client(base_url=url, timeout=60, event_hooks={"response": [Client._record]}) as browser:
        form = browser.get("/")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)[1]
        signed_in = browser.post("/login", data={"token": course["tokens"]["alice"], "csrf": csrf},
                                 headers={"Origin": url})
        assert signed_in.status_code == 303, signed_in.text[:500]
        assert browser.get("/api/v1/me").json()["learner"] == "alice", "the session cookie reads"
        page = browser.get(f"/submissions/{graded['alice-quiz']['id']}")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        other = browser.get(f"/api/v1/submissions/{graded['carol-quiz']['id']}")
        assert other.status_code == 404
        write = browser.post("/api/v1/exercises/day45-quiz/submissions", headers={"Origin": url},
                             content=zip_of({"answers.toml": b"[answers]\n"}))
        assert write.status_code == 401, "a write needs the token, never the cookie"
    assert clients["alice"].get("/status", params={"exercise": "day45-quiz"}).json()[0]["submissions"] == 1


# -- uploads: caps, bad archives, the policy, replays -----------------------------------------------------


def test_an_upload_over_the_cap_is_413(course, clients):
    host, port = course["server"].url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:  # the headers alone
        sock.sendall(f"POST /api/v1/exercises/day45-quiz/submissions HTTP/1.1\r\nHost: {host}\r\n"
                     f"Authorization: Bearer {course['tokens']['erin']}\r\n"
                     f"Content-Type: application/zip\r\nContent-Length: {50 * UPLOAD_BYTES}\r\n\r\n".encode())
        answer = b""
        for _ in range(100):  # until the server closes the connection: it does at once
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        answer = answer.decode()
    assert answer.startswith("HTTP/1.1 413"), answer[:200]
    assert '"too-large"' in answer

    def streamed():  # no Content-Length: counted as it comes
        for _ in range(UPLOAD_BYTES // 65536 + 2):
            yield b"\0" * 65536
    try:
        r = clients["erin"].post("/exercises/day45-quiz/submissions", content=streamed(),
                                 headers={"Content-Type": "application/zip"})
        assert r.status_code == 413 and error_of(r)["code"] == "too-large" and error_of(r)["field"] == "body"
    except httpx.TransportError:  # the server answered and closed before the client sent it all
        pass
    r = clients["prof"].post("/extensions", content=b"{" + b" " * REQUEST_BYTES + b"}",
                             headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and error_of(r)["code"] == "too-large"
    assert clients["erin"].get("/submissions").json()["items"] == [], "nothing stored"


def members(n: int) -> bytes:
    return zip_of({f"junk/{i}.txt": b"x" for i in range(n)})


def traversal() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../answers.toml", b"[answers]\n")
    return buf.getvalue()


@pytest.mark.parametrize("body,reason", [
    (b"this is not a zip", "not a readable zip archive"),
    (traversal(), "outside the archive"),
    (zip_of({"notes.txt": b"hello"}), "none of the files"),
    (members(UPLOAD_FILES + 1), f"more than the {UPLOAD_FILES} allowed"),
    (zip_of({"answers.toml": b"0" * (SUBMISSION_BYTES + 1)}), "would inflate"),
    (zip_of({"a/answers.toml": b"[answers]\n", "b/answers.toml": b"[answers]\n"}), "could be answers.toml"),
])
def test_an_unreadable_upload_is_422_naming_why_and_spends_nothing(clients, body, reason):
    r = clients["dave"].upload("day45-quiz", body)
    assert r.status_code == 422, r.text
    error = error_of(r)
    assert error["code"] == "bad-upload" and error["field"] == "body" and reason in error["message"]
    status = clients["dave"].get("/status", params={"exercise": "day45-quiz"}).json()[0]
    assert status["submissions"] == 0 and status["tokens_left"] == 2


def test_a_sheet_that_does_not_parse_is_graded_unreadable_and_gives_its_token_back(clients):
    r = clients["erin"].upload("day45-quiz", {"answers.toml": b"[answers\nd4_h2_d_k = 2\n"})
    assert r.status_code == 202, r.text
    sub = clients["erin"].wait(r.json()["id"])
    assert sub["status"] == "graded" and sub["score"] == 0
    assert sub["grade"]["error"]["kind"] == "invalid-submission"
    deadline = time.monotonic() + 30  # the refund follows the grade
    while time.monotonic() < deadline:
        (status,) = clients["erin"].get("/status", params={"exercise": "day45-quiz"}).json()
        if status["tokens_left"] == 2:
            break
        time.sleep(0.2)
    assert status["submissions"] == 1 and status["tokens_left"] == 2, status


def test_the_rate_limit_is_429_with_retry_after_and_a_replay_is_the_first_upload(clients):
    sheet = {"answers.toml": quiz_sheet(wrong=False)}
    first = clients["dave"].upload("day45-quiz", sheet, key="dave-1")
    assert first.status_code == 202, first.text
    again = clients["dave"].upload("day45-quiz", sheet, key="dave-1")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"], "a replay: the same"
    second = clients["dave"].upload("day45-quiz", {"answers.toml": quiz_sheet(wrong=True)}, key="dave-2")
    assert second.status_code == 202
    third = clients["dave"].upload("day45-quiz", sheet, key="dave-3")
    assert third.status_code == 429, third.text
    assert error_of(third)["code"] == "rate-limited"
    assert 0 < int(third.headers["Retry-After"]) <= 600 * 60
    replay = clients["dave"].upload("day45-quiz", sheet, key="dave-1")
    assert replay.status_code == 200 and replay.json()["id"] == first.json()["id"], "even at the limit"
    uploads = clients["dave"].get("/submissions").json()["items"]
    assert [u["id"] for u in uploads] == [first.json()["id"], second.json()["id"]]
    status = clients["dave"].get("/status", params={"exercise": "day45-quiz"}).json()[0]
    assert status["tokens_left"] == 0 and status["next_submission_at"] is not None


def test_a_late_day_is_spent_only_when_asked_and_makes_the_upload_on_time(clients):
    sheet = {"answers.toml": quiz_sheet(wrong=False)}
    r = clients["frank"].upload("day45-quiz", sheet, key="frank-1", use_late_day="true")
    assert r.status_code == 202, r.text
    sub = r.json()
    assert sub["late_days_spent"] == 1 and sub["late"]["days"] == 0 and sub["late"]["penalty"] == 0
    assert clients["frank"].get("/me").json()["late_days"] == {"total": 2, "spent": 1, "left": 1}
    r = clients["frank"].upload("day45-quiz", {"answers.toml": quiz_sheet(wrong=True)}, key="frank-2")
    assert r.status_code == 202 and r.json()["late_days_spent"] == 0 and r.json()["late"]["days"] == 1
    assert clients["frank"].get("/me").json()["late_days"]["spent"] == 1, "none without consent"


def test_closed_and_not_open_are_409(clients):
    closed = clients["erin"].upload("day49-data", {"data.py": b"x = 1\n"})
    assert closed.status_code == 409 and error_of(closed)["code"] == "closed"
    early = clients["erin"].upload("day49-quiz", {"answers.toml": b"[answers]\n"})
    assert early.status_code == 409 and error_of(early)["code"] == "not-open"
    assert 0 < int(early.headers["Retry-After"]) <= 86400 + 60
    zh = clients["erin"].upload("day49-data", {"data.py": b"x = 1\n"}, lang="zh-TW")
    assert error_of(zh)["message"] != error_of(closed)["message"], "the message in the caller's language"


def test_an_unknown_exercise_and_bad_parameters_are_json_errors(clients):
    r = clients["erin"].upload("day99-nothing", {"answers.toml": b""})
    assert r.status_code == 404 and error_of(r)["field"] == "exercise"
    r = clients["erin"].get("/submissions/not-a-number")
    assert r.status_code == 422 and error_of(r)["code"] == "invalid" and error_of(r)["field"] == "upload_id"
    r = clients["erin"].get("/no/such/route")
    assert r.status_code == 404 and error_of(r)["code"] == "not-found"
    r = clients["erin"].upload("day45-quiz", {"answers.toml": b""}, key="bad key with spaces")
    assert r.status_code == 422 and error_of(r)["field"] == "Idempotency-Key"


# -- grades, reports and what a student may see ---------------------------------------------------------


def test_a_quiz_is_graded_end_to_end_and_visibility_follows_each_learners_due(clients, graded):
    alice, carol = graded["alice-quiz"], graded["carol-quiz"]
    assert alice["status"] == carol["status"] == "graded"
    wrong = {"d4_h2_d_k", "fp32_exp_overflow_z"}
    for sub in (alice, carol):
        checks = {c["id"]: c for c in sub["grade"]["checks"]}
        assert {i for i, c in checks.items() if not c["passed"]} >= wrong
        assert all(c["title"] and c["rule"] for c in checks.values())
    hidden = {c["id"]: c for c in carol["grade"]["checks"]}  # before carol's own due
    shown = {c["id"]: c for c in alice["grade"]["checks"]}  # after alice's
    assert all(not hidden[i]["message"] for i in wrong), "before due: title, rule and pass/fail only"
    assert all(shown[i]["message"] for i in wrong), "after due: the diagnosis"
    text = clients["carol"].get(f"/submissions/{carol['id']}/report", params={"format": "text"}).text
    assert "d_model = 4, h = 2: what is d_k?" in text
    # alice was an hour late: 10 % of the points, once
    assert alice["late"]["days"] == 1 and alice["late"]["penalty"] == pytest.approx(0.10)
    raw = sum(c["points"] for c in alice["grade"]["checks"])
    assert alice["score"] == pytest.approx(max(raw - 2.1, 0)) and alice["max_score"] == 21
    assert carol["late"]["days"] == 0
    assert carol["score"] == pytest.approx(sum(c["points"] for c in hidden.values()))
    assert any("late penalty" in w["message"] for w in alice["grade"]["warnings"])
    full = clients["prof"].get(f"/submissions/{carol['id']}").json()
    assert all(c["message"] for c in full["grade"]["checks"] if c["id"] in wrong), "the instructor sees all"


def test_day45_attention_is_graded_end_to_end_through_the_jail(clients, graded):
    good, bad = graded["alice-solution"], graded["alice-mutant:no-causal-mask"]
    assert good["status"] == "graded" and good["passed"] is True and good["score"] == good["max_score"]
    assert bad["status"] == "graded" and bad["passed"] is False
    leak = {c["id"]: c for c in bad["grade"]["checks"]}["mha-has-no-future-leak"]
    assert leak["passed"] is False and leak["message"] == "" and leak["symptoms"] == [], "after_due"
    assert all(d["check"] != "mha-has-no-future-leak" for d in bad["grade"]["diagnosis"])
    assert {c["id"]: c for c in bad["grade"]["checks"]}["causal-attention-matches-reference"]["message"]
    for fmt, kind in (("html", "text/html"), ("markdown", "text/markdown"), ("json", "application/json")):
        r = clients["alice"].get(f"/submissions/{bad['id']}/report", params={"format": fmt, "lang": "zh-TW"})
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind)
        assert r.headers["Content-Security-Policy"].startswith("default-src 'none'")


def test_status_and_the_class_view(clients, graded):
    (quiz,) = clients["alice"].get("/status", params={"exercise": "day45-quiz"}).json()
    assert quiz["submissions"] == 1 and quiz["counted"] == graded["alice-quiz"]["id"]
    assert quiz["score"] == pytest.approx(graded["alice-quiz"]["score"])
    grades = {g["learner"]: g for g in clients["prof"].get("/class/day45-quiz/grades").json()}
    assert grades["alice"]["submission"] == graded["alice-quiz"]["id"] and grades["alice"]["name"] == "Alice"
    assert grades["alice"]["score"] == pytest.approx(graded["alice-quiz"]["score"])
    assert grades["alice"]["late"]["days"] == 1 and grades["carol"]["late"]["days"] == 0
    queue = clients["prof"].get("/queue").json()
    assert {"queued", "running", "dead", "oldest_queued_at", "dead_letters"} <= set(queue)
    r = clients["prof"].post("/queue/999999/retry")
    assert r.status_code == 404 and error_of(r)["code"] == "not-found"


def test_an_extension_and_a_release_from_the_instructor(clients):
    due = "2031-01-01T00:00:00+00:00"
    r = clients["prof"].post("/extensions", json={"learner": "erin", "exercise": "day49-data", "due": due,
                                                   "closes": "2031-01-02T00:00:00+00:00", "reason": "note"})
    assert r.status_code == 200, r.text
    (status,) = clients["erin"].get("/status", params={"exercise": "day49-data"}).json()
    assert status["deadlines"]["due"] == due and status["next_submission_at"] is not None
    r = clients["prof"].post("/extensions", json={"learner": "erin", "exercise": "day49-data", "due": "soon"})
    assert r.status_code == 422 and error_of(r)["field"] == "due"
    r = clients["prof"].post("/extensions", json={"learner": "erin", "exercise": "day49-data", "due": due,
                                                   "surprise": 1})
    assert r.status_code == 422 and error_of(r)["field"] == "surprise"
    released = clients["prof"].post("/exercises/day45-attention/release").json()
    assert released["exercise"] == "day45-attention" and released["released_at"]


def test_no_response_to_a_student_contains_a_hidden_test_a_key_or_a_solution(clients, graded):
    """Every endpoint and every report format, for every student who has uploads; then all that
    this module's students ever received."""
    for who in ("alice", "carol", "dave"):
        c = clients[who]
        for path in ("/me", "/exercises", "/submissions", "/status", "/status?exercise=day45-quiz"):
            assert c.get(path).status_code == 200
        for sub in c.get("/submissions").json()["items"]:
            c.get(f"/submissions/{sub['id']}")
            for fmt in ("text", "json", "html", "markdown"):
                for lang in ("en", "zh-TW"):
                    c.get(f"/submissions/{sub['id']}/report", params={"format": fmt, "lang": lang})
        for exercise in EDITION:
            starter = c.get(f"/exercises/{exercise}/starter")
            assert starter.status_code == 200
            with zipfile.ZipFile(io.BytesIO(starter.content)) as zf:
                for name in zf.namelist():
                    text = zf.read(name).decode("utf-8", "replace")
                    for planted in PLANTED.values():
                        assert planted not in text, (exercise, name)
    assert len(SEEN) > 100
    for what, response in SEEN:
        blob = response.content.decode("utf-8", "replace") + json.dumps(dict(response.headers))
        for kind, planted in PLANTED.items():
            assert planted not in blob, f"{what} sent the planted {kind} string"
    solution_code = (ROOT / "exercises" / "day45-attention" / "solution" / "attention.py").read_text()
    longest = max(solution_code.splitlines(), key=len)
    assert all(longest not in r.content.decode("utf-8", "replace") for _, r in SEEN)


# -- a killed server --------------------------------------------------------------------------------------


def test_a_killed_worker_and_a_killed_server_lose_nothing_and_grade_each_exactly_once(tmp_path):
    """A worker killed mid-grading fails only its job (graded again on a fresh pool); then the
    server is killed with jobs queued and running, and the restarted server grades the rest."""
    exercises = private_edition(tmp_path / "exercises")
    (exercises / "day49-data" / "hidden" / "test_zz_slow.py").write_text(
        "import time\nfrom grader.testkit import check\n\n\n"
        "@check(points=0, rule='target-shift', day=49, title='takes its time')\n"
        "def test_takes_its_time(submission):\n    time.sleep(1.0)\n")
    db = str(tmp_path / "kill.db")
    with Gradebook(db) as gb:
        token = issue_token(gb, "kim")
    n = 4
    solution = (ROOT / "exercises" / "day49-data" / "solution" / "data.py").read_bytes()
    server = Server(tmp_path, db, exercises).start()
    assert server.proc is not None
    SERVER_PID[:] = [server.proc.pid]
    try:
        deadline = time.monotonic() + 60
        while not workers_of(server.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(workers_of(server.proc.pid)) == 1, "the pool is warm before the first upload"
        kim = Client(server.url, token, student=False)
        ids = []
        for i in range(n):
            r = kim.upload("day49-data", {"data.py": solution + f"\n# upload {i}\n".encode()}, key=f"k{i}")
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        first_worker = running(kim, ids, graded=0)
        os.kill(first_worker, signal.SIGKILL)  # a worker dies mid-grading: its lease fails, a new pool
        running(kim, ids, graded=1, but_not=first_worker)
        server.kill9()
        deadline = time.monotonic() + 20  # the pool's workers die with the server
        while time.monotonic() < deadline:
            try:
                os.killpg(server.proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            pytest.fail("worker processes outlived the killed server")
        with Gradebook(db) as gb:
            at_kill = gb.counts("day49-data")["final_runs"]
        assert 1 <= at_kill < n
        server.start()
        assert re.search(r"[1-9]\d* jobs resumed", server.log.read_text()), "the running job is resumed"
        kim = Client(server.url, token, student=False)
        for i in ids:
            assert kim.wait(i)["status"] == "graded"
        with Gradebook(db) as gb:
            counts = gb.counts("day49-data")
        assert counts["final_runs"] == counts["graded_pairs"] == counts["submissions"] == n
        assert counts["error_runs"] == 0
        attempts = clients_jobs_attempts(db)
        assert sorted(attempts) == [1] * (n - 1) + [2], "the dead worker's job, once more; a restart: never"
        assert "a worker process died" in (tmp_path / "serve-1.log").read_text()
        assert re.search(r"job \d+ \(upload \d+, kim, day49-data\): graded", server.log.read_text())
    finally:
        server.stop()


def test_two_servers_on_one_postgresql_gradebook_grade_every_upload_once(tmp_path, postgres):
    db = postgres.create_database()
    exercises = private_edition(tmp_path / "exercises")
    n = 10
    with Gradebook(db) as gb:
        tokens = [issue_token(gb, f"p{i}") for i in range(n)]
    servers = [Server(tmp_path / name, db, exercises) for name in ("a", "b")]
    try:
        for server in servers:
            server.root.mkdir()
            server.start()
        sheet = quiz_sheet(wrong=False)
        ids = []
        for i, token in enumerate(tokens):  # every other upload to the other server
            r = Client(servers[i % 2].url, token, student=False).upload(
                "day45-quiz", {"answers.toml": sheet + f"\n# {i}\n".encode()}, key="once")
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        for i, (token, upload_id) in enumerate(zip(tokens, ids, strict=True)):  # read from the other
            other = Client(servers[(i + 1) % 2].url, token, student=False)
            assert other.wait(upload_id)["status"] == "graded"
    finally:
        for server in servers:
            server.stop()
    with Gradebook(db) as gb:
        counts = gb.counts("day45-quiz")
    assert counts["final_runs"] == counts["graded_pairs"] == counts["submissions"] == n
    assert clients_jobs_attempts(db) == [1] * n, "no job was leased twice"
    logs = "".join(server.log.read_text() for server in servers)
    assert len(re.findall(r"day45-quiz\): graded", logs)) == n, "each graded by one server, once"


def workers_of(pid: int) -> list[int]:
    """The pool's worker processes of a server: its children that multiprocessing spawned."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            found.append(int(entry.name))
    return found


def running(client: Client, ids: list[int], *, graded: int, but_not: int | None = None) -> int:
    """Wait until at least `graded` uploads are graded and one is grading on a live worker
    (another than `but_not`); that worker's pid."""
    deadline = time.monotonic() + WAIT
    states: list[str] = []
    while time.monotonic() < deadline:
        states = [client.get(f"/submissions/{i}").json()["status"] for i in ids]
        workers = [w for w in workers_of(SERVER_PID[0]) if w != but_not]
        if states.count("graded") >= graded and "grading" in states and len(workers) == 1:
            return workers[0]
        time.sleep(0.1)
    pytest.fail(f"never {graded} graded and one grading at once: {states}")


def clients_jobs_attempts(db: str) -> list[int]:
    from sqlalchemy import select

    from grader.store.schema import Job

    with Gradebook(db) as gb, gb.sessions() as s:
        return list(s.scalars(select(Job.attempts).order_by(Job.id)))


# -- grader serve's own checks -------------------------------------------------------------------------


def test_serve_refuses_bad_options_with_exit_2(tmp_path):
    def serve(*args, env=None):
        return subprocess.run([sys.executable, "-m", "grader", "serve", *args], capture_output=True,
                              text=True, cwd=ROOT, timeout=120, env={**os.environ, **(env or {})})
    db = str(tmp_path / "g.db")
    r = serve("--db", db, "--course", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "--course" in r.stderr
    (tmp_path / "bad.toml").write_text("[exercises.day45-quiz]\ndue = 2026-01-01T00:00:00\n")
    r = serve("--db", db, "--course", str(tmp_path / "bad.toml"), "--port", "0")
    assert r.returncode == 2 and "bad.toml" in r.stderr and "due" in r.stderr and "Traceback" not in r.stderr
    r = serve("--db", str(tmp_path / "no" / "such" / "dir" / "g.db"), "--port", "0")
    assert r.returncode == 2 and "--db" in r.stderr and "Traceback" not in r.stderr
    r = serve("--db", db, "--host", "0.0.0.0", "--port", "0")
    assert r.returncode == 2 and "--allow-plain-http" in r.stderr


def test_a_full_queue_is_429_queue_full_with_retry_after_and_stores_nothing(tmp_path, monkeypatch):
    """In process (the queue made full by hand: QUEUE_DEPTH is 2,000 jobs)."""
    from fastapi.testclient import TestClient

    from grader.limits import QUEUE_RETRY_SECONDS
    from grader.service.app import create_app
    from grader.service.service import Service
    from grader.store.queue import QueueFull

    db = str(tmp_path / "full.db")
    service = Service.open(db)
    try:
        token = issue_token(service.gradebook, "quinn")

        def full(*args, **kwargs):
            raise QueueFull(2000)
        monkeypatch.setattr(service.queue, "submit", full)
        with TestClient(create_app(service)) as http:
            r = http.post("/api/v1/exercises/day45-quiz/submissions",
                          content=zip_of({"answers.toml": b"[answers]\n"}),
                          headers={"Authorization": f"Bearer {token}", "Content-Type": "application/zip"})
        assert r.status_code == 429 and error_of(r)["code"] == "queue-full"
        assert r.headers["Retry-After"] == str(QUEUE_RETRY_SECONDS)
        assert service.queue.uploads("quinn") == []
    finally:
        service.close()
