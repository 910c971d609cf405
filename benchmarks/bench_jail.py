"""How much does the jail cost? A script, not a test:

    .venv/bin/python benchmarks/bench_jail.py [--n 50] [--cold 3] [--skip-naive]

On the same N day45-attention submissions (copies of the solution, every fifth with a small bug)
it times:
  (a) the hidden checks run in this process with no isolation at all: the floor;
  (b) this grader: grader.grading.grade.grade(), one jail per submission forked from the warm zygote;
  (c) the naive way: a fresh `python -m pytest` process over the hidden tests per submission;
and prints the three rows, b/a (target <= 1.3) and c/b (target >= 4), then the wall time of
`grader grade` cold (a new process, a new zygote) on one submission (target <= 3 s).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

EXERCISE = "day45-attention"
BUGS = [   # (find, replace) in the solution's attention.py: a learner's small mistakes
    ("/ math.sqrt(q.size(-1))", "/ q.size(-1)"),
    ("diagonal=1)", "diagonal=0)"),
    ('float("-inf")', "-1e9"),
    ("x.view(B, T, n_head, d_model // n_head).transpose(1, 2)", "x.view(B, n_head, T, d_model // n_head)"),
    ("return self.w_o(merge_heads(y))", "return merge_heads(y)"),
]


def make_submissions(n: int, where: Path) -> list[Path]:
    solution = (ROOT / "exercises" / EXERCISE / "solution" / "attention.py").read_text()
    subs = []
    for i in range(n):
        text = solution
        if i % 5 == 4:
            find, replace = BUGS[(i // 5) % len(BUGS)]
            assert find in text, find
            text = text.replace(find, replace)
        d = where / f"sub{i:03d}"
        d.mkdir()
        (d / "attention.py").write_text(text + f"\n# submission {i}\n")
        subs.append(d)
    return subs


def rows_a_b(subs) -> tuple[float, list, float, list, str, float, float]:
    """(a) and (b), interleaved submission by submission (in alternating order), so that both rows
    see the same machine: on a shared machine the load drifts more than the effect measured."""
    from inprocess import InProcessSubmission

    from grader.jail.doctor import ensure_sound
    from grader.catalog.exercises import exercise_dir, load_exercise
    from grader.grading.grade import grade
    from grader.jail import launcher
    from grader.grading.runner import run_hidden_tests
    from grader.grading.session import freeze_long_lived_objects
    hidden = exercise_dir(EXERCISE) / "hidden"
    exercise = load_exercise(EXERCISE)
    t = time.perf_counter()
    zygote = launcher.default_zygote()
    start = time.perf_counter() - t
    t = time.perf_counter()
    ensure_sound(zygote)
    check = time.perf_counter() - t
    freeze_long_lived_objects()             # the same garbage-collector setting for both rows

    def a(sub):
        collected = run_hidden_tests(hidden, InProcessSubmission(sub, ["attention"]))
        return all(c.passed for c in collected.results)

    def b(sub):
        return grade(exercise, sub).passed

    a(subs[0]), b(subs[0])                                                       # warm-up
    ta = tb = 0.0
    va, vb = [], []
    for i, sub in enumerate(subs):
        for row in ((a, b) if i % 2 == 0 else (b, a)):
            t = time.perf_counter()
            verdict = row(sub)
            dt = time.perf_counter() - t
            if row is a:
                ta += dt
                va.append(verdict)
            else:
                tb += dt
                vb.append(verdict)
    return ta, va, tb, vb, zygote.isolation, start, check


def row_c(subs) -> tuple[float, list]:
    hidden = ROOT / "exercises" / EXERCISE / "hidden"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT)]))
    verdicts = []
    t = time.perf_counter()
    for sub in subs:
        env["GRADER_BENCH_SUBMISSION"] = str(sub)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", str(hidden), "-q", "-p", "naive_plugin",
             "-c", str(ROOT / "grader" / "hidden-pytest.ini"), "--rootdir", str(hidden),
             "-p", "no:cacheprovider", "--noconftest", "--import-mode=importlib",
             "--assert=plain", "-W", "ignore"],
            env=env, capture_output=True, text=True, cwd=str(ROOT))
        verdicts.append(proc.returncode == 0)
    return time.perf_counter() - t, verdicts


def cold(sub: Path, runs: int) -> list[float]:
    """`python -m grader` from this checkout (the `grader` script would run whichever checkout the
    virtual environment has installed)."""
    walls = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "grader", "grade", EXERCISE, str(sub)], capture_output=True,
                       cwd=str(ROOT))
        walls.append(time.perf_counter() - t)
    return walls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--cold", type=int, default=3, help="cold `grader grade` runs")
    parser.add_argument("--skip-naive", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grader-bench-"))
    try:
        subs = make_submissions(args.n, work)
        import torch
        torch.set_num_threads(1)
        a, va, b, vb, isolation, start, check = rows_a_b(subs)
        if args.skip_naive:
            c, vc = float("nan"), vb
        else:
            c, vc = row_c(subs)
        walls = cold(subs[0], args.cold) if args.cold else []
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = len(subs)
    print(f"{n} {EXERCISE} submissions ({sum(va)} pass, {n - sum(va)} with a bug); "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    print(f"  (a) hidden checks in-process, no isolation   {a:7.2f} s   {1000 * a / n:7.1f} ms each")
    print(f"  (b) this grader ({isolation:10})            {b:7.2f} s   {1000 * b / n:7.1f} ms each"
          f"   (+ {start:.2f} s once to start the zygote, {check:.2f} s for the jail's self-check)")
    print(f"  (c) a fresh `python -m pytest` each        {c:7.2f} s   {1000 * c / n:7.1f} ms each")
    print(f"  b/a = {b / a:.2f}   (target <= 1.3)")
    print(f"  c/b = {c / b:.2f}   (target >= 4)")
    if walls:
        print(f"  `grader grade` cold, one submission: {', '.join(f'{w:.2f}' for w in walls)} s wall "
              f"(median {statistics.median(walls):.2f} s; target <= 3 s)")
    if not (va == vb == vc):
        print("  WARNING: the rows disagree on which submissions pass:",
              [i for i in range(n) if not (va[i] == vb[i] == vc[i])])


if __name__ == "__main__":
    main()
