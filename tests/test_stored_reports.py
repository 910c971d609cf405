"""A stored grade renders as the grade just graded: batch files and `gradebook show` read the
gradebook, and say what `grader grade` says on the same submission (timestamps and durations aside)."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from conftest import EXERCISES, run_grader
from grader.catalog.mutants import apply_mutant, load_mutants

EXERCISE = "day48-decoder"          # its training probe attaches a loss curve


def without_durations(text: str) -> str:
    text = re.sub(r'"(duration_s|naming_s|execution_time)": [0-9.e-]+', r'"\1": 0', text)
    text = re.sub(r'time="[0-9.]+"', 'time="N"', text)                  # JUnit
    return re.sub(r"\d+(\.\d+)? ?(s\b|秒)", "N s", text)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """One learner's submission, graded by `grader batch` into a SQLite gradebook."""
    base = tmp_path_factory.mktemp("stored")
    course = base / "class"
    shutil.copytree(EXERCISES / EXERCISE / "solution", course / "s002")
    # a learner's bug: Post-LN, so some checks fail with messages and a diagnosis
    post_ln = next(m for m in load_mutants() if m.id == "post-ln")
    learner = apply_mutant(post_ln, EXERCISE, course / "s001")
    db, out = base / "gradebook.db", base / "out"
    proc = run_grader("batch", EXERCISE, course, "--db", db, "--out", out, "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"db": db, "out": out, "submission": learner}


def test_the_batch_grade_file_is_what_grade_prints_with_the_curve(graded_class):
    stored = (graded_class["out"] / "grades" / "s001.json").read_text(encoding="utf-8")
    fresh = run_grader("grade", EXERCISE, graded_class["submission"], "--format", "json", "--student", "s001")
    assert fresh.returncode == 1, fresh.stderr
    assert without_durations(stored) == without_durations(fresh.stdout)
    grade = json.loads(stored)
    assert not grade["passed"] and any(c["curve"] for c in grade["checks"])
    assert any(c["message_id"] for c in grade["checks"] if not c["passed"])


@pytest.mark.parametrize("fmt", ["html", "text", "markdown", "junit", "gradescope"])
def test_gradebook_show_renders_the_stored_grade_as_grade_renders_it(graded_class, fmt):
    shown = run_grader("gradebook", "show", "s001", "--db", graded_class["db"], "--exercise", EXERCISE,
                       "--format", fmt, "--lang", "zh-TW")
    fresh = run_grader("grade", EXERCISE, graded_class["submission"], "--format", fmt, "--lang", "zh-TW",
                       "--student", "s001")
    assert shown.returncode == 0 and fresh.returncode == 1, shown.stderr + fresh.stderr
    if fmt == "text":             # show adds the instructor's overview (history) before the report
        assert without_durations(shown.stdout).endswith(without_durations(fresh.stdout))
    else:
        assert without_durations(shown.stdout) == without_durations(fresh.stdout)
    assert "注意力" in fresh.stdout or "層" in fresh.stdout     # it is the zh-TW report
