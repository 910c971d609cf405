"""The course's own files (exercise.toml, key.toml, mutants/*.toml) are refused when malformed, with
the file, the table and the key named, and exit code 2 on the command line, never a traceback;
the caps of grader/limits.py are the ones in use, the jail's side included; the error hierarchy of
grader/errors.py keeps every old import path and carries its exit codes."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import ROOT

import grader.errors as errors
import grader.catalog.exercises as exercises
import grader.catalog.mutants as mutants
import grader.catalog.quiz as quiz
from grader.cli import main
from grader.limits import JAIL_SIDE, Limits

QUIZ = "day45-quiz"
LIMIT_KEYS = "call_seconds, cpu_seconds, file_size_mb, memory_mb, open_files, output_bytes, " \
             "processes, tmp_mb, wall_seconds"


def course(tmp_path: Path, exercise: str = QUIZ) -> Path:
    dest = tmp_path / "course"
    shutil.copytree(ROOT / "exercises" / exercise, dest / exercise,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.fixture
def use_course(monkeypatch):
    """Point the grader (in this process) at another folder of exercises."""
    def use(folder: Path):
        monkeypatch.setattr(exercises, "EXERCISES_DIR", folder)
        exercises.load_exercise.cache_clear()
        quiz.load_key.cache_clear()
    yield use
    exercises.load_exercise.cache_clear()
    quiz.load_key.cache_clear()


def grader(*args, exercises_dir: Path):
    env = {**os.environ, "GRADER_EXERCISES_DIR": str(exercises_dir)}
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


# -- exercise.toml ------------------------------------------------------------------------------

def test_a_typo_in_limits_is_an_error_naming_file_table_key_and_the_known_keys(tmp_path, use_course):
    folder = course(tmp_path)
    append(folder / QUIZ / "exercise.toml", "\n[limits]\nwall_second = 5\n")
    use_course(folder)
    with pytest.raises(errors.ExerciseFileError) as caught:
        exercises.load_exercise(QUIZ)
    assert str(caught.value) == (f"{folder / QUIZ / 'exercise.toml'}: [limits]: unknown key "
                                 f"'wall_second'; known keys: {LIMIT_KEYS}")


def test_the_command_line_exits_2_with_the_error_and_no_traceback(tmp_path):
    folder = course(tmp_path)
    append(folder / QUIZ / "exercise.toml", "\n[limits]\nwall_second = 5\n")
    for args in (("exercises",), ("grade", QUIZ, tmp_path), ("starter", QUIZ, tmp_path / "out")):
        proc = grader(*args, exercises_dir=folder)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("error: ") and "exercise.toml: [limits]: unknown key 'wall_second'" \
            in proc.stderr, proc.stderr


def test_known_limits_are_read_and_reach_the_jail(tmp_path, use_course):
    folder = course(tmp_path)
    append(folder / QUIZ / "exercise.toml", "\n[limits]\nwall_seconds = 5\nmemory_mb = 512\n")
    use_course(folder)
    limits = exercises.load_exercise(QUIZ).limits
    assert (limits.wall_seconds, limits.memory_mb, limits.call_seconds) == (5.0, 512, 60.0)
    jail = limits.for_jail()
    assert jail["cpu_seconds"] == 5.0 and jail["memory_mb"] == 512 and jail["open_files"] == 256


@pytest.mark.parametrize("extra, where", [
    ("\ncolour = 'red'\n", "(top level): unknown key 'colour'; known keys: day, days, files, id, kind, "
                           "limits, mutation, names, points, rules, starter_mutants, starter_symptoms, title"),
    ("\n[title]\nfr = 'x'\n", None),       # [title] is defined already: a TOML error, also refused
])
def test_unknown_top_level_keys_are_errors(tmp_path, use_course, extra, where):
    folder = course(tmp_path)
    text = (folder / QUIZ / "exercise.toml").read_text(encoding="utf-8")
    (folder / QUIZ / "exercise.toml").write_text(extra + text if where else text + extra, encoding="utf-8")
    use_course(folder)
    with pytest.raises(errors.ExerciseFileError) as caught:
        exercises.load_exercise(QUIZ)
    message = str(caught.value)
    assert message.startswith(f"{folder / QUIZ / 'exercise.toml'}: ")
    assert (where in message) if where else ("not valid TOML" in message), message


def test_an_unknown_title_language_names_the_title_table(tmp_path, use_course):
    folder = course(tmp_path)
    path = folder / QUIZ / "exercise.toml"
    path.write_text(path.read_text(encoding="utf-8").replace("[title]\n", "[title]\nfr = 'x'\n"),
                    encoding="utf-8")
    use_course(folder)
    with pytest.raises(errors.ExerciseFileError, match=r"\[title\]: unknown key 'fr'; known keys: en, zh-TW"):
        exercises.load_exercise(QUIZ)


def test_a_missing_or_mistyped_value_names_its_key(tmp_path, use_course):
    folder = course(tmp_path)
    append(folder / QUIZ / "exercise.toml", "\n[limits]\nmemory_mb = 'lots'\n")
    use_course(folder)
    with pytest.raises(errors.ExerciseFileError, match=r"exercise.toml: \[limits\]: memory_mb: .*'lots'"):
        exercises.load_exercise(QUIZ)


# -- key.toml -----------------------------------------------------------------------------------

def test_an_unknown_key_in_an_answer_key_question_is_an_error(tmp_path, use_course):
    folder = course(tmp_path)
    key = folder / QUIZ / "key.toml"
    key.write_text(key.read_text(encoding="utf-8").replace('answer = 2\n', 'answer = 2\ntolerance = 1\n', 1),
                   encoding="utf-8")
    use_course(folder)
    with pytest.raises(errors.ExerciseFileError) as caught:
        quiz.load_key(QUIZ)
    message = str(caught.value)
    assert message.startswith(f"{key}: [[questions]] #1 (d4_h2_d_k): unknown key 'tolerance'; known keys: ")
    assert "answer" in message and "hint" in message and "tol" not in message.split("known keys: ")[1].split(", ")
    proc = grader("starter", QUIZ, tmp_path / "out", exercises_dir=folder)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "key.toml: [[questions]] #1 (d4_h2_d_k): unknown key 'tolerance'" in proc.stderr


def test_an_unknown_table_in_an_answer_key_is_an_error(tmp_path, use_course):
    folder = course(tmp_path)
    append(folder / QUIZ / "key.toml", "\n[answers]\nd4_h2_d_k = 2\n")
    use_course(folder)
    with pytest.raises(errors.ExerciseFileError,
                       match=r"key.toml: \(top level\): unknown key 'answers'; known keys: questions$"):
        quiz.load_key(QUIZ)


def test_an_unreadable_key_value_is_an_error_not_a_traceback(tmp_path, use_course):
    folder = course(tmp_path)
    key = folder / QUIZ / "key.toml"
    key.write_text(key.read_text(encoding="utf-8").replace('answer = 2\n', 'answer = "two"\n', 1),
                   encoding="utf-8")
    use_course(folder)
    with pytest.raises(errors.ExerciseFileError, match=r"key.toml: \[\[questions\]\] d4_h2_d_k: answer"):
        quiz.pose(QUIZ, None)


def test_a_learner_answers_file_still_has_unknown_ids_graded_not_refused(tmp_path):
    ex = exercises.load_exercise(QUIZ)
    checks, warnings = quiz.grade_answers(ex, {"answers": {"no_such_question": "1"}}, None)
    assert checks and not any(c.passed for c in checks)
    assert any("no_such_question" in str(w) for w in warnings)


# -- mutants ------------------------------------------------------------------------------------

@pytest.fixture
def mutant_folder(tmp_path, monkeypatch):
    folder = tmp_path / "mutants"
    folder.mkdir()
    shutil.copy(ROOT / "mutants" / "loss-sum.toml", folder)
    monkeypatch.setattr(mutants, "MUTANTS_DIR", folder)
    return folder


def test_an_unknown_key_in_a_mutant_edit_is_an_error(mutant_folder):
    path = mutant_folder / "loss-sum.toml"
    path.write_text(path.read_text(encoding="utf-8").replace('file = "data.py"', 'files = "data.py"'),
                    encoding="utf-8")
    with pytest.raises(mutants.MutantError) as caught:
        mutants.load_mutants()
    assert str(caught.value).splitlines() == [
        f"{path}: [[edit]] #1: missing key 'file'",
        f"{path}: [[edit]] #1: unknown key 'files'; known keys: exercise, file, find, replace"]
    result = CliRunner().invoke(main, ["mutants", "list"])
    assert result.exit_code == 2 and result.exception is not None and isinstance(result.exception, SystemExit)
    assert "[[edit]] #1: unknown key 'files'" in result.output


def test_an_unknown_top_level_key_in_a_mutant_is_an_error(mutant_folder):
    append(mutant_folder / "loss-sum.toml", "")
    path = mutant_folder / "loss-sum.toml"
    path.write_text("symptom = ['nan-forward']\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(errors.ExerciseFileError, match=r"loss-sum.toml: \(top level\): unknown key 'symptom'; "
                                                       r"known keys: day, description, edit, id, message, rule, "
                                                       r"symptoms$"):
        mutants.load_mutants()


def test_a_mutant_without_its_message_is_an_error_naming_the_file(mutant_folder):
    path = mutant_folder / "loss-sum.toml"
    text = path.read_text(encoding="utf-8")
    start = text.index("[message]")
    path.write_text(text[:start] + text[text.index("[[edit]]"):], encoding="utf-8")
    with pytest.raises(mutants.MutantError) as caught:
        mutants.load_mutants()
    assert str(caught.value).splitlines() == [f"{path}: (top level): missing key 'message'"]
    result = CliRunner().invoke(main, ["mutants", "list"])
    assert result.exit_code == 2 and "loss-sum.toml: (top level): missing key 'message'" in result.output


def test_a_mutant_message_needs_both_languages(mutant_folder):
    path = mutant_folder / "loss-sum.toml"
    text = path.read_text(encoding="utf-8")
    zh_line = next(line for line in text.splitlines() if line.startswith("zh-TW = "))
    path.write_text(text.replace(zh_line + "\n", ""), encoding="utf-8")
    with pytest.raises(mutants.MutantError) as caught:
        mutants.load_mutants()
    assert str(caught.value).splitlines() == [f"{path}: [message]: missing key 'zh-TW'"]


def test_the_shipped_course_files_are_all_valid():
    assert len(exercises.all_exercises()) >= 7
    assert len(mutants.load_mutants()) >= 20
    for ex in exercises.all_exercises():
        if ex.kind == "quiz":
            assert len(quiz.pose(ex.id, "someone")) == len(quiz.load_key(ex.id))


# -- limits -------------------------------------------------------------------------------------

def test_the_default_limits_are_specs():
    # SPEC: 120 s wall per submission, 4 GiB memory, 256 processes and threads, 64 MiB per
    # written file, 1 MiB of kept output
    lim = Limits()
    assert (lim.wall_seconds, lim.memory_mb, lim.processes, lim.file_size_mb, lim.output_bytes) == (
        120, 4096, 256, 64, 1 << 20)
    assert Limits(wall_seconds=7).for_jail()["cpu_seconds"] == 7


def test_the_jail_side_constants_mirror_the_table():
    import grader.jail.sandbox as sandbox
    import grader.jail.wire as wire
    source = (ROOT / "grader" / "jail" / "zygote.py").read_text(encoding="utf-8")   # zygote runs as a script
    imported = {"wire": wire, "sandbox": sandbox}
    for name, value in JAIL_SIDE.items():
        module, attr = name.split(".")
        if module in imported:
            assert getattr(imported[module], attr) == value, name
        else:
            line = next(s for s in source.splitlines() if s.startswith(f"{attr} = "))
            assert eval(line.split("=", 1)[1].split("#")[0]) == value, name


def test_the_caps_in_use_are_the_table():
    import grader.catalog.answers as answers
    import grader.jail.client as client
    import grader.limits as limits
    import grader.locale as locale
    import grader.intake.sources as sources
    import reports.view as view
    assert sources.MAX_FILE_BYTES == limits.LEARNER_FILE_BYTES == 1 << 20  # submission reads through sources
    assert sources.MAX_ARCHIVE_MEMBERS == 50_000 and sources.MAX_ARCHIVE_BYTES == 2 << 30
    assert sources.MAX_RATIO == 200
    assert view.MAX_MESSAGE == locale.MAX_PARAM == limits.MESSAGE_CHARS == 64 * 1024
    assert view.MAX_REPORT == 1 << 20
    assert client.MAX_SUBMISSION_BYTES == 8 << 20 and client.Limits is Limits
    assert answers.MAX_CHARS == 200 and answers.MAX_ELEMENTS == 10_000


# -- the error hierarchy ------------------------------------------------------------------------

def test_every_error_keeps_its_old_import_path():
    from grader.course.batch import BatchError
    from grader.jail.doctor import JailUnsound
    from grader.catalog.exercises import UnknownExercise
    from grader.jail.client import JailCrash, JailError, JailMemory, JailSandbox, JailTimeout, LearnerError
    from grader.jail.launcher import ZygoteError
    from grader.catalog.mutants import MutantError
    from grader.intake.sources import SourceError
    from grader.intake.submission import InvalidSubmission, UsageError
    assert (BatchError, JailUnsound, UnknownExercise, MutantError, SourceError, UsageError) == (
        errors.BatchError, errors.JailUnsound, errors.UnknownExercise, errors.MutantError,
        errors.SourceError, errors.UsageError)
    assert (JailError, JailCrash, JailMemory, JailSandbox, JailTimeout, LearnerError, ZygoteError,
            InvalidSubmission) == (errors.JailError, errors.JailCrash, errors.JailMemory,
                                   errors.JailSandbox, errors.JailTimeout, errors.LearnerError,
                                   errors.ZygoteError, errors.InvalidSubmission)


def test_exit_codes_come_from_the_hierarchy():
    for cls in (errors.UsageError, errors.UnknownExercise, errors.ExerciseFileError, errors.MutantError,
                errors.SourceError, errors.BatchError, errors.JailUnsound):
        assert cls.exit_code == 2 and issubclass(cls, errors.GraderError), cls
    for cls in (errors.InvalidSubmission, errors.JailError, errors.JailTimeout, errors.ZygoteError,
                errors.LearnerError):
        assert cls.exit_code == 1 and not issubclass(cls, errors.UsageError), cls
    assert issubclass(errors.UnknownExercise, LookupError) and issubclass(errors.MutantError, ValueError)
    assert (errors.JailTimeout.kind, errors.JailMemory.symptom) == ("timeout", "memory-limit")


def test_an_error_let_through_by_a_command_is_its_exit_code(monkeypatch):
    def refuse():
        raise errors.JailUnsound("the jail leaks")
    monkeypatch.setattr(mutants, "load_mutants", refuse)
    result = CliRunner().invoke(main, ["mutants", "list"])
    assert result.exit_code == 2 and "error: the jail leaks" in result.output
