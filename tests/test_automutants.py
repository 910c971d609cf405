import ast
import json

import pytest

from grader.mutation.automutants import (
    AutoMutant,
    Cache,
    Equivalent,
    MutantResult,
    mutants_of_source,
    summarize,
)

SOURCE = '''
"""Docstring: never mutated."""
import torch
import torch.nn.functional as F


def f(x, y, n):
    if n <= 0:
        raise ValueError(f"n must be positive, got {n + 1}")
    if x.shape[0] > 1 and y is not None:
        z = torch.triu(x, diagonal=1) * 2.0
        return torch.softmax(z + y, dim=-1)[1:]
    s = x.masked_fill(y, float("-inf")).transpose(-2, -1).view(2, 3, 4)
    return F.cross_entropy(s, y, reduction="mean") + x.mean(dim=0, keepdim=True)


def block(self, x):
    x = x + self.attn(self.ln_1(x))
    var = x.var(dim=-1, unbiased=False)
    return torch.sqrt(var + self.eps)


if __name__ == "__main__":
    print(f(1, 2))
'''


def mutants():
    return mutants_of_source("f.py", SOURCE)


def sources(operator: str) -> list[str]:
    return [m.source for m in mutants() if m.operator == operator]


@pytest.mark.parametrize(
    "operator,expected",
    [
        ("comparison", "x.shape[0] >= 1"),
        ("boolean", " or y is not None"),
        ("not-removed", None),
        ("arithmetic", "z - y"),
        ("constant", "* 0.0"),
        ("removed-statement", "        pass\n        return torch.softmax"),
        ("swapped-arguments", "transpose(-1, -2)"),
        ("slice", "dim=-1)[:]"),
        ("target-shift", "dim=-1)[:-1]"),
        ("dim", "dim=-2)[1:]"),
        ("keepdim", "keepdim=False"),
        ("diagonal", "diagonal=2"),
        ("tensor-name", "torch.tril(x"),
        ("tensor-name", "torch.log_softmax"),
        ("mask-value", "masked_fill(y, -1000000000.0)"),
        ("removed-scale", "z = torch.triu(x, diagonal=1)\n"),
        ("residual-dropped", "x = self.attn(self.ln_1(x))"),
        ("layernorm-placement", "x = self.ln_1(x + self.attn(x))"),
        ("variance", "unbiased=True"),
        ("eps", "return torch.sqrt(var)\n"),
        ("eps", "return torch.sqrt(var) + self.eps"),
        ("reshape-order", "view(2, 4, 3)"),
        ("reduction", "reduction='sum'"),
        ("reduction", "x.sum(dim=0, keepdim=True)"),
    ],
)
def test_each_operator_produces_its_mutant(operator, expected):
    found = sources(operator)
    if expected is None:  # no `not` in SOURCE: the operator must produce nothing
        assert not found
    else:
        assert any(expected in s for s in found), (operator, expected)


def test_a_mutant_changes_one_spot_of_the_original_source_and_parses():
    original = SOURCE.splitlines()
    for m in mutants():
        ast.parse(m.source)
        changed = [line for line in m.diff.splitlines()[2:] if line[:1] == "-"]
        assert len(changed) == 1, m.diff  # the formatting elsewhere is the original's
        assert changed[0][1:] == original[m.line - 1], m.id  # the line the id names


def test_main_block_docstring_and_messages_are_not_mutated():
    for m in mutants():
        assert 'print(f(1, 2))' in m.source
        assert '"""Docstring: never mutated."""' in m.source
        assert 'raise ValueError(f"n must be positive, got {n + 1}")' in m.source, m.diff


def test_ids_carry_operator_file_line_col_and_hash():
    ms = mutants()
    assert len({m.id for m in ms}) == len(ms)
    assert len({m.hash for m in ms}) == len(ms)
    for m in ms:
        assert m.id == f"{m.operator}:f:{m.line}:{m.col}:{m.hash}"


def test_the_hash_survives_an_edit_elsewhere_in_the_file():
    before = {m.hash for m in mutants_of_source("f.py", SOURCE)}
    after = {m.hash for m in mutants_of_source("f.py", SOURCE + "\n\ndef g():\n    return 1\n")}
    assert before <= after


def test_identical_code_mutant_is_dropped():
    ms = mutants_of_source("g.py", "def g(a):\n    return max(a, a)\n")
    assert not [m for m in ms if m.operator == "swapped-arguments"]
    assert [m for m in ms if m.operator == "removed-statement"]  # the rest is generated


def test_budget_spreads_over_operators_and_is_deterministic():
    from grader.mutation.automutants import exercise_mutants, select

    ms = exercise_mutants("day49-data")
    operators = {m.operator for m in ms}
    chosen = select(ms, len(operators))
    assert {m.operator for m in chosen} == operators
    assert [m.id for m in select(ms, len(operators))] == [m.id for m in chosen]


def mutant(mid: str, hash: str) -> AutoMutant:
    op = mid.split(":")[0]
    return AutoMutant(
        id=mid, operator=op, file="f.py", line=1, col=0, hash=hash, source="x\n", diff="--- a/f.py\n"
    )


def test_summary_counts_raw_and_adjusted_and_reports_stale_equivalents():
    a, b, c, d = (mutant(f"constant:f:1:0:{h}", h) for h in ("aaaa", "bbbb", "cccc", "dddd"))
    results = [
        MutantResult(mutant=a, killed=True, score=0, max_score=1),
        MutantResult(mutant=b, killed=False, score=1, max_score=1, equivalent=False, input="f(1): ..."),
        MutantResult(mutant=c, killed=False, score=1, max_score=1, equivalent=True),
        MutantResult(mutant=d, killed=False, score=1, max_score=1, equivalent=False),
    ]
    reviewed = [Equivalent(hash="dddd", reason="x"), Equivalent(hash="eeee", reason="gone")]
    report = summarize("ex", [a, b, c, d], results, reviewed, 0.95, 1.0)
    assert (report.killed, report.survived, report.likely_equivalent, report.reviewed_equivalent) == (
        1,
        1,
        1,
        1,
    )
    assert report.raw == 0.25 and report.adjusted == 0.5 and not report.passed
    assert [s.id for s in report.survivors] == [b.id] and report.survivors[0].input == "f(1): ..."
    assert report.stale_equivalents == ["eeee"]
    data = json.loads(report.model_dump_json())
    assert {"raw", "adjusted", "survivors", "cache_hits", "seconds"} <= data.keys()


def test_cache_returns_what_was_put_for_the_same_inputs_only(tmp_path):
    m = mutant("constant:f:1:0:aaaa", "aaaa")
    Cache(tmp_path, "k1").put(MutantResult(mutant=m, killed=True, score=0, max_score=1))
    hit = Cache(tmp_path, "k1").get(m)
    assert hit is not None and hit.killed and hit.cached
    assert Cache(tmp_path, "k2").get(m) is None  # other solution, tests or grader
    assert Cache(tmp_path, "k1").get(m.model_copy(update={"source": "y\n"})) is None
    assert Cache(None, "k1").get(m) is None


def test_equivalents_toml_is_read_and_bad_input_named(tmp_path, monkeypatch):
    import grader.catalog.exercises
    from grader.mutation.automutants import mutation_floor, reviewed_equivalents
    from grader.errors import UsageError

    monkeypatch.setattr(grader.catalog.exercises, "exercise_dir", lambda _id: tmp_path)
    assert reviewed_equivalents("x") == []
    (tmp_path / "exercise.toml").write_text('id = "x"\n')
    assert mutation_floor("x") == 0.95
    (tmp_path / "exercise.toml").write_text("[mutation]\nfloor = 0.8\n")
    assert mutation_floor("x") == 0.8
    (tmp_path / "equivalents.toml").write_text(
        '[[equivalent]]\nhash = "ab12"\noperator = "slice"\nreason = "same"\n'
    )
    assert reviewed_equivalents("x")[0].hash == "ab12"
    (tmp_path / "equivalents.toml").write_text('[[equivalent]]\nhash = "ab12"\n')
    with pytest.raises(UsageError, match=r"equivalents\.toml.*reason"):
        reviewed_equivalents("x")


def test_auto_score_end_to_end_grades_caches_and_replays(tmp_path, monkeypatch):
    """day49-data with three mutants: one killed, one whose outputs the grader's inputs never
    tell apart (`batch_size <= 0` -> `< 0`), shown as a diff; the second run is all cached."""
    import grader.mutation.automutants as A

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path))
    every = A.exercise_mutants("day49-data")
    boundary = next(m for m in every if m.operator == "comparison" and "if batch_size < 0:" in m.diff)
    shifted = next(m for m in every if m.operator == "target-shift")
    monkeypatch.setattr(A, "exercise_mutants", lambda _ex: [boundary, shifted])
    # day49-data's equivalents.toml reviews the boundary mutant; here it is to be found unreviewed
    monkeypatch.setattr(A, "reviewed_equivalents", lambda _ex: [])
    report = A.auto_score("day49-data", workers=2)
    assert report.graded == 2 and report.killed == 1 and report.cache_hits == 0
    assert [s.id for s in report.likely_equivalents + report.survivors] == [boundary.id]
    assert "-    if batch_size <= 0:\n+    if batch_size < 0:" in A.text_report(report)
    again = A.auto_score("day49-data", workers=2)
    assert again.cache_hits == 2 and again.model_dump(exclude={"seconds", "cache_hits"}) == report.model_dump(
        exclude={"seconds", "cache_hits"}
    )


def test_distinguishing_input_names_the_call_that_tells_a_mutant_apart():
    from grader.mutation.automutants import distinguish, exercise_mutants, replay_solution, solution_files
    from grader.grading.grade import solution_trace

    files = solution_files("day49-data")
    solution = replay_solution("day49-data", solution_trace("day49-data"), files)
    shifted = next(m for m in exercise_mutants("day49-data") if m.operator == "target-shift")
    equivalent, found = distinguish("day49-data", shifted, solution, files)
    assert not equivalent
    assert found is not None and "data.make_xy(" in found and "solution" in found and "mutant" in found
    # a line the grader's requests never run is untested, not equivalent
    unreached = shifted.model_copy(update={"line": len(files["data.py"].splitlines()) + 5})
    assert distinguish("day49-data", unreached, solution, files) == (
        False,
        f"no grader input reaches data.py line {unreached.line}",
    )


@pytest.mark.parametrize(
    "args,named",
    [(["nonexistent-ex"], "EXERCISE"), (["day49-data", "--budget", "0"], "--budget")],
)
def test_cli_bad_input_is_one_clean_error_exit_2(args, named):
    from click.testing import CliRunner

    from grader.cli import main

    result = CliRunner().invoke(main, ["mutants", "auto", *args])
    assert result.exit_code == 2
    assert named in result.output
