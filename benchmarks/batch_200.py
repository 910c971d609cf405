"""Acceptance run for issue 7: a class of 200 graded in one `grader batch` into SQLite and, separately,
into PostgreSQL (a throwaway cluster, fsync on); the two gradebooks must agree grade for grade.

    .venv/bin/python benchmarks/batch_200.py                      # day49-bughunt, 200 learners, 2 workers
    .venv/bin/python benchmarks/batch_200.py --n 40 --backends sqlite

The class (grader/course/sampleclass.py): the reference solution and the correct alternatives, every
mutant of the exercise (buggy), and hostile learners: an endless loop at import, a syntax error, a
malformed diagnosis.toml, a missing file. day49-bughunt is the exercise with both a Python file and
a TOML answer sheet, so every kind of hostile submission applies. It takes several minutes on 2
cores (the endless loops each use the exercise's 60 s call limit); the unit suite
(tests/test_batch.py) does the same on a class of 8.
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.course.sampleclass import make_class  # noqa: E402
from grader.store import Gradebook  # noqa: E402

HOSTILE = ("import-loop", "syntax-error", "malformed-toml", "missing-file")


def snapshot(db: str, exercise: str) -> dict:
    with Gradebook(db) as gb:
        counts = gb.counts(exercise)
        grades = {c.learner: (c.grade.score, c.grade.passed, c.grade.error.kind if c.grade.error else None,
                              tuple((ch.id, ch.passed, ch.points) for ch in c.grade.checks), c.status)
                  for c in gb.current_grades(exercise)}
    return {"counts": counts, "grades": grades}


def run(exercise: str, src: Path, db: str, out: Path, workers: int) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", exercise, str(src), "--db", db,
                           "--workers", str(workers), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"grader batch exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}")
    return wall, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exercise", default="day49-bughunt")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-hostile", type=int, default=2, help="learners of each hostile kind")
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]

    with tempfile.TemporaryDirectory(prefix="grader-bench-") as tmp:
        tmp = Path(tmp)
        manifest = make_class(args.exercise, tmp / "class", args.n, hostile=HOSTILE, per_hostile=args.per_hostile)
        kinds = collections.Counter(k.split(":")[0] for k in manifest.values())
        print(f"class: {len(manifest)} learners of {args.exercise}: " +
              ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) +
              f"; hostile kinds: {', '.join(sorted({k for k in manifest.values() if k.startswith('hostile')}))}")
        results = {}
        for backend in backends:
            if backend == "sqlite":
                db, pg = str(tmp / "gradebook.db"), None
            else:
                from grader.store.pgtemp import TempPostgres
                pg = TempPostgres(durable=True).start()
                db = pg.create_database("grader")
            try:
                wall, stdout = run(args.exercise, tmp / "class", db, tmp / f"out-{backend}", args.workers)
                snap = snapshot(db, args.exercise)
            finally:
                if pg is not None:
                    pg.stop()
            line = next((l for l in stdout.splitlines() if "throughput:" in l), "").strip()
            rate = re.search(r"= ([\d.]+) grades/s", line)
            results[backend] = snap
            c = snap["counts"]
            print(f"\n[{backend}] {wall:.1f} s wall for the whole command; {line}")
            print(f"[{backend}] gradebook: {c['submissions']} submissions, {c['final_runs']} final grades, "
                  f"{c['graded_pairs']} distinct (submission, version) pairs, {c['error_runs']} grader errors")
            assert c["final_runs"] == c["graded_pairs"] == len(manifest), c
            if rate:
                results[backend]["rate"] = float(rate.group(1))

        first = results[backends[0]]["grades"]
        by_kind = collections.defaultdict(list)
        for learner, kind in manifest.items():
            by_kind[kind].append(first[learner])
        print("\nby kind (from the first backend):")
        for kind, grades in sorted(by_kind.items()):
            passed = sum(g[1] for g in grades)
            errors = collections.Counter(g[2] for g in grades if g[2])
            print(f"  {kind:42} {len(grades):4} learners  mean {sum(g[0] for g in grades) / len(grades):6.2f}"
                  f"  passed {passed:3}" + (f"  errors {dict(errors)}" if errors else ""))
        for backend in backends[1:]:
            other = results[backend]["grades"]
            diff = [k for k in first if first[k] != other.get(k)]
            if diff or set(first) != set(other):
                sys.exit(f"MISMATCH between {backends[0]} and {backend}: {diff[:10]}")
            print(f"\n{backends[0]} and {backend}: identical scores, verdicts and checks for all "
                  f"{len(first)} learners")


if __name__ == "__main__":
    main()
