"""Every hostile class input of tests/adversarial/classes.py through `grader batch`, in-process.

What these check is input handling, the gradebook and the outputs, not grading: the executor is
replaced by one that builds each Grade in this (trusted) process without running learner code.
The one case graded for real through the jail (a class zip with one damaged learner zip, one
worker) is in tests/test_batch.py (test_a_class_archive_with_one_damaged_learner_zip_...).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from grader import __version__
from grader.cli import main
from grader.catalog.exercises import load_exercise
from grader.models import Grade
from grader.text import terminal
from reports.gradebook import FORMULA_START
from tests.adversarial.classes import CLASS_CASES, EXERCISE, HUGE, ClassCase

RAW_CONTROL = re.compile(r"[\x1b\x07\x9b]|\r(?!\n)")
STORED_CAP = int(1.1 * (1 << 20))


class FakePool:
    """The batch's executor, without jails: a full-score Grade per task, made here. A task whose
    data.py starts with HUGE gets back a crash whose import error's `where` is 8 MiB, put in the
    reply as plain data (as a worker sends it), so only the batch's own validation can bound it."""

    def __init__(self):
        self.learners: list[str] = []

    def describe(self) -> str:
        return "fake pool (no learner code run)"

    def run(self, tasks):
        exercise = load_exercise(EXERCISE)
        for task in tasks:
            self.learners.append(task["learner"])
            huge = task["files"].get("data.py", b"").startswith(HUGE)
            grade = Grade(
                exercise=exercise.id,
                passed=not huge,
                score=0.0 if huge else float(exercise.points),
                max_score=float(exercise.points),
                isolation="none",
                grader_version=__version__,
                student=task["learner"],
            ).model_dump()
            if huge:
                where = "x" * (8 << 20)
                grade["error"] = {
                    "kind": "crash",
                    "message": f"importing data.py raised ImportError at {where}: boom",
                    "message_id": "importing {module}.py raised {type} at {where}: {message}",
                    "message_params": {
                        "module": "data", "type": "ImportError", "where": where, "message": "boom"
                    },
                }
            now = datetime.now(UTC).isoformat()
            yield task, {
                "submission_id": task["submission_id"],
                "worker": "fake",
                "started_at": now,
                "finished_at": now,
                "status": "graded",
                "grade": grade,
            }

    def close(self, cancel: bool = False) -> None:
        pass


def run(case: ClassCase, source, db, out, monkeypatch, *extra):
    pool = FakePool()
    monkeypatch.setattr("grader.course.batch._executor", lambda workers, scheduler: pool)
    result = CliRunner().invoke(
        main, ["batch", EXERCISE, str(source), "--db", db, "--out", str(out), "--no-progress", *extra]
    )
    printed = result.output  # stdout and stderr, as a terminal shows them
    assert isinstance(result.exception, SystemExit) or result.exception is None, printed
    assert "Traceback" not in printed, printed
    assert not RAW_CONTROL.search(printed), repr(RAW_CONTROL.findall(printed))
    return result, printed, pool


def cli(*args) -> tuple[int, str]:
    """A `grader` command in-process: its exit code and all it printed, which must be clean."""
    result = CliRunner().invoke(main, list(args))
    printed = result.output
    assert isinstance(result.exception, SystemExit) or result.exception is None, printed
    assert "Traceback" not in printed and not RAW_CONTROL.search(printed), repr(printed[:2000])
    return result.exit_code, printed


def formula_cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text)) for c in row if c[:1] in FORMULA_START]


def current(db: str) -> dict[str, tuple]:
    from grader.store import Gradebook

    with Gradebook(db) as gb:
        grades = gb.current_grades(EXERCISE)
    learners = [c.learner for c in grades]
    assert len(learners) == len(set(learners)), learners  # each learner once
    return {
        c.learner: (c.grade.score, c.grade.passed, c.grade.error.kind if c.grade.error else None,
                    c.grade.error.message if c.grade.error else None, c.digest)
        for c in grades
    }


def longest_stored(db: str) -> int:
    """The longest text or blob the gradebook holds (grade JSON included)."""
    with sqlite3.connect(db) as conn:
        longest = 0
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            for column in columns:
                (n,) = conn.execute(f'SELECT max(length(CAST("{column}" AS BLOB))) FROM "{table}"').fetchone()
                longest = max(longest, n or 0)
    return longest


@pytest.mark.parametrize("case", CLASS_CASES, ids=lambda c: c.name)
def test_a_hostile_class_input_breaks_nothing(case: ClassCase, tmp_path, monkeypatch):
    for target, value in case.patch.items():
        monkeypatch.setattr(target, value)
    source = case.build(tmp_path)
    db, out = str(tmp_path / "g.db"), tmp_path / "out"
    result, printed, pool = run(case, source, db, out, monkeypatch)
    assert result.exit_code == case.exit_code, printed

    if case.source_error is not None:  # SOURCE unreadable as a whole: exit 2 naming it, nothing kept
        assert "error: " in printed and case.source_error in printed, printed
        assert terminal(str(source)) in printed, printed  # named, as it is shown
        assert not (tmp_path / "g.db").exists() and not out.exists()
        assert run(case, source, db, out, monkeypatch)[0].exit_code == 2
        return

    # every honest learner graded once, by the executor; each failing one stored with its reason
    assert sorted(pool.learners) == sorted(case.honest), printed
    grades = current(db)
    assert set(grades) == set(case.honest) | set(case.failing), printed
    for learner in case.honest:
        assert grades[learner][2] in (None, "crash"), (learner, grades[learner][:3])
    for learner, reason in case.failing.items():
        score, passed, kind, message, _ = grades[learner]
        assert (score, passed, kind) == (0.0, False, "invalid-submission")
        assert reason in message, message

    # one distinct output file per learner, naming that learner
    files = sorted((out / "grades").glob("*.json"))
    students = [json.loads(p.read_text())["student"] for p in files]
    assert sorted(students) == sorted(grades) and len({p.name.casefold() for p in files}) == len(files)

    # nothing skipped silently: listed in batch.json and in what was printed
    report = json.loads((out / "batch.json").read_text())
    entries = [e["entry"] for e in report["skipped_entries"]]
    assert sorted(entries) == sorted(case.skipped), entries
    for entry in entries:
        assert f"skipped {entry}" in printed, printed
    assert sorted(u["learner"] for u in report["unreadable_found"]) == sorted(case.failing)
    for learner, reason in case.failing.items():
        assert reason in next(u["reason"] for u in report["unreadable_found"] if u["learner"] == learner)

    # the outputs are formula-safe and the stored strings bounded
    table = (out / "grades.csv").read_text(encoding="utf-8")
    assert len(list(csv.reader(io.StringIO(table)))) == len(grades) + 1 and not formula_cells(table)
    assert longest_stored(db) < STORED_CAP
    assert max(p.stat().st_size for p in files) < STORED_CAP

    # what the instructor reads back: the exports and each learner's grades, printed clean
    code, exported = cli("gradebook", "export", "--db", db, "--format", "csv")
    assert code == 0 and not formula_cells(exported)
    assert cli("gradebook", "export", "--db", db, "--format", "json")[0] == 0
    for learner in grades:
        code, shown = cli("gradebook", "show", learner, "--db", db, "--no-color")
        assert code == 0 and len(shown.encode()) < STORED_CAP, (learner, shown[:500])

    # the re-run the README recommends: nothing changes, nothing is graded twice
    again, printed_again, pool_again = run(case, source, db, out, monkeypatch)
    assert again.exit_code == case.exit_code, printed_again
    assert pool_again.learners == [] and current(db) == grades
    assert sorted(p.name for p in (out / "grades").glob("*.json")) == [p.name for p in files]
    if case.exit_allowed is not None:
        allowed = run(case, source, db, out, monkeypatch, "--allow-skipped")[0]
        assert allowed.exit_code == case.exit_allowed


ON_POSTGRES = [c for c in CLASS_CASES if c.name in (
    "gradescope-5-mb-learner-id", "non-utf8-folder-names", "terminal-sequences-in-folder-names",
    "oversized-error-message", "ids-differ-only-by-white-space", "safe-names-would-collide",
    "one-learner-as-a-folder-and-a-file")]


@pytest.mark.parametrize("case", ON_POSTGRES, ids=lambda c: c.name)
def test_hostile_ids_and_strings_fit_postgresql(case: ClassCase, tmp_path, monkeypatch, postgres):
    """PostgreSQL enforces what SQLite does not (column lengths, NUL, encodings): the same batch,
    and its re-run. A 256-character canonical id overflowed learners.key (200) there."""
    from grader.store import Gradebook

    url, source = postgres.create_database(), case.build(tmp_path)
    for _ in range(2):
        result, printed, _pool = run(case, source, url, tmp_path / "out", monkeypatch)
        assert result.exit_code == case.exit_code, printed
    with Gradebook(url) as gb:
        learners = sorted(c.learner for c in gb.current_grades(EXERCISE))
    assert learners == sorted([*case.honest, *case.failing])
