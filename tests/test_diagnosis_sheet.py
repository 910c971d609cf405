"""The bug hunt's diagnosis.toml read as learners write it (grader/catalog/diagnosis_sheet.py; issue 14)."""
import shutil

import pytest
from conftest import EXERCISES

from grader.catalog.diagnosis_sheet import (
    RULE_IDS,
    AcceptedDiagnosis,
    closest_first,
    day_number,
    judge_bug,
    rule_id,
    symptom_letter,
)
from grader.grading.grade import grade
from grader.locale import msg

B = AcceptedDiagnosis(frozenset({"causal-mask", "numerical-stability"}), frozenset({44, 45}),
                      msg("which positions the mask blocks"))


def sheet(rule, day, table="B"):
    return {"bugs": {table: {"rule": rule, "day": day}}}


@pytest.mark.parametrize("rule", ["causal-mask", "Causal-Mask", "CAUSAL_MASK", " causal mask ",
                                  "causal--mask", "numerical-stability", "Numerical_Stability"])
@pytest.mark.parametrize("day", [44, 45, "44", " 45 ", 44.0, "Day 44", "day45"])
def test_accepted_diagnoses_as_written(rule, day):
    assert judge_bug(sheet(rule, day), "B", B) is None


def test_a_lowercase_bug_table_is_that_bug():
    assert judge_bug(sheet("causal-mask", 44, table="b"), "B", B) is None


@pytest.mark.parametrize("day", [43, "43", 46.0, "day 46"])
def test_a_wrong_day_is_still_wrong(day):
    assert "is not the curriculum day" in judge_bug(sheet("causal-mask", day), "B", B)


@pytest.mark.parametrize("day", ["forty-four", True, 44.5, None, [44]])
def test_a_day_that_is_no_number_is_told_how_to_write_it(day):
    assert "is not a day number" in judge_bug(sheet("causal-mask", day), "B", B)


def test_a_valid_rule_of_another_bug_points_where_to_look():
    problem = judge_bug(sheet("Pre-LN residual", 44), "B", B)
    assert "is not the rule bug (B) breaks" in problem and "which positions the mask blocks" in problem


def test_an_unknown_rule_lists_the_valid_ids_closest_first():
    problem = judge_bug(sheet("causal-masking", 44), "B", B)
    assert "is not a rule id" in problem
    listed = problem.split("closest first: ")[1].rstrip(".").split(", ")
    assert listed[0] == "causal-mask" and sorted(listed) == sorted(RULE_IDS)
    assert closest_first("atention-scale")[0] == "attention-scaling"


def test_a_missing_table():
    assert "no [bugs.B] table" in judge_bug({"bugs": {"A": {}}}, "B", B)
    assert "no [bugs.B] table" in judge_bug({"bugs": "B"}, "B", B)
    assert "no [bugs.B] table" in judge_bug({}, "B", B)


def test_rule_and_day_readers():
    assert rule_id("Target_Shift") == "target-shift" and rule_id(None) == ""
    assert day_number("４４") == 44 and day_number("44x") is None and day_number(False) is None
    assert [symptom_letter(x) for x in ("B", "b", "(B)", "B)", " d ")] == ["B", "B", "B", "B", "D"]
    assert symptom_letter("the mask") == "the mask" and symptom_letter(None) == ""


def test_the_bug_hunt_grades_a_diagnosis_as_learners_write_it(tmp_path):
    folder = tmp_path / "sub"
    shutil.copytree(EXERCISES / "day49-bughunt" / "solution", folder)
    (folder / "diagnosis.toml").write_text(
        '[bugs.a]\nrule = "Attention_Scaling"\nday = "43"\n[bugs.B]\nrule = "Causal-Mask"\nday = "44"\n'
        '[bugs.C]\nrule = "pre ln residual"\nday = 46\n[bugs.D]\nrule = "TARGET-SHIFT"\nday = 49.0\n'
        '[symptoms]\nnan_first_forward = "(B)"\nloss_collapse = "d"\nfirst_loss = "4.605 nats"\n',
        encoding="utf-8")
    result = grade("day49-bughunt", folder)
    assert result.score == result.max_score, [(c.id, c.message) for c in result.checks if not c.passed]
