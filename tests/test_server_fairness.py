"""Issue 28, items 5 and 6, over real HTTP on loopback: `grader serve --workers 2` in a subprocess.

- A dying worker takes nobody else down: one learner's upload whose worker is killed (kill -9)
  three times is a dead letter; another learner's upload grading in the other worker all the
  while is graded on its first attempt. The edition's day49-data has a first hidden check that
  writes its worker's pid to a folder and waits for a file the test makes (bounded), so the test
  knows which worker grades which upload, and the innocent upload is in flight through all three.
- One learner cannot stall everyone: four uploads of day45-attention that hang until the wall
  limit (WALL seconds in this edition: a sleep at import) hold both workers; another learner's
  quiz waits for one of those gradings at most, and is graded before the hangs queued before it.

One server for the file (the tests run in file order and leave nothing running); every wait is
bounded, and the server is killed with its whole process group at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from grader.store import Gradebook
from grader.store.schema import Job
from tests.server_harness import (
    CODE,
    EXERCISES,
    QUIZ,
    Server,
    clean_env,
    hard_timeout,
    issue_token,
    quiz_sheet,
    upload,
    wait_graded,
    zipped,
)

DATA = "day49-data"
WALL = 8  # seconds: day45-attention's wall (and call) limit in this edition, which a hang uses up
GATE_SECONDS = 240  # the most the gate check waits for its file
TEST_LIMIT = 420  # seconds one test may take, then it fails (the server's start included)
KILLED, QUICK, HUNG = ("vic", "ina"), "qui", "han"  # (victim, innocent), the quick learner, the hanging one

GATE_CHECK = """import os
import time
from pathlib import Path

from grader.testkit import check

MARKERS, GATE = Path({markers!r}), Path({gate!r})


@check(points=0, rule="target-shift", day=49, title="waits for the test's gate")
def test_waits_for_the_gate(submission):
    (MARKERS / str(os.getpid())).write_text("")  # this worker grades an upload now
    deadline = time.monotonic() + {seconds}
    while not GATE.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
"""


def edition(folder: Path) -> tuple[Path, Path, Path]:
    """The three exercises, day49-data with the gate check first, day45-attention's wall WALL s;
    the edition, its markers folder and its gate file (not made yet)."""
    root, markers, gate = folder / "edition", folder / "markers", folder / "gate"
    for name in (DATA, CODE, QUIZ):
        shutil.copytree(EXERCISES / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    markers.mkdir()
    check = GATE_CHECK.format(markers=str(markers), gate=str(gate), seconds=GATE_SECONDS)
    (root / DATA / "hidden" / "test_aa_gate.py").write_text(check, encoding="utf-8")
    with open(root / CODE / "exercise.toml", "a", encoding="utf-8") as f:
        f.write(f"\n[limits]\nwall_seconds = {WALL}\ncall_seconds = {WALL}\n")
    return root, markers, gate


class Served:
    def __init__(self, server: Server, book: Gradebook, tokens: dict[str, str], markers: Path, gate: Path):
        self.server, self.book, self.tokens, self.markers, self.gate = server, book, tokens, markers, gate

    def client(self, who: str) -> httpx.Client:
        return self.server.client(self.tokens[who])

    def jobs(self) -> dict[int, dict]:
        """upload id -> its job's attempts, status, last lease and finish (the gradebook's)."""
        with self.book.sessions() as s:
            return {
                job.upload_id: {
                    "attempts": job.attempts,
                    "status": job.status,
                    "started": job.started_at,
                    "finished": job.finished_at,
                }
                for job in s.scalars(select(Job))
            }

    def new_marker(self, known: set[int], timeout: float = 180) -> int:
        """The pid of a worker that reached the gate check and is not one of `known`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = {int(p.name) for p in self.markers.iterdir()} - known
            if found:
                assert len(found) == 1, found
                return found.pop()
            assert self.server.proc is not None and self.server.proc.poll() is None, self.server.log()[-3000:]
            time.sleep(0.05)
        raise AssertionError(f"no worker reached the gate in {timeout} s:\n{self.server.log()[-3000:]}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fairness")
    root, markers, gate = edition(folder)
    env = clean_env(GRADER_EXERCISES_DIR=str(root))
    db = folder / "gradebook.db"
    server = Server(db, folder / "serve.log", workers=2, env=env)
    try:
        with hard_timeout(TEST_LIMIT):
            tokens = {who: issue_token(db, who, env=env) for who in (*KILLED, QUICK, HUNG)}
            server.start()
        with Gradebook(str(db)) as book:
            yield Served(server, book, tokens, markers, gate)
    finally:
        gate.touch()  # a gate check still waiting ends
        server.stop()


@pytest.fixture(autouse=True)
def bounded():
    with hard_timeout(TEST_LIMIT):
        yield


def test_a_worker_killed_three_times_fails_only_its_own_upload(served):
    victim, innocent = KILLED
    solution = (EXERCISES / DATA / "solution" / "data.py").read_bytes()
    began = time.monotonic()
    with served.client(innocent) as ina, served.client(victim) as vic:
        r = upload(ina, DATA, zipped({"data.py": solution + b"\n# the innocent\n"}))
        assert r.status_code == 202, r.text
        innocent_id = r.json()["id"]
        innocent_worker = served.new_marker(set())  # grading, held at the gate through all that follows
        r = upload(vic, DATA, zipped({"data.py": solution + b"\n# the victim\n"}))
        assert r.status_code == 202, r.text
        victim_id = r.json()["id"]
        killed: list[int] = []
        for _ in range(3):  # each attempt of the victim's upload, on a fresh worker each time
            worker = served.new_marker({innocent_worker, *killed})
            os.kill(worker, signal.SIGKILL)
            killed.append(worker)
        dead = wait_graded(vic, [victim_id], timeout=120)[victim_id]
        assert dead["status"] == "failed", dead
        assert served.jobs()[innocent_id]["status"] == "running", "the innocent upload is in flight still"
        served.gate.touch()
        graded = wait_graded(ina, [innocent_id], timeout=180)[innocent_id]
    took = time.monotonic() - began
    jobs = served.jobs()
    print(f"\nworkers killed: {killed}; the innocent's worker {innocent_worker}; {took:.1f} s in all")
    print(f"attempts: victim {jobs[victim_id]['attempts']}, innocent {jobs[innocent_id]['attempts']}")
    assert graded["status"] == "graded" and graded["passed"] is True, graded
    assert jobs[innocent_id]["attempts"] == 1, "the innocent upload was charged nothing"
    assert (jobs[victim_id]["attempts"], jobs[victim_id]["status"]) == (3, "dead")
    assert innocent_worker not in killed
    assert served.server.log().count("a worker process died") == 3


def test_four_hanging_uploads_delay_another_learners_grade_by_one_grading_at_most(served):
    with served.client(HUNG) as han, served.client(QUICK) as qui:
        hangs = []
        for i in range(4):
            body = zipped({"attention.py": f"import time\n\ntime.sleep(3600)  # hang {i}\n"})
            r = upload(han, CODE, body)
            assert r.status_code == 202, r.text
            hangs.append(r.json()["id"])
        deadline = time.monotonic() + 60
        while [served.jobs()[i]["status"] for i in hangs[:2]] != ["running"] * 2:  # both workers hung
            assert time.monotonic() < deadline, served.jobs()
            time.sleep(0.1)
        time.sleep(1.0)  # the hangs are under way in the jails
        began = time.monotonic()
        r = upload(qui, QUIZ, quiz_sheet("the quick learner"))
        assert r.status_code == 202, r.text
        quick = r.json()["id"]
        sub = wait_graded(qui, [quick], timeout=6 * WALL + 60)[quick]
        waited = time.monotonic() - began
        assert sub["status"] == "graded", sub  # (another learner's quiz variant: not passed)
        hung = wait_graded(han, hangs, timeout=6 * WALL + 120)
    assert all(h["status"] == "graded" and h["passed"] is False for h in hung.values()), hung
    jobs = served.jobs()
    gradings = [(jobs[i]["finished"] - jobs[i]["started"]).total_seconds() for i in hangs]
    print(f"\nthe quick grade waited {waited:.1f} s behind 4 hanging uploads (wall {WALL} s)")
    print("the hanging gradings took " + ", ".join(f"{s:.1f}" for s in gradings) + " s")
    print(
        f"leased: quick {jobs[quick]['started']}, hangs " + ", ".join(str(jobs[i]["started"]) for i in hangs)
    )
    for i in hangs[2:]:  # queued before the quick upload, they started after it and finished later
        assert jobs[quick]["started"] < jobs[i]["started"], "the quick upload went first"
        assert jobs[quick]["finished"] < jobs[i]["finished"]
    assert waited <= max(gradings[:2]) + 10, "at most one grading's wall time, and a little more"
    assert all(jobs[i]["attempts"] == 1 for i in (quick, *hangs))
