"""Root causes first: a check that fails because a function it builds on fails too is shown
under that root cause, and every report says to fix the root first; points stay per check.

The hidden tests here are a tiny exercise of their own (split/merge heads, a multi-head step
built on it, a causal step built on that), graded against learner-style submissions: once with a
stand-in submission (fast: the runner's grouping logic), once in a real jail.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from grader.models import CheckResult
from grader.runner import needs_errors, root_causes, run_hidden_tests

HIDDEN = '''
from grader.testkit import check

@check(points=2, rule="head-split", day=45, title="split and merge heads")
def test_split_heads(submission):
    assert submission.heads.split([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]

@check(points=3, rule="head-split", day=45, title="multi-head sum", needs=("split-heads",))
def test_multi_head(submission):
    assert submission.heads.multi_head([1, 2, 3, 4], 2) == [3, 7]

@check(points=3, rule="causal-mask", day=45, title="causal multi-head", needs=("multi-head",))
def test_causal_multi_head(submission):
    assert submission.heads.causal([1, 2, 3, 4], 2) == [3, 10]

@check(points=1, rule="api-contract", day=45, title="no heads at all")
def test_unrelated(submission):
    assert submission.heads.version() == 1
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


@pytest.fixture
def hidden(tmp_path):
    folder = tmp_path / "hidden"
    folder.mkdir()
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
