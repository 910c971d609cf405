"""What does one grade cost in CPU, and is it cheaper than at a base commit? A script, not a test:

    .venv/bin/python benchmarks/bench_grade.py [--base bb88852] [--repeats 3] [--exercises ID ...]

The base commit is checked out in a temporary `git worktree` (removed at the end) and, in one run,
one fresh grading process per tree (cwd and PYTHONPATH at that tree, the same .venv python)
grades each code exercise's solution and its starter (a failing submission, whose failed checks
are named by replaying them on the mutants) with `grader.grading.grade.grade`: one warm-up grade, then
--repeats grades (more for a cheap one, see MEASURED_SECONDS) whose CPU seconds are averaged.
The table prints base and head side by side, with base / head per row. Target: every solution's
grade at least 1.5 times cheaper than at bb88852 (the script exits 1 when one is not; the
starters are shown, not judged). About a minute and a half on two CPUs.

A grade's CPU seconds are split into:
  jail     the jail's side: learner code and the jail's worker, the zygote's fork of the jail,
           and the spare jail it forks for the next grade (each grade uses one spare up).
           These are descendants of the grading process (bwrap, the zygote, its jails), so
           this is that process tree's CPU after the grade minus the same before it (the
           baseline: the zygote's start-up, earlier grades' jails). The tree's CPU is read from
           /proc/<pid>/stat: utime + stime of each live descendant, plus its cutime + cstime
           (what its reaped children used), once `launcher.collect()` has made the zygote reap
           every killed jail (a jail is killed without waiting: its CPU reaches the zygote's
           cutime when it is reaped). Each read is in clock ticks (10 ms) per process, so one
           grade's figure is good to a few ticks; the mean of a row's grades smooths that.
  reference  the trusted counterparts' work in the grading process: calls into reference_model
           (every function and method of its modules, wrapped here), and the budgets' timing of
           a call's counterpart (reference_model's, or the exercise solution's where it has no
           module of that name: CallBudgets._measure and _twin, budgets._seconds_per_step).
  wire     the grading process's side of the jail's round trips: `Jail.request` and
           `Jail.wait_ready` (encoding, the socket's system calls, decoding the reply).
  naming   `grader.grading.fingerprints.Namer` calls: replaying failed checks on the mutants.
  pytest   the rest of the grading process: pytest, hypothesis, the hidden tests' own code,
           budgets, assembling the grade.
A wrapped call's CPU (time.process_time) goes to the outermost category it runs in; a category
entered inside another is not timed again. The wrappers cost a microsecond or so a call, the
same in both trees.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
EXERCISES = ("day45-attention", "day48-decoder", "day49-data", "day49-bughunt")
SUBMISSIONS = ("solution", "starter")
PARTS = ("jail", "reference", "wire", "naming", "pytest")
TARGET = 1.5  # a solution's grade: base CPU / head CPU at least this
MEASURED_SECONDS = 2.0  # a row's grades are repeated past --repeats until they used this much CPU ...
MAX_REPEATS = 12  # ... or this many were graded


# -- the grading process (--child TREE): imports the grader of TREE only --------------------------
class Meter:
    """CPU seconds per category, outermost category first (see the module's docstring)."""

    def __init__(self):
        self.seconds = dict.fromkeys(PARTS[1:4], 0.0)
        self._inside = False

    def wrap(self, category: str, fn):
        import functools

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if self._inside:
                return fn(*args, **kwargs)
            self._inside = True
            started = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[category] += time.process_time() - started
                self._inside = False

        return timed

    def install(self) -> None:
        import importlib
        import inspect
        import pkgutil

        import grader.grading.budgets
        import grader.grading.fingerprints
        import grader.jail.client
        import reference_model

        names = [reference_model.__name__] + [
            f"{reference_model.__name__}.{m.name}" for m in pkgutil.iter_modules(reference_model.__path__)
        ]
        for name in names:
            module = importlib.import_module(name)
            for attr, value in list(vars(module).items()):
                if getattr(value, "__module__", None) != name:
                    continue  # imported from elsewhere: wrapped where it is defined
                if inspect.isfunction(value):
                    setattr(module, attr, self.wrap("reference", value))
                elif inspect.isclass(value):
                    for method, fn in list(vars(value).items()):
                        if inspect.isfunction(fn):
                            setattr(value, method, self.wrap("reference", fn))
        # `import reference_model as ref; ref.x` reads the package's names, imported from its modules
        for attr, value in list(vars(reference_model).items()):
            module = getattr(value, "__module__", "") or ""
            if inspect.isfunction(value) and module.startswith(reference_model.__name__ + "."):
                setattr(reference_model, attr, getattr(sys.modules[module], attr))
        # the budgets' timing of a call's counterpart: reference_model's, or the exercise
        # solution's where reference_model has no module of that name (the bug hunt's train())
        calls = grader.grading.budgets.CallBudgets
        calls._measure = self.wrap("reference", calls._measure)
        calls._twin = self.wrap("reference", calls._twin)
        grader.grading.budgets._seconds_per_step = self.wrap("reference", grader.grading.budgets._seconds_per_step)
        client = grader.jail.client.Jail
        client.request = self.wrap("wire", client.request)
        client.wait_ready = self.wrap("wire", client.wait_ready)
        namer = grader.grading.fingerprints.Namer
        namer.__call__ = self.wrap("naming", namer.__call__)


def _stat_ticks(pid: int) -> tuple[int, int]:
    """(own ticks, reaped children's ticks) of a process: utime + stime, cutime + cstime."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _children(pid: int) -> list[int]:
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


def descendants_cpu() -> float:
    """CPU seconds of this process's descendants, live and reaped (see the module's docstring)."""
    from grader.jail import launcher

    launcher.collect()  # killed jails reaped: their CPU is in the zygote's cutime
    ticks = _stat_ticks(os.getpid())[1]
    todo = _children(os.getpid())
    while todo:
        pid = todo.pop()
        try:
            own, reaped = _stat_ticks(pid)
        except OSError:
            continue  # ended between the listing and the read: counted in its parent's cutime
        ticks += own + reaped
        todo += _children(pid)
    return ticks / os.sysconf("SC_CLK_TCK")


def measure(tree: Path, exercises: list[str], repeats: int) -> dict:
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    from grader.grading.grade import grade

    meter = Meter()
    meter.install()
    results: dict = {}
    for exercise in exercises:
        for which in SUBMISSIONS:
            path = tree / "exercises" / exercise / which
            warm = grade(exercise, path)  # warm-up: the zygote, imports, what a process keeps
            rows: list[dict] = []
            # a cheap grade is repeated more: the jail's clock ticks are 10 ms
            while len(rows) < repeats or (
                sum(sum(r.values()) for r in rows) < MEASURED_SECONDS and len(rows) < MAX_REPEATS
            ):
                before = dict(meter.seconds)
                jail_before, cpu_before = descendants_cpu(), time.process_time()
                graded = grade(exercise, path)
                grader_cpu = time.process_time() - cpu_before
                jail = descendants_cpu() - jail_before
                assert graded.score == warm.score, (exercise, which, graded.score, warm.score)
                row = {k: meter.seconds[k] - before[k] for k in meter.seconds}
                row["pytest"] = grader_cpu - sum(row.values())
                row["jail"] = jail
                rows.append(row)
            results[f"{exercise}/{which}"] = {
                "score": warm.score,
                "diagnosis": sorted(d.mutant or "" for d in warm.diagnosis),
                "grades": len(rows),
                **{part: sum(r[part] for r in rows) / len(rows) for part in PARTS},
            }
    return results


# -- the driver ----------------------------------------------------------------------------------
def run_child(tree: Path, exercises: list[str], repeats: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("GRADER_GRADE_LOG", None)
    command = [
        str(PYTHON),
        str(HERE),
        "--child",
        str(tree),
        "--repeats",
        str(repeats),
        "--exercises",
        *exercises,
    ]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"grading in {tree} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(base: dict, head: dict) -> list[str]:
    lines = [
        f"{'':34} {'CPU s':>7}  " + " ".join(f"{p:>9}" for p in PARTS) + f"  {'base/head':>9}",
    ]
    for key in base:
        b, h = base[key], head[key]
        b_total, h_total = sum(b[p] for p in PARTS), sum(h[p] for p in PARTS)
        lines.append(
            f"{key:34} {b_total:7.3f}  " + " ".join(f"{b[p]:9.3f}" for p in PARTS) + f"  base ({b['grades']})"
        )
        lines.append(
            f"{'':34} {h_total:7.3f}  "
            + " ".join(f"{h[p]:9.3f}" for p in PARTS)
            + f"  head ({h['grades']}) {b_total / h_total:5.2f}x"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", default="bb88852", help="the commit compared with (default bb88852)")
    parser.add_argument("--repeats", type=int, default=3, help="warm grades averaged per row")
    parser.add_argument("--exercises", nargs="+", default=list(EXERCISES))
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child.resolve(), args.exercises, args.repeats)))
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        worktree = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--quiet", str(worktree), args.base], cwd=ROOT, check=True
        )
        try:
            base = run_child(worktree, args.exercises, args.repeats)
            head = run_child(ROOT, args.exercises, args.repeats)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
    print(
        f"CPU seconds per warm grade (mean of {args.repeats} or more), base {args.base} vs head (this tree)\n"
    )
    print("\n".join(table(base, head)))
    missed = []
    for key in base:
        if base[key]["score"] != head[key]["score"] or base[key]["diagnosis"] != head[key]["diagnosis"]:
            print(
                f"\nWARNING: {key} graded differently: base {base[key]['score']} "
                f"{base[key]['diagnosis']}, head {head[key]['score']} {head[key]['diagnosis']}"
            )
        ratio = sum(base[key][p] for p in PARTS) / sum(head[key][p] for p in PARTS)
        if key.endswith("/solution") and ratio < TARGET:
            missed.append(f"{key} {ratio:.2f}x")
    print(f"\n({time.monotonic() - started:.0f} s)")
    if missed:
        print(
            f"TARGET MISSED: a solution's grade at least {TARGET}x cheaper than at {args.base}: "
            + ", ".join(missed)
        )
        return 1
    print(f"target met: every solution's grade at least {TARGET}x cheaper than at {args.base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
