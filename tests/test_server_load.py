"""Issue 13 under load and crashes, over real HTTP on loopback against real `grader serve`
processes: a `kill -9` with 40 submissions in flight, a retried upload, two servers on one
PostgreSQL gradebook, 50 concurrent clients, and the student install from a fresh venv.

Quiz submissions (day45-quiz: graded without a jail, in a few hundred milliseconds) keep the load
cheap; each is a distinct sheet (a comment makes it one), so each is its own submission and its
own grade run, and "graded exactly once" is counted in the gradebook itself: one grade run per
upload's submission, every job done.
"""

from __future__ import annotations

import json
import re
import socket
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx
import pytest

from tests.server_harness import (
    EXERCISES,
    QUIZ,
    Learner,
    Server,
    hard_timeout,
    issue_roster,
    quiz_sheet,
    runs_per_upload,
    upload,
    wait_graded,
)

TEST_LIMIT = 360  # seconds a test may take, servers' starts included; a hang fails, never blocks CI
GRADE_LIMIT = 240  # seconds for a load to be graded


@pytest.fixture(autouse=True)
def bounded():
    """An exception in the main thread after TEST_LIMIT: the fixtures' finalizers still run."""
    with hard_timeout(TEST_LIMIT):
        yield


@contextmanager
def serving(*servers: Server):
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        for s in servers:
            s.stop()


def upload_all(server: Server, tokens: dict[str, str], per_learner: int, threads: int = 8) -> dict[int, str]:
    """per_learner distinct quiz sheets from each learner, `threads` at a time: upload id -> learner."""
    jobs = [(who, n) for who in tokens for n in range(per_learner)]
    clients = {who: server.client(token) for who, token in tokens.items()}

    def one(job):
        who, n = job
        r = upload(clients[who], QUIZ, quiz_sheet(f"{who}-{n}"), key=f"{who}-{n}")
        assert r.status_code == 202, r.text
        return r.json()["id"], who

    try:
        with ThreadPoolExecutor(threads) as pool:
            return dict(pool.map(one, jobs))
    finally:
        for c in clients.values():
            c.close()


def wait_all(server: Server, tokens: dict[str, str], ids: dict[int, str]) -> dict[int, dict]:
    done: dict[int, dict] = {}
    for who, token in tokens.items():
        with server.client(token) as api:
            done |= wait_graded(api, [i for i, w in ids.items() if w == who], GRADE_LIMIT)
    return done


def assert_graded_once(db_url: str, ids: dict[int, str], done: dict[int, dict]) -> None:
    runs = runs_per_upload(db_url)
    assert set(runs) == set(ids), "the uploads in the gradebook are the ones made"
    assert {u: r for u, r in runs.items() if r != ("done", 1)} == {}, "each upload: job done, one grade run"
    assert {s["status"] for s in done.values()} == {"graded"}
    assert all(s["score"] > 0 and s["grade"] for s in done.values())  # (variant questions differ)


def status_counts(db_url: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status, _ in runs_per_upload(db_url).values():
        counts[status] = counts.get(status, 0) + 1
    return counts


# -- kill -9 --------------------------------------------------------------------------------------------


def test_kill_9_with_40_in_flight_then_restarts_grade_each_exactly_once(tmp_path):
    db = tmp_path / "gradebook.db"
    tokens = issue_roster(db, [str(1000 + i) for i in range(4)], tmp_path)
    logs = [tmp_path / f"serve-{i}.log" for i in range(3)]
    first = Server(db, logs[0]).start()
    try:
        ids = upload_all(first, tokens, per_learner=10)
    finally:
        first.kill()  # kill -9, its pool and their jails with it, the moment the 40th is stored
    assert len(ids) == 40
    at_kill = status_counts(str(db))
    print(f"\nat the first kill -9: {at_kill}")
    assert at_kill.get("done", 0) <= 30, f"too few in flight to prove anything: {at_kill}"

    second = Server(db, logs[1]).start()
    try:
        resumed = re.search(r"(\d+) jobs resumed", second.log())
        assert resumed, second.log()[-3000:]
        print(f"the restart resumed {resumed.group(1)} jobs")
        deadline = time.monotonic() + GRADE_LIMIT
        while status_counts(str(db)).get("done", 0) < at_kill.get("done", 0) + 3:
            assert time.monotonic() < deadline, second.log()[-3000:]
            time.sleep(0.05)
    finally:
        second.kill()  # again, in the middle of grading
    print(f"at the second kill -9: {status_counts(str(db))}")

    with serving(Server(db, logs[2])) as (third,):
        done = wait_all(third, tokens, ids)
    assert_graded_once(str(db), ids, done)


# -- one server for the next two tests --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("load")
    db = folder / "gradebook.db"
    tokens = issue_roster(db, [str(2000 + i) for i in range(50)], folder)
    with serving(Server(db, folder / "serve.log")) as (server,):
        yield server, tokens, db


def raw_post_then_hang_up(url: str, path: str, token: str, key: str, body: bytes) -> None:
    """The whole upload sent, then the connection closed before the answer: a network error as
    the client sees it."""
    parts = urlsplit(url)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/zip\r\nIdempotency-Key: {key}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as s:
        s.sendall(head.encode() + body)
        s.shutdown(socket.SHUT_WR)


def test_a_retried_upload_with_the_same_idempotency_key_is_one_submission(sqlite_server):
    server, tokens, db = sqlite_server
    key, body = str(uuid.uuid4()), quiz_sheet(1001)
    with server.client(tokens["2000"]) as api:
        first = upload(api, QUIZ, body, key)
        again = upload(api, QUIZ, body, key)
        assert (first.status_code, again.status_code) == (202, 200), (first.text, again.text)
        assert again.json()["id"] == first.json()["id"]
        # the key names the upload: another body under it is still that one upload
        other = upload(api, QUIZ, quiz_sheet(1002), key)
        assert other.status_code == 200 and other.json()["id"] == first.json()["id"]
        # an answer lost on the way: the client sends again with its key
        lost_key = str(uuid.uuid4())
        raw_post_then_hang_up(
            server.url, f"/api/v1/exercises/{QUIZ}/submissions", tokens["2000"], lost_key, quiz_sheet(1003)
        )
        retried = upload(api, QUIZ, quiz_sheet(1003), lost_key)
        assert retried.status_code in (200, 202), retried.text
        mine = api.get("/submissions", params={"exercise": QUIZ}).json()["items"]
        assert sorted(s["id"] for s in mine) == sorted({first.json()["id"], retried.json()["id"]})
        wait_graded(api, [s["id"] for s in mine], GRADE_LIMIT)
    with server.client(tokens["2001"]) as api:  # keys are per learner: the same key is c01's own
        theirs = upload(api, QUIZ, body, key)
        assert theirs.status_code == 202 and theirs.json()["id"] != first.json()["id"]
        wait_graded(api, [theirs.json()["id"]], GRADE_LIMIT)
    runs = runs_per_upload(str(db))
    assert all(r == ("done", 1) for r in runs.values()), runs


def test_50_concurrent_clients_all_get_their_grades_while_health_answers(sqlite_server):
    server, tokens, _ = sqlite_server
    learners = sorted(tokens)[:50]
    assert len(learners) == 50
    start, stop = threading.Barrier(len(learners)), threading.Event()
    latencies: list[float] = []
    health_errors: list[str] = []

    def health():
        with httpx.Client(base_url=server.url, timeout=30) as c:
            while not stop.is_set():
                t = time.perf_counter()
                try:
                    r = c.get("/api/v1/health")
                    if r.status_code != 200:
                        health_errors.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as exc:
                    health_errors.append(repr(exc))
                latencies.append(time.perf_counter() - t)
                stop.wait(0.25)

    def client(who: str) -> dict:
        with server.client(tokens[who]) as api:
            start.wait(timeout=60)
            t = time.monotonic()
            r = upload(api, QUIZ, quiz_sheet(5000 + learners.index(who)))
            assert r.status_code == 202, r.text
            sub = wait_graded(api, [r.json()["id"]], GRADE_LIMIT)[r.json()["id"]]
            sub["waited"] = time.monotonic() - t
            return sub

    watcher = threading.Thread(target=health, daemon=True)
    watcher.start()
    try:
        with ThreadPoolExecutor(len(learners)) as pool:
            results = list(pool.map(client, learners))
    finally:
        stop.set()
        watcher.join(timeout=60)
    assert [s["learner"] for s in results] == learners
    assert {s["status"] for s in results} == {"graded"}
    assert all(s["score"] > 0 and s["grade"] for s in results)
    assert health_errors == [] and len(latencies) >= 1
    waits = sorted(s["waited"] for s in results)
    print(
        f"\n50 clients: upload to grade p50 {statistics.median(waits):.2f} s, max {waits[-1]:.2f} s; "
        f"/api/v1/health answered {len(latencies)} times meanwhile, latency p50 "
        f"{statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
    )


# -- two servers, one PostgreSQL gradebook ----------------------------------------------------------------


def test_two_servers_on_one_postgresql_gradebook_grade_100_without_a_duplicate(postgres, tmp_path):
    url = postgres.create_database()
    tokens = issue_roster(url, [str(3000 + i) for i in range(10)], tmp_path)
    servers = [Server(url, tmp_path / f"serve-{i}.log", workers=1) for i in range(2)]
    with serving(*servers):
        halves = [dict(list(tokens.items())[i::2]) for i in range(2)]
        with ThreadPoolExecutor(2) as pool:
            parts = list(
                pool.map(lambda i: upload_all(servers[i], halves[i], per_learner=10, threads=4), range(2))
            )
        ids = parts[0] | parts[1]
        assert len(ids) == 100
        done = wait_all(servers[0], tokens, ids)  # either server answers for the one gradebook
    assert_graded_once(url, ids, done)
    from sqlalchemy import create_engine, text

    from grader.store import normalize_url

    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as c:
            workers = dict(c.execute(text("SELECT worker, COUNT(*) FROM grade_runs GROUP BY worker")).all())
    finally:
        engine.dispose()
    print(f"\ngrade runs per worker process: {workers}")
    assert sum(workers.values()) == 100 and len(workers) >= 2, "both servers graded"


# -- the student install against a real server ------------------------------------------------------------


def test_the_fresh_venv_client_logs_in_fetches_submits_and_reads_back(
    student_install, sqlite_server, tmp_path
):
    """`pip install ./client` (the student's wheel, tests/test_client_install.py's venv): the student commands
    against a real server, from a folder outside the checkout."""
    server, tokens, _ = sqlite_server
    learner = Learner(tmp_path / "home", python=str(student_install / "python"))
    learner.env = {k: v for k, v in learner.env.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    login = learner.run("login", "--server", server.url, "--token", tokens["2049"])
    assert login.returncode == 0, login.stderr
    work = tmp_path / "home" / "work"
    starter = learner.run("starter", QUIZ, work, "--server", server.url)
    assert starter.returncode == 0, starter.stderr
    sheet = (work / "answers.toml").read_text(encoding="utf-8")
    assert "# learner: 2049" in sheet  # the learner's own variant
    (work / "answers.toml").write_bytes((EXERCISES / QUIZ / "solution" / "answers.toml").read_bytes())
    submitted = learner.run("submit", QUIZ, work, "--wait", "--format", "json")
    assert submitted.returncode in (0, 1), submitted.stderr
    report = json.loads(submitted.stdout)
    assert report["exercise"] == QUIZ and submitted.returncode == (0 if report["passed"] else 1)
    status = learner.run("status", QUIZ)
    assert status.returncode == 0 and QUIZ in status.stdout, status.stderr
    history = learner.run("history", QUIZ, "--format", "json")
    assert history.returncode == 0, history.stderr
    mine = json.loads(history.stdout)
    assert {s["learner"] for s in mine} == {"2049"} and report["student"] == "2049"
    assert [s["counted"] for s in mine] == [False] * (len(mine) - 1) + [True]  # no course.toml: the last
