"""What does a hostile reply cost the grader? A script, not a test:

    .venv/bin/python benchmarks/bench_replies.py [--corpus] [--only NAME ...]

Each submission is graded in a fresh grading process (`grader.grading.grade.grade`, day45-attention,
the adversarial corpus's short limits), and that process's own peak RSS (ru_maxrss) and
wall time are printed beside the reference solution's, with their ratios (target: RSS <= 2x).
The rows are the solution, then every forged reply of tests/adversarial/replies.py (32 MiB of
empty maps, deep nesting, many tiny strings, the shape bomb, a huge declared shape with few bytes,
a 500 MiB-announced frame, ...), and with --corpus every case of tests/adversarial/cases.py too.
A second table decodes each forged body in this process: its time, and its tracemalloc peak.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from adversarial import cases as corpus  # noqa: E402
from adversarial.replies import CASES, attack_code, body_bytes  # noqa: E402

from grader.jail import wire  # noqa: E402

SOLUTION = ROOT / "exercises" / "day45-attention" / "solution" / "attention.py"

GRADE_ONE = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
import grader.grading.grade as grading
from grader.catalog.exercises import load_exercise
from grader.models import Limits
exercise = load_exercise("day45-attention").model_copy(update={{"limits": Limits(
    wall_seconds=30, call_seconds=10, memory_mb=1024, processes=32, file_size_mb=64)}})
start = time.monotonic()
grade = grading.grade(exercise, {sub!r})
print(json.dumps({{"seconds": time.monotonic() - start, "score": grade.score,
                  "error": grade.error.kind if grade.error else None,
                  "self_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
"""


def grade_in_fresh_process(sub: Path) -> dict:
    """Grade `sub` in a new Python process: its peak RSS (MiB), the grade's time and score."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", GRADE_ONE.format(root=str(ROOT), sub=str(sub))],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        lines = out.read().decode().strip().splitlines()
    row = json.loads(lines[-1]) if proc.returncode == 0 and lines else {"seconds": None, "score": None}
    # the grading process's own peak (KiB on Linux); wait4's would also be the largest of its
    # reaped descendants': the zygote and, through it, the jails
    row["rss_mb"] = row.get("self_kib", usage.ru_maxrss) / 1024
    row["exit"] = proc.returncode
    return row


def submission(where: Path, name: str, code: str) -> Path:
    sub = where / name
    sub.mkdir()
    (sub / "attention.py").write_text(SOLUTION.read_text() + "\n# --- the attack ---\n" + code)
    return sub


def corpus_code(template: str, where: Path) -> str:
    """A corpus case's code with its placeholders filled as the test's arena would (harmlessly)."""
    plant = where / "plant"
    plant.mkdir(exist_ok=True)
    values = {
        "@PLANT@": str(plant),
        "@CANARY@": "BENCH-CANARY",
        "@PORT@": "9",
        "@MARK@": "bench-mark",
        "@SIBLING@": "BENCH-SIBLING",
        "@EXERCISE@": str(ROOT / "exercises" / "day45-attention"),
    }
    for key, value in values.items():
        template = template.replace(key, value)
    return template


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", action="store_true", help="also every case of tests/adversarial/cases.py")
    ap.add_argument("--only", nargs="*", default=None, help="only these forged replies (by name)")
    args = ap.parse_args()

    rows: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="bench-replies-") as tmp:
        where = Path(tmp)
        base = grade_in_fresh_process(submission(where, "solution", ""))
        rows.append(("solution", base))
        todo = [c for c in CASES if args.only is None or c.name in args.only]
        for case in todo:
            rows.append(
                (
                    f"reply:{case.name}",
                    grade_in_fresh_process(submission(where, case.name, attack_code(case))),
                )
            )
        if args.corpus:
            for case in corpus.CASES:
                if case.cli or case.name == "read-sibling-submission":
                    continue  # graded through the command line (a process of its own), or needs a victim
                code = corpus_code(case.code, where)
                rows.append(
                    (f"corpus:{case.name}", grade_in_fresh_process(submission(where, case.name, code)))
                )

    print(f"{'submission':42s} {'peak RSS MiB':>12s} {'x solution':>10s} {'grade s':>8s} {'x solution':>10s}")
    worst = 0.0
    for name, row in rows:
        rss_ratio = row["rss_mb"] / base["rss_mb"]
        worst = max(worst, rss_ratio)
        secs = row.get("seconds")
        t_ratio = f"{secs / base['seconds']:10.2f}" if secs and base.get("seconds") else f"{'-':>10s}"
        shown = f"{secs:8.2f}" if secs is not None else f"{'exit ' + str(row['exit']):>8s}"
        print(f"{name:42s} {row['rss_mb']:12.0f} {rss_ratio:10.2f} {shown} {t_ratio}")
    print(f"worst peak RSS: {worst:.2f}x the solution's (target <= 2)")

    print()
    print(f"{'decoding the forged body':42s} {'body MiB':>9s} {'ms':>8s} {'peak KiB':>9s}  outcome")
    for case in CASES:
        body = body_bytes(case)
        start = time.perf_counter()  # timed apart from tracemalloc, which slows every allocation
        outcome = decode_outcome(body)
        elapsed = time.perf_counter() - start
        tracemalloc.start()
        decode_outcome(body)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{case.name:42s} {len(body) / 2**20:9.2f} {elapsed * 1000:8.1f} {peak / 1024:9.1f}  {outcome}")


def decode_outcome(body: bytes) -> str:
    try:
        wire.decode(body)
        return "decoded"
    except wire.WireError as exc:
        return f"WireError: {str(exc)[:60]}"


if __name__ == "__main__":
    main()
