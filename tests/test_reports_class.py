"""The class report: its numbers are the numbers of the grades it summarises.

Every figure is recomputed here from the grades, independently of reports.class_report, and
compared with what the HTML shows (its data-* attributes and tables) and with the CSV.
"""
import csv
import io
import statistics
from collections import Counter

import pytest
from bs4 import BeautifulSoup

from reports.class_report import render_class_csv, render_class_html, summarize
from reports.gradebook import COLUMNS
from test_reports import assert_self_contained
from test_reports_grades import (hostile_grade, invalid_grade, only_bug_d_grade, quiz_pass_grade,
                                 quiz_wrong_grade, solution_grade, starter_grade)


def class_of_grades():
    """A small class: three bug-hunt submissions twice over (different learners), two quizzes,
    one that could not be graded, and one full of hostile text."""
    base = [starter_grade(), only_bug_d_grade(), solution_grade()]
    copies = [g.model_copy(update={"student": f"{g.student}-2"}) for g in base]
    return base + copies + [quiz_pass_grade(), quiz_wrong_grade(), invalid_grade(), hostile_grade()]


@pytest.fixture(scope="module")
def grades():
    return class_of_grades()


@pytest.fixture(scope="module", params=["en", "zh-TW"])
def page(request, grades):
    return request.param, BeautifulSoup(render_class_html(grades, lang=request.param), "html.parser")


def pct(g):
    return 100 * g.score / g.max_score


def test_the_overview_numbers(grades, page):
    _, doc = page
    assert_self_contained(doc)
    stat = {d["data-stat"]: d["data-value"] for d in doc.select("[data-stat]")}
    assert int(stat["submissions"]) == len(grades) == 10
    assert int(stat["passed"]) == sum(g.passed for g in grades) == 3
    assert float(stat["mean"]) == pytest.approx(statistics.fmean(map(pct, grades)), abs=0.01)
    assert float(stat["median"]) == pytest.approx(statistics.median(map(pct, grades)), abs=0.01)
    assert int(stat["errors"]) == sum(1 for g in grades if g.error) == 2


def test_the_histogram_counts_every_submission_in_its_bin(grades, page):
    _, doc = page
    bins = doc.select("#histogram svg.histogram g.bin")
    assert len(bins) == 10
    expected = Counter(min(int(pct(g) // 10), 9) for g in grades)
    for i, b in enumerate(bins):
        assert (float(b["data-lo"]), float(b["data-hi"])) == (10 * i, 10 * i + 10)
        assert int(b["data-count"]) == expected.get(i, 0), i
    assert sum(int(b["data-count"]) for b in bins) == len(grades)
    assert doc.select_one("svg.histogram")["data-counts"] == ",".join(str(expected.get(i, 0)) for i in range(10))


def test_pass_rate_per_check(grades, page):
    _, doc = page
    shown = {g["data-key"]: (int(g["data-passed"]), int(g["data-total"]))
             for g in doc.select("#checks svg.rates g.rate")}
    expected = Counter()
    total = Counter()
    for g in grades:
        for c in g.checks:
            total[f"{g.exercise}/{c.id}"] += 1
            expected[f"{g.exercise}/{c.id}"] += c.passed
    assert shown == {k: (expected[k], total[k]) for k in total}
    assert shown["day49-bughunt/training-on-a-markov-corpus"] == (2, 6)     # only the solutions train honestly


def test_pass_rate_per_rule(grades, page):
    _, doc = page
    bars = {g["data-key"]: (int(g["data-passed"]), int(g["data-total"])) for g in doc.select("#rules g.rate")}
    rows = {r["data-rule"]: (int(r["data-passed"]), int(r["data-total"])) for r in doc.select("#rules tr[data-rule]")}
    expected = {}
    for g in grades:
        for c in g.checks:
            p, t = expected.get(c.rule, (0, 0))
            expected[c.rule] = (p + c.passed, t + 1)
    assert bars == rows == expected


def test_most_frequent_diagnoses_with_counts(grades, page):
    lang, doc = page
    rows = doc.select("#diagnoses tr.diagnosis")
    counts = [int(r["data-count"]) for r in rows]
    assert counts == sorted(counts, reverse=True)
    by_mutant = {r["data-mutant"]: int(r["data-count"]) for r in rows if r["data-mutant"]}
    expected = Counter()
    for g in grades:
        expected.update({d.mutant for d in g.diagnosis if d.mutant})
    assert by_mutant == dict(expected)
    assert by_mutant["unshifted-targets"] == 4 and by_mutant["post-ln"] == 2
    if lang == "zh-TW":
        text = doc.select_one("#diagnoses").get_text()
        assert "目標沒有位移" in text and "未來的詞元洩漏" in text


def test_errors_and_submissions_tables(grades, page):
    _, doc = page
    errors = {r["data-error"]: int(r["data-count"]) for r in doc.select("#errors tr[data-error]")}
    assert errors == dict(Counter(g.error.kind for g in grades if g.error))
    rows = doc.select("#submissions tr.submission")
    assert [r["data-passed"] == "true" for r in rows] == [g.passed for g in grades]
    assert "<b>eve</b>" not in str(doc) or doc.find("b") is None


def test_summary_matches_the_page(grades):
    s = summarize(grades)
    assert s.n == len(grades) and sum(s.histogram) == len(grades)
    assert sum(r.total for r in s.rules) == sum(len(g.checks) for g in grades)
    assert sum(r.points for r in s.rules) == pytest.approx(sum(g.score for g in grades))


def test_class_csv_has_one_row_per_grade(grades):
    rows = list(csv.DictReader(io.StringIO(render_class_csv(grades))))
    assert len(rows) == len(grades)
    for row, g in zip(rows, grades):
        assert list(row) == COLUMNS
        assert row["student"] == (g.student or "") and row["exercise"] == g.exercise
        assert float(row["score"]) == g.score and float(row["percent"]) == pytest.approx(pct(g), abs=0.01)
        assert row["checks_passed"] == str(sum(c.passed for c in g.checks))


def test_an_empty_class_still_renders():
    doc = BeautifulSoup(render_class_html([], lang="zh-TW"), "html.parser")
    assert doc.select_one('[data-stat="submissions"]')["data-value"] == "0"
    assert render_class_csv([]).strip() == ",".join(COLUMNS)
