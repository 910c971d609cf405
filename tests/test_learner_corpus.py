"""Learner bugs the issue names are diagnosed as the first broken thing.

`grader mutants verify` (tests/test_mutants.py) already proves that every mutant fails a check of
its rule and every alternative gets full marks. It does not prove that the OTHER failing checks
don't point the learner somewhere else: a 1/sqrt(d_model) scale must not read as a mask bug, a
wrong split_heads must not read as a padding bug, targets shifted twice must not say "flatten".
A failing check of another rule is fine only when the report groups it under a failing check of
the mutant's rule (caused_by).
"""

import pytest

from grader.catalog.mutants import apply_mutant, load_mutants

MISLEADING_BEFORE = [
    ("day45-attention", "scale-by-sqrt-d-model"),
    ("day45-attention", "head-split-no-transpose"),
    ("day49-data", "targets-shifted-twice"),
]


@pytest.fixture(scope="module")
def graded(tmp_path_factory, corpus_grades):
    """mutant id -> (mutant, its grade as JSON); each graded once for the whole run."""
    out = {}
    for exercise, mutant_id in MISLEADING_BEFORE:
        mutant = next(m for m in load_mutants() if m.id == mutant_id)
        path = apply_mutant(mutant, exercise, tmp_path_factory.mktemp(mutant_id) / "submission")
        out[mutant_id] = (mutant, corpus_grades.cli_json(exercise, path)[1])
    return out


@pytest.mark.parametrize(("exercise", "mutant_id"), MISLEADING_BEFORE)
def test_every_failure_of_another_rule_is_grouped_under_the_mutants_rule(exercise, mutant_id, graded):
    mutant, grade = graded[mutant_id]
    failed = {c["id"]: c for c in grade["checks"] if not c["passed"]}
    own_rule = {cid for cid, c in failed.items() if c["rule"] == mutant.rule}
    assert own_rule, f"no failing check of rule {mutant.rule}: {sorted(failed)}"
    stray = [
        (cid, c["rule"], c["message"][:160])
        for cid, c in failed.items()
        if c["rule"] != mutant.rule and not own_rule & set(c.get("caused_by") or [])
    ]
    assert not stray, f"{mutant_id} is also reported as another bug, not grouped under {mutant.rule}: {stray}"


def test_targets_shifted_twice_never_tells_the_learner_to_flatten(graded):
    _, grade = graded["targets-shifted-twice"]
    failing = [c for c in grade["checks"] if not c["passed"]]
    assert failing
    assert all(c["rule"] != "loss-flattening" for c in failing), [c["id"] for c in failing]
    assert not any("flatten" in c["message"].lower() for c in failing), [c["message"] for c in failing]
    assert {d["rule"] for d in grade["diagnosis"]} == {"target-shift"}
