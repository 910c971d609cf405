"""The per-submission reports: terminal, HTML, Markdown, JSON, JUnit XML, Gradescope, CSV.

HTML is parsed (BeautifulSoup), JUnit XML read back with junitparser, results.json validated
against the JSON Schema written from Gradescope's documentation.
"""
import csv
import io
import json
import os
import re
import subprocess
import sys

import jsonschema
import pytest
from bs4 import BeautifulSoup
from junitparser import Error, Failure, JUnitXml

from grader.models import RULES
from grader.catalog.mutants import load_mutants
from reports import FORMATS, render
from reports.gradebook import COLUMNS
from reports.gradescope import schema
from reports.terminal import width
from reports.view import MAX_MESSAGE, MAX_REPORT
from test_reports_grades import (FOUR_BUGS, ROOT, hostile_grade, invalid_grade,
                                 only_bug_d_grade, quiz_pass_grade, quiz_wrong_grade, starter_grade)

CJK = re.compile(r"[\u4e00-\u9fff]")


def soup(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def all_grades():
    return [starter_grade(), only_bug_d_grade(), quiz_pass_grade(), quiz_wrong_grade(),
            invalid_grade(), hostile_grade()]


def assert_self_contained(doc: BeautifulSoup):
    """No external asset: no script at all, no src/href that leaves the page, no CSS import/url."""
    assert doc.find("script") is None
    assert doc.find("link") is None and doc.find("iframe") is None and doc.find("object") is None
    for tag in doc.find_all(True):
        for attr in ("src", "href", "srcset", "action", "data", "poster", "xlink:href"):
            value = tag.get(attr)
            if value is not None:
                assert str(value).startswith("#"), (tag.name, attr, value)
    for style in doc.find_all("style"):
        assert "@import" not in style.text and "url(" not in style.text
    assert not doc.find_all(style=re.compile(r"url\("))


# -- HTML -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["zh-TW", "en"])
def test_html_shows_the_four_diagnoses_and_the_loss_plot(lang):
    html = render(starter_grade(), "html", lang)
    doc = soup(html)
    assert_self_contained(doc)
    assert doc.html["lang"] == ("zh-Hant-TW" if lang == "zh-TW" else "en")
    cards = doc.select("#diagnosis article.diagnosis")
    # each of the four bugs once, with its day; the root causes' diagnoses first (reports/view.py),
    # so Post-LN, whose check builds on the others, comes last
    named = [(c["data-mutant"], int(c["data-day"])) for c in cards]
    assert sorted(named, key=lambda m: m[1]) == list(zip(FOUR_BUGS, [43, 44, 46, 49]))
    assert named[-1][0] == "post-ln"
    for card in cards:
        text = card.get_text(" ", strip=True)
        assert bool(CJK.search(text)) == (lang == "zh-TW"), text
    if lang == "zh-TW":
        joined = " ".join(c.get_text(" ", strip=True) for c in cards)
        for term in ("注意力縮放", "因果遮罩", "Pre-LN 殘差", "目標位移", "第 43 天"):
            assert term in joined, term
        assert "scores scaled by" not in html and "NaN on the first forward pass at" not in html
    messages = {m.id: m.message for m in load_mutants()}
    for card in cards:  # each bug in its mutant's own words, in the report's language
        message = messages[card["data-mutant"]]
        said = message.zh_TW if lang == "zh-TW" else message.en
        assert said in card.get_text(" ", strip=True) or said in card.get_text(), said
    plot = doc.select_one("#training svg.loss-curve")
    assert plot is not None and int(plot["data-points"]) == 120
    assert int(plot["data-nonfinite"]) == 120          # NaN from the very first step: drawn, not crashed
    assert plot.select("rect.nonfinite") and plot.select("line.ln-v") and plot.select("line.floor")


def test_html_groups_checks_by_rule_and_day_with_points():
    g = starter_grade()
    doc = soup(render(g, "html", "en"))
    groups = doc.select("#checks section.group")
    seen = [(s["data-rule"], int(s["data-day"])) for s in groups]
    assert seen == sorted(set(seen), key=lambda k: (k[1], k[0]))
    assert sorted(seen) == sorted({(c.rule, c.day) for c in g.checks})
    items = doc.select("#checks li.check")
    assert sorted(i["data-check"] for i in items) == sorted(c.id for c in g.checks)
    by_id = {c.id: c for c in g.checks}
    for item in items:
        c = by_id[item["data-check"]]
        assert float(item["data-points"]) == c.points and float(item["data-max-points"]) == c.max_points
        assert item["data-passed"] == ("true" if c.passed else "false")
    assert doc.select_one("[data-score]")["data-score"] == str(g.score)


def test_html_plots_a_collapsing_loss_below_the_floor():
    g = only_bug_d_grade()
    doc = soup(render(g, "html", "zh-TW"))
    plot = doc.select_one("svg.loss-curve")
    assert int(plot["data-nonfinite"]) == 0
    points = [tuple(map(float, p.split(","))) for p in plot.select_one("polyline.loss")["points"].split()]
    floor_y = float(plot.select_one("line.floor")["y1"])
    assert points[0][1] < floor_y < points[-1][1]      # starts above the floor, ends below (y grows down)
    assert "低於熵下限" in plot.get_text()


def test_html_escapes_and_caps_learner_text():
    html = render(hostile_grade(), "html", "zh-TW")
    assert len(html.encode()) <= MAX_REPORT
    doc = soup(html)
    assert_self_contained(doc)
    assert doc.find("img") is None and "<script>" not in html and "\x1b" not in html
    assert "&lt;script&gt;" in html
    for msg in doc.select(".check .msg"):
        assert len(msg.get_text().encode()) <= MAX_MESSAGE + 8
    assert "<b>eve</b>" not in html and "&lt;b&gt;eve&lt;/b&gt;" in html


def test_a_quiz_report_never_shows_the_key():
    wrong = quiz_wrong_grade()
    for lang in ("en", "zh-TW"):
        for fmt in ("html", "markdown", "text", "gradescope", "junit"):
            out = render(wrong, fmt, lang)
            for key in ("4194304", "4,194,304", "0.0558, 0.9442", "[[1, 0], [0.0558"):
                assert key not in out, (fmt, lang, key)


def test_error_text_from_outside_the_checks_is_translated():
    g = invalid_grade()
    assert g.error.kind == "invalid-submission" and "symbolic link" in g.error.message
    doc = soup(render(g, "html", "zh-TW"))
    error = doc.select_one("#error")
    assert error["data-kind"] == "invalid-submission"
    assert "符號連結" in error.get_text() and "symbolic" not in error.get_text()


# -- terminal and Markdown --------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_text_fits_80_columns_and_colours_only_when_asked(lang):
    for g in all_grades():
        plain = render(g, "text", lang)
        assert "\x1b" not in plain
        assert all(width(line) <= 80 for line in plain.splitlines()), \
            [line for line in plain.splitlines() if width(line) > 80][:3]
    coloured = render(starter_grade(), "text", lang, color=True)
    assert "\x1b[31m" in coloured and "\x1b[2J" not in coloured and "\x1b]0;" not in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == render(starter_grade(), "text", lang)


def test_text_names_the_diagnoses():
    text = render(starter_grade(), "text", "zh-TW")
    for mutant in FOUR_BUGS:
        assert f"[{mutant}]" in text
    assert "診斷" in text and "訓練探測" in text and "損失從第 0 步起是 NaN/inf" in text


def test_markdown_is_inert_and_complete():
    md = render(hostile_grade(), "markdown", "en")
    assert "\x1b" not in md
    outside_code = re.sub(r"(?ms)^(`{3,})text\n.*?^\1$", "", md)      # a fenced block shows text as is
    assert outside_code != md and "<script>" not in outside_code and "<img" not in outside_code
    assert len(md.encode()) <= MAX_REPORT
    md = render(starter_grade(), "markdown", "zh-TW")
    assert md.startswith("# 除錯挑戰")
    assert all(f"`{m}`" in md for m in FOUR_BUGS)
    assert "## 依規則與課程日分組的檢查項目" in md and "### 因果遮罩 · 第 44 天" in md


# -- JSON ---------------------------------------------------------------------------------------------

def test_json_has_spec_fields_and_is_strict():
    for g in all_grades():
        text = render(g, "json")
        data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
        for field in ("exercise", "passed", "score", "max_score", "checks", "symptoms", "diagnosis", "error"):
            assert field in data
        for c in data["checks"]:
            for field in ("id", "passed", "points", "max_points", "rule", "day", "message", "symptoms"):
                assert field in c
    data = json.loads(render(starter_grade(), "json"))
    assert sorted(d["mutant"] for d in data["diagnosis"]) == sorted(FOUR_BUGS)
    assert all(d["message_id"] or d["message_i18n"].get("zh-TW") for d in data["diagnosis"])


# -- Gradescope ---------------------------------------------------------------------------------------

def test_gradescope_results_validate_against_the_documented_schema():
    validator = jsonschema.Draft202012Validator(schema())
    jsonschema.Draft202012Validator.check_schema(schema())
    for g in all_grades():
        for lang in ("en", "zh-TW"):
            data = json.loads(render(g, "gradescope", lang))
            validator.validate(data)
            assert data["score"] == g.score
            assert len(data["tests"]) == len(g.checks)
            assert sum(t["max_score"] for t in data["tests"]) == sum(c.max_points for c in g.checks)
            assert [t["status"] for t in data["tests"]] == ["passed" if c.passed else "failed" for c in g.checks]
            assert data["stdout_visibility"] == "hidden"


def test_the_schema_rejects_what_gradescope_does_not_document():
    validator = jsonschema.Draft202012Validator(schema())
    good = json.loads(render(quiz_wrong_grade(), "gradescope"))
    for broken in ({**good, "visibility": "public"}, {**good, "points": 3},
                   {"tests": [{"name": "no score anywhere"}]},
                   {**good, "tests": [{**good["tests"][0], "status": "ok"}]}):
        assert list(validator.iter_errors(broken)), broken


# -- JUnit ------------------------------------------------------------------------------------------

def test_junit_xml_reads_back_with_the_right_counts():
    for g in all_grades():
        for lang in ("en", "zh-TW"):
            xml = JUnitXml.fromstring(render(g, "junit", lang).encode())
            suites = list(xml)
            assert len(suites) == 1
            suite = suites[0]
            failed = [c for c in g.checks if not c.passed]
            assert suite.name == g.exercise
            assert suite.tests == len(g.checks) + (1 if g.error else 0)
            assert suite.failures == len(failed) and suite.errors == (1 if g.error else 0)
            cases = list(suite)
            assert len(cases) == suite.tests
            failures = [c for c in cases if any(isinstance(r, Failure) for r in c.result)]
            errors = [c for c in cases if any(isinstance(r, Error) for r in c.result)]
            assert len(failures) == len(failed) and len(errors) == (1 if g.error else 0)
            assert {c.classname for c in cases} <= {f"{g.exercise}.{r}" for r in RULES} | {f"{g.exercise}.grading"}
    suite = next(iter(JUnitXml.fromstring(render(starter_grade(), "junit", "en").encode())))
    case = next(c for c in suite if c.name.startswith("causal-mask:"))
    assert case.result[0].message.startswith("NaN on the first forward pass at query row 0")
    assert case.result[0].type == "nan-forward"


# -- CSV --------------------------------------------------------------------------------------------

def test_csv_gradebook_row():
    for g in all_grades():
        rows = list(csv.DictReader(io.StringIO(render(g, "csv"))))
        assert len(rows) == 1
        row = rows[0]
        assert list(row) == COLUMNS
        assert float(row["score"]) == g.score and float(row["max_score"]) == g.max_score
        assert row["passed"] == ("true" if g.passed else "false")
        assert row["error_kind"] == (g.error.kind if g.error else "")
        per_rule = {r: sum(c.points for c in g.checks if c.rule == r) for r in {c.rule for c in g.checks}}
        for rule in RULES:
            cell = row[f"score:{rule}"]
            assert (float(cell) if cell else None) == per_rule.get(rule)
    row = next(csv.DictReader(io.StringIO(render(starter_grade(), "csv"))))
    assert sorted(row["diagnosed"].split(";")) == sorted(FOUR_BUGS) and row["student"] == "s-starter"


def test_every_format_renders_every_grade():
    for g in all_grades():
        for fmt in FORMATS:
            for lang in ("en", "zh-TW"):
                out = render(g, fmt, lang)
                assert out and len(out.encode()) <= MAX_REPORT + 64 * 1024, (fmt, lang)
    with pytest.raises(ValueError):
        render(starter_grade(), "pdf")


# -- the command line ------------------------------------------------------------------------------

def test_cli_writes_the_zh_tw_html_of_the_bug_hunt_starter(tmp_path):
    out = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "day49-bughunt",
                           str(ROOT / "exercises" / "day49-bughunt" / "starter"), "--format", "html",
                           "--lang", "zh-TW", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    doc = soup(out.read_text(encoding="utf-8"))
    assert sorted(c["data-mutant"] for c in doc.select("article.diagnosis")) == sorted(FOUR_BUGS)
    assert "因果遮罩" in doc.select_one("#diagnosis").get_text()
    assert doc.select_one("svg.loss-curve") is not None
    assert proc.stdout == ""


def test_cli_language_defaults_from_the_locale_and_formats_are_offered():
    env_zh = {k: v for k, v in os.environ.items() if k not in ("LANGUAGE", "LC_ALL", "LC_MESSAGES")}
    env_zh["LANG"] = "zh_TW.UTF-8"
    quiz = str(ROOT / "exercises" / "day45-quiz" / "solution")
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "day45-quiz", quiz],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=env_zh)
    assert proc.returncode == 0 and "通過" in proc.stdout and "\x1b" not in proc.stdout, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "day45-quiz", quiz, "--lang", "en",
                           "--format", "junit"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=env_zh)
    assert proc.returncode == 0 and proc.stdout.startswith("<?xml"), proc.stderr
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "--help"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    for fmt in FORMATS:
        assert fmt in proc.stdout


def test_the_loss_plot_handles_nan_inf_huge_and_empty_runs():
    from grader.models import TrainingCurve
    from reports.svg import loss_curve
    labels = {k: k for k in ("title", "step", "loss", "ln_v", "floor", "nonfinite", "below_floor", "empty")}
    curve = TrainingCurve(losses=[None, 5.0, 1e9, 2.0, None, None, 1.0], ln_v=4.6, floor=1.39, steps=7)
    plot = soup(loss_curve(curve, labels=labels)).svg
    assert plot["data-nonfinite"] == "3" and plot["data-points"] == "7"
    assert len(plot.select("rect.nonfinite")) == 2                    # step 0, and steps 4-5
    ys = [float(p.split(",")[1]) for line in plot.select("polyline.loss") for p in line["points"].split()]
    assert min(ys) >= float(plot.select_one("rect")["y"])            # 1e9 is drawn at the top edge
    assert plot.select_one("circle.loss") is not None                 # the lone last point
    for losses in ([], [None] * 5, [3.0]):
        svg = soup(loss_curve(TrainingCurve(losses=losses, ln_v=4.6, floor=1.39), labels=labels)).svg
        assert svg is not None and (svg.select_one("text.empty") is not None) == (losses != [3.0])


# -- a diagnosis whose message is data (a mutant's [message]) ----------------------------------------

def mutant_diagnosis_grade():
    """A failing check diagnosed as the post-ln mutant, its message in both languages as its
    TOML gives them; no msgid, so only message_i18n can give the zh-TW text."""
    from grader.models import CheckResult, Diagnosis, Grade
    from grader.catalog.mutants import load_mutants

    post_ln = next(m for m in load_mutants() if m.id == "post-ln")
    return Grade(exercise="day48-decoder", passed=False, score=0, max_score=2, checks=[
        CheckResult(id="block-is-pre-ln", passed=False, points=0, max_points=2, rule="pre-ln-residual",
                    day=46, title="the block is Pre-LN", message="the block is not Pre-LN")],
        diagnosis=[Diagnosis(rule=post_ln.rule, day=post_ln.day, mutant=post_ln.id, check="block-is-pre-ln",
                             message=post_ln.message.en,
                             message_i18n={"en": post_ln.message.en, "zh-TW": post_ln.message.zh_TW})],
        grader_version="test"), post_ln.message


def squashed(text: str) -> str:
    """Report text with wrapping, escapes and markup undone, to look for a sentence in it."""
    import html
    return re.sub(r"[\s\\]", "", html.unescape(text))


@pytest.mark.parametrize("fmt", ["html", "text", "markdown", "gradescope", "junit"])
def test_a_diagnosis_is_shown_in_the_language_of_the_report(fmt):
    g, message = mutant_diagnosis_grade()
    zh, en = render(g, fmt, "zh-TW"), render(g, fmt, "en")
    if fmt == "gradescope":
        zh, en = json.loads(zh)["output"], json.loads(en)["output"]
    assert squashed(message.zh_TW) in squashed(zh) and squashed(message.en) not in squashed(zh)
    assert squashed(message.en) in squashed(en) and squashed(message.zh_TW) not in squashed(en)


def test_the_class_report_shows_a_diagnosis_in_its_language():
    from reports.class_report import summarize

    g, message = mutant_diagnosis_grade()
    [stat] = summarize([g], lang="zh-TW").diagnoses
    assert stat.message == message.zh_TW
    [stat] = summarize([g], lang="en").diagnoses
    assert stat.message == message.en


# -- the learner's copy (issue 31) -----------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh-TW"])
@pytest.mark.parametrize("fmt", ["text", "html", "markdown"])
def test_a_learners_report_leaves_out_the_isolation_and_a_crash_shows_no_empty_tally(fmt, lang):
    crashed = invalid_grade().model_copy(update={"isolation": "bubblewrap"})
    assert crashed.error is not None and crashed.checks == []
    theirs = render(crashed, fmt, lang, learner=True)
    text = soup(theirs).get_text() if fmt == "html" else theirs
    assert not re.search("isolation|bubblewrap|隔離", text), text
    assert not re.search(r"0 of 0|0 個檢查項目中通過 0", text), text        # no "0 of 0 checks passed"
    assert "bubblewrap" in render(crashed, fmt, lang)                   # the instructor's view keeps it
    graded = starter_grade()                                           # a tally where there are checks
    tally = f"{sum(c.passed for c in graded.checks)} of {len(graded.checks)} checks passed"
    assert tally in render(graded, fmt, "en", learner=True)


def test_a_table_header_never_wraps_inside_a_word():
    """繳交次數 broke as 繳交/次數 in a narrow column of the class page (issue 31): every page's
    tables (one stylesheet, reports/templates/_style.css.j2) keep a header on one line."""
    style = soup(render(starter_grade(), "html", "zh-TW")).find("style").text
    assert re.search(r"table\.data th \{[^}]*white-space: nowrap", style)
