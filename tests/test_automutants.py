from grader.automutants import mutants_of_source

SOURCE = '''
"""Docstring: never mutated."""
import torch


def f(x, y):
    if x.shape[0] > 1 and y is not None:
        z = torch.triu(x, 1) * 2.0
        return torch.softmax(z + y, dim=-1)[1:]
    return x.mean(dim=0, keepdim=True)


if __name__ == "__main__":
    print(f(1, 2))
'''


def by_operator():
    found = {}
    for m in mutants_of_source("f.py", SOURCE):
        found.setdefault(m.operator, []).append(m)
    return found


def test_each_operator_produces_its_mutant():
    found = by_operator()
    assert any("x.shape[0] >= 1" in m.source for m in found["comparison"])
    assert any(" or y is not None" in m.source for m in found["boolean"])
    assert any("torch.tril(x, 1)" in m.source for m in found["tensor-name"])
    assert any("torch.log_softmax" in m.source for m in found["tensor-name"])
    assert any("keepdim=False" in m.source for m in found["tensor-keyword"])
    assert any("[:]" in m.source or "[1:]" not in m.source for m in found["slice"])
    assert any("* 0.0" in m.source for m in found["constant"])
    assert any(m.source.count("return") == 1 for m in found["removed-statement"])


def test_main_block_and_docstring_are_not_mutated():
    for m in mutants_of_source("f.py", SOURCE):
        assert "print(f(1, 2))" in m.source
        assert m.line < 14


def test_ids_are_unique_and_diffs_readable():
    ms = mutants_of_source("f.py", SOURCE)
    assert len({m.id for m in ms}) == len(ms)
    assert all(m.diff.startswith("--- a/f.py") for m in ms)


def test_identical_code_mutant_is_dropped():
    # `x + 0` -> constant 0 mutants of `0` that yield the same code are impossible to tell apart;
    # here: swapping equal arguments compiles to the same code and must be dropped.
    ms = mutants_of_source("g.py", "def g(a):\n    return max(a, a)\n")
    assert not [m for m in ms if m.operator == "swapped-arguments"]


def test_budget_spreads_over_operators_and_is_deterministic():
    from grader.automutants import exercise_mutants, select

    ms = exercise_mutants("day49-data")
    chosen = select(ms, 7)
    assert len(chosen) == 7
    assert len({m.operator for m in chosen}) == 7  # day49-data has 7 operators
    assert [m.id for m in select(ms, 7)] == [m.id for m in chosen]


def test_auto_score_end_to_end_grades_through_the_learner_path():
    from grader.automutants import auto_score

    report = auto_score("day49-data", budget=3, workers=2)
    assert report.killed + report.survived == 3
    assert 0 <= report.raw <= 1 and report.adjusted == report.raw
    assert all(m.diff.startswith("--- a/") for m in report.survivors)
