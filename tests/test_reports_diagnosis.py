"""A diagnosis is worded as its evidence allows (issue 29): in every report, in both languages.

Three levels (grader.models.Diagnosis.level): "reproduced" is stated as a fact (the learner's
outputs on every failing call are what the bug gives; with `call`, the input that told it apart
from the other possible bugs); "candidate" is one of several possible known bugs, grouped under
one heading and never stated as a fact; "localized" says that no known bug explains the outputs,
and where the difference starts. Grades are made by hand here (nothing is graded): the words are
the point, not the search that finds the bugs.
"""
import csv
import io
import json
import re

import pytest
from bs4 import BeautifulSoup
from junitparser import JUnitXml

from grader.locale import msg
from grader.models import CheckResult, Diagnosis, Grade
from report_checks import check_report
from reports import FORMATS, render
from reports.class_report import render_class_html, summarize
from reports.lms import feedback_text

CJK = re.compile(r"[\u4e00-\u9fff]")
OLD = "The grader recognised these known bugs by reproducing your outputs with them."
OLD_ZH = "評分程式用這些已知的 bug 重現出你的輸出，因而認出了它們。"
FACT = {"en": "exactly what this known bug gives", "zh-TW": "和這個已知 bug 產生的完全一樣"}
FACTS = {"en": "exactly what these known bugs give", "zh-TW": "和這些已知 bug 產生的完全一樣"}
HEADINGS = {
    "reproduced": {"en": "Known bugs in your code", "zh-TW": "你的程式中的已知 bug"},
    "candidate": {"en": "Possible known bugs", "zh-TW": "可能的已知 bug"},
    "localized": {"en": "No known bug explains your outputs", "zh-TW": "沒有已知 bug 能解釋你的輸出"},
}
ONE_OF = {"en": "consistent with one of these known bugs; the grader could not tell which",
          "zh-TW": "其中之一相符；評分程式無法判斷是哪一個"}
POSSIBLY = {"en": "(possibly) ", "zh-TW": "（可能）"}
TOLD_APART = {"en": "Told apart from the other possible known bugs by", "zh-TW": "與其他可能的已知 bug 區分開來"}
STARTS = {"en": "the difference from the reference starts in scaled_dot_product_attention",
          "zh-TW": "與參考實作的差異從 scaled_dot_product_attention 開始"}

BUGS = {  # id -> (en, zh-TW): each its own words, as a mutant's TOML gives them
    "scale-by-sqrt-d-model": ("scores are divided by sqrt(d_model)", "分數除以 sqrt(d_model)"),
    "scale-by-d-model": ("scores are divided by d_model", "分數除以 d_model"),
    "mask-diagonal-0": ("the mask hides each position from itself", "遮罩連位置自己也蓋住了"),
}
DISTINGUISHING = "multi_head_attention(x=randn(1, 3, 8), n_head=2)"
# grader/grading/fingerprints.py's message when its search ran out of time
CUT_SHORT = ("the difference from the reference starts in {function}: its smallest failing call is {call} "
             "(the grader ran out of time before it had compared every known bug)")
SMALLEST = "scaled_dot_product_attention(q=randn(1, 1, 2, 4), k=randn(1, 1, 2, 4), v=randn(1, 1, 2, 4))"


def soup(text: str) -> BeautifulSoup:
    return BeautifulSoup(text, "html.parser")


def bug(mutant: str, level: str = "reproduced", call: str | None = None, **extra) -> Diagnosis:
    en, zh = BUGS[mutant]
    return Diagnosis(rule="attention-scaling", day=45, mutant=mutant, check="scaled", level=level, call=call,
                     message=en, message_i18n={"en": en, "zh-TW": zh}, **extra)


def localized(function: str = "scaled_dot_product_attention", call: str = SMALLEST) -> Diagnosis:
    return Diagnosis(rule="attention-scaling", day=45, check="scaled", level="localized", function=function,
                     call=call, message=msg("the difference from the reference starts in {function}: its "
                                            "smallest failing call is {call}, and no known bug explains it",
                                            function=function, call=call))


def grade_of(*diagnoses: Diagnosis, student: str = "s1") -> Grade:
    return Grade(exercise="day45-attention", passed=False, score=0, max_score=2, student=student, checks=[
        CheckResult(id="scaled", passed=False, points=0, max_points=2, rule="attention-scaling", day=45,
                    title="scores are scaled by 1/sqrt(d_k)", message="scores differ")],
        diagnosis=list(diagnoses), grader_version="test")


def reproduced_grade() -> Grade:
    """One bug told apart from another that reproduced the failing calls alike."""
    return grade_of(bug("scale-by-sqrt-d-model", call=DISTINGUISHING))


def candidate_grade() -> Grade:
    """Two bugs that reproduce the failing calls alike, with no input found to tell them apart."""
    return grade_of(bug("scale-by-d-model", "candidate"), bug("scale-by-sqrt-d-model", "candidate"))


def localized_grade() -> Grade:
    return grade_of(localized())


def mixed_grade() -> Grade:
    """Every level at once: one bug a fact, two candidates for another part, a function unexplained."""
    return grade_of(bug("mask-diagonal-0", call=DISTINGUISHING), bug("scale-by-d-model", "candidate"),
                    bug("scale-by-sqrt-d-model", "candidate"), localized())


def old_grade() -> Grade:
    """A grade stored before levels existed: its diagnoses have no level (nor call nor function)."""
    data = grade_of(bug("scale-by-d-model"), bug("mask-diagonal-0")).model_dump(mode="json")
    for d in data["diagnosis"]:
        for key in ("level", "call", "function"):
            d.pop(key)
    return Grade.model_validate(data)


def levels_in_html(html: str) -> list[str]:
    return [s["data-level"] for s in soup(html).select("#diagnosis section.diagnoses")]


def text_of(fmt: str, g: Grade, lang: str) -> str:
    """What a person reads of the report: the text of the page, Gradescope's output lines."""
    out = render(g, fmt, lang)
    if fmt == "html":
        return soup(out).select_one("#diagnosis").get_text(" ", strip=True)
    if fmt == "gradescope":
        return json.loads(out)["output"]
    return out.replace("\\", "")  # markdown's escapes


# -- the HTML report -------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_a_reproduced_bug_is_a_fact_told_apart_by_its_call(lang):
    html = render(reproduced_grade(), "html", lang)
    assert levels_in_html(html) == ["reproduced"]
    section = soup(html).select_one("#diagnosis section.reproduced")
    assert section.h3.get_text(strip=True) == HEADINGS["reproduced"][lang]
    [card] = section.select("article.diagnosis")
    assert card["data-level"] == "reproduced" and card["data-mutant"] == "scale-by-sqrt-d-model"
    assert card["data-call"] == DISTINGUISHING
    text = section.get_text(" ", strip=True)
    assert FACT[lang] in text and BUGS["scale-by-sqrt-d-model"][lang == "zh-TW"] in text
    assert TOLD_APART[lang] in card.select_one("p.note").get_text() and DISTINGUISHING in card.get_text()
    assert POSSIBLY[lang] not in text and OLD not in html and OLD_ZH not in html


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_candidates_are_one_possibility_each_never_a_fact(lang):
    html = render(candidate_grade(), "html", lang)
    assert levels_in_html(html) == ["candidate"]
    section = soup(html).select_one("#diagnosis section.candidate")
    assert section.h3.get_text(strip=True) == HEADINGS["candidate"][lang]
    assert ONE_OF[lang] in section.select_one("p.lead").get_text()
    cards = section.select("article.diagnosis")
    assert [c["data-mutant"] for c in cards] == ["scale-by-d-model", "scale-by-sqrt-d-model"]
    for card in cards:
        said = card.select_one("p").get_text()
        assert said == POSSIBLY[lang] + BUGS[card["data-mutant"]][lang == "zh-TW"], said
    page = soup(html).get_text(" ", strip=True)
    for sentence in (OLD, OLD_ZH, FACT[lang], FACTS[lang], HEADINGS["reproduced"][lang]):
        assert sentence not in page, sentence


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_localized_says_no_known_bug_and_where_the_difference_starts(lang):
    html = render(localized_grade(), "html", lang)
    assert levels_in_html(html) == ["localized"]
    section = soup(html).select_one("#diagnosis section.localized")
    assert section.h3.get_text(strip=True) == HEADINGS["localized"][lang]
    [card] = section.select("article.diagnosis")
    assert card["data-function"] == "scaled_dot_product_attention" and card["data-call"] == SMALLEST
    assert not card.has_attr("data-mutant") and card.select_one(".tag") is None
    said = card.select_one("p").get_text()
    assert STARTS[lang] in said and SMALLEST in said
    assert bool(CJK.search(said)) == (lang == "zh-TW")
    page = soup(html).get_text(" ", strip=True)
    for sentence in (OLD, OLD_ZH, FACT[lang], HEADINGS["reproduced"][lang], HEADINGS["candidate"][lang]):
        assert sentence not in page, sentence


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_every_level_at_once_in_its_order_and_only_the_fact_as_one(lang):
    html = render(mixed_grade(), "html", lang)
    assert levels_in_html(html) == ["reproduced", "candidate", "localized"]
    doc = soup(html)
    facts = doc.select("#diagnosis section.reproduced article.diagnosis")
    assert [c["data-mutant"] for c in facts] == ["mask-diagonal-0"]
    assert FACT[lang] in doc.select_one("#diagnosis section.reproduced p.lead").get_text()
    for card in doc.select("#diagnosis section.candidate article.diagnosis"):
        assert card.select_one("p").get_text().startswith(POSSIBLY[lang])
    assert OLD not in html and OLD_ZH not in html


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_a_bug_reproduced_is_not_listed_again_as_a_candidate(lang):
    g = grade_of(bug("scale-by-d-model"), bug("scale-by-d-model", "candidate"), bug("mask-diagonal-0", "candidate"))
    doc = soup(render(g, "html", lang))
    assert [c["data-mutant"] for c in doc.select("#diagnosis article.diagnosis")] == ["scale-by-d-model",
                                                                                      "mask-diagonal-0"]
    assert [c["data-level"] for c in doc.select("#diagnosis article.diagnosis")] == ["reproduced", "candidate"]
    # a lone candidate is not "one of these"
    assert ONE_OF[lang] not in doc.get_text(" ", strip=True)


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_a_grade_stored_before_levels_renders_its_bugs_as_reproduced(lang):
    g = old_grade()
    assert [d.level for d in g.diagnosis] == ["reproduced", "reproduced"]
    html = render(g, "html", lang)
    assert levels_in_html(html) == ["reproduced"]
    assert [c["data-mutant"] for c in soup(html).select("#diagnosis article.diagnosis")] == ["scale-by-d-model",
                                                                                           "mask-diagonal-0"]
    assert FACTS[lang] in soup(html).select_one("#diagnosis p.lead").get_text()
    assert POSSIBLY[lang] not in html and "data-call" not in html


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_a_search_cut_short_does_not_say_that_no_known_bug_explains_it(lang):
    cut = Diagnosis(rule="attention-scaling", day=45, check="scaled", level="localized", searched=False,
                    function="scaled_dot_product_attention", call=SMALLEST,
                    message=msg(CUT_SHORT, function="scaled_dot_product_attention", call=SMALLEST))
    for g in (grade_of(cut), grade_of(cut, localized("merge_heads", "merge_heads(x=randn(1, 2, 3, 4))"))):
        for fmt in ("html", "text", "markdown", "gradescope"):
            text = squashed(text_of(fmt, g, lang))
            assert squashed(HEADINGS["localized"][lang]) not in text, fmt
            assert squashed({"en": "ran out of time before it had compared every known bug",
                             "zh-TW": "在比對完所有已知 bug 之前就用完了時間"}[lang]) in text, fmt
            assert squashed(STARTS[lang]) in text


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_a_localized_diagnosis_without_a_message_is_said_from_its_function_and_call(lang):
    g = grade_of(Diagnosis(rule="attention-scaling", day=45, check="scaled", level="localized",
                           function="scaled_dot_product_attention", call=SMALLEST))
    [card] = soup(render(g, "html", lang)).select("#diagnosis article.diagnosis")
    said = card.select_one("p").get_text()
    assert STARTS[lang] in said and SMALLEST in said


# -- the text formats ------------------------------------------------------------------------------

def squashed(text: str) -> str:
    """Text with its layout undone (a terminal wraps between two CJK characters, with no space)."""
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("fmt", ["text", "markdown", "gradescope", "html"])
@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_each_format_words_each_level_as_its_evidence_allows(fmt, lang):
    fact, cands, where = (squashed(text_of(fmt, g, lang))
                          for g in (reproduced_grade(), candidate_grade(), localized_grade()))

    def said(text: str, *sentences: str) -> bool:
        return all(squashed(x) in text for x in sentences)

    assert said(fact, HEADINGS["reproduced"][lang], FACT[lang], TOLD_APART[lang], DISTINGUISHING)
    assert said(cands, HEADINGS["candidate"][lang], ONE_OF[lang])
    for en, zh in (BUGS["scale-by-d-model"], BUGS["scale-by-sqrt-d-model"]):
        assert said(cands, POSSIBLY[lang] + (zh if lang == "zh-TW" else en))
    assert said(where, HEADINGS["localized"][lang], STARTS[lang], SMALLEST)
    for text in (cands, where):
        for sentence in (OLD, OLD_ZH, FACT[lang], FACTS[lang], HEADINGS["reproduced"][lang]):
            assert not said(text, sentence), (fmt, sentence)
    for text in (fact, cands, where):
        assert bool(CJK.search(text)) == (lang == "zh-TW"), (fmt, text[:200])


def test_the_text_report_keeps_to_80_columns_in_both_languages():
    for lang in ("en", "zh-TW"):
        check_report("text", render(mixed_grade(), "text", lang), lang)


def test_the_levels_read_in_order_in_the_terminal():
    text = render(mixed_grade(), "text", "en")
    at = [text.index(HEADINGS[level]["en"]) for level in ("reproduced", "candidate", "localized")]
    assert at == sorted(at)
    lines = text.splitlines()
    assert any(x.startswith("  ● ") and "mask-diagonal-0" in x for x in lines)
    assert any(x.startswith("  ○ ") and "scale-by-d-model" in x for x in lines)
    assert any(x.startswith("  ▸ ") for x in lines)


# -- the data formats ------------------------------------------------------------------------------

def test_json_junit_and_gradescope_carry_the_level():
    g = mixed_grade()
    levels = ["reproduced", "candidate", "candidate", "localized"]
    data = json.loads(render(g, "json"))
    assert [d["level"] for d in data["diagnosis"]] == levels
    assert data["diagnosis"][0]["call"] == DISTINGUISHING and data["diagnosis"][3]["function"] == \
        "scaled_dot_product_attention"
    extra = json.loads(render(g, "gradescope"))["extra_data"]["diagnosis"]
    assert [d["level"] for d in extra] == levels
    assert extra[3] == {"rule": "attention-scaling", "day": 45, "mutant": None, "check": "scaled",
                        "level": "localized", "call": SMALLEST, "function": "scaled_dot_product_attention"}
    for lang in ("en", "zh-TW"):
        [suite] = list(JUnitXml.fromstring(render(g, "junit", lang).encode()))
        props = [(p.name, p.value) for p in suite.properties() if p.name.startswith("diagnosis")]
        assert [name for name, _ in props] == [f"diagnosis:{level}" for level in levels]
        assert TOLD_APART[lang] in props[0][1] and POSSIBLY[lang] in props[1][1] and STARTS[lang] in props[3][1]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_every_format_stays_what_its_format_must_be(fmt, lang):
    hostile = "f('\x1b[2J<script>x</script>\u202e')"
    g = grade_of(bug("scale-by-d-model", call=hostile), bug("mask-diagonal-0", "candidate"),
                 bug("scale-by-sqrt-d-model", "candidate"), localized("g\x07<b>", hostile))
    check_report(fmt, render(g, fmt, lang), lang)


# -- what counts as diagnosed: class report, grades.csv, LMS feedback ------------------------------

def test_only_a_reproduced_bug_counts_as_diagnosed():
    grades = [reproduced_grade(), candidate_grade().model_copy(update={"student": "s2"}),
              mixed_grade().model_copy(update={"student": "s3"}), localized_grade().model_copy(
                  update={"student": "s4"}), old_grade().model_copy(update={"student": "s5"})]
    stats = {(s.mutant, s.level): (s.count, s.candidates) for s in summarize(grades, with_copies=False).diagnoses}
    assert stats == {
        ("scale-by-sqrt-d-model", "reproduced"): (1, 2),   # a fact once; a candidate in s2 and s3
        ("scale-by-d-model", "reproduced"): (1, 2),        # the old grade's fact; candidates in s2, s3
        ("mask-diagonal-0", "reproduced"): (2, 0),         # s3 and the old grade
        (None, "localized"): (2, 0),                       # s3, s4: no known bug, same function
    }
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(render(grades[2], "csv")))}
    assert rows["s3"]["diagnosed"] == "mask-diagonal-0"
    assert rows["s3"]["candidates"] == "scale-by-d-model;scale-by-sqrt-d-model"
    [row] = csv.DictReader(io.StringIO(render(grades[1], "csv")))
    assert row["diagnosed"] == "" and row["candidates"] == "scale-by-d-model;scale-by-sqrt-d-model"
    for lang in ("en", "zh-TW"):
        doc = soup(render_class_html(grades, lang=lang))
        by_learner = {tr["data-learner"]: tr.get_text(" ", strip=True) for tr in doc.select("tr.submission")}
        assert "scale-by-d-model" not in by_learner["s2"] and "mask-diagonal-0" in by_learner["s3"]
        assert "scale-by-sqrt-d-model" not in by_learner["s3"]
        rows = {(tr["data-mutant"] or None, tr["data-level"]): (int(tr["data-count"]), int(tr["data-candidates"]))
                for tr in doc.select("#diagnoses tr.diagnosis")}
        assert rows == stats
        localized_row = doc.select_one('#diagnoses tr.diagnosis[data-level="localized"]').get_text(" ", strip=True)
        assert "scaled_dot_product_attention" in localized_row and SMALLEST not in localized_row
        assert bool(CJK.search(localized_row)) == (lang == "zh-TW")


@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_lms_feedback_names_a_candidate_only_as_a_possibility(lang):
    assert POSSIBLY[lang] in feedback_text(candidate_grade(), lang)
    assert POSSIBLY[lang] not in feedback_text(reproduced_grade(), lang)
    # a fact first, then where the difference starts, a possibility last
    assert BUGS["mask-diagonal-0"][lang == "zh-TW"] in feedback_text(mixed_grade(), lang)
    assert STARTS[lang] in feedback_text(grade_of(bug("scale-by-d-model", "candidate"), localized()), lang)
