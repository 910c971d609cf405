"""The command line as a whole: `grader gradebook show` in every format and language, commands
that only read a gradebook never creating one, --lang from the locale, and exit code 2 for
usage errors (ours and click's).

The gradebook is made by `grader batch` on two tiny quiz classes (quizzes need no jail, so a
batch takes seconds): s000 has a malformed day49-quiz answer sheet and a day45-quiz grade, s001
a day49-quiz and a day45-quiz grade, s002 a day49-quiz grade only, and one learner's id starts
like a spreadsheet formula.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course.sampleclass import make_class
from grader.store import Gradebook
from reports import render
from reports.render import FORMATS

ROOT = Path(__file__).resolve().parents[1]
FORMULA = "=1+2"                    # a learner id a spreadsheet would compute
LANG_VARS = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def run(*args, cwd=ROOT, env=None, lang="C.UTF-8"):
    """`python -m grader ARGS` with this checkout's code, in a given locale."""
    base = {k: v for k, v in os.environ.items() if k not in LANG_VARS and k != "GRADER_DB"}
    base.update(PYTHONPATH=str(ROOT), LANG=lang, **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=base)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    make_class("day49-quiz", root / "c49", 3, hostile=("malformed-toml",))
    shutil.copytree(root / "c49" / "s001", root / "c49" / FORMULA)
    make_class("day45-quiz", root / "c45", 2)
    db = root / "class.db"
    for ex, src, extra in (("day49-quiz", root / "c49", ()),
                           ("day45-quiz", root / "c45", ("--out", root / "out45"))):
        # the second batch writes its class report in the locale's language (zh-TW here)
        proc = run("batch", ex, src, "--db", db, "--workers", 1, *extra, lang="zh_TW.UTF-8")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    with Gradebook(str(db)) as gb:
        current = {(c.learner, c.exercise): c.grade for c in gb.current_grades()}
    return {"db": db, "root": root, "current": current}


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_show_renders_the_stored_grade_as_grade_does(book, fmt, lang):
    grade = book["current"][("s002", "day49-quiz")]
    proc = run("gradebook", "show", "s002", "--db", book["db"], "--format", fmt, "--lang", lang)
    assert proc.returncode == 0, proc.stderr
    report = render(grade, fmt, lang)
    if fmt == "text":        # the instructor's overview and history first, then the report
        overview, _, rest = proc.stdout.partition("\n\nsubmissions and grade runs:\n")
        assert overview.startswith("learner s002\n  day49-quiz: PASSED  25 / 25")
        assert "run " in rest and "attempt 1" in rest and rest.endswith("\n" + report)
    else:
        assert proc.stdout == report
    if fmt == "json":
        assert json.loads(proc.stdout)["exercise"] == "day49-quiz"
    if fmt not in ("json", "csv"):      # data formats are the same in both languages
        assert (render(grade, fmt, "en") == report) == (lang == "en")
    if lang == "zh-TW" and fmt in ("text", "html", "markdown"):
        assert "通過" in proc.stdout


def test_show_of_a_learner_with_several_exercises(book):
    db = book["db"]
    text = run("gradebook", "show", "s000", "--db", db, "--lang", "en")
    assert text.returncode == 0
    for ex in ("day45-quiz", "day49-quiz"):       # both in the overview, history and reports
        assert text.stdout.count(f"{ex}: ") == 1 and f"{ex} submission" in text.stdout
        assert render(book["current"][("s000", ex)], "text", "en") in text.stdout
    assert "day49-quiz: NOT PASSED  0 / 25" in text.stdout     # the malformed sheet, recorded

    ambiguous = run("gradebook", "show", "s000", "--db", db, "--format", "html")
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    assert ambiguous.stderr.startswith("error: ") and "--exercise" in ambiguous.stderr
    assert "day45-quiz" in ambiguous.stderr and "day49-quiz" in ambiguous.stderr

    one = run("gradebook", "show", "s000", "--db", db, "--format", "markdown", "--exercise", "day45-quiz",
              "--lang", "en")
    assert one.returncode == 0 and one.stdout == render(book["current"][("s000", "day45-quiz")], "markdown", "en")
    only = run("gradebook", "show", "s000", "--db", db, "--exercise", "day45-quiz", "--lang", "en")
    assert "day45-quiz submission" in only.stdout and "day49-quiz" not in only.stdout


def test_show_history_is_the_learners_record_as_data(book):
    proc = run("gradebook", "show", "s000", "--db", book["db"], "--format", "json", "--history")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert data["learner"] == "s000"
    assert {s["exercise"] for s in data["submissions"]} == {"day45-quiz", "day49-quiz"}
    assert all(len(s["runs"]) == 1 and s["runs"][0]["attempt"] == 1 for s in data["submissions"])
    current = {c["exercise"]: c for c in data["current"]}
    assert current["day49-quiz"]["status"] == "unreadable" and current["day49-quiz"]["score"] == 0
    assert current["day45-quiz"]["grade"]["exercise"] == "day45-quiz"
    wrong = run("gradebook", "show", "s000", "--db", book["db"], "--format", "html", "--history")
    assert wrong.returncode == 2 and "--history" in wrong.stderr


def test_show_of_an_unknown_learner_or_exercise_is_exit_2(book):
    nobody = run("gradebook", "show", "nobody", "--db", book["db"])
    assert nobody.returncode == 2 and nobody.stderr == "error: LEARNER: no learner 'nobody' in the gradebook\n"
    other = run("gradebook", "show", "s002", "--db", book["db"], "--exercise", "day45-quiz")
    assert other.returncode == 2 and other.stdout == ""
    assert "no current grade for 'day45-quiz'" in other.stderr and "day49-quiz" in other.stderr


def test_show_writes_out_a_file(book, tmp_path):
    out = tmp_path / "s002.html"
    proc = run("gradebook", "show", "s002", "--db", book["db"], "--format", "html", "--out", out, "--lang", "en")
    assert proc.returncode == 0 and proc.stdout == "" and f"wrote {out}" in proc.stderr
    assert out.read_text(encoding="utf-8") == render(book["current"][("s002", "day49-quiz")], "html", "en")
    bad = run("gradebook", "show", "s002", "--db", book["db"], "--out", tmp_path / "no" / "such" / "dir.txt")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --out: cannot write")


@pytest.mark.parametrize("command", [("gradebook", "show", "s002"), ("gradebook", "export"),
                                     ("gradebook", "export", "--format", "json"), ("regrade", "day49-quiz")])
@pytest.mark.parametrize("how", ["relative", "absolute", "env"])
def test_read_only_commands_never_create_a_gradebook(tmp_path, command, how):
    (tmp_path / "work").mkdir()
    given = "missing.db" if how == "relative" else str(tmp_path / "work" / "missing.db")
    args = [*command] + ([] if how == "env" else ["--db", given])
    proc = run(*args, cwd=tmp_path / "work", env={"GRADER_DB": given} if how == "env" else None)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == f"error: gradebook {given} does not exist\n" and proc.stdout == ""
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["work"]      # no db, -wal, -shm or -journal


def test_batch_still_creates_a_missing_gradebook(book, tmp_path):
    proc = run("batch", "day49-quiz", book["root"] / "c49", "--db", "new.db", "--workers", 1, cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "new.db").is_file()


def test_lang_defaults_from_the_locale(book, tmp_path):
    grade = book["current"][("s002", "day49-quiz")]
    for locale, lang in (("zh_TW.UTF-8", "zh-TW"), ("en_US.UTF-8", "en"), ("C", "en")):
        proc = run("gradebook", "show", "s002", "--db", book["db"], "--format", "markdown", lang=locale)
        assert proc.stdout == render(grade, "markdown", lang), locale
    assert run("gradebook", "show", "s002", "--db", book["db"], "--format", "markdown",
               env={"LANGUAGE": "zh_TW"}, lang="en_US.UTF-8").stdout == render(grade, "markdown", "zh-TW")
    # `--lang` beats the locale
    assert run("gradebook", "show", "s002", "--db", book["db"], "--format", "markdown", "--lang", "en",
               lang="zh_TW.UTF-8").stdout == render(grade, "markdown", "en")
    # `grader grade` on a quiz, and the class report of `grader batch` (made under zh_TW.UTF-8)
    make_class("day49-quiz", tmp_path / "one", 1)
    graded = run("grade", "day49-quiz", tmp_path / "one" / "s000", lang="zh_TW.UTF-8")
    assert graded.returncode == 0 and "通過" in graded.stdout
    assert '<html lang="zh-Hant-TW"' in (book["root"] / "out45" / "class.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("args", [("gradebook", "show", "s002", "--format", "pdf"),
                                  ("grade", "day49-quiz", ".", "--lang", "fr"),
                                  ("batch", "day49-quiz", ".", "--workers", "0"),
                                  ("gradebook", "show"),
                                  ("no-such-command",)])
def test_click_usage_errors_exit_2(args):
    proc = run(*args)
    assert proc.returncode == 2 and "Usage:" in proc.stderr and "Error:" in proc.stderr


def test_our_usage_errors_exit_2_with_error_on_stderr(tmp_path):
    proc = run("grade", "no-such-exercise", tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("error: EXERCISE: ") and proc.stdout == ""
    proc = run("grade", "day49-quiz", tmp_path / "missing")
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")


def test_every_csv_is_guarded_against_formulas(book):
    """The export, a learner's CSV and the class report's grades.csv: one guard (reports/gradebook)."""
    exported = run("gradebook", "export", "--db", book["db"], "--exercise", "day49-quiz").stdout.splitlines()
    assert exported[0].startswith("learner,name,email,exercise,score,max_score,passed,status,")
    assert [line.split(",")[0] for line in exported[1:]] == ["'" + FORMULA, "s000", "s001", "s002"]
    shown = run("gradebook", "show", FORMULA, "--db", book["db"], "--format", "csv").stdout.splitlines()
    assert shown[1].startswith(f"'{FORMULA},day49-quiz,25,25,100,true,")
    from reports.gradebook import guard
    assert [guard(s) for s in ("=x", "+x", "-x", "@x", "\tx", "\rx", "x=", "")] == \
        ["'=x", "'+x", "'-x", "'@x", "'\tx", "'\rx", "x=", ""]


def test_only_reports_gradebook_writes_csv():
    """Every CSV goes through reports/gradebook.py: no other module of grader/ or reports/ imports csv
    (but the roster reader)."""
    users = sorted(str(p.relative_to(ROOT)) for pkg in ("grader", "reports") for p in (ROOT / pkg).rglob("*.py")
                   if any(line.strip() in ("import csv", "from csv import DictWriter")
                          or line.strip().startswith(("import csv", "from csv "))
                          for line in p.read_text(encoding="utf-8").splitlines()))
    # and grader/policy/roster.py, which reads LMS rosters (its token CSV's cells guarded the same way)
    assert users == ["grader/policy/roster.py", "reports/gradebook.py"]
