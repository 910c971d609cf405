"""Issue 12, deliver 4 and 5: every stored and printed string capped and clean, and a grader
failure retried a bounded number of times.

- A learner whose import error carries a 10 MB `where`, type and message (the worker's
  `describe` replaced from learner code, so nothing the jail's side caps can be relied on) gets a
  grade row, a grade file and a `gradebook show` each within SPEC's caps (64 KiB a message,
  1 MiB a report), measured as the bytes of the stored JSON.
- Learner ids and archive member names holding OSC title and clipboard sequences, CSI and bare
  CRs never reach stdout or stderr raw from `grader batch`, `gradebook export` or `show`.
- CSV cells that a spreadsheet would run as a formula are guarded, ids and file names included.
- A submission on which the grader itself fails is retried GRADER_ATTEMPTS times in all (exit 1
  while it is retried), then recorded as a final `crash` that names the cause (exit 0, and
  the next run grades nothing).
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.catalog.exercises import load_exercise
from grader.limits import GRADE_TEXT_BYTES, GRADER_ATTEMPTS, MESSAGE_BYTES, REPORT_BYTES
from grader.locale import msg
from grader.models import CheckResult, Grade, GradeError
from grader.catalog.quiz import starter_text
from grader.store import Gradebook
from grader.store.gradebook import CurrentGrade
from grader.text import terminal
from reports.gradebook import FORMULA_START, render_csv, render_export_csv

ROOT = Path(__file__).resolve().parents[1]
RAW = ("\x1b", "\x07", "\x9b", "\u202e")  # ESC, BEL, CSI, a bidi override
HUGE = 10_000_000

# learner code that replaces the jail worker's `describe` (found through the frames that import
# it, whatever the worker module is called) and then fails its import
FORGED_DESCRIBE = f"""
import sys

def _forged(exc, _n={HUGE}):
    return {{"type": "ValueError" + "T" * _n, "mro": ["ValueError", "Exception"] * 100_000,
             "message": "\\x1b]0;pwned\\x07" + "m" * _n, "where": "attention.py:" + "w" * _n,
             "memory": False}}

_f = sys._getframe()
while _f is not None:
    if callable(_f.f_globals.get("describe")):
        _f.f_globals["describe"] = _forged
    _f = _f.f_back
raise ValueError("boom")
"""


def grader(*args, check_rc: int | None = 0, timeout: int = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "grader", *map(str, args)],
        capture_output=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout.decode("utf-8", "replace")[-3000:] + err[-3000:]
    return proc


def assert_clean(output: bytes) -> None:
    """No control sequence raw: no ESC, BEL, C1 CSI or bidi override; no CR that is not a CRLF."""
    text = output.decode("utf-8", "replace")
    for ch in RAW:
        assert ch not in text, (ch, text[max(text.find(ch) - 200, 0) : text.find(ch) + 200])
    assert "\r" not in text.replace("\r\n", ""), text


# -- 1. a 10 MB `where` ------------------------------------------------------------------------


def test_a_forged_10_mb_import_error_is_capped_in_the_row_the_grade_file_and_show(tmp_path):
    src = tmp_path / "class"
    (src / "mallory").mkdir(parents=True)
    (src / "mallory" / "attention.py").write_text(FORGED_DESCRIBE)
    db, out = tmp_path / "class.db", tmp_path / "out"
    grader("batch", "day45-attention", src, "--db", db, "--workers", 1, "--out", out)

    with sqlite3.connect(db) as con:
        rows = con.execute("select length(grade), grade from grade_runs").fetchall()
    assert len(rows) == 1
    stored = json.loads(rows[0][1])
    error = stored["error"]
    assert error["kind"] == "crash" and error["message_params"]["where"].startswith("attention.py:www")
    assert rows[0][0] < MESSAGE_BYTES + 4096  # one message, and a grade's few other fields
    assert len(json.dumps(error, ensure_ascii=False).encode()) < MESSAGE_BYTES + 1024

    (grade_file,) = (out / "grades").glob("*.json")
    assert grade_file.stat().st_size < MESSAGE_BYTES + 4096
    assert "\x1b" not in json.loads(grade_file.read_text())["error"]["message"]  # JSON keeps it escaped

    with Gradebook(str(db)) as gb:
        (learner,) = {c.learner for c in gb.current_grades()}  # however the layout names them
    for args in ((), ("--format", "json", "--history"), ("--format", "json"), ("--lang", "zh-TW")):
        shown = grader("gradebook", "show", learner, "--db", db, *args).stdout
        assert len(shown) < REPORT_BYTES, args
        assert_clean(shown)
    assert b"importing attention.py raised" in grader("gradebook", "show", learner, "--db", db).stdout


def test_every_part_of_a_grade_is_bounded_and_the_whole_within_the_grade_text_cap():
    where = "w" * HUGE
    checks = [
        CheckResult(
            id=f"check-{i}",
            passed=False,
            points=0,
            max_points=1,
            rule="api-contract",
            day=45,
            message=msg(
                "your code raised {type} at {where}: {message}", type="T" * HUGE, where=where, message=where
            ),
            evidence={"got": "e" * HUGE, "deep": [[[[[[[[[[[[1]]]]]]]]]]]], "many": list(range(100_000))},
        )
        for i in range(40)
    ]
    error = GradeError(
        kind="crash",
        message=msg(
            "importing {module}.py raised {type} at {where}: {message}",
            module="attention",
            type="ValueError",
            where=where,
            message=where,
        ),
    )
    grade = Grade(
        exercise="day45-attention",
        passed=False,
        score=0,
        max_score=34,
        checks=checks,
        error=error,
        warnings=["n" * HUGE] * 3000,
    )
    data = grade.model_dump()
    assert len(json.dumps(data, ensure_ascii=False).encode()) < GRADE_TEXT_BYTES + 160 * 1024
    assert len(grade.checks) == 40 and all(c.message.startswith("your code raised TTT") for c in grade.checks)
    for c in grade.checks:  # every param still there, so the message renders in any language
        assert set(c.message_params) == {"type", "where", "message"}
        assert len(json.dumps(c.evidence["many"])) < MESSAGE_BYTES
    assert len(grade.warnings) == 1000
    again = Grade.model_validate(json.loads(json.dumps(data)))  # stored and read back: the same
    assert again.model_dump() == data
    # one message alone: message and params within 64 KiB
    assert len(json.dumps(error.model_dump(), ensure_ascii=False).encode()) < MESSAGE_BYTES + 512


def test_a_diagnosis_in_every_language_is_bounded_as_one_message():
    from grader.models import Diagnosis

    huge = "診" * HUGE
    d = Diagnosis(rule="causal-mask", day=44, mutant="m", message=huge,
                  message_i18n={"en": huge, "zh-TW": huge, **{f"x{i}": huge for i in range(200)}})
    assert len(json.dumps(d.model_dump(), ensure_ascii=False).encode()) < MESSAGE_BYTES + 1024
    assert d.message_i18n["en"].startswith("診") and d.message_i18n["zh-TW"].startswith("診")
    assert d.message.startswith("診")                          # the English text keeps its share


DATA = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=30) | st.dictionaries(st.text(max_size=20), inner, max_size=30),
    max_leaves=200,
)


@settings(max_examples=200, deadline=None)
@given(DATA, st.integers(min_value=0, max_value=4096))
def test_bounded_data_stays_within_its_room_and_is_storable(value, room):
    from grader.text import Room, bounded, data_bytes

    kept = bounded({"v": value}, Room(room))
    assert data_bytes(kept) <= room + 64  # a last scalar or key may overrun by its own few bytes
    json.dumps(kept, ensure_ascii=False).encode("utf-8")  # no lone surrogate, no NUL left
    assert "\x00" not in json.dumps(kept, ensure_ascii=False)


# -- 2. terminal sequences in ids and member names -----------------------------------------------

HOSTILE_IDS = (
    "\x1b]0;pwned-title\x07alice",
    "\x1b]52;c;ZWNobyBwd25lZA==\x07bob",
    "carol\rmallory-overwrites-the-line",
    "\x1b[2J\x1b[31mdave",
    "\u202eevil\u202c",
)


def hostile_zip(path: Path) -> Path:
    exercise = load_exercise("day45-quiz")
    with zipfile.ZipFile(path, "w") as z:
        for learner in HOSTILE_IDS:
            z.writestr(f"{learner}/answers.toml", starter_text(exercise, None))
        z.writestr("\x1b]0;member-title\x07/README.txt", "not a submission")
        z.writestr("notes\r\x1b[1Kforged.txt", "a stray top-level file")
    return path


def test_osc_csi_and_cr_in_ids_and_member_names_never_reach_the_terminal_raw(tmp_path):
    source = hostile_zip(tmp_path / "class.zip")
    db, out = tmp_path / "class.db", tmp_path / "out"
    batch = grader("batch", "day45-quiz", source, "--db", db, "--out", out, check_rc=None)
    assert batch.returncode in (0, 1, 2), batch
    assert_clean(batch.stdout + batch.stderr)
    if not db.exists():  # the sources of this branch refused the whole archive: nothing more to show
        return
    with Gradebook(str(db)) as gb:
        learners = sorted({c.learner for c in gb.current_grades()})
    assert learners, batch.stdout
    for fmt in ("csv", "json"):
        export = grader("gradebook", "export", "--db", db, "--format", fmt)
        assert_clean(export.stdout + export.stderr)
    exported = json.loads(grader("gradebook", "export", "--db", db, "--format", "json").stdout)
    assert sorted(e["learner"] for e in exported) == learners  # escaped in the JSON text, the data kept
    for learner in learners:
        for args in ((), ("--format", "json", "--history"), ("--format", "csv"), ("--format", "markdown")):
            shown = grader("gradebook", "show", learner, "--db", db, *args)
            assert_clean(shown.stdout + shown.stderr)
    unknown = grader("gradebook", "show", "\x1b]0;nobody\x07", "--db", db, check_rc=2)
    assert_clean(unknown.stdout + unknown.stderr)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FFF), max_size=200))
def test_terminal_text_never_holds_a_control_character(text):
    shown = terminal(text)
    assert not any(ch in shown for ch in RAW)
    assert all(ch in "\n\t" or (0x20 <= ord(ch) < 0x7F or ord(ch) > 0x9F) for ch in shown)


# -- 3. CSV cells formula-safe -------------------------------------------------------------------

FORMULAS = ("=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1")


def test_csv_cells_that_a_spreadsheet_would_run_are_guarded_ids_and_file_names_too():
    grades = [Grade(exercise="day45-quiz", passed=False, score=0, max_score=1, student=f) for f in FORMULAS]
    current = [
        CurrentGrade(
            learner=f,
            name=f,
            email=f,
            exercise="day45-quiz",
            version="v" * 40,
            submission_id=i,
            digest="d" * 64,
            origin=f"{f}/answers.toml",
            late=False,
            run_id=i,
            status="graded",
            grade=g,
            graded_at=datetime(2026, 12, 1, tzinfo=UTC),
            worker=f,
        )
        for i, (f, g) in enumerate(zip(FORMULAS, grades, strict=True))
    ]
    for text, columns in (
        (render_csv(grades), ("student",)),
        (render_export_csv(current), ("learner", "name", "email", "origin")),
    ):
        rows = list(csv.DictReader(io.StringIO(text)))
        assert len(rows) == len(FORMULAS)
        for row in rows:
            for col in columns:
                assert row[col][:1] not in FORMULA_START, (col, row[col])
                # guarded, or (a bare CR) written out as `\r`, which no spreadsheet runs
                assert row[col].startswith(("'", "\\r")), (col, row[col])
            assert not any(ch in "".join(row.values()) for ch in "\r\x1b")


# -- 4. a grader failure is retried a bounded number of times ------------------------------------


class InProcess:
    """An executor in this process, so that grading can be made to fail for one learner."""

    def __init__(self, fail_for: str):
        self.fail_for = fail_for

    def describe(self) -> str:
        return "in-process (test)"

    def run(self, tasks):
        from grader.course.batch import grade_task

        for task in tasks:
            if task["learner"] == self.fail_for:
                yield (
                    task,
                    {
                        "submission_id": task["submission_id"],
                        "worker": "test",
                        "status": "error",
                        "message": msg("internal grader error: {detail}", detail="a deliberate failure"),
                    },
                )
            else:
                yield task, grade_task(task)

    def close(self, cancel: bool = False) -> None:
        pass


def test_a_grader_failure_is_retried_then_recorded_as_a_final_crash_and_the_batch_exits_0(
    tmp_path, monkeypatch
):
    import grader.course.batch
    from grader.cli import main

    exercise = load_exercise("day45-quiz")
    src = tmp_path / "class"
    for learner in ("alice", "broken"):
        (src / learner).mkdir(parents=True)
        (src / learner / "answers.toml").write_text(starter_text(exercise, None))
    db = str(tmp_path / "class.db")
    monkeypatch.setattr(grader.course.batch, "_executor", lambda workers, scheduler: InProcess("broken"))

    codes, outputs = [], []
    for _ in range(GRADER_ATTEMPTS + 1):
        result = CliRunner().invoke(main, ["batch", "day45-quiz", str(src), "--db", db, "--no-progress"])
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        codes.append(result.exit_code)
        outputs.append(result.output)
    assert codes == [1] * (GRADER_ATTEMPTS - 1) + [0, 0], outputs
    assert "given up on" in outputs[GRADER_ATTEMPTS - 1] and "1 given up" in outputs[GRADER_ATTEMPTS - 1]
    assert "0 to grade" in outputs[-1]

    with Gradebook(db) as gb:
        current = {c.learner: c for c in gb.current_grades("day45-quiz")}
        runs = gb.learner("broken")["submissions"][0]["runs"]
    assert [r["status"] for r in runs] == ["error"] * (GRADER_ATTEMPTS - 1) + ["given-up"]
    broken = current["broken"]
    assert broken.status == "given-up" and broken.grade.error.kind == "crash" and not broken.grade.passed
    assert f"failed on this submission {GRADER_ATTEMPTS} times" in broken.grade.error.message
    assert "a deliberate failure" in broken.grade.error.message  # names the cause
    assert current["alice"].status == "graded"
    from reports import render

    zh = render(broken.grade, "text", "zh-TW")
    assert "評分程式本身在這次繳交上失敗了" in zh and "評分程式內部錯誤" in zh


@pytest.mark.parametrize(
    "statuses, expected",
    [
        ((), 0),
        (("error",), 1),
        (("error", "error"), 2),
        (("error", "graded"), 0),
        (("error", "given-up", "error"), 1),
    ],
)
def test_grader_failures_are_counted_since_the_last_final_grade(tmp_path, statuses, expected):
    from grader.store import Incoming, Outcome

    with Gradebook(str(tmp_path / "gb.db")) as gb:
        version = gb.exercise_version("day45-quiz", "v1", 21)
        (sid,) = gb.add_submissions("day45-quiz", [Incoming(learner="x", files={"answers.toml": b""})])
        grade = Grade(exercise="day45-quiz", passed=False, score=0, max_score=21)
        for status in statuses:
            gb.record(sid, version, Outcome(status=status, grade=grade), force=True)
        assert gb.grader_failures(sid, version) == expected
