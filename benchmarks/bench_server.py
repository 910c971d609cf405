"""What does the grading server cost a learner, and can it take a deadline? A script, not a test:

    .venv/bin/python benchmarks/bench_server.py            # ~5 min on 2 cores
    .venv/bin/python benchmarks/bench_server.py --quick    # ~1 min: a surge of 100 from 20 clients
    .venv/bin/python benchmarks/bench_server.py --quiz     # the surge of quiz sheets instead

Against a real `grader serve --workers 2` on 127.0.0.1 (a subprocess, SQLite gradebook, warmed
by two gradings of each kind first), in one run it measures and prints side by side:
  1. `grader submit day45-attention DIR --wait` of the solution (a comment makes each run's
     bytes new, so it is graded, not answered from an earlier grade), wall time of the whole
     command, against a cold `grader grade day45-attention DIR` of the same file (a new process: its own torch
     import and zygote). Target: submit at least 3 times faster.
  2. The client's own start-up: `grader submit --help` wall time, and which heavy modules that
     command imported (none: no torch). Target <= 0.3 s.
  3. A deadline surge: SURGE distinct day45-attention submissions (copies of the solution; or
     day45-quiz sheets with --quiz) uploaded by CLIENTS concurrent clients (threads with httpx,
     each waiting for its own uploads with long polls, as `grader submit --wait` does), drained by
     the server; then `grader batch --workers 2` of the same submissions into a fresh gradebook.
     Throughput of each and their ratio (target >= 90 %), and p50/p95 from upload (the server's
     received_at) to grade (the job's finished_at), both read from the gradebook. Batch's
     throughput is given two ways: as `grader batch` reports it (its worker start-up included)
     and in steady state (from its first grade on); the target is held to the steady state, the
     stricter. The surge is code by default, a course's real load: a quiz sheet is graded in
     ~70 ms, less than the upload, the polls and the queue's transactions around it, so --quiz
     measures the web process more than the grading (on 2 cores: 11 /s against batch's 28 /s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.limits import LONG_POLL_SECONDS  # noqa: E402
from tests.server_harness import (  # noqa: E402
    CODE,
    EXERCISES,
    QUIZ,
    Learner,
    Server,
    clean_env,
    issue_roster,
    upload,
    wait_graded,
    zipped,
)

HEAVY = ("torch", "numpy", "sqlalchemy", "fastapi", "uvicorn", "jinja2", "pytest", "distributed")


def wall(argv, env, cwd, timeout=600) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    return time.perf_counter() - t, proc


def solution(n: int) -> str:
    text = (EXERCISES / CODE / "solution" / "attention.py").read_text(encoding="utf-8")
    return f"{text}\n# bench {n}\n"


def quiz(n: int) -> str:
    text = (EXERCISES / QUIZ / "solution" / "answers.toml").read_text(encoding="utf-8")
    return f"{text}\n# bench {n}\n"


def submit_vs_cold_grade(server: Server, token: str, folder: Path, repeats: int) -> dict:
    learner = Learner(folder / "home")
    proc = learner.run("login", "--server", server.url, "--token", token)
    assert proc.returncode == 0, proc.stderr
    submits, colds = [], []
    for i in range(repeats):  # interleaved: both see the same machine
        work = folder / f"work{i}"
        work.mkdir()
        (work / "attention.py").write_text(solution(10_000 + i), encoding="utf-8")
        seconds, proc = wall(
            [sys.executable, "-m", "grader", "submit", CODE, str(work), "--wait"], learner.env, learner.home
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        submits.append(seconds)
        (work / "attention.py").write_text(solution(20_000 + i), encoding="utf-8")
        seconds, proc = wall([sys.executable, "-m", "grader", "grade", CODE, str(work)], clean_env(), ROOT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        colds.append(seconds)
    return {"submit": statistics.median(submits), "cold": statistics.median(colds), "runs": (submits, colds)}


def client_start(folder: Path, repeats: int) -> dict:
    learner = Learner(folder / "start-home")
    times = []
    for _ in range(repeats):
        seconds, proc = wall([sys.executable, "-m", "grader", "submit", "--help"], learner.env, learner.home)
        assert proc.returncode == 0, proc.stderr
        times.append(seconds)
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['grader', 'submit', '--help']\n"
        "try:\n    runpy.run_module('grader', run_name='__main__', alter_sys=True)\n"
        "except SystemExit:\n    pass\n"
        f"print(repr(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=learner.env, cwd=learner.home
    )
    heavy = eval(proc.stderr.strip().splitlines()[-1])  # our own probe's repr of a list
    return {"median": statistics.median(times), "min": min(times), "heavy": heavy}


def last_upload(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(db) as c:
        return c.execute("SELECT COALESCE(MAX(id), 0) FROM uploads").fetchone()[0]


def gradebook_times(db: Path, after: int) -> tuple[list[float], float]:
    """(upload-to-grade seconds of each upload after the id `after`, the drain's seconds: first
    received to last finished), from the server's own clock in the gradebook."""
    import sqlite3

    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT u.received_at, j.finished_at FROM uploads u JOIN jobs j ON j.upload_id = u.id "
            "WHERE u.id > ? AND j.status = 'done'",
            (after,),
        ).fetchall()

    def when(text: str) -> datetime:
        return datetime.fromisoformat(text)

    pairs = [(when(r), when(f)) for r, f in rows]
    latencies = sorted((f - r).total_seconds() for r, f in pairs)
    drain = (max(f for _, f in pairs) - min(r for r, _ in pairs)).total_seconds()
    return latencies, drain


def surge(
    server: Server, tokens: dict[str, str], db: Path, exercise: str, bodies: list[tuple[str, str]]
) -> dict:
    """Every client uploads its share at once, then waits for its own uploads until all are graded."""
    name = "attention.py" if exercise == CODE else "answers.toml"
    shares: dict[str, list[str]] = {}
    for who, text in bodies:
        shares.setdefault(who, []).append(text)
    start, after = threading.Barrier(len(shares)), last_upload(db)

    def client(who: str) -> list[dict]:
        with server.client(tokens[who]) as api:
            start.wait(timeout=120)
            ids = []
            for text in shares[who]:
                r = upload(api, exercise, zipped({name: text}))
                assert r.status_code == 202, r.text
                ids.append(r.json()["id"])
            deadline = time.monotonic() + 1800
            pending, done = list(ids), []
            while pending:
                wait = {"wait": LONG_POLL_SECONDS}  # held by the server until graded
                sub = api.get(f"/submissions/{pending[0]}", params=wait).raise_for_status().json()
                if sub["status"] in ("graded", "failed"):
                    done.append(sub)
                    pending.pop(0)
                    continue
                assert time.monotonic() < deadline, "the surge was not drained in 30 min"
            return done

    t = time.perf_counter()
    with ThreadPoolExecutor(len(shares)) as pool:
        results = [s for subs in pool.map(client, sorted(shares)) for s in subs]
    seen = time.perf_counter() - t
    assert len(results) == len(bodies) and {s["status"] for s in results} == {"graded"}
    latencies, drain = gradebook_times(db, after)
    assert len(latencies) == len(bodies)
    return {
        "n": len(bodies),
        "throughput": len(bodies) / drain,
        "drain": drain,
        "seen": seen,
        "p50": statistics.median(latencies),
        "p95": latencies[int(0.95 * (len(latencies) - 1))],
    }


def batch(folder: Path, exercise: str, bodies: list[tuple[str, str]]) -> dict:
    """`grader batch --workers 2` of the same files: one learner folder per submission."""
    name = "attention.py" if exercise == CODE else "answers.toml"
    source = folder / "class"
    for i, (_, text) in enumerate(bodies):
        (source / f"s{i:04d}").mkdir(parents=True)
        (source / f"s{i:04d}" / name).write_text(text, encoding="utf-8")
    out = folder / "batch-out"
    seconds, proc = wall(
        [
            sys.executable,
            "-m",
            "grader",
            "batch",
            exercise,
            str(source),
            "--db",
            str(folder / "batch.db"),
            "--workers",
            "2",
            "--out",
            str(out),
        ],
        clean_env(),
        ROOT,
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tally = json.loads((out / "batch.json").read_text(encoding="utf-8"))
    graded, total, first = tally["graded"], tally["seconds"], tally["first_s"] or 0.0
    assert graded == len(bodies), tally
    return {
        "wall": seconds,
        "reported": graded / total,
        "steady": (graded - 1) / (total - first) if total > first else graded / total,
        "seconds": total,
        "first": first,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a surge of 100 from 20 clients, 1 repeat")
    parser.add_argument("--surge", type=int, help="submissions in the surge [500; --quick 100]")
    parser.add_argument("--clients", type=int, help="concurrent clients [50; --quick 20]")
    parser.add_argument("--quiz", action="store_true", help="surge with day45-quiz sheets, not code")
    parser.add_argument("--repeats", type=int, help="submit/cold-grade pairs [3; --quick 1]")
    args = parser.parse_args()
    n = args.surge or (100 if args.quick else 500)
    clients = args.clients or (20 if args.quick else 50)
    repeats = args.repeats or (1 if args.quick else 3)
    exercise = QUIZ if args.quiz else CODE
    make = quiz if args.quiz else solution

    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        folder = Path(tmp)
        db = folder / "gradebook.db"
        learners = [str(7000 + i) for i in range(clients + 1)]
        tokens = issue_roster(db, learners, folder)
        solo, crowd = learners[0], learners[1:]
        bodies = [(crowd[i % clients], make(i)) for i in range(n)]
        server = Server(db, folder / "serve.log", workers=2).start()
        try:
            print(f"server {server.url} (2 workers, SQLite); warming both workers on each kind ...")
            with server.client(tokens[solo]) as api:
                warm = [(CODE, "attention.py", solution(-k)) for k in (1, 2)]
                warm += [(QUIZ, "answers.toml", quiz(-k)) for k in (1, 2)]
                ids = [upload(api, ex, zipped({name: text})).json()["id"] for ex, name, text in warm]
                wait_graded(api, ids, 600)
            timing = submit_vs_cold_grade(server, tokens[solo], folder, repeats)
            start = client_start(folder, 5)
            print(f"surge: {n} {exercise} submissions from {clients} clients ...")
            served = surge(server, tokens, db, exercise, bodies)
        finally:
            server.stop()
        print(f"grader batch --workers 2 of the same {n} ...")
        batched = batch(folder, exercise, bodies)

    ratio = timing["cold"] / timing["submit"]
    share = served["throughput"] / batched["steady"]
    rows = [
        ("submit --wait, warm server (median)", f"{timing['submit']:.2f} s", "", ""),
        ("grade, cold process (median)", f"{timing['cold']:.2f} s", "", ""),
        ("  cold grade / submit", f"{ratio:.2f} x", ">= 3 x", ratio >= 3),
        ("submit --help, wall (median of 5)", f"{start['median']:.3f} s", "<= 0.3 s", start["median"] <= 0.3),
        (
            "  heavy modules it imported",
            ", ".join(start["heavy"]) or "none",
            "no torch",
            "torch" not in start["heavy"],
        ),
        (f"surge: {n} {exercise} from {clients} clients", "", "", ""),
        ("  server drain", f"{served['throughput']:.2f} /s", f"{served['drain']:.1f} s", ""),
        ("  grader batch, as it reports", f"{batched['reported']:.2f} /s", f"{batched['seconds']:.1f} s", ""),
        (
            "  grader batch, steady state",
            f"{batched['steady']:.2f} /s",
            f"first at {batched['first']:.1f} s",
            "",
        ),
        ("  server / batch (steady state)", f"{share:.0%}", ">= 90 %", share >= 0.9),
        ("  server / batch (as reported)", f"{served['throughput'] / batched['reported']:.0%}", "", ""),
        ("  upload to grade p50 / p95", f"{served['p50']:.1f} s / {served['p95']:.1f} s", "", ""),
    ]
    print()
    print(f"{'':40}{'measured':>16}  {'target':<16}result")
    for label, measured, target, ok in rows:
        verdict = "" if ok == "" else ("ok" if ok else "MISSED")
        print(f"{label:40}{measured:>16}  {target:<16}{verdict}")
    submits, colds = ([round(x, 2) for x in runs] for runs in timing["runs"])
    print(f"(submit runs {submits}; cold grade runs {colds})")


if __name__ == "__main__":
    main()
