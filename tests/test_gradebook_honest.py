"""The honest gradebook (issue 16): overrides with a reason and an author, removals that can be
undone, which submission counts (the server's rule, in batch too), late penalties from the LMS
export's own timestamps, all of it audited, and shown in every export and report.

Grades are hand-made and recorded with Gradebook.record where grading is not the point; one test
runs a real `grader regrade` on day49-data to show an override survives it.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from grader.policy.adjust import LmsLateness, OverrideFact, adjusted, lms_lateness
from grader.cli import main as cli_main
from grader.models import CheckResult, Grade
from grader.policy.course import ON_TIME, CoursePolicy, Deadlines
from grader.store import Gradebook, Incoming, Outcome

EX = "day49-data"  # 20 points
DUE = datetime(2026, 12, 6, 15, 59, tzinfo=UTC)  # tests/fixtures/course.toml: 23:59 +08:00


def course_toml(tmp_path, counts="last-on-time", extra=""):
    path = tmp_path / "course.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            [exercises.{EX}]
            due = {DUE.isoformat()}
            counts = "{counts}"
            late = {{ grace_minutes = 15, penalty_per_day = 0.10, max_penalty = 0.50 }}
            """
        )
        + extra,
        encoding="utf-8",
    )
    return path


def policy_of(path):
    from grader.policy.course import load_policy

    return load_policy(path, [EX])


def grade(score: float, max_score: float = 20.0) -> Grade:
    passed = score == max_score
    return Grade(
        exercise=EX,
        passed=passed,
        score=score,
        max_score=max_score,
        checks=[CheckResult(id="c1", passed=passed, points=score, max_points=max_score, rule="data", day=49)],
    )


def hand_in(book: Gradebook, learner: str, score: float, body: bytes, **kw) -> int:
    """One learner submission with a hand-made grade, as a batch would record it."""
    vid = book.exercise_version(EX, "v1", 20)
    (sid,) = book.add_submissions(EX, [Incoming(learner=learner, files={"data.py": body}, **kw)])
    book.record(sid, vid, Outcome(status="graded", grade=grade(score)), force=True)
    return sid


def current(book, learner, policy=None):
    (c,) = [c for c in book.current_grades(EX, policy=policy) if c.learner == learner]
    return c


# -- the pure rules ------------------------------------------------------------------------------


def test_an_override_replaces_the_score_after_the_late_penalty_and_says_who_and_why():
    late = LmsLateness(
        lms_lateness(CoursePolicy(), EX, Deadlines(None, None, None), submitted_at=None, flagged_late=False).late,
        "",
    )
    assert late.late == ON_TIME
    plain = grade(12)
    assert adjusted(plain, late, None) is plain  # nothing to adjust: the grade as graded
    policy = CoursePolicy.model_validate(
        {"exercises": {EX: {"due": DUE, "late": {"grace_minutes": 15, "penalty_per_day": 0.1}}}}
    )
    two_days = lms_lateness(
        policy, EX, Deadlines(None, DUE, None), submitted_at=DUE + timedelta(hours=25), flagged_late=False
    )
    assert two_days.late.days == 2 and two_days.late.penalty == pytest.approx(0.2)
    out = adjusted(plain, two_days, OverrideFact(18, "regraded by hand", "ta"))
    assert [a.kind for a in out.adjustments] == ["late-penalty", "override"]
    assert out.adjustments[0].before == 12 and out.adjustments[0].after == pytest.approx(8)
    assert out.adjustments[1].before == pytest.approx(8) and out.adjustments[1].after == 18
    assert out.score == 18 and not out.passed  # 18 of 20 from a person: not full marks
    assert adjusted(plain, ON_TIME_LMS, OverrideFact(20, "grader bug", "ta")).passed
    assert plain.score == 12 and not plain.adjustments  # the graded grade is untouched


ON_TIME_LMS = LmsLateness(ON_TIME, "")


def test_canvas_late_flag_without_a_time_is_one_started_day_after_grace_and_says_so():
    policy = CoursePolicy.model_validate(
        {"exercises": {EX: {"due": DUE, "late": {"grace_minutes": 15, "penalty_per_day": 0.25}}}}
    )
    d = Deadlines(None, DUE, None)
    flag = lms_lateness(policy, EX, d, submitted_at=None, flagged_late=True)
    assert flag.late.days == 1 and flag.late.penalty == 0.25 and "without a time" in flag.reason
    # a timestamp says more than the flag: three started days
    stamped = lms_lateness(policy, EX, d, submitted_at=DUE + timedelta(days=2, hours=1), flagged_late=True)
    assert stamped.late.days == 3 and "timestamp" in stamped.reason
    out = adjusted(grade(20), flag, None)
    assert out.score == 15 and out.passed and "without a time" in out.adjustments[0].reason


# -- the store -------------------------------------------------------------------------------------


def test_an_override_applies_over_every_run_and_a_revoke_goes_back(book):
    sid = hand_in(book, "ann", 10, b"x = 1\n")
    book.override("ann", EX, 17, "the data check was wrong for her", "prof")
    c = current(book, "ann")
    assert c.grade.score == 17 and c.graded_score == 10
    assert c.override is not None and c.override.reason == "the data check was wrong for her"
    # a new run of the same submission (what a regrade records) does not lose the override
    book.record(sid, book.exercise_version(EX, "v2", 20), Outcome(status="graded", grade=grade(11)))
    c = current(book, "ann")
    assert c.graded_score == 11 and c.grade.score == 17 and c.grade.adjustments[-1].before == 11
    book.override("ann", EX, 19, "second look", "prof")
    assert current(book, "ann").grade.score == 19
    left = book.revoke_override("ann", EX, "prof")
    assert left is not None and left.score == 17  # the older one applies again
    assert book.revoke_override("ann", EX, "prof") is None
    c = current(book, "ann")
    assert c.grade.score == 11 and not c.grade.adjustments
    actions = [(e["action"], e["actor"]) for e in book.audit_log(learner="ann")]
    assert actions == [("override", "prof"), ("override", "prof"), ("revoke", "prof"), ("revoke", "prof")]


def test_removals_leave_rows_in_place_and_restore_brings_back_exactly(book):
    first = hand_in(book, "bob", 20, b"x = 1\n")
    second = hand_in(book, "bob", 5, b"x = 2\n")
    hand_in(book, "cat", 20, b"y = 1\n")
    assert current(book, "bob").submission_id == second  # latest seen, as before a policy
    assert book.remove("bob", "wrong file", "prof", submission=second) == 1
    assert current(book, "bob").submission_id == first
    assert book.remove("bob", "copied", "prof", exercise=EX) == 1  # only `first` was still in
    assert [c.learner for c in book.current_grades(EX)] == ["cat"]
    assert book.remove("bob", "undo", "prof", exercise=EX, restore=True) == 1
    assert current(book, "bob").submission_id == first  # `second` stays removed: its own removal
    book.remove("bob", "undo", "prof", submission=second, restore=True)
    assert current(book, "bob").submission_id == second
    book.remove("cat", "left the course", "prof")
    assert [c.learner for c in book.current_grades(EX)] == ["bob"]
    assert book.learner("cat") is not None  # nothing deleted
    book.remove("cat", "came back", "prof", restore=True)
    assert [c.learner for c in book.current_grades(EX)] == ["bob", "cat"]
    assert [e["action"] for e in book.audit_log()] == ["remove", "remove", "restore", "restore", "remove", "restore"]


def test_which_submission_counts_follows_the_course_policy(book, tmp_path):
    on_time = hand_in(book, "dan", 14, b"a\n", submitted_at=DUE - timedelta(hours=1))
    best = hand_in(book, "dan", 20, b"b\n", submitted_at=DUE + timedelta(hours=30))  # 2 days late
    assert current(book, "dan").submission_id == best  # no policy: the latest seen
    last = current(book, "dan", policy_of(course_toml(tmp_path)))
    assert last.submission_id == on_time and last.grade.score == 14 and not last.grade.adjustments
    by_best = current(book, "dan", policy_of(course_toml(tmp_path, "best")))
    # 20 less 2 days at 10 % is 16, more than 14 on time
    assert by_best.submission_id == best and by_best.grade.score == pytest.approx(16)
    (penalty,) = by_best.grade.adjustments
    assert penalty.kind == "late-penalty" and penalty.late_days == 2 and by_best.graded_score == 20
    assert by_best.late_days == 2 and by_best.penalty == pytest.approx(0.2)
    chosen = policy_of(course_toml(tmp_path, "chosen"))
    assert current(book, "dan", chosen).submission_id == on_time  # none chosen: last on time
    book.choose("dan", EX, best, "prof")
    assert current(book, "dan", chosen).submission_id == best
    assert book.audit_log(learner="dan")[-1]["details"] == {"submission": best}


def test_an_extension_in_course_toml_moves_the_due_of_the_late_penalty(book, tmp_path):
    hand_in(book, "eve", 20, b"e\n", submitted_at=DUE + timedelta(hours=30))
    extra = f'\n[[extensions]]\nlearner = "eve"\nexercise = "{EX}"\ndue = {(DUE + timedelta(days=2)).isoformat()}\n'
    assert current(book, "eve", policy_of(course_toml(tmp_path))).grade.score == pytest.approx(16)
    assert current(book, "eve", policy_of(course_toml(tmp_path, extra=extra))).grade.score == 20


def test_bad_corrections_change_nothing(book):
    from grader.store.gradebook import GradebookInputError

    sid = hand_in(book, "fay", 9, b"f\n")
    with pytest.raises(GradebookInputError, match="LEARNER"):
        book.override("nobody", EX, 5, "why", "prof")
    with pytest.raises(GradebookInputError, match="--reason"):
        book.override("fay", EX, 5, "  ", "prof")
    with pytest.raises(GradebookInputError, match="--submission"):
        book.choose("fay", EX, sid + 99, "prof")
    with pytest.raises(GradebookInputError, match="--submission"):
        book.remove("fay", "x", "prof", submission=sid + 99)
    with pytest.raises(GradebookInputError, match="EXERCISE"):
        book.revoke_override("fay", EX, "prof")
    assert book.audit_log() == [] and current(book, "fay").grade.score == 9


# -- the commands ------------------------------------------------------------------------------------


def run(*args, rc=0):
    result = CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == rc, (result.output, result.stderr if hasattr(result, "stderr") else "")
    return result


def test_the_commands_correct_audit_and_export_what_they_did(db, tmp_path):
    with Gradebook(db) as book:
        first = hand_in(book, "gil", 8, b"g1\n", submitted_at=DUE - timedelta(hours=2))
        hand_in(book, "gil", 12, b"g2\n", submitted_at=DUE + timedelta(minutes=20))  # 1 day late
        hand_in(book, "hal", 20, b"h\n", late=True)  # Canvas _LATE, no time
    course = course_toml(tmp_path, "best")
    run("gradebook", "override", "hal", EX, "--score", 15, "--reason", "talked it through", "--author", "prof",
        "--db", db)
    run("gradebook", "choose", "gil", EX, "--submission", first, "--author", "ta", "--db", db)
    run("gradebook", "remove", "gil", "--submission", first, "--reason", "wrong file", "--db", db)
    rows = {r["learner"]: r for r in csv.DictReader(io.StringIO(
        run("gradebook", "export", "--db", db, "--course", course).output))}
    assert rows["hal"]["score"] == "15.0" and rows["hal"]["graded_score"] == "20.0"
    assert rows["hal"]["override_reason"] == "talked it through" and rows["hal"]["override_author"] == "prof"
    assert rows["hal"]["late_days"] == "1" and rows["hal"]["penalty"] == "0.1"
    # gil's on-time submission is removed: the late one counts, 12 less 10 % of 20
    assert rows["gil"]["score"] == "10.0" and rows["gil"]["late_days"] == "1" and rows["gil"]["override_score"] == ""
    run("gradebook", "restore", "gil", "--submission", first, "--reason", "it was right", "--db", db)
    chosen = course_toml(tmp_path, "chosen")
    data = json.loads(run("gradebook", "export", "--db", db, "--format", "json", "--course", chosen).output)
    gil = next(r for r in data if r["learner"] == "gil")
    assert gil["score"] == 8 and gil["grade"]["adjustments"] == []
    hal = next(r for r in data if r["learner"] == "hal")
    assert [a["kind"] for a in hal["grade"]["adjustments"]] == ["late-penalty", "override"]
    shown = run("gradebook", "show", "hal", "--db", db, "--course", chosen).output
    assert "talked it through" in shown and "override by prof" in shown
    audit = json.loads(run("gradebook", "audit", "--db", db, "--format", "json").output)
    assert [(e["action"], e["learner"]) for e in audit] == [
        ("override", "hal"), ("choose", "gil"), ("remove", "gil"), ("restore", "gil")]
    text = run("gradebook", "audit", "--db", db, "--learner", "gil").output
    assert "remove  gil  day49-data" in text and "wrong file" in text and "hal" not in text
    run("gradebook", "override", "hal", EX, "--revoke", "--db", db)
    assert json.loads(run("gradebook", "export", "--db", db, "--format", "json").output)[1]["score"] == 20


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("override", "ivy", EX, "--score", 21, "--reason", "r"), "--score"),
        (("override", "ivy", EX, "--score", -1, "--reason", "r"), "--score"),
        (("override", "ivy", EX, "--score", 5, "--reason", " "), "--reason"),
        (("override", "ivy", EX, "--score", 5), "--reason"),
        (("override", "nobody", EX, "--score", 5, "--reason", "r"), "LEARNER"),
        (("override", "ivy", "no-such-exercise", "--score", 5, "--reason", "r"), "EXERCISE"),
        (("override", "ivy", EX, "--revoke"), "EXERCISE"),
        (("remove", "ivy", "--submission", 999, "--reason", "r"), "--submission"),
        (("remove", "ivy", "--reason", ""), "--reason"),
        (("restore", "nobody", "--reason", "r"), "LEARNER"),
        (("choose", "ivy", EX, "--submission", 999), "--submission"),
    ],
)
def test_bad_input_is_exit_2_naming_the_argument_and_stores_nothing(tmp_path, args, named):
    db = str(tmp_path / "gb.db")
    with Gradebook(db) as book:
        hand_in(book, "ivy", 9, b"i\n")
    result = run("gradebook", *args, "--db", db, rc=2)
    assert named in result.output
    with Gradebook(db) as book:
        assert book.audit_log() == [] and current(book, "ivy").grade.score == 9
        assert not current(book, "ivy").grade.adjustments


def test_a_missing_gradebook_is_exit_2_and_is_not_created(tmp_path):
    db = tmp_path / "none.db"
    for args in (("override", "a", EX, "--score", 1, "--reason", "r"), ("audit",), ("remove", "a", "--reason", "r")):
        assert "does not exist" in run("gradebook", *args, "--db", db, rc=2).output
    assert not db.exists()


# -- the reports show the adjustments, in both languages -------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_every_report_shows_the_penalty_and_the_override_with_its_reason(lang):
    from reports import render

    policy = CoursePolicy.model_validate(
        {"exercises": {EX: {"due": DUE, "late": {"grace_minutes": 15, "penalty_per_day": 0.1}}}}
    )
    flag = lms_lateness(policy, EX, Deadlines(None, DUE, None), submitted_at=None, flagged_late=True)
    g = adjusted(grade(20), flag, OverrideFact(17, "a <b>bold</b> claim", "prof"))
    words = {"en": ("Late penalty", "without a time", "Score set by"), "zh-TW": ("遲交扣分", "沒有繳交時間", "調整了分數")}
    for fmt in ("text", "html", "markdown", "junit", "gradescope"):
        out = render(g, fmt, lang)
        for w in words[lang]:
            assert w in out, (fmt, w)
        assert "prof" in out and "18 → 17" in out, fmt
        if fmt == "html":
            assert "<b>bold</b>" not in out and "&lt;b&gt;bold&lt;/b&gt;" in out
    assert json.loads(render(g, "gradescope", lang))["score"] == 17
    assert json.loads(render(g, "json", lang))["adjustments"][1]["reason"] == "a <b>bold</b> claim"


# -- a real regrade ----------------------------------------------------------------------------------


def test_an_override_survives_a_real_regrade_and_shows_in_the_export_with_its_reason(tmp_path):
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from grader.course.sampleclass import make_class

    root = Path(__file__).resolve().parents[1]
    exercises = tmp_path / "exercises"
    shutil.copytree(root / "exercises" / EX, exercises / EX, ignore=shutil.ignore_patterns("__pycache__"))
    with open(exercises / EX / "exercise.toml", "a") as f:
        f.write("\n[limits]\nwall_seconds = 30\ncall_seconds = 4\n")
    manifest = make_class(EX, tmp_path / "class", 2, only=("solution", "mutant:unshifted-targets"))
    db = str(tmp_path / "gb.db")
    env = {**os.environ, "GRADER_EXERCISES_DIR": str(exercises)}

    def grader(*args):
        proc = subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True,
                              text=True, timeout=300, cwd=root, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    grader("batch", EX, tmp_path / "class", "--db", db, "--workers", 1)
    buggy = next(k for k, v in manifest.items() if v == "mutant:unshifted-targets")
    grader("gradebook", "override", buggy, EX, "--score", 19, "--reason", "shift fixed in office hours",
           "--author", "prof", "--db", db)
    out = grader("regrade", EX, "--db", db, "--force", "--workers", 1)
    assert "regrading 2 of 2 current submissions" in out
    with Gradebook(db) as book:
        runs = book.latest_runs([c.submission_id for c in book.current_grades(EX)])
        assert all(len(r) == 2 for r in runs.values())  # regraded: a second run each
        c = current(book, buggy)
        assert c.graded_score < 19 and c.grade.score == 19 and c.run_id == runs[c.submission_id][-1][1].id
    rows = {r["learner"]: r for r in csv.DictReader(io.StringIO(grader("gradebook", "export", "--db", db)))}
    assert rows[buggy]["score"] == "19.0" and rows[buggy]["override_reason"] == "shift fixed in office hours"
    actions = [e["action"] for e in json.loads(grader("gradebook", "audit", "--db", db, "--format", "json"))]
    assert actions == ["batch", "override", "regrade"]
