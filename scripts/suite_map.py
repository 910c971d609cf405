"""Where the suite's time goes (tests/README.md): per test file, its tests' wall time, how many
grades it made and how many of those were repeats; the slowest wider-scoped fixtures; and, over
the whole run, how many grades were made and how many repeated one already made (same exercise,
same files, same options).

    .venv/bin/python scripts/suite_map.py [--out DIR] [--read DIR] [pytest arguments...]

runs `pytest -n 2 --dist loadgroup` (or the arguments given) with GRADER_GRADE_LOG set, so every
grade, in the test process or in a CLI, server or pool process it started, logs one line naming
its test (grader/grading/grade.py log_grade); the JUnit XML gives each test's time. --read DIR prints
the map of a run already made into DIR.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(out: Path, pytest_args: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("grades.jsonl*"):
        old.unlink()
    env = {**os.environ, "GRADER_GRADE_LOG": str(out / "grades.jsonl")}
    args = pytest_args or ["-q", "-n", "2", "--dist", "loadgroup"]
    argv = [sys.executable, "-m", "pytest", *args, f"--junitxml={out / 'junit.xml'}"]
    return subprocess.run(argv, cwd=ROOT, env=env).returncode


def test_file(classname: str) -> str:
    """tests.test_x or tests.test_x.TestClass -> tests/test_x.py"""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        if (ROOT / ("/".join(parts[:end]) + ".py")).is_file():
            return "/".join(parts[:end]) + ".py"
    return classname


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def report(out: Path) -> str:
    tests = collections.defaultdict(lambda: [0, 0.0])  # file -> [tests, seconds]
    for case in ET.parse(out / "junit.xml").getroot().iter("testcase"):
        file = test_file(case.get("classname", ""))
        tests[file][0] += 1
        tests[file][1] += float(case.get("time") or 0)
    grades = lines(out / "grades.jsonl")
    made = collections.Counter()
    per_file = collections.defaultdict(lambda: [0, 0, 0.0])  # file -> [grades, repeats, grading s]
    for g in grades:
        file = g["test"].split("::")[0] or "(outside a test)"
        key = (g["exercise"], g["digest"], tuple(g["options"]))
        made[key] += 1
        per_file[file][0] += 1
        per_file[file][1] += made[key] > 1
        per_file[file][2] += g["seconds"]
    rows = [f"{'file':42} {'tests':>5} {'wall s':>8} {'grades':>6} {'repeats':>7} {'grading s':>9}"]
    for file in sorted(set(tests) | set(per_file), key=lambda f: -tests[f][1]):
        n, seconds = tests[file]
        g, r, gs = per_file[file]
        rows.append(f"{file:42} {n:5d} {seconds:8.1f} {g:6d} {r:7d} {gs:9.1f}")
    total = sum(s for _, s in tests.values())
    repeats = sum(c - 1 for c in made.values())
    rows.append(f"{'all':42} {sum(n for n, _ in tests.values()):5d} {total:8.1f} {len(grades):6d} "
                f"{repeats:7d} {sum(g['seconds'] for g in grades):9.1f}")
    rows.append(f"\n{len(made)} distinct grades; {repeats} of {len(grades)} grades repeated one already made")
    fixtures = sorted(lines(Path(f"{out / 'grades.jsonl'}.fixtures")), key=lambda f: -f["seconds"])
    rows.append(f"\n{'slowest fixtures (module/session scope)':60} {'s':>7}")
    rows += [f"{f['fixture'] + ' @ ' + f['where']:60.60} {f['seconds']:7.1f}" for f in fixtures[:15]]
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="where the logs go (default: a new temp folder)")
    parser.add_argument("--read", type=Path, help="only print the map of a run made into this folder")
    options, pytest_args = parser.parse_known_args()
    if options.read:
        print(report(options.read))
        return 0
    out = options.out or Path(tempfile.mkdtemp(prefix="suite-map-"))
    status = run(out, pytest_args)
    print(report(out))
    print(f"\n(logs in {out})")
    return status


if __name__ == "__main__":
    sys.exit(main())
