"""CI's proof that every known bug is caught and named, and correct code is never rejected."""
import re

import pytest
from grader.catalog.mutants import alternatives, load_mutants
from grader.models import RULES


def test_mutant_set_is_large_and_covers_the_rules_of_code_exercises():
    mutants = load_mutants()
    assert len(mutants) >= 25
    spec_table = {"scale-by-d-model", "no-scale", "mask-diagonal-0", "no-causal-mask", "post-ln",
                  "unshifted-targets", "fp16-mask-minus-1e9", "all-masked-row-nan", "no-max-shift"}
    assert spec_table <= {m.id for m in mutants}
    covered = {m.rule for m in mutants}
    code_rules = set(RULES) - {"quiz"}
    assert code_rules <= covered, sorted(code_rules - covered)
    assert len(alternatives()) >= 12


CJK = r"[\u4e00-\u9fff]"


@pytest.mark.parametrize("mutant", load_mutants(), ids=lambda m: m.id)
def test_every_mutant_tells_the_learner_its_bug_in_both_languages(mutant):
    en, zh = mutant.message.en, mutant.message.zh_TW
    assert en.strip() and zh.strip() and en != zh
    assert not re.search(CJK, en), en
    assert re.search(CJK, zh), zh                                     # translated, not English
    # written as a Taiwanese reader writes: full-width punctuation next to Chinese, a space
    # between Chinese and Latin letters or digits, sentences ending in 。
    assert not re.search(rf"{CJK}[,:;!?]|[,:;!?]\s*{CJK}", zh), zh
    assert not re.search(rf"{CJK}[A-Za-z0-9]|[A-Za-z0-9]{CJK}", zh), zh
    assert zh.endswith("。") and en.endswith("."), (en, zh)
    assert not re.search("[张这个们为时对会从后过还进说发间维数组]", zh), zh   # Traditional, not Simplified


# Every case `grader mutants verify` grades is graded, exercise by exercise, by
# tests/test_exercise_check.py (`grader exercise check`), so the suite does not grade them twice.


def test_a_case_that_cannot_be_graded_is_a_failed_verdict_not_a_crash_of_the_run():
    from grader.mutation.verify import Case, grade_case

    verdict = grade_case(Case(kind="alternative", name="no-such-folder", exercise="day45-attention"))
    assert not verdict.ok and "could not be graded" in verdict.why and "does not exist" in verdict.why
    assert verdict.grade.error is not None and verdict.grade.error.kind == "invalid-submission"
