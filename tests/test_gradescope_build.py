"""`grader gradescope build` and the autograder it builds (grader/course/autograder.py): the zip's
members, the course policy's visibility in results.json, a results.json whatever fails, and the
real thing: the built zip unpacked in a scratch root laid out as Gradescope documents it, setup.sh
run once in a fresh venv, then run_autograder for the solution, a mutant and an empty submission.

The fresh-venv tests (`-m fresh_venv`, about a minute and a half: pip installs torch from the
local wheel) can be skipped on a developer's machine with GRADER_SKIP_INSTALL_TEST=1; in CI
(CI=true) they always run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import typing
import zipfile
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from grader.course.autograder import AutograderConfig, failure_results, run
from grader.cli import main
from grader.catalog.exercises import all_exercises
from grader.models import Grade
from grader.catalog.mutants import apply_mutant, load_mutants
from grader.policy.course import GRADESCOPE_VISIBILITY, Visibility
from reports.gradescope import results, schema

ROOT = Path(__file__).resolve().parents[1]
EX = "day49-data"
AFTER_DUE = "get-batch-draws-every-start-uniformly"  # the mutant below fails it
HIDDEN = "lm-loss-is-a-mean"
MUTANT = "last-start-never"
COURSE = f"""
[exercises.{EX}]
due = 2026-12-06T23:59:00+08:00
visibility = {{ default = "visible", checks = {{ "{AFTER_DUE}" = "after_due", "{HIDDEN}" = "hidden" }} }}
"""

fresh_venv = pytest.mark.skipif(
    os.environ.get("GRADER_SKIP_INSTALL_TEST") == "1" and os.environ.get("CI") != "true",
    reason="GRADER_SKIP_INSTALL_TEST=1: the fresh-venv autograder test is skipped (it always runs in CI)",
)


def validate(data: dict) -> dict:
    jsonschema.Draft202012Validator(schema()).validate(data)
    return data


def build(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["gradescope", "build", *args], catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("course") / "course.toml"
    path.write_text(COURSE)
    return path


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory, course) -> Path:
    out = tmp_path_factory.mktemp("build") / "autograder.zip"
    code, output = build(EX, "--out", str(out), "--course", str(course))
    assert code == 0, output
    assert f"wrote {out}" in output
    return out


# -- the zip --------------------------------------------------------------------------------------


def test_the_zip_has_setup_and_run_autograder_at_its_root_executable(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as zf:
        infos = {i.filename: i for i in zf.infolist()}
    for name in ("setup.sh", "run_autograder"):
        mode = infos[name].external_attr >> 16
        assert mode & 0o111 == 0o111, f"{name}: {oct(mode)}"
        assert infos[name].create_system == 3  # Unix: unzip reads the mode
    assert infos["pyproject.toml"].external_attr >> 16 & 0o111 == 0
    names = set(infos)
    for package in ("grader", "reports", "reference_model"):
        assert f"{package}/__init__.py" in names
    assert "grader/course/autograder.py" in names and "grader/jail/zygote.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def test_the_zip_holds_only_this_exercise(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as zf:
        names = zf.namelist()
        mutant_tomls = {n: tomllib.loads(zf.read(n).decode()) for n in names if n.startswith("mutants/")
                        and n.endswith(".toml")}
    others = [e.id for e in all_exercises() if e.id != EX]
    assert others
    assert {n.split("/")[1] for n in names if n.startswith("exercises/") and n.count("/") > 1} == {EX}
    for part in ("exercise.toml", "hidden/test_data.py", "solution/data.py"):
        assert f"exercises/{EX}/{part}" in names
    assert not [n for n in names if any(o in n for o in others)]
    assert not any(n.startswith("mutants/alternatives") for n in names)
    # the shared mutants that name this exercise's bugs, each with only this exercise's edits
    ours = {m.id for m in load_mutants() if EX in m.exercises}
    assert {Path(n).stem for n in mutant_tomls} == ours
    for name, data in mutant_tomls.items():
        assert data["edit"] and {e["exercise"] for e in data["edit"]} == {EX}, name
    multi = next(m for m in load_mutants() if EX in m.exercises and len(m.exercises) > 1)  # unshifted-targets
    assert any(e.exercise != EX for e in multi.edit)


def test_the_course_visibility_and_the_pins_are_baked_in(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as zf:
        config = AutograderConfig.model_validate_json(zf.read("autograder.json"))
        requirements = zf.read("requirements.txt").decode().splitlines()
        fallback = json.loads(zf.read("failed-results.json"))
    assert config.exercise == EX
    assert config.visibility == {AFTER_DUE: "after_due_date", HIDDEN: "hidden"}
    assert config.default_visibility == "visible" and config.of("make-xy-returns-int64") == "visible"
    pins = [line for line in requirements if not line.startswith("#")]
    assert "torch==2.13.0" in pins
    assert all(line.count("==") == 1 and "+" not in line for line in pins), pins
    assert {p.split("==")[0] for p in pins} >= {"numpy", "pytest", "hypothesis", "msgpack", "pydantic"}
    assert validate(fallback)["score"] == 0 and "not graded" in fallback["output"]


def test_every_policy_visibility_has_its_gradescope_word():
    enum = schema()["$defs"]["visibility"]["enum"]
    assert set(GRADESCOPE_VISIBILITY) == set(typing.get_args(Visibility))
    assert sorted(set(GRADESCOPE_VISIBILITY.values())) == sorted(enum)  # sealed is after_due_date too


@pytest.mark.parametrize(
    "args, needle",
    [
        (["day49-nope", "--out", "{tmp}/a.zip"], "EXERCISE: unknown exercise 'day49-nope'"),
        ([EX, "--out", "{tmp}/no/such/folder/a.zip"], "--out: the folder {tmp}/no/such/folder does not exist"),
        ([EX, "--out", "{tmp}/a.zip", "--course", "{tmp}/bad.toml"], "bad.toml: late_dayz: unknown key"),
        (
            [EX, "--out", "{tmp}/a.zip", "--course", "{tmp}/wrong.toml"],
            "wrong.toml: exercises.day46-nope: unknown exercise",
        ),
        ([EX, "--out", "{tmp}/a.zip", "--course", "{tmp}/missing.toml"], "missing.toml: cannot be read"),
    ],
)
def test_bad_input_exits_2_naming_it(tmp_path, args, needle):
    (tmp_path / "bad.toml").write_text("late_dayz = 1\n")
    (tmp_path / "wrong.toml").write_text("[exercises.day46-nope]\n")
    result = CliRunner().invoke(main, ["gradescope", "build", *(a.format(tmp=tmp_path) for a in args)])
    assert result.exit_code == 2, result.output
    assert needle.format(tmp=tmp_path) in result.output
    assert not (tmp_path / "a.zip").exists()


# -- results.json's visibility ------------------------------------------------------------------

SECRET = "PLANTED-SECRET-51c"


def two_checks() -> Grade:
    check = dict(passed=False, points=0, max_points=1, rule="causal-mask", day=44)
    return Grade.model_validate(
        dict(
            exercise="day45-attention",
            passed=False,
            score=0,
            max_score=2,
            checks=[dict(id="open", title="open", **check), dict(id="later", title="later", **check)],
            diagnosis=[
                dict(rule="causal-mask", day=44, check="open", message="seen now"),
                dict(rule="causal-mask", day=44, check="later", message=f"after due {SECRET}"),
                dict(rule="causal-mask", day=44, message=f"of no check {SECRET}"),
            ],
            output=dict(start=f"printed {SECRET}"),
        )
    )


def test_without_visibility_every_check_and_the_whole_are_visible():
    data = validate(results(two_checks()))
    assert data["visibility"] == "visible" and {t["visibility"] for t in data["tests"]} == {"visible"}
    assert SECRET in data["output"]  # nothing withheld: the summary tells everything


def test_a_withheld_check_tells_its_diagnosis_in_its_own_test_only():
    data = validate(results(two_checks(), visibility={"later": "after_due_date"}))
    by_id = {t["extra_data"]["id"]: t for t in data["tests"]}
    assert (by_id["open"]["visibility"], by_id["later"]["visibility"]) == ("visible", "after_due_date")
    assert SECRET not in data["output"]  # neither its diagnosis, nor one of no check, nor the printout
    assert "seen now" in data["output"]
    assert f"after due {SECRET}" in by_id["later"]["output"]
    assert "after due" not in by_id["open"]["output"]


def test_the_default_visibility_is_the_top_levels_and_each_checks_without_its_own():
    data = validate(results(two_checks(), visibility={"open": "visible"}, default_visibility="after_published"))
    assert data["visibility"] == "after_published" and data["stdout_visibility"] == "hidden"
    assert [t["visibility"] for t in data["tests"]] == ["visible", "after_published"]


# -- run_autograder's core, in this process -------------------------------------------------------


def scratch_root(tmp_path: Path) -> Path:
    """/autograder as Gradescope lays it out, with the config of a build."""
    root = tmp_path / "autograder"
    for name in ("source", "submission", "results"):
        (root / name).mkdir(parents=True)
    (root / "source" / "autograder.json").write_text(AutograderConfig(exercise=EX).model_dump_json())
    return root


def test_a_missing_submission_folder_is_a_results_json_of_0(tmp_path):
    root = scratch_root(tmp_path)
    (root / "submission").rmdir()
    data = run(root)
    written = validate(json.loads((root / "results" / "results.json").read_text()))
    assert written == json.loads(json.dumps(data))
    assert written["score"] == 0 and written["extra_data"]["error"] == "grader-failure"
    assert "submission" in written["output"] and "does not exist" in written["output"]


def test_a_crash_of_the_grader_is_a_results_json_of_0_saying_so(tmp_path, monkeypatch, capsys):
    import grader.grading.grade

    def broken(*args, **kwargs):
        raise RuntimeError(f"grader bug {SECRET}")

    monkeypatch.setattr(grader.grading.grade, "grade", broken)
    root = scratch_root(tmp_path)
    written = validate(run(root))
    assert written == json.loads((root / "results" / "results.json").read_text())
    assert written["score"] == 0 and "the grader failed" in written["output"]
    assert SECRET not in written["output"]  # the traceback is for the instructor: on stderr
    assert SECRET in capsys.readouterr().err


def test_failure_results_speak_the_configured_language():
    data = validate(failure_results(AutograderConfig(exercise=EX, lang="zh-TW"), "x"))
    assert data["output"] != failure_results(AutograderConfig(exercise=EX), "x")["output"]


def test_run_autograder_copies_the_build_time_results_when_python_cannot_start(autograder_zip, tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    with zipfile.ZipFile(autograder_zip) as zf:
        zf.extract("run_autograder", root)
        zf.extract("failed-results.json", root / "source")
    (root / "run_autograder").chmod(0o755)
    proc = subprocess.run(
        [str(root / "run_autograder")], env={**os.environ, "GRADER_AUTOGRADER_ROOT": str(root)},
        capture_output=True, text=True, timeout=60, cwd=root,
    )  # no venv at all: setup.sh never ran
    assert proc.returncode == 0, proc.stderr
    assert "wrote no results.json" in proc.stderr
    assert validate(json.loads((root / "results" / "results.json").read_text()))["score"] == 0


# -- the real thing: a fresh venv, setup.sh once, run_autograder per submission -------------------


@pytest.fixture(scope="module")
def gradescope_root(autograder_zip, tmp_path_factory, torch_wheels):
    """The zip unpacked to ROOT/source, setup.sh run there once (a fresh venv at ROOT/venv), and
    run_autograder copied to ROOT, as Gradescope builds its image. Times setup.sh."""
    root = tmp_path_factory.mktemp("gradescope") / "autograder"
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(autograder_zip) as zf:
        zf.extractall(root / "source")
        for info in zf.infolist():  # zipfile drops the modes: restore them, as unzip does
            (root / "source" / info.filename).chmod(info.external_attr >> 16 & 0o777)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    env = {**os.environ, "GRADER_AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys._base_executable,
           # torch from the wheel already on this machine, never fetched again (tests/README.md)
           "PIP_FIND_LINKS": " ".join([str(torch_wheels), os.environ.get("PIP_FIND_LINKS", "")]).strip()}
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    proc = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True, timeout=900,
        cwd=root / "source",
    )
    print(f"\nsetup.sh (fresh venv, pip install) took {time.monotonic() - started:.0f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "setup.sh: ready; torch 2.13.0" in proc.stdout
    fetched = [line for line in proc.stdout.splitlines() if re.search(r"Downloading\s+\S*torch-", line)]
    assert fetched == [], fetched
    return root, env


def run_autograder(gradescope_root, files: Path | None) -> dict:
    """One Gradescope run: `files` (a folder) as the submission, a fresh results/."""
    root, env = gradescope_root
    for name in ("submission", "results"):
        shutil.rmtree(root / name, ignore_errors=True)
    if files is None:
        (root / "submission").mkdir()
    else:
        shutil.copytree(files, root / "submission")
    started = time.monotonic()
    proc = subprocess.run(
        [str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=600, cwd=root
    )
    print(f"run_autograder took {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    data = validate(json.loads((root / "results" / "results.json").read_text()))
    assert data["extra_data"]["exercise"] == EX
    return data


def graded_in_the_jail(data: dict) -> None:
    """Whatever jail the machine allows; where CI requires bubblewrap, bubblewrap."""
    isolation = data["extra_data"]["isolation"]
    assert isolation in ("bubblewrap", "process")
    if os.environ.get("GRADER_REQUIRE_BWRAP"):
        assert isolation == "bubblewrap"


@pytest.mark.fresh_venv
@fresh_venv
def test_fresh_venv_the_solution_scores_the_maximum(gradescope_root):
    data = run_autograder(gradescope_root, ROOT / "exercises" / EX / "solution")
    assert data["score"] == data["extra_data"]["max_score"] > 0
    graded_in_the_jail(data)
    assert all(t["score"] == t["max_score"] for t in data["tests"])
    shown = {t["extra_data"]["id"]: t["visibility"] for t in data["tests"]}
    assert shown[AFTER_DUE] == "after_due_date" and shown[HIDDEN] == "hidden"
    assert set(shown.values()) == {"visible", "after_due_date", "hidden"}


@pytest.mark.fresh_venv
@fresh_venv
def test_fresh_venv_a_mutant_scores_less_and_its_after_due_check_waits(gradescope_root, tmp_path):
    mutant = next(m for m in load_mutants() if m.id == MUTANT)
    data = run_autograder(gradescope_root, apply_mutant(mutant, EX, tmp_path / "mutant"))
    assert 0 <= data["score"] < data["extra_data"]["max_score"]
    graded_in_the_jail(data)
    failed = {t["extra_data"]["id"]: t for t in data["tests"] if t["status"] == "failed"}
    assert AFTER_DUE in failed and failed[AFTER_DUE]["visibility"] == "after_due_date"
    named = [d for d in data["extra_data"]["diagnosis"] if d["mutant"] == MUTANT]
    assert named, data["extra_data"]["diagnosis"]
    told = mutant.message.en[:40]
    assert told in failed[AFTER_DUE]["output"]  # shown with the check, after the due date
    assert told not in data["output"]  # not in the summary, which Gradescope shows at once


@pytest.mark.fresh_venv
@fresh_venv
def test_fresh_venv_an_empty_submission_is_a_results_json_of_0(gradescope_root):
    data = run_autograder(gradescope_root, None)
    assert data["score"] == 0 and data["extra_data"]["error"] == "invalid-submission"
    assert "data.py" in data["output"]
