"""End to end: the `grader` command on solutions, starters and broken submissions."""
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from conftest import EXERCISES, grade_json, run_grader

# every exercise folder whose exercise.toml is of kind "code" (the default), as a new one is added
CODE_EXERCISES = [
    p.parent.name
    for p in sorted(EXERCISES.glob("*/exercise.toml"))
    if tomllib.loads(p.read_text()).get("kind", "code") == "code"
]


@pytest.mark.parametrize("exercise", CODE_EXERCISES)
def test_solution_passes_at_full_marks(exercise, corpus_grades):
    code, grade = corpus_grades.cli_json(exercise, EXERCISES / exercise / "solution")
    failing = [(c["id"], c["message"]) for c in grade["checks"] if not c["passed"]]
    assert failing == [], failing
    assert code == 0 and grade["passed"] is True and grade["error"] is None
    assert grade["score"] == grade["max_score"] > 0


@pytest.mark.parametrize("exercise", CODE_EXERCISES)
def test_starter_scores_zero_without_a_grader_traceback(exercise, tmp_path):
    proc = run_grader("starter", exercise, tmp_path / "mine")
    assert proc.returncode == 0, proc.stderr
    code, grade = grade_json(exercise, tmp_path / "mine")
    assert code == 1 and grade["passed"] is False and grade["score"] == 0
    assert grade["checks"], "a starter is graded check by check, not refused"
    assert not any("internal grader error" in c["message"] for c in grade["checks"])


def test_json_has_the_fields_of_spec(corpus_grades):
    _, grade = corpus_grades.cli_json("day45-attention", EXERCISES / "day45-attention" / "solution")
    for field in ("exercise", "passed", "score", "max_score", "checks", "symptoms", "diagnosis", "error"):
        assert field in grade
    for field in ("id", "passed", "points", "max_points", "rule", "day", "message", "symptoms"):
        assert field in grade["checks"][0]


def test_points_in_metadata_equal_the_sum_of_checks(corpus_grades):
    for exercise in CODE_EXERCISES:
        _, grade = corpus_grades.cli_json(exercise, EXERCISES / exercise / "solution")
        assert sum(c["max_points"] for c in grade["checks"]) == grade["max_score"], exercise


def copy_solution(tmp_path, exercise="day45-attention"):
    target = tmp_path / "submission"
    shutil.copytree(EXERCISES / exercise / "solution", target)
    return target


def test_missing_file_fails_only_the_checks_that_read_it(tmp_path):
    sub = copy_solution(tmp_path, "day49-bughunt")
    (sub / "diagnosis.toml").unlink()
    code, grade = grade_json("day49-bughunt", sub)
    assert code == 1 and grade["error"] is None
    failed = [c for c in grade["checks"] if not c["passed"]]
    assert failed and all(c["id"].startswith("diagnosis-") for c in failed)
    assert all("diagnosis.toml" in c["message"] for c in failed)


def test_missing_name_fails_only_the_checks_that_call_it(tmp_path):
    sub = copy_solution(tmp_path)
    text = (sub / "attention.py").read_text().replace("def merge_heads(", "def merge_heads_typo(")
    (sub / "attention.py").write_text(text)
    code, grade = grade_json("day45-attention", sub)
    assert grade["error"] is None and code == 1
    failed = [c for c in grade["checks"] if not c["passed"]]
    assert failed and all("merge_heads" in c["message"] for c in failed)
    assert any(c["passed"] for c in grade["checks"])


def test_syntax_error_is_reported_with_its_line(tmp_path):
    sub = copy_solution(tmp_path)
    lines = (sub / "attention.py").read_text().splitlines()
    lines[9] = "def broken(:"
    (sub / "attention.py").write_text("\n".join(lines))
    code, grade = grade_json("day45-attention", sub)
    assert grade["error"]["kind"] == "invalid-submission"
    assert "attention.py line 10" in grade["error"]["message"]


def test_exception_at_import_is_a_crash_with_its_line(tmp_path):
    sub = copy_solution(tmp_path)
    (sub / "attention.py").write_text((sub / "attention.py").read_text() + "\nundefined_name\n")
    code, grade = grade_json("day45-attention", sub)
    assert code == 1 and grade["error"]["kind"] == "crash"
    assert "NameError" in grade["error"]["message"] and "attention.py:" in grade["error"]["message"]


def test_symbolic_link_is_refused(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    os.symlink(EXERCISES / "day45-attention" / "solution" / "attention.py", sub / "attention.py")
    code, grade = grade_json("day45-attention", sub)
    assert grade["error"]["kind"] == "invalid-submission" and "symbolic link" in grade["error"]["message"]


def test_single_file_path_is_accepted():
    code, grade = grade_json("day45-attention", EXERCISES / "day45-attention" / "solution" / "attention.py")
    assert code == 0 and grade["passed"]


def test_usage_errors_exit_2_and_name_the_argument(tmp_path):
    proc = run_grader("grade", "day99-nothing", tmp_path)
    assert proc.returncode == 2 and "EXERCISE" in proc.stderr and "day45-attention" in proc.stderr
    proc = run_grader("grade", "day45-attention", tmp_path / "nope")
    assert proc.returncode == 2 and "PATH" in proc.stderr


def test_malformed_toml_fails_the_checks_that_read_it_with_line_and_column(tmp_path):
    sub = copy_solution(tmp_path, "day49-bughunt")
    (sub / "diagnosis.toml").write_text('[bugs.A]\nrule = "attention-scaling\nday = 43\n')
    code, grade = grade_json("day49-bughunt", sub)
    assert code == 1 and grade["error"] is None
    failed = [c for c in grade["checks"] if not c["passed"]]
    assert failed and all(c["id"].startswith("diagnosis-") for c in failed)
    assert all("diagnosis.toml" in c["message"] and "line 2" in c["message"] for c in failed)
    assert all(c["passed"] for c in grade["checks"] if not c["id"].startswith("diagnosis-"))


def test_learner_output_cannot_forge_the_report(tmp_path):
    sub = copy_solution(tmp_path)
    text = (sub / "attention.py").read_text()
    text += '\nprint(\'{"exercise": "day45-attention", "passed": true, "score": 999}\')\n'
    (sub / "attention.py").write_text(text)
    code, grade = grade_json("day45-attention", sub)
    assert grade["score"] == grade["max_score"] == 35 and code == 0
    assert "999" in grade["output"]["start"]     # what it printed is kept as output, nothing more


def test_submission_folder_is_never_written(tmp_path):
    sub = copy_solution(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in sub.rglob("*")}
    grade_json("day45-attention", sub)
    assert {p: p.stat().st_mtime_ns for p in sub.rglob("*")} == before


def test_exercises_lists_every_exercise():
    proc = run_grader("exercises")
    assert proc.returncode == 0
    for exercise in CODE_EXERCISES:
        assert exercise in proc.stdout


def test_starter_refuses_to_overwrite(tmp_path):
    assert run_grader("starter", "day45-attention", tmp_path).returncode == 0
    proc = run_grader("starter", "day45-attention", tmp_path)
    assert proc.returncode == 2 and "already exists" in proc.stderr


def test_bughunt_starter_report_names_all_four_bugs():
    code, grade = grade_json("day49-bughunt", EXERCISES / "day49-bughunt" / "starter")
    named = {(d["rule"], d["day"], d["mutant"]) for d in grade["diagnosis"]}
    assert named >= {("attention-scaling", 43, "scale-by-d-model"), ("causal-mask", 44, "mask-diagonal-0"),
                     ("pre-ln-residual", 46, "post-ln"), ("target-shift", 49, "unshifted-targets")}
    assert "nan-forward" in grade["symptoms"]
