"""A real `grader serve` in a subprocess, and the real CLI against it, for the end-to-end tests
(tests/test_server_e2e.py, tests/test_server_load.py) and benchmarks/bench_server.py.

Everything listens on 127.0.0.1 on a port the kernel picks (`--port 0`; the server says which on
stderr). Every wait is bounded, and every server is killed with its whole process group (its
worker processes and their jails) when the test is done, whatever happened.
"""

from __future__ import annotations

import csv
import io
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ROOT / "exercises"
QUIZ = "day45-quiz"
CODE = "day45-attention"
START_SECONDS = 120  # a server's start: the gradebook's migrations, the exercises, uvicorn
LISTENING = re.compile(r"listening on (https?://[^\s]+?:\d+)")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a child process: ours, without a login the machine may carry."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRADER_SERVER", "GRADER_TOKEN")}
    env.update(LANG="C.UTF-8", LC_ALL="C.UTF-8", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def grader(*args, env=None, timeout: float = 300, cwd=ROOT, python: str = sys.executable):
    """`python -m grader ARGS`, the real command line."""
    return subprocess.run(
        [python, "-m", "grader", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env if env is not None else clean_env(),
    )


def issue_token(db, learner: str, role: str = "student", name: str | None = None, env=None) -> str:
    args = ["tokens", "issue", learner, "--role", role, "--db", db]
    if name:
        args += ["--name", name]
    proc = grader(*args, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    token = proc.stdout.strip()
    assert token and "\n" not in token, proc.stdout
    return token


def issue_roster(db, learners: Iterable[str], folder: Path, env=None) -> dict[str, str]:
    """One token per learner (Canvas user ids: digits) through `grader tokens issue --roster`, from a
    Canvas gradebook export."""
    roster, out = folder / "roster.csv", folder / "tokens.csv"
    rows = ["Student,ID,SIS User ID,SIS Login ID,Section", "    Points Possible,,,,"]
    rows += [f"Learner {i},{i},sis-{i},{i}@example.edu,A" for i in learners]
    roster.write_text("\n".join(rows) + "\n", encoding="utf-8")
    proc = grader("tokens", "issue", "--roster", roster, "--out", out, "--db", db, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    with out.open(encoding="utf-8", newline="") as f:
        return {row["learner"]: row["token"] for row in csv.DictReader(f)}


class Server:
    """`grader serve --db DB --port 0 --workers N [--course FILE]` as a subprocess of its own
    process group; `url` once it answers /api/v1/health."""

    def __init__(
        self,
        db,
        log: Path,
        *,
        course: Path | None = None,
        workers: int = 2,
        env=None,
        args=(),
        open_files: int | None = None,
    ):
        self.db, self.log_path, self.course, self.workers = db, log, course, workers
        self.env = env if env is not None else clean_env()
        self.args = list(args)
        self.open_files = open_files  # RLIMIT_NOFILE, soft and hard, of the server (None: ours)
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> Server:
        argv = [sys.executable, "-m", "grader", "serve", "--db", str(self.db), "--port", "0"]
        argv += ["--workers", str(self.workers), *self.args]
        if self.course is not None:
            argv += ["--course", str(self.course)]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - held for the process's life
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
            preexec_fn=None if self.open_files is None else self._limit_open_files,
        )
        deadline = time.monotonic() + START_SECONDS
        while not self.url:
            found = LISTENING.search(self.log())
            if found:
                self.url = found.group(1)
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"grader serve did not start:\n{self.log()[-4000:]}")
            time.sleep(0.1)
        while True:  # the socket is bound before uvicorn runs: wait for an answer
            try:
                if httpx.get(self.url + "/api/v1/health", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"grader serve does not answer:\n{self.log()[-4000:]}")
            time.sleep(0.1)

    def _limit_open_files(self) -> None:  # in the child, before exec
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """SIGKILL to the server and every process it started (its pool, their jails), then
        reaped: a zombie's pid would look alive to the next server's Queue.resume()."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        self._log.close()
        self.proc = None

    def stop(self) -> None:
        """SIGTERM (uvicorn's graceful stop), then whatever is left is killed."""
        if self.proc is None:
            return
        try:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def client(self, token: str | None = None, **kw) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url + "/api/v1", headers=headers, timeout=60, **kw)

    def rss_bytes(self) -> int:
        """The web process's resident memory now (its workers are processes of their own)."""
        assert self.proc is not None
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE).group(1)) * 1024  # type: ignore[union-attr]

    def open_fds(self) -> int:
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


class Learner:
    """One learner's machine: a home folder of their own (their login file), the real CLI."""

    def __init__(self, home: Path, env=None, python: str = sys.executable):
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        base = env if env is not None else clean_env()
        self.env = {**base, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
        self.env.pop("GRADER_EXERCISES_DIR", None)  # a student's machine has no exercises
        if python == sys.executable:  # this checkout's grader, whatever the venv has installed
            self.env["PYTHONPATH"] = str(ROOT)
        self.python = python

    def run(self, *args, timeout: float = 300) -> subprocess.CompletedProcess:
        return grader(*args, env=self.env, timeout=timeout, cwd=self.home, python=self.python)


@contextmanager
def hard_timeout(seconds: int):
    """An exception in the main thread after `seconds`: the fixtures' finalizers still run."""

    def expired(signum, frame):
        raise TimeoutError(f"more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextmanager
def learner_server(folder: Path, learner: str, start_limit: int = 240):
    """`grader serve` (one grading worker) on a fresh gradebook in `folder`, with `learner`'s token
    as its `.token`; stopped on the way out."""
    db = folder / "gradebook.sqlite"
    with hard_timeout(start_limit):
        token = issue_token(db, learner)
        srv = Server(db, folder / "server.log", workers=1).start()
    srv.token = token
    try:
        yield srv
    finally:
        srv.stop()


def zipped(files: dict[str, bytes | str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def quiz_sheet(n: object) -> bytes:
    """The quiz's own solution sheet, made distinct by a comment (a distinct submission)."""
    text = (EXERCISES / QUIZ / "solution" / "answers.toml").read_text(encoding="utf-8")
    return zipped({"answers.toml": f"{text}\n# sheet {n}\n"})


def upload(client: httpx.Client, exercise: str, body: bytes, key: str | None = None) -> httpx.Response:
    headers = {"Content-Type": "application/zip"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(f"/exercises/{exercise}/submissions", content=body, headers=headers)


def wait_graded(client: httpx.Client, ids: Iterable[int], timeout: float = 300) -> dict[int, dict]:
    """Each submission's JSON once it is graded or failed; AssertionError after `timeout`."""
    pending, done = set(ids), {}
    deadline = time.monotonic() + timeout
    while pending:
        for i in sorted(pending):
            sub = client.get(f"/submissions/{i}").raise_for_status().json()
            if sub["status"] in ("graded", "failed"):
                done[i] = sub
                pending.discard(i)
        if pending:
            assert time.monotonic() < deadline, f"not graded after {timeout} s: {sorted(pending)}"
            time.sleep(0.3)
    return done


def runs_per_upload(db_url: str) -> dict[int, tuple[str, int]]:
    """upload id -> (its job's status, how many grade runs its submission has) in the gradebook."""
    from sqlalchemy import create_engine, text

    from grader.store import normalize_url

    engine = create_engine(normalize_url(db_url))
    try:
        with engine.connect() as c:
            rows = c.execute(
                text(
                    "SELECT u.id, j.status, (SELECT COUNT(*) FROM grade_runs r"
                    " WHERE r.submission_id = u.submission_id) FROM uploads u"
                    " JOIN jobs j ON j.upload_id = u.id"
                )
            ).all()
    finally:
        engine.dispose()
    return {int(u): (str(status), int(n)) for u, status, n in rows}
