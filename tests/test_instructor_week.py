"""The instructor's week after a deadline, end to end (issue 16, "Done when"): a class of 30 as
Canvas' "Download Submissions" zip gives it (three late, two byte-for-byte copies, one copy with
renamed variables, one learner who handed in another exercise) is graded with the course policy,
published, and imported back as Canvas' CSV; the class report lists the copies and the numbers
per check; an instructor's override survives a regrade and shows, with its reason, in the export.

One batch of 30 into SQLite with the local pool, then one `regrade --force`: the CLI as an
instructor types it, each command in its own process.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections import Counter

import pytest
from bs4 import BeautifulSoup

from grader.catalog.exercises import load_exercise
from grader.course.sampleclass import make_canvas_export
from tests.test_batch import EXERCISE, KINDS, copy_exercise, grader

N = 30
PENALTY = 0.10  # a day late: a Canvas _LATE flag is one started day


@pytest.fixture(scope="module")
def week(tmp_path_factory):
    root = tmp_path_factory.mktemp("week")
    exercises = copy_exercise(root / "exercises")
    manifest = make_canvas_export(EXERCISE, root / "submissions.zip", N, only=KINDS)
    course = root / "course.toml"
    course.write_text(
        textwrap.dedent(
            f"""
            [exercises.{EXERCISE}]
            due = 2026-11-08T23:59:00+08:00
            late = {{ grace_minutes = 0, penalty_per_day = {PENALTY} }}
            """
        ),
        encoding="utf-8",
    )
    db, out = str(root / "class.db"), root / "out"
    proc = grader("batch", EXERCISE, root / "submissions.zip", "--db", db, "--out", out, "--course", course,
                  "--workers", 2, "--no-progress", exercises=exercises, timeout=1800, check_rc=None)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return {"root": root, "exercises": exercises, "manifest": manifest, "course": course, "db": db,
            "out": out, "stdout": proc.stdout + proc.stderr}


def export(week) -> dict[str, dict]:
    proc = grader("gradebook", "export", "--db", week["db"], "--exercise", EXERCISE, "--course", week["course"],
                  exercises=week["exercises"])
    return {row["learner"]: row for row in csv.DictReader(io.StringIO(proc.stdout))}


def class_page(week) -> BeautifulSoup:
    return BeautifulSoup((week["out"] / "class.html").read_text(encoding="utf-8"), "html.parser")


def test_every_learner_of_the_export_is_graded_and_published_as_a_page_of_their_own(week):
    rows = export(week)
    assert set(rows) == set(week["manifest"])
    published = json.loads((week["out"] / "published.json").read_text(encoding="utf-8"))["learners"]
    assert set(published) == set(week["manifest"])
    for uid, entry in published.items():
        assert entry["score"] == pytest.approx(float(rows[uid]["score"]))
        page = (week["out"] / entry["files"]["html"]).read_text(encoding="utf-8")
        assert "<script" not in page and 'src="http' not in page and "<link" not in page  # self-contained
        assert (week["out"] / entry["files"]["markdown"]).read_text(encoding="utf-8").strip()


def test_late_learners_lose_one_days_penalty_from_canvas_own_late_flag(week):
    rows = export(week)
    points = load_exercise(EXERCISE).points
    for uid, info in week["manifest"].items():
        row = rows[uid]
        graded, score = float(row["graded_score"]), float(row["score"])
        if info["late"]:
            assert row["late"] == "True" and float(row["penalty"]) == pytest.approx(PENALTY), row
            assert score == pytest.approx(max(0.0, graded - PENALTY * points)), row
        else:
            assert row["late"] == "False" and score == pytest.approx(graded), row


def test_the_canvas_import_file_carries_the_final_scores_under_canvas_own_columns(week):
    text = (week["out"] / "canvas-import.csv").read_text(encoding="utf-8-sig")
    table = list(csv.reader(io.StringIO(text)))
    assert table[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert len(table[0]) == 6  # one assignment column
    body = [r for r in table[1:] if r[0] != "Points Possible"]
    rows = export(week)
    assert {r[1]: float(r[5]) for r in body} == pytest.approx({uid: float(r["score"]) for uid, r in rows.items()})
    assert {r[1]: r[0] for r in body} == {uid: info["name"] for uid, info in week["manifest"].items()}


def test_the_class_report_lists_the_copies_as_pairs_with_a_side_by_side_view(week):
    page = class_page(week)
    copied = {(uid, info["copy_of"]) for uid, info in week["manifest"].items() if info["kind"] == "copy"}
    near = {(uid, info["copy_of"]) for uid, info in week["manifest"].items() if info["kind"] == "near-copy"}
    assert len(copied) == 2 and len(near) == 1
    groups = [set(tr["data-learners"].split()) for tr in page.select("#copies tr.identical")]
    for copier, original in copied:
        assert any({copier, original} <= g for g in groups), groups
    pairs = {frozenset((tr["data-a"], tr["data-b"])) for tr in page.select("#copies tr.near-copy")}
    (copier, original), = near
    assert frozenset((copier, original)) in pairs
    assert page.select("#copies details.copy-view pre.side mark")
    # a hint, never a verdict: the copier's own grade does not mention it
    rows = export(week)
    assert "cop" not in rows[copier]["diagnosis"].lower()


def test_the_class_report_gives_each_check_its_pass_rate_and_discrimination_hardest_first(week):
    page = class_page(week)
    items = page.select("#items tr.item")
    graded = [json.loads(f.read_text(encoding="utf-8")) for f in (week["out"] / "grades").glob("*.json")]
    assert len(graded) == N
    assert {tr["data-check"] for tr in items} == {c["id"] for g in graded for c in g["checks"]}
    rates = [int(tr["data-passed"]) / int(tr["data-total"]) for tr in items]
    assert rates == sorted(rates)
    assert all(int(tr["data-total"]) > 0 for tr in items)
    # the class mixes correct and buggy work: some check separates them
    assert any(tr["data-discrimination"] and float(tr["data-discrimination"]) > 0 for tr in items)
    late = page.select_one("#lateness tr[data-stat=late]")
    assert int(late["data-value"]) == sum(info["late"] for info in week["manifest"].values())
    learners = page.select("#submissions tr.submission a[href^=\"learners/\"]")
    assert len(learners) == N and all((week["out"] / a["href"]).is_file() for a in learners)


def test_one_learner_with_another_exercise_fails_alone_and_the_class_is_not_called_the_wrong_exercise(week):
    wrong = [uid for uid, info in week["manifest"].items() if info["kind"].startswith("wrong-exercise")]
    assert len(wrong) == 1
    assert "may be the wrong exercise" not in week["stdout"]  # the warning is for most of a class
    row = export(week)[wrong[0]]
    assert float(row["score"]) == 0.0 and row["passed"] == "False" and row["failed_checks"], row


def test_an_override_survives_a_regrade_and_shows_in_the_export_with_its_reason(week):
    rows = export(week)
    who = next(uid for uid, info in week["manifest"].items()
               if not info["late"] and float(rows[uid]["score"]) < 17)
    grader("gradebook", "override", who, EXERCISE, "--score", 17, "--reason", "regraded by hand: off-by-one only",
           "--author", "prof-lin", "--db", week["db"], exercises=week["exercises"])
    proc = grader("regrade", EXERCISE, "--db", week["db"], "--force", "--course", week["course"], "--workers", 2,
                  "--no-progress", exercises=week["exercises"], timeout=1800, check_rc=None)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    after = export(week)
    row = after[who]
    assert float(row["score"]) == 17.0 and float(row["graded_score"]) < 17
    assert row["override_reason"] == "regraded by hand: off-by-one only" and row["override_author"] == "prof-lin"
    # the regrade left every other learner's final score as it was
    changed = Counter(uid for uid in rows if uid != who and after[uid]["score"] != rows[uid]["score"])
    assert not changed
    grader("gradebook", "publish", EXERCISE, "--db", week["db"], "--out", week["out"], "--course", week["course"],
           exercises=week["exercises"])
    text = (week["out"] / "canvas-import.csv").read_text(encoding="utf-8-sig")
    assert [r for r in csv.reader(io.StringIO(text)) if r[1] == who][0][5] == "17"
