"""Root causes first: a check that fails because a function it builds on fails too is shown
under that root cause, and every report says to fix the root first; points stay per check.

The hidden tests here are a tiny exercise of their own (split/merge heads, a multi-head step
built on it, a causal step built on that), graded against learner-style submissions: once with a
stand-in submission (fast: the runner's grouping logic), once in a real jail.
"""
from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import jsonschema
import pytest
from gradebook_checks import Recorder, differences

from grader.limits import Limits
from grader.models import CheckResult, Diagnosis, Grade
from grader.grading.runner import needs_errors, root_causes, run_hidden_tests
from grader.grading.session import SubmissionSession
from reports.class_report import render_class_html, summarize
from reports.gradescope import schema as gradescope_schema
from reports.render import render
from reports.view import build_view

HIDDEN = '''
from grader.testkit import check, fail

def expect(got, want, what):
    if got != want:
        fail(f"{what} returned {got}; expected {want}", symptoms=["value-mismatch"], got=str(got))

@check(points=2, rule="head-split", day=45, title="split and merge heads")
def test_split_heads(submission):
    expect(submission.heads.split([1, 2, 3, 4], 2), [[1, 2], [3, 4]], "split")

@check(points=3, rule="head-split", day=45, title="multi-head sum", needs=("split-heads",))
def test_multi_head(submission):
    expect(submission.heads.multi_head([1, 2, 3, 4], 2), [3, 7], "multi_head")

@check(points=3, rule="causal-mask", day=45, title="causal multi-head", needs=("multi-head",))
def test_causal_multi_head(submission):
    expect(submission.heads.causal([1, 2, 3, 4], 2), [3, 10], "causal")

@check(points=1, rule="api-contract", day=45, title="no heads at all")
def test_unrelated(submission):
    expect(submission.heads.version(), 1, "version")
'''

CORRECT = '''
def split(xs, n):
    size = len(xs) // n
    return [xs[i * size:(i + 1) * size] for i in range(n)]

def multi_head(xs, n):
    return [sum(h) for h in split(xs, n)]

def causal(xs, n):
    out, total = [], 0
    for s in multi_head(xs, n):
        total += s
        out.append(total)
    return out

def version():
    return 1
'''

# the learner's classic slip: heads taken with a stride (a view without the transpose), so the
# multi-head and causal steps built on it fail too, though their own code is right
STRIDED_SPLIT = CORRECT.replace("return [xs[i * size:(i + 1) * size] for i in range(n)]",
                                "return [xs[i::n] for i in range(n)]")


def module_of(source: str) -> SimpleNamespace:
    namespace: dict = {}
    exec(compile(source, "heads.py", "exec"), namespace)
    return SimpleNamespace(**{k: v for k, v in namespace.items() if not k.startswith("__")})


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hidden")
    (folder / "test_heads.py").write_text(HIDDEN)
    return folder


def graded(hidden, source: str) -> dict[str, CheckResult]:
    """The hidden tests run against a stand-in submission (a namespace, no jail)."""
    results = run_hidden_tests(hidden, SimpleNamespace(heads=module_of(source))).results
    return {c.id: c for c in results}


def test_a_broken_split_is_the_root_of_the_checks_built_on_it(hidden):
    checks = graded(hidden, STRIDED_SPLIT)
    assert [c.passed for c in checks.values()] == [False, False, False, True]
    assert checks["split-heads"].caused_by == []                 # the first broken thing
    assert checks["multi-head"].caused_by == ["split-heads"]
    assert checks["causal-multi-head"].caused_by == ["split-heads"]   # followed down to the root
    assert checks["unrelated"].caused_by == []
    # points are still per check: nothing is given or taken for the grouping
    assert [c.points for c in checks.values()] == [0, 0, 0, 1]


def test_a_need_that_passes_is_no_cause(hidden):
    # multi_head wrong on its own (max instead of sum): split passes, so multi-head is the root
    checks = graded(hidden, CORRECT.replace("[sum(h) for h", "[max(h) for h"))
    assert checks["split-heads"].passed
    assert checks["multi-head"].caused_by == []
    assert checks["causal-multi-head"].caused_by == ["multi-head"]
    # and only the causal step wrong: a failure of its own, with no cause to name
    checks = graded(hidden, CORRECT.replace("total += s", "total = s"))
    assert [c.id for c in checks.values() if not c.passed] == ["causal-multi-head"]
    assert checks["causal-multi-head"].caused_by == []


def test_the_correct_solution_passes_with_no_causes(hidden):
    checks = graded(hidden, CORRECT)
    assert all(c.passed and c.caused_by == [] for c in checks.values())


def write_hidden(tmp_path, source: str):
    # a file name of its own: pytest, run again in this process, keeps modules by name
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / f"test_broken_{tmp_path.name[-12:].replace('-', '_')}.py").write_text(source)
    return folder


def test_a_need_naming_no_check_is_the_graders_bug_named_at_collection(tmp_path):
    folder = write_hidden(tmp_path, HIDDEN.replace('needs=("multi-head",)', 'needs=("multi_head",)'))
    with pytest.raises(RuntimeError) as err:
        run_hidden_tests(folder, SimpleNamespace(heads=module_of(CORRECT)))
    text = str(err.value)
    assert "test_broken_" in text and ".py::test_causal_multi_head" in text and "'multi_head'" in text
    assert "multi-head" in text                                  # the ids it could have meant


def test_needs_in_a_cycle_are_the_graders_bug_and_no_check_runs(tmp_path):
    source = HIDDEN.replace('title="split and merge heads")', 'title="split", needs=("causal-multi-head",))')
    folder = write_hidden(tmp_path, source)
    ran = []
    with pytest.raises(RuntimeError) as err:
        run_hidden_tests(folder, SimpleNamespace(heads=module_of(CORRECT)),
                         before_checks=lambda: ran.append(1))
    assert "test_broken_" in str(err.value) and "cycle" in str(err.value)
    # split needs causal, which needs multi-head, which needs split
    assert "split-heads -> causal-multi-head -> multi-head -> split-heads" in str(err.value)
    assert ran == []                                             # nothing was started


def test_needs_errors_finds_self_needs_and_every_cycle():
    assert needs_errors({"a": ("a",)}, {}) == ["a: needs form a cycle: a -> a"]
    assert needs_errors({"a": ("b",), "b": ()}, {}) == []
    two = needs_errors({"a": ("b",), "b": ("a",), "c": ("d",), "d": ("c",)}, {})
    assert len(two) == 2 and all("cycle" in e for e in two)


def check(id: str, passed: bool) -> CheckResult:
    return CheckResult(id=id, passed=passed, points=float(passed), max_points=1.0, rule="head-split", day=45,
                       message="" if passed else f"{id} is wrong")


def test_root_causes_of_a_diamond_are_each_root_once():
    # d builds on b and c, both built on a: a broken `a` is d's one root, named once
    needs = {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c")}
    out = {c.id: c.caused_by for c in root_causes([check(x, False) for x in "abcd"], needs)}
    assert out == {"a": [], "b": ["a"], "c": ["a"], "d": ["a"]}
    # b and c broken on their own: d has two roots, in the order it names them
    results = [check("a", True)] + [check(x, False) for x in "bcd"]
    out = {c.id: c.caused_by for c in root_causes(results, needs)}
    assert out["d"] == ["b", "c"]


def test_a_broken_split_in_a_real_jail_is_the_root_too(hidden, tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "heads.py").write_text(STRIDED_SPLIT)
    session = SubmissionSession(sub, ["heads"], Limits())
    try:
        checks = {c.id: c for c in run_hidden_tests(hidden, session).results}
    finally:
        session.close()
    assert checks["split-heads"].message == "split returned [[1, 3], [2, 4]]; expected [[1, 2], [3, 4]]"
    assert checks["causal-multi-head"].caused_by == ["split-heads"] and checks["unrelated"].passed


# -- the reports ----------------------------------------------------------------------------------

ROOT_MESSAGE = "split returned [[1, 3], [2, 4]]; expected [[1, 2], [3, 4]]"
OWN_MESSAGES = ("multi_head returned [4, 6]; expected [3, 7]", "causal returned [4, 10]; expected [3, 10]")


@pytest.fixture(scope="module")
def strided(hidden) -> Grade:
    checks = list(graded(hidden, STRIDED_SPLIT).values())
    return Grade(exercise="day45-attention", passed=False, score=sum(c.points for c in checks),
                 max_score=sum(c.max_points for c in checks), checks=checks, student="learner-7")


def test_the_text_report_shows_the_root_first_and_its_dependents_under_it(strided):
    text = render(strided, "text")
    assert text.count(ROOT_MESSAGE) == 1                          # the root's message, once
    assert not any(m in text for m in OWN_MESSAGES)               # no message the root caused
    first, root, dependents = (text.index(x) for x in ("Fix these first", ROOT_MESSAGE,
                                                       "also failing because they build on"))
    assert first < root < dependents < text.index("causal mask · day 45")   # before the groups
    under = text[dependents:text.index("────", dependents)]
    assert "multi-head sum" in under and "causal multi-head" in under and "no heads" not in under
    words = " ".join(text.split())                               # as wrapped at 80 columns
    assert words.count("also failing because it builds on “split and merge heads”: fix that first") == 2
    assert "fix this first: 2 other failing check(s) build on it" in words
    assert "0/3" in under                                         # points still shown per check


def test_every_format_groups_the_failures_under_their_root(strided):
    markdown = render(strided, "markdown")
    assert markdown.index("## Fix these first") < markdown.index("## Checks by rule and day")
    assert markdown.count("split returned") == 1 and not any(m in markdown for m in OWN_MESSAGES)

    page = render(strided, "html")
    assert page.index('id="root-causes"') < page.index('id="checks"')
    assert page.count('data-caused-by="split-heads"') == 2
    assert page.count("split returned") == 1                      # the dependents' own messages fold
    assert all(m in page for m in OWN_MESSAGES) and page.count("<details><summary>its own message") == 2

    suite = ET.fromstring(render(strided, "junit"))
    cases = {c.get("name").split(":")[0]: c.find("failure") for c in suite.iter("testcase")}
    hint = "also failing because it builds on “split and merge heads”: fix that first"
    assert cases["multi-head"].get("message") == hint
    assert "- multi-head sum\n- causal multi-head" in cases["split-heads"].text
    assert cases["unrelated"] is None

    data = json.loads(render(strided, "gradescope"))
    jsonschema.Draft202012Validator(gradescope_schema()).validate(data)
    tests = {t["extra_data"]["id"]: t for t in data["tests"]}
    assert tests["causal-multi-head"]["output"].startswith("also failing because it builds on")
    assert tests["causal-multi-head"]["extra_data"]["caused_by"] == ["split-heads"]
    assert tests["causal-multi-head"]["score"] == 0 and tests["unrelated"]["score"] == 1
    assert "Fix these first\n- “split and merge heads”: 2 other failing check(s)" in data["output"]

    stored = json.loads(render(strided, "json"))
    assert [c["caused_by"] for c in stored["checks"]] == [[], ["split-heads"], ["split-heads"], []]
    [row] = csv.DictReader(io.StringIO(render(strided, "csv")))
    assert row["root_causes"] == "split-heads" and row["score"] == "1"


def test_the_learner_reads_it_in_taiwanese_mandarin(strided):
    text = "".join(x.strip() for x in render(strided, "text", "zh-TW").split("\n"))
    assert "請先修正這些" in text
    assert "以下檢查也失敗了，因為它們建立在「split and merge heads」之上" in text
    assert text.count("也失敗了，因為它建立在「split and merge heads」之上：請先修正那一項") == 2
    for fmt in ("markdown", "html", "junit", "gradescope"):
        assert "建立在「split and merge heads」之上" in render(strided, fmt, "zh-TW"), fmt


def test_a_grade_stored_before_root_causes_reads_and_renders_as_it_did(strided):
    old = strided.model_dump()
    for c in old["checks"]:
        del c["caused_by"]
    back = Grade.model_validate(old)
    assert all(c.caused_by == [] for c in back.checks)
    text = render(back, "text")
    assert "Fix these first" not in text and all(m in text for m in OWN_MESSAGES)


def test_causes_a_report_cannot_show_leave_the_failure_as_it_is(strided):
    """A cause naming a check that passed, no check at all, or itself (a stored grade made by
    hand, or one whose checks changed) is no root: the failure shows its own message."""
    checks = [c.model_copy(update={"caused_by": ["unrelated", "gone", c.id]}) for c in strided.checks]
    text = render(strided.model_copy(update={"checks": checks}), "text")
    assert "Fix these first" not in text and all(m in text for m in OWN_MESSAGES)
    # a chain stored as it is (A caused by B caused by C): only C, the check with no cause, is a root
    chain = [c.model_copy(update={"caused_by": {"multi-head": ["split-heads"], "causal-multi-head":
                                                 ["multi-head"]}.get(c.id, [])}) for c in strided.checks]
    view = build_view(strided.model_copy(update={"checks": chain}))
    assert [r.check.id for r in view.root_causes] == ["split-heads"]
    assert [d.id for d in view.root_causes[0].dependents] == ["multi-head"]


def test_the_gradebook_keeps_the_root_causes(strided, tmp_path):
    recorder = Recorder(str(tmp_path / "gradebook.db"))
    try:
        back = recorder.round_trip(strided)
    finally:
        recorder.book.close()
    assert differences(back, strided) == []
    assert back.checks[2].caused_by == ["split-heads"]


def test_the_class_report_counts_the_most_frequent_root_causes(strided, hidden):
    wrong_sum = list(graded(hidden, CORRECT.replace("[sum(h) for h", "[max(h) for h")).values())
    other = strided.model_copy(update={"checks": wrong_sum, "student": "learner-8"})
    summary = summarize([strided, strided, other])
    assert [(r.id, r.count, r.dependents) for r in summary.root_causes] == [("split-heads", 2, 4),
                                                                           ("multi-head", 1, 1)]
    page = render_class_html([strided, other])
    assert ('data-check="split-heads" data-exercise="day45-attention" data-count="1" '
            'data-dependents="2"') in page
    assert "Most frequent root causes" in page


def test_a_known_bug_found_by_several_checks_is_named_once_the_roots_first(strided):
    def found(check, mutant, text):
        return Diagnosis(rule="head-split", day=45, mutant=mutant, check=check, message=text)

    grade = strided.model_copy(update={"diagnosis": [
        found("causal-multi-head", "head-split-no-transpose", "found again, by the causal step"),
        found("multi-head", "merge-heads-no-transpose", "merge_heads mixes positions"),
        found("split-heads", "head-split-no-transpose", "split_heads mixes positions"),
    ]})
    view = build_view(grade)
    assert [d.message for d in view.diagnoses] == ["split_heads mixes positions",
                                                  "merge_heads mixes positions"]
    assert " ".join(render(grade, "text").split()).count("mixes positions") == 2
    assert len(json.loads(render(grade, "json"))["diagnosis"]) == 3          # the data keeps all


def test_a_root_whose_details_are_not_shown_yet_leaves_its_dependents_their_messages(strided):
    """The server shows a check whose visibility has not applied by its title and result only
    (grader.policy.course.visible_view): it is no root then, and listed under none."""
    def hidden_details(c):
        return CheckResult.model_validate({**c.model_dump(), "message": "", "message_id": None,
                                           "message_params": {}, "symptoms": [], "evidence": {}})

    root_hidden = [hidden_details(c) if c.id == "split-heads" else c for c in strided.checks]
    text = render(strided.model_copy(update={"checks": root_hidden}), "text")
    assert "Fix these first" not in text and "builds on" not in text
    assert all(m in " ".join(text.split()) for m in OWN_MESSAGES)
    one_hidden = [hidden_details(c) if c.id == "multi-head" else c for c in strided.checks]
    [root] = build_view(strided.model_copy(update={"checks": one_hidden})).root_causes
    assert [d.id for d in root.dependents] == ["causal-multi-head"]
