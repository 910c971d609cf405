"""Naming a learner's bugs says what the evidence allows (grader.grading.fingerprints, docs/diagnosis.md).

One explanation for the whole submission: the smallest set of known bugs that reproduces every
failing call is named as fact; sets alike on the recorded calls are told apart on the learner's
own code, else listed as candidates; with no known bug to explain it, the report says where the
difference starts. Learner-style submissions (the solution changed by hand, as a learner writes
it), graded once per run (corpus_grades).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exercises import EXERCISES_DIR
from grader.catalog.exercises import load_exercise
from grader.grading.fingerprints import Namer, call_graph, reachable
from grader.grading.grade import grade_code
from grader.grading.replay import Trace
from grader.intake.submission import read_submission

SOLUTION = (EXERCISES_DIR / "day45-attention" / "solution" / "attention.py").read_text()
MASK = "torch.triu(torch.ones(T_q, T_k, dtype=torch.bool), diagonal=1)"
FILL = 'scores.masked_fill(blocked, float("-inf"))'
SCALE = "q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"


def learner(tmp_path: Path, name: str, *edits: tuple[str, str]) -> Path:
    text = SOLUTION
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "attention.py").write_text(text)
    return folder


def by_level(grade) -> dict[str, list]:
    levels: dict[str, list] = {"reproduced": [], "candidate": [], "localized": []}
    for d in grade.diagnosis:
        levels[d.level].append(d)
    return levels


def test_two_bugs_at_once_are_both_named_and_nothing_else(corpus_grades, tmp_path):
    """triu(diagonal=0) and a -1e9 fill: each alone is a known bug; together no single bug (nor
    finfo.min, nor a float32 softmax) reproduces the calls. The -1e9 fill and a finfo(float32).min
    fill answer alike on every recorded call: a bfloat16 input, run on the learner's own code,
    tells them apart, and is the evidence shown."""
    path = learner(
        tmp_path,
        "two-bugs",
        (MASK, MASK.replace("diagonal=1", "diagonal=0")),
        (FILL, "scores.masked_fill(blocked, -1e9)"),
    )
    levels = by_level(corpus_grades.grade("day45-attention", path))
    assert sorted(d.mutant for d in levels["reproduced"]) == ["fp16-mask-minus-1e9", "mask-diagonal-0"]
    assert levels["candidate"] == [] and levels["localized"] == []
    fill = next(d for d in levels["reproduced"] if d.mutant == "fp16-mask-minus-1e9")
    assert fill.call is not None and "bfloat16" in fill.call, fill.call


def test_dividing_by_d_k_is_named_alone_and_beside_the_mask_bug(corpus_grades, tmp_path):
    alone = learner(tmp_path, "d-k", (SCALE, "q @ k.transpose(-2, -1) / q.size(-1)"))
    both = learner(
        tmp_path,
        "d-k-and-mask",
        (SCALE, "q @ k.transpose(-2, -1) / q.size(-1)"),
        (MASK, MASK.replace("diagonal=1", "diagonal=0")),
    )
    assert [d.mutant for d in by_level(corpus_grades.grade("day45-attention", alone))["reproduced"]] == [
        "scale-by-d-k"
    ]
    named = by_level(corpus_grades.grade("day45-attention", both))
    assert sorted(d.mutant for d in named["reproduced"]) == ["mask-diagonal-0", "scale-by-d-k"]
    assert named["candidate"] == []


def test_a_bug_no_mutant_has_is_localized_not_misnamed(corpus_grades, tmp_path):
    """transpose(2, 3) works on 4-D inputs only: no known bug does that. The report says where
    the difference starts and its smallest failing call, and names no known bug."""
    path = learner(tmp_path, "transpose-2-3", (SCALE, "q @ k.transpose(2, 3) / math.sqrt(q.size(-1))"))
    grade = corpus_grades.grade("day45-attention", path)
    levels = by_level(grade)
    assert levels["reproduced"] == [] and levels["candidate"] == []
    assert [d.function for d in levels["localized"]] == ["scaled_dot_product_attention"]
    where = levels["localized"][0]
    assert where.call.startswith("scaled_dot_product_attention(q=float32[") and where.mutant is None
    assert "no known bug explains it" in where.message


@pytest.fixture(scope="module")
def two_bug_trace(tmp_path_factory):
    """The two-bug submission's recorded calls and check results (graded once, its bugs not named)."""
    path = learner(
        tmp_path_factory.mktemp("trace"),
        "two-bugs",
        (MASK, MASK.replace("diagonal=1", "diagonal=0")),
        (FILL, "scores.masked_fill(blocked, -1e9)"),
    )
    exercise = load_exercise("day45-attention")
    trace = Trace()
    grade = grade_code(exercise, read_submission(exercise, path), name_bugs=False, trace=trace)
    return exercise, trace, grade.checks


def test_without_the_learner_code_to_tell_them_apart_alike_bugs_stay_candidates(two_bug_trace):
    exercise, trace, results = two_bug_trace
    named = Namer(exercise, trace).explain(results)  # no jail: no input can be run on their code
    facts = sorted(d.mutant for d in named if d.level == "reproduced")
    candidates = sorted(d.mutant for d in named if d.level == "candidate")
    assert facts == ["mask-diagonal-0"]
    assert candidates == ["fill-float32-min", "fp16-mask-minus-1e9"]


def test_a_search_cut_short_states_no_fact_and_does_not_claim_no_bug_explains_it(two_bug_trace):
    exercise, trace, results = two_bug_trace
    Namer(exercise, trace).explain(results)  # the solution's replays, remembered in this process
    named = Namer(exercise, trace, seconds=0).explain(results)  # no time for any known bug
    assert all(d.level == "localized" for d in named) and named
    assert all("no known bug explains it" not in d.message and "ran out of time" in d.message for d in named)


def test_a_passing_submission_or_one_failing_elsewhere_gets_no_name(two_bug_trace):
    exercise, trace, results = two_bug_trace
    assert Namer(exercise, trace).explain([r.model_copy(update={"passed": True}) for r in results]) == []
    assert Namer(exercise, Trace()).explain(results) == []  # nothing recorded: nothing to say


def test_the_call_graph_finds_where_a_difference_starts():
    graph = call_graph({"attention.py": SOLUTION})
    assert "stable_softmax" in reachable(graph, "MultiHeadAttention")
    assert "MultiHeadAttention" not in reachable(graph, "scaled_dot_product_attention")
