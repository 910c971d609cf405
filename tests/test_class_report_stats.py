"""The numbers an instructor reads in a class report, and the copies it points at.

A class of six learners is made by hand, so every number below is worked out by hand here (in
the comments) rather than recomputed by the code under test: the score statistics, the pass
rates, the discrimination index D of each check, the lateness. Their files are day49-data's:
the solution, a byte copy, a renamed-variables copy, an independent solution, and two learners
who handed in the starter with only a comment of their own.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import UTC, datetime

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from grader.course.copies import find_copies
from grader.catalog.exercises import exercise_dir, load_exercise
from grader.catalog.starters import starter_files
from grader.models import Adjustment, CheckResult, Diagnosis, Grade
from grader.course.sampleclass import renamed_locals
from reports.class_report import ClassEntry, render_class_html, render_items_csv, summarize

EXERCISE = "day49-data"
STARTER = starter_files(load_exercise(EXERCISE))
SOLUTION = (exercise_dir(EXERCISE) / "solution" / "data.py").read_bytes()
HOSTILE = b"\n# </pre><script>alert(1)</script> \xe2\x80\xae reversed\n"

# An independent solution: the same functions, written another way by another person.
INDEPENDENT = b'''import numpy as np
import torch
import torch.nn.functional as F


def make_xy(chunk):
    seq = torch.as_tensor(np.asarray(chunk), dtype=torch.long)
    inputs = seq[: len(seq) - 1].clone()
    labels = seq[1:].clone()
    return inputs, labels


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    tokens = torch.as_tensor(np.asarray(data), dtype=torch.long)
    n_starts = tokens.numel() - block_size
    if n_starts < 1:
        raise ValueError("data is shorter than block_size + 1")
    starts = torch.randint(0, n_starts, (batch_size,), generator=generator)
    offsets = torch.arange(block_size)
    index = starts[:, None] + offsets[None, :]
    return tokens[index].to(device), tokens[index + 1].to(device)


def lm_loss(logits, targets):
    vocab = logits.size(-1)
    flat_logits = logits.view(-1, vocab)
    flat_targets = targets.view(-1)
    return F.cross_entropy(flat_logits, flat_targets)
'''

# check id -> (points, English title, zh-TW title)
CHECKS = {
    "easy": (1.0, "an easy check", "簡單的檢查"),
    "sep": (1.0, "a separating check", "區分強弱的檢查"),
    "x": (2.0, "a two-point check", "兩分的檢查"),
    "y": (1.0, "a hard check", "困難的檢查"),
}
# who passed what: scores 5, 4, 3, 3, 1, 1 of 5
PASSED = {
    "s1": {"easy", "sep", "x", "y"},
    "s2": {"easy", "sep", "x"},
    "s3": {"easy", "sep", "y"},
    "s4": {"easy", "x"},
    "s5": {"easy"},
    "s6": {"easy"},
}
FILES = {
    "s1": SOLUTION + HOSTILE,
    "s2": renamed_locals(SOLUTION) + HOSTILE,  # a near copy of s1 (and so of s6)
    "s3": INDEPENDENT,
    "s4": STARTER["data.py"] + b"\n# s4 was here\n",  # the starter, only a comment added
    "s5": STARTER["data.py"] + b"\n# s5 too\n",
    "s6": SOLUTION + HOSTILE,  # byte for byte s1's
}


def check(cid: str, passed: bool) -> CheckResult:
    points, en, zh = CHECKS[cid]
    return CheckResult(
        id=cid,
        passed=passed,
        points=points if passed else 0.0,
        max_points=points,
        rule="data-windows",
        day=49,
        title=en,
        title_i18n={"en": en, "zh-TW": zh},
    )


def grade(who: str) -> Grade:
    checks = [check(cid, cid in PASSED[who]) for cid in CHECKS]
    score = sum(c.points for c in checks)
    diagnosis = []
    if who in ("s4", "s5", "s6"):
        diagnosis.append(Diagnosis(rule="target-shift", day=49, mutant="unshifted-targets", message="x"))
    if who == "s5":
        diagnosis.append(Diagnosis(rule="data-windows", day=49, mutant="windows-off-the-end", message="y"))
    adjustments = []
    if who == "s1":  # 90 minutes late: 10 % of 5 points taken
        adjustments.append(Adjustment(kind="late-penalty", before=5.0, after=4.5, late_minutes=90.0, late_days=1))
        score = 4.5
    return Grade(
        exercise=EXERCISE,
        passed=score == 5.0,
        score=score,
        max_score=5.0,
        checks=checks,
        diagnosis=diagnosis,
        student=who,
        adjustments=adjustments,
    )


def entries() -> list[ClassEntry]:
    return [
        ClassEntry(
            learner=who,
            name=f"Learner {who}",
            grade=grade(who),
            files={"data.py": FILES[who]},
            late=who in ("s1", "s6"),
            late_minutes=30.0 if who == "s6" else None,  # s1's time is in its penalty
            report_href=f"learners/{who}.html",
        )
        for who in PASSED
    ]


@pytest.fixture(scope="module")
def summary():
    return summarize(entries(), "en", STARTER)


def test_score_statistics_are_the_hand_computed_ones(summary):
    # percents after s1's late penalty: 90, 80, 60, 60, 20, 20
    percents = [90, 80, 60, 60, 20, 20]
    mean = 330 / 6  # 55
    assert summary.n == 6 and summary.passed == 0
    assert summary.mean_percent == pytest.approx(55.0)
    assert summary.median_percent == pytest.approx(60.0)
    assert summary.std_percent == pytest.approx(math.sqrt(sum((p - mean) ** 2 for p in percents) / 6))
    assert summary.std_percent == pytest.approx(26.93, abs=0.01)
    assert (summary.min_percent, summary.max_percent) == (20.0, 90.0)
    assert summary.histogram == [0, 0, 2, 0, 0, 0, 2, 0, 1, 1]


def test_pass_rates_and_discrimination(summary):
    by_id = {c.id: c for c in summary.checks}
    assert {cid: (c.passed, c.total) for cid, c in by_id.items()} == {
        "easy": (6, 6),
        "sep": (3, 6),
        "x": (3, 6),
        "y": (2, 6),
    }
    # 27 % of 6 learners: groups of round(1.62) = 2. Ranked on the OTHER checks' points:
    # sep: s1 4/4, s2 3/4, s4 3/4, s3 2/4, s5 1/4, s6 1/4 -> top s1, s2 (tie s2/s4 by id) pass sep,
    #      bottom s5, s6 fail it: D = 1 - 0 = 1, a check strong learners pass and weak ones fail
    assert by_id["sep"].discrimination == pytest.approx(1.0)
    # easy: everyone passes, so top and bottom alike: D = 0
    assert by_id["easy"].discrimination == pytest.approx(0.0)
    # x (2 points): others out of 3: s1 3, s3 3, s2 2, s4 1, s5 1, s6 1 -> top s1 (pass), s3 (fail),
    #      bottom s5, s6 (fail): D = 1/2 - 0
    assert by_id["x"].discrimination == pytest.approx(0.5)
    # y: others out of 4: s1 4, s2 4, s3 2, s4 3, s5 1, s6 1 -> top s1 (pass), s2 (fail): 1/2 - 0
    assert by_id["y"].discrimination == pytest.approx(0.5)
    # hardest first: y (2/6), then x and sep (3/6; the less discriminating first), then easy
    assert [c.id for c in summary.items] == ["y", "x", "sep", "easy"]


def test_diagnoses_and_lateness(summary):
    assert [(d.mutant, d.count) for d in summary.diagnoses] == [
        ("unshifted-targets", 3),
        ("windows-off-the-end", 1),
    ]
    late = summary.lateness
    # s1 (90 minutes, from its penalty) and s6 (30): median 60; one penalty of 0.5 points
    assert (late.late, late.known, late.median_minutes) == (2, 2, 60.0)
    assert (late.penalties, late.penalty_points, late.overrides) == (1, 0.5, 0)


def test_identical_and_near_copies(summary):
    copies = summary.copies
    assert [g.learners for g in copies.identical] == [("s1", "s6")]
    pairs = {(p.a, p.b): p for p in copies.near}
    # the renamed-variables copy is found against both holders of the original
    assert set(pairs) == {("s1", "s2"), ("s2", "s6")}
    assert all(p.similarity >= copies.threshold for p in pairs.values())
    assert pairs[("s1", "s2")].files[0].a_regions  # the side-by-side view's slices
    flagged = copies.learners
    assert "s3" not in flagged, "an independent solution is no copy"
    assert not {"s4", "s5"} & flagged, "two learners who kept the starter copied nothing"


def test_the_starter_is_what_keeps_two_starters_apart():
    """Without the starter as boilerplate, the two starter hand-ins would be near copies: the
    exclusion is what keeps them out, not chance."""
    subs = {w: {"data.py": FILES[w]} for w in ("s4", "s5")}
    assert [(p.a, p.b) for p in find_copies(subs, {}).near] == [("s4", "s5")]
    assert find_copies(subs, STARTER).near == []


def test_an_unchanged_starter_is_counted_not_grouped():
    subs = {"a": dict(STARTER), "b": dict(STARTER), "c": {"data.py": SOLUTION}}
    found = find_copies(subs, STARTER)
    assert found.identical == [] and found.near == [] and found.unchanged_starter == ["a", "b"]


def page(lang: str) -> BeautifulSoup:
    html = render_class_html(entries(), exercise=EXERCISE, starter=STARTER, lang=lang)
    return BeautifulSoup(html, "html.parser")


def test_the_page_escapes_learner_code_and_says_it_is_a_hint():
    doc = page("en")
    assert doc.find("script") is None
    sides = doc.select("#copies pre.side")
    assert sides and any("<script>alert(1)</script>" in pre.get_text() for pre in sides)
    assert all("\u202e" not in pre.get_text() for pre in sides)  # the bidi override written out
    assert any(pre.find("mark") for pre in sides)  # the matching regions highlighted
    assert "never a verdict" in doc.select_one("#copies .hint").get_text()
    near = {(r["data-a"], r["data-b"]) for r in doc.select("#copies tr.near-copy")}
    assert near == {("s1", "s2"), ("s2", "s6")}
    assert [r["data-learners"] for r in doc.select("#copies tr.identical")] == ["s1 s6"]


def test_the_page_shows_the_numbers_and_links_each_learner():
    doc = page("en")
    items = doc.select("#items tr.item")
    assert [r["data-check"] for r in items] == ["y", "x", "sep", "easy"]
    assert {r["data-check"]: float(r["data-discrimination"]) for r in items}["sep"] == 1.0
    stat = {d["data-stat"]: d["data-value"] for d in doc.select("#numbers [data-stat]")}
    assert float(stat["std"]) == pytest.approx(26.93, abs=0.01) and stat["late"] == "2"
    lateness = {d["data-stat"]: d["data-value"] for d in doc.select("#lateness [data-stat]")}
    assert lateness["median-minutes-late"] == "60.0" and lateness["penalties"] == "1"
    links = {r["data-learner"]: r.select_one("a")["href"] for r in doc.select("#submissions tr.submission")}
    assert links == {w: f"learners/{w}.html" for w in PASSED}


def test_zh_tw_report_has_zh_tw_titles_and_headings():
    doc = page("zh-TW")
    items = doc.select_one("#items").get_text()
    assert "區分強弱的檢查" in items and "a separating check" not in items
    assert doc.select_one("#items h2").get_text() == "依難度排列的檢查"
    assert doc.select_one("#copies h2").get_text() == "可能雷同"     # neutral, as the English (issue 31)
    assert "抄襲" not in doc.get_text()
    assert "不是判定" in doc.select_one("#copies .hint").get_text()


def test_items_csv_holds_the_item_statistics():
    rows = list(csv.DictReader(io.StringIO(render_items_csv(entries(), "zh-TW"))))
    assert [r["check"] for r in rows] == ["y", "x", "sep", "easy"]
    sep = next(r for r in rows if r["check"] == "sep")
    assert (sep["passed"], sep["ran"], float(sep["pass_rate"]), float(sep["discrimination"])) == ("3", "6", 0.5, 1.0)
    assert sep["title"] == "區分強弱的檢查"


def test_overview_lists_each_exercise_with_a_link_to_its_class_report(tmp_path):
    from grader.cli import main
    from grader.store import Gradebook, Incoming, Outcome

    db = str(tmp_path / "class.db")
    with Gradebook(db) as gb:
        version = gb.exercise_version(EXERCISE, "v1", 5.0)
        ids = gb.add_submissions(
            EXERCISE,
            [Incoming(learner=w, files={"data.py": FILES[w]}, late=w == "s6") for w in PASSED],
        )
        for w, sid in zip(PASSED, ids, strict=True):
            raw = grade(w).model_copy(update={"adjustments": [], "score": 5.0 if w == "s1" else grade(w).score})
            gb.record(sid, version, Outcome(status="graded", grade=raw, finished_at=datetime.now(UTC)))
    out = tmp_path / "site" / "index.html"
    result = CliRunner().invoke(main, ["gradebook", "overview", "--db", db, "--out", str(out), "--lang", "en"])
    assert result.exit_code == 0, result.output
    doc = BeautifulSoup(out.read_text(encoding="utf-8"), "html.parser")
    [row] = doc.select("tr.exercise")
    assert row["data-exercise"] == EXERCISE and row["data-learners"] == "6"
    assert float(row["data-mean"]) == pytest.approx(340 / 6, abs=0.01)  # as graded, no penalty: s1 at 100 %
    assert row["data-late"] == "1" and row["data-copies"] == "3"  # s1, s2, s6
    assert row.select_one("a")["href"] == f"{EXERCISE}/class.html"
    missing = CliRunner().invoke(main, ["gradebook", "overview", "--db", str(tmp_path / "no.db"), "--out", str(out)])
    assert missing.exit_code == 2


def test_the_overlap_count_is_copydetects():
    """near_pairs counts the overlap itself (it is the pairwise loop's cost); it must be the
    count copydetect's compare_files gives for the same fingerprints."""
    from copydetect import compare_files

    from grader.course.copies import fingerprints, overlap

    prints = fingerprints({w: {"data.py": FILES[w]} for w in ("s1", "s2", "s3")}, STARTER)
    for a, b in (("s1", "s2"), ("s1", "s3"), ("s2", "s3")):
        pa, pb = prints[a]["data.py"], prints[b]["data.py"]
        _, (sim_a, sim_b), _ = compare_files(pa.fp, pb.fp)
        in_a, in_b = overlap(pa, pb)
        assert (in_a / pa.coverage, in_b / pb.coverage) == pytest.approx((sim_a, sim_b))
        assert in_a > 0  # every pair shares some code (the same three functions)


def test_a_page_of_bare_grades_claims_nothing_about_copies():
    """The grading server's page has grades without files: no copies section, rather than a
    "no pair is that similar" that nothing was compared for."""
    doc = BeautifulSoup(render_class_html([grade(w) for w in PASSED], lang="en"), "html.parser")
    assert doc.select_one("#copies") is None and doc.select_one("#items") is not None
    assert page("en").select_one("#copies") is not None
