"""Known bugs that once scored full marks (issue 29.5) now fail a check of their own rule.

Each case is the mutant applied to its exercise's solution and graded through the normal path.
The grades are the stored ones `grader exercise check` makes of the same mutants
(tests/test_exercise_check.py), so this file adds no grading of its own to a full run.
"""

import pytest

from grader.catalog.mutants import apply_mutant, load_mutants

FORMER_FALSE_ACCEPTS = [  # (exercise, mutant, rule, the check that now fails it)
    # lm_head tied by a second Parameter sharing wte's storage: 25 Parameters, where the reference
    # has 24; the tie splits when the model is converted (.double(), .to(device))
    ("day48-decoder", "head-tied-by-new-parameter", "weight-tying", "weight-tying"),
    # get_batch reseeds torch's global RNG from the generator: the same batch on every call
    ("day49-data", "get-batch-reseeds-global-rng", "data-windows", "get-batch-uses-the-generator"),
    # get_batch ignores `device`: with device="meta", tensors with values come back
    ("day49-data", "get-batch-ignores-device", "data-windows", "get-batch-returns-int64"),
    # stable_softmax(z) defaults to dim=1: right on 2-D inputs, wrong on (B, T, V)
    ("day45-attention", "softmax-default-dim-1", "api-contract", "softmax-default-dim"),
]


@pytest.mark.parametrize(("exercise", "mutant_id", "rule", "check_id"), FORMER_FALSE_ACCEPTS,
                         ids=[case[1] for case in FORMER_FALSE_ACCEPTS])
def test_a_former_false_accept_fails_a_check_of_its_rule(exercise, mutant_id, rule, check_id, tmp_path,
                                                         corpus_grades):
    mutant = next(m for m in load_mutants() if m.id == mutant_id)
    assert mutant.rule == rule and exercise in mutant.exercises
    grade = corpus_grades.grade(exercise, apply_mutant(mutant, exercise, tmp_path / "submission"))
    assert grade.error is None, grade.error
    assert not grade.passed and grade.score < grade.max_score
    failed = {c.id: c.rule for c in grade.checks if not c.passed}
    assert failed.get(check_id) == rule, failed
