"""The mutant is its own fingerprint: a failed check's requests, replayed on trusted code, name the bug."""

import shutil
import sys

import pytest
import torch

from exercises import EXERCISES_DIR
from grader.grading.grade import grade, solution_trace
from grader.jail.wire import Handle
from grader.limits import REPLAY_EVENTS, REPLAY_VALUE_ELEMENTS
from grader.catalog.mutants import apply_mutant, load_mutants
from grader.grading.replay import Outcome, Trace, counterpart, outcome_of, raised, replay, same


def value(v):
    return Outcome("value", v)


def test_same_answers_agree_and_different_ones_do_not():
    x = torch.tensor([1.0, float("nan"), float("inf")])
    assert same(value(x), value(x.clone()))
    assert same(value(x), value(x + torch.tensor([1e-6, 0.0, 0.0])))  # rounding
    assert not same(value(x), value(torch.tensor([1.0, 2.0, float("inf")])))  # a NaN where there was none
    assert not same(value(x), value(torch.tensor([1.0, float("nan"), -float("inf")])))
    assert not same(value(x), value(x.double()))  # the dtype is part of the answer
    assert not same(value(x), value(x[:2]))
    assert not same(value(torch.ones(3)), value(torch.ones(3) * 1.01))
    assert same(raised("ValueError"), raised("ValueError"))
    assert not same(raised("ValueError"), raised("RuntimeError"))
    assert not same(raised("ValueError"), value(None))
    assert same(value([Handle(3, "A"), 2]), value([Handle(9, "B"), 2]))  # objects left in a jail
    assert not same(value({"a": 1}), value({"b": 1}))
    assert same(Outcome("opaque"), value(1))  # nothing kept: nothing contradicts


def test_a_reply_too_large_to_keep_is_opaque():
    assert outcome_of(torch.zeros(REPLAY_VALUE_ELEMENTS + 1)).kind == "opaque"
    assert outcome_of([torch.zeros(3)]).kind == "value"


def test_a_trusted_counterpart_imports_its_siblings_and_leaves_sys_modules_alone():
    files = {
        "helpers.py": "def double(x):\n    return 2 * x\n",
        "main.py": "from helpers import double\n\ndef f(x):\n    return double(x) + 1\n",
    }
    someone_elses = sys.modules["helpers"] = type(sys)("helpers")
    try:
        modules = counterpart(files, "test/siblings")
        assert modules is not None and modules["main"].f(2) == 5
        assert "main" not in sys.modules and sys.modules["helpers"] is someone_elses
    finally:
        del sys.modules["helpers"]
    assert counterpart({"broken.py": "raise ImportError('no')\n"}, "test/broken") is None


def test_replay_rebuilds_objects_from_the_calls_that_made_them():
    files = {
        "scale.py": (
            "class Scale:\n    def __init__(self, k):\n        self.k = k\n\n"
            "    def __call__(self, x):\n        return x * self.k\n"
        )
    }
    modules = counterpart(files, "test/scale")
    trace = Trace()
    trace.begin("makes")
    trace.record(
        "call",
        {"module": "scale", "path": ["Scale"]},
        0,
        {"args": [3], "kwargs": {}},
        value(Handle(7, "Scale")),
    )
    trace.begin("uses")
    x = torch.ones(2)
    trace.record("call", {"handle": 7}, 0, {"args": [x], "kwargs": {}}, value(x * 3))
    events = trace.events("uses")
    assert [e.op for e in events] == ["call", "call"]  # the maker of handle 7 comes first
    outcomes = replay(events, modules)
    assert same(outcomes[-1], events[-1].outcome)


def test_a_check_keeps_at_most_REPLAY_EVENTS_requests():
    trace = Trace()
    trace.begin("long")
    for _ in range(REPLAY_EVENTS + 5):
        trace.record("get", {"module": "m", "path": ["x"]}, 0, {}, value(1))
    assert len(trace.checks["long"]) == REPLAY_EVENTS


def test_the_solution_replayed_in_this_process_answers_as_it_did_in_the_jail():
    trace = solution_trace("day49-data")
    files = {p.name: p.read_text() for p in (EXERCISES_DIR / "day49-data" / "solution").glob("*.py")}
    modules = counterpart(files, "test/day49-data-solution")
    compared = 0
    for events in trace.values():
        for event, outcome in zip(events, replay(events, modules), strict=True):
            if event.outcome is not None and event.outcome.kind != "opaque":
                assert same(event.outcome, outcome), (event.op, event.target)
                compared += 1
        # float64 with gradients: the same code agrees with itself
        a = replay(events, modules, float64=True, gradients=True)
        b = replay(events, modules, float64=True, gradients=True)
        assert all(same(x, y) for x, y in zip(a, b, strict=True))
    assert compared > 20


@pytest.mark.parametrize(
    ("exercise", "mutant"),
    [("day49-data", "no-short-data-check"), ("day45-attention", "softmax-returns-float32")],
)
def test_a_mutant_is_named_with_its_own_rule_and_message(tmp_path, exercise, mutant):
    """Mutants no hidden test knows by name: the replay names them, from their TOML."""
    m = next(m for m in load_mutants() if m.id == mutant)
    graded = grade(exercise, apply_mutant(m, exercise, tmp_path / "submission"))
    named = [d for d in graded.diagnosis if d.mutant == mutant]
    assert named, graded.diagnosis
    failed = {c.id for c in graded.checks if not c.passed}
    assert all(d.check in failed and d.rule == m.rule and d.day == m.day for d in named)
    assert all(d.message == m.message.en and d.message_i18n["zh-TW"] == m.message.zh_TW for d in named)


def test_correct_code_is_named_nothing(tmp_path):
    shutil.copytree(EXERCISES_DIR / "day49-data" / "solution", tmp_path / "s")
    graded = grade("day49-data", tmp_path / "s")
    assert graded.passed and graded.diagnosis == []
