"""`grader mutants compose` (grader/mutation/compose.py, docs/diagnosis.md): known bugs composed on a
solution, and what the grade states as fact compared with what was injected.

The counting (precision, recall, candidates, wrong names, contradictions, floors) and the
enumeration are pure functions, tested here on hand-made data; `judge`'s naming rule likewise on
hand-made grades. One real run of the command grades two compositions of day49-data (each twice:
named and not), about 5 s on an idle 2-core machine."""
import json

import pytest

from grader.mutation.compose import (
    FLOORS,
    Floor,
    Outcome,
    Totals,
    applied,
    compose,
    compositions,
    edited_lines,
    exclusive,
    exclusive_pairs,
    floor_problems,
    sample,
    solution_files,
    tally,
)
from grader.models import Diagnosis, Grade
from grader.catalog.mutants import Edit, Mutant, load_mutants
from grader.mutation.verify import Case, judge


def bug(id, *edits, exercise="ex"):
    """A known bug of exercise `ex` editing f.py: each edit a (find, replace) pair."""
    return Mutant(id=id, rule="causal-mask", day=44, description=id, message={"en": id, "zh-TW": id},
                  edit=[Edit(exercise=exercise, file="f.py", find=f, replace=r) for f, r in edits])


FILES = {"f.py": "a = 1\nb = 2 + 3\nc = 4\n"}


# -- the counting -------------------------------------------------------------------------------
def outcomes():
    return [
        # both injected bugs named
        Outcome(injected=["a", "b"], named=["a", "b"], naming_seconds=0.2),
        # one named right, one wrong; the other injected bug is among the candidates
        Outcome(injected=["a", "c"], named=["a", "x"], candidates=["c", "y"], naming_seconds=0.4),
        # the bugs cancel out: the grade passes, and the composition is left out of recall
        Outcome(injected=["b", "c"], passed=True, naming_seconds=9.0),
        # one right, two wrong that cannot both be in one program; nothing found: localized
        Outcome(injected=["d", "e"], named=["d", "f", "g"], localized=["attention"], naming_seconds=0.6),
    ]


def test_precision_is_over_every_named_bug_and_recall_over_the_failed_compositions():
    t = tally(outcomes(), {frozenset(("f", "g")), frozenset(("a", "z"))})
    assert (t.compositions, t.passed, t.failed) == (4, 1, 3)
    assert (t.named, t.named_right) == (7, 4) and t.precision == round(4 / 7, 4)
    assert (t.injected_failed, t.found) == (6, 4) and t.recall == round(4 / 6, 4)


def test_candidates_are_counted_apart_from_the_named():
    t = tally(outcomes(), set())
    assert (t.candidates, t.candidates_injected, t.with_candidates, t.candidates_hit) == (2, 1, 1, 1)
    assert t.localized == 1
    assert t.named == 7  # no candidate counts as named


def test_wrong_names_and_contradictions_are_listed_by_composition():
    t = tally(outcomes(), {frozenset(("f", "g")), frozenset(("a", "b"))})
    assert t.wrong == [1, 3]
    # a, b of composition 0 are both injected, yet exclusive by the pairs given: a contradiction
    # is a property of the two names, whatever was injected
    assert [(c.composition, c.bugs) for c in t.contradictions] == [(0, ("a", "b")), (3, ("f", "g"))]
    assert tally(outcomes(), set()).contradictions == []


def test_naming_seconds_are_those_of_failed_grades():
    t = tally(outcomes(), set())
    assert (t.naming_median_s, t.naming_max_s) == (0.4, 0.6)  # the passed composition's 9 s is not one


def test_an_undefined_ratio_is_none_and_holds():
    t = tally([Outcome(injected=["a"], passed=True)], set())
    assert t.precision is None and t.recall is None
    assert floor_problems(t, FLOORS[1]) == []
    assert tally([], set()).precision is None


def test_floors_are_the_issue_s_done_when():
    assert FLOORS[1].precision == 1.0 and FLOORS[1].recall == 0.95
    assert FLOORS[2].precision == 0.98 and FLOORS[2].recall == 0.80 and FLOORS[2].contradictions == 0
    assert FLOORS[3].precision == 0.95 and FLOORS[3].recall is None
    assert all(f.naming_median_s == 1.0 for f in FLOORS.values())


def test_below_a_floor_says_which():
    t = tally(outcomes(), {frozenset(("f", "g"))})
    problems = floor_problems(t, FLOORS[2])
    assert any(p.startswith("precision 0.571 < 0.98") for p in problems)
    assert any(p.startswith("recall 0.667 < 0.80") for p in problems)
    assert any("1 reports state two contradictory causes" in p for p in problems)
    slow = Totals(naming_median_s=1.5)
    assert floor_problems(slow, FLOORS[1]) == ["naming adds 1.500 s (median) > 1 s"]
    assert floor_problems(Totals(precision=1.0, recall=0.95), Floor(precision=1.0, recall=0.95)) == []


# -- the enumeration, and what is exclusive -----------------------------------------------------
def test_overlapping_edits_are_skipped_and_counted():
    bugs = [
        bug("one", ("a = 1", "a = 0")),
        bug("two", ("a = 1\nb", "a = 2\nb")),  # overlaps one's text
        bug("three", ("c = 4", "c = 5")),
        bug("elsewhere", ("c = 4", "c = 6"), exercise="other"),  # not this exercise's
    ]
    found = compositions(bugs, "ex", FILES, 2)
    assert (found.bugs, found.subsets, found.overlapping) == (3, 3, 1)
    assert found.compositions == [("one", "three"), ("three", "two")]
    assert applied([bugs[0], bugs[2]], "ex", FILES) == {"f.py": "a = 0\nb = 2 + 3\nc = 5\n"}
    assert applied([bugs[0], bugs[1]], "ex", FILES) is None


def test_two_bugs_are_exclusive_when_they_overlap_or_rewrite_one_line():
    overlap = bug("p", ("b = 2 + 3", "b = 5")), bug("q", ("2 + 3", "2 - 3"))
    same_line = bug("r", ("b = 2", "b = 7")), bug("s", ("+ 3", "- 3"))  # apply together, one line
    apart = bug("t", ("a = 1", "a = 0")), bug("u", ("c = 4", "c = 5"))
    assert edited_lines(same_line[0], "ex", FILES) == {("f.py", 2)}
    assert applied(same_line, "ex", FILES) is not None
    assert exclusive(*overlap, "ex", FILES) and exclusive(*same_line, "ex", FILES)
    assert not exclusive(*apart, "ex", FILES)
    multi = bug("v", ("a = 1\nb = 2 + 3\n", "a = 0\nb = 0\n"))  # a two-line edit
    assert edited_lines(multi, "ex", FILES) == {("f.py", 1), ("f.py", 2)}
    assert exclusive_pairs([*overlap, *apart], "ex", FILES) == {frozenset(("p", "q"))}


def test_the_catalog_s_overlapping_pairs_are_skipped():
    files = solution_files("day45-attention")
    found = compositions(load_mutants(), "day45-attention", files, 2)
    assert found.overlapping > 0 and len(found.compositions) + found.overlapping == found.subsets
    assert ("scale-by-d-model", "scale-by-sqrt-d-model") not in found.compositions  # one line, two ways
    by_id = {m.id: m for m in load_mutants()}
    assert exclusive(by_id["scale-by-d-model"], by_id["scale-by-sqrt-d-model"], "day45-attention", files)


def test_a_sample_is_deterministic_and_keeps_the_order():
    items = [f"c{i:03}" for i in range(200)]
    drawn = sample(items, 10, seed=3)
    assert drawn == sample(items, 10, seed=3) and len(set(drawn)) == 10
    assert drawn == sorted(drawn) and set(drawn) <= set(items)
    assert drawn != sample(items, 10, seed=4)
    assert sample(items, None) == items and sample(items, 500) == items


# -- judge: a mutant's own bug stated as fact, and nothing else ----------------------------------
def graded(*named):
    """A failing grade naming (mutant, level) pairs."""
    diagnosis = [Diagnosis(rule="causal-mask", day=44, mutant=m, level=level) for m, level in named]
    return Grade(exercise="day45-attention", passed=False, score=0, max_score=10, diagnosis=diagnosis,
                 checks=[{"id": "c", "passed": False, "points": 0, "max_points": 10,
                          "rule": "causal-mask", "day": 44}])


MUTANT = Case(kind="mutant", name="no-causal-mask", exercise="day45-attention",
              expected_rules=["causal-mask"], named=["no-causal-mask"])
STARTER = Case(kind="starter", name="starter", exercise="day45-attention",
               expected_rules=["causal-mask"], named=["no-causal-mask", "mask-diagonal-0"])


@pytest.mark.parametrize("named,ok,why", [
    ([("no-causal-mask", "reproduced")], True, ""),
    ([("no-causal-mask", "candidate")], False, "does not state no-causal-mask as reproduced"),
    ([("no-causal-mask", "reproduced"), ("mha-causal-default-false", "reproduced")], False,
     "states mha-causal-default-false as reproduced: not in this case"),
    ([("no-causal-mask", "reproduced"), ("mha-causal-default-false", "candidate")], True, ""),
])
def test_a_mutant_case_needs_its_bug_as_fact_and_no_other(named, ok, why):
    verdict = judge(MUTANT, graded(*named))
    assert verdict.ok is ok and why in verdict.why


def test_a_starter_needs_each_bug_as_fact_or_candidate_and_no_wrong_fact():
    assert judge(STARTER, graded(("no-causal-mask", "reproduced"), ("mask-diagonal-0", "candidate"))).ok
    missing = judge(STARTER, graded(("no-causal-mask", "reproduced")))
    assert not missing.ok and "names mask-diagonal-0 neither as reproduced nor as a candidate" in missing.why
    wrong = judge(STARTER, graded(("no-causal-mask", "reproduced"), ("mask-diagonal-0", "reproduced"),
                                  ("no-scale", "reproduced")))
    assert not wrong.ok and "no-scale" in wrong.why


# -- the shell, with a grader of hand-made grades; then once for real ----------------------------
def test_compose_grades_the_sample_in_process_with_a_given_grader():
    calls = []

    def fake_grade(exercise, path, **options):
        calls.append(options)
        return graded(("unshifted-targets", "reproduced")).model_copy(update={"exercise": exercise})

    report = compose("day49-data", 2, 3, grade_with=fake_grade)
    assert len(report.rows) == 3 and calls == [{}, {}, {}]  # no timing with a store of grades
    assert report.rows == compose("day49-data", 2, 3, grade_with=fake_grade).rows
    named_right = sum("unshifted-targets" in r.composition for r in report.rows)
    assert report.totals.named == 3 and report.totals.named_right == named_right
    assert report.totals.recall == round(named_right / 6, 4)
    assert not report.passed and report.problems


def test_exercise_check_holds_a_sample_of_pairs_to_the_floor():
    from grader.mutation.authoring import COMPOSE_SAMPLE, compose_row

    solution = solution_files("day49-data")
    by_id = {m.id: m for m in load_mutants()}
    pairs = compositions(by_id.values(), "day49-data", solution, 2).compositions
    injected = {json.dumps(applied([by_id[i] for i in c], "day49-data", solution), sort_keys=True): c
                for c in pairs}

    def names_what_it_reads(exercise, path, **options):
        # a perfect namer: the bugs whose edits the folder holds, stated as fact
        files = {name: (path / name).read_text() for name in solution}
        named = injected[json.dumps(files, sort_keys=True)]
        return graded(*[(m, "reproduced") for m in named]).model_copy(update={"exercise": exercise})

    row = compose_row("day49-data", workers=1, grade_with=names_what_it_reads)
    assert row.ok and row.kind == "compose" and row.score == "P 1.00 R 1.00", row
    assert row.why.startswith(f"{COMPOSE_SAMPLE} of ")


@pytest.mark.parametrize("args,named", [
    (["no-such-exercise"], "EXERCISE"),
    (["day45-quiz"], "quiz exercise"),
    (["day49-data", "--k", "4"], "--k"),
    (["day49-data", "--sample", "0"], "--sample"),
])
def test_bad_input_is_one_clean_error_exit_2(args, named):
    from click.testing import CliRunner

    from grader.cli import main

    result = CliRunner().invoke(main, ["mutants", "compose", *args])
    assert result.exit_code == 2 and named in result.output


def test_a_real_run_of_the_command(grader_cli):
    """Two pairs of day49-data's known bugs, graded for real, named and not (about 5 s)."""
    proc = grader_cli("mutants", "compose", "day49-data", "--k", "2", "--sample", "2", "--workers", "1",
                      "--format", "json")
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    found = compositions(load_mutants(), "day49-data", solution_files("day49-data"), 2)
    assert report["compatible"] == len(found.compositions) and report["overlapping"] == found.overlapping
    assert [tuple(r["composition"]) for r in report["rows"]] == sample(found.compositions, 2)
    for row in report["rows"]:
        o = row["outcome"]
        assert o["injected"] == list(row["composition"])
        assert o["naming_seconds"] is not None and o["seconds"] > 0
        assert o["wrong"] == [n for n in o["named"] if n not in o["injected"]]
    recounted = tally([Outcome.model_validate(r["outcome"]) for r in report["rows"]],
                      {frozenset(p) for p in report["exclusive_pairs"]})
    assert report["totals"] == json.loads(recounted.model_dump_json())
    assert report["passed"] == (proc.returncode == 0) == (report["problems"] == [])
