"""What a warm grading process keeps from one submission for the next (benchmarks/bench_grade.py
measures what it saves): an exploration's drawn cases, a mutant's answers to a failed check's
requests, the reference's time per call signature, and a pytest session with the hidden tests
collected. Each must leave every grade exactly as a fresh process gives it, and stay bounded."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch
from hypothesis import strategies as st

from exercises import EXERCISES_DIR
from grader.grading import budgets, explore, replay, runner
from grader.grading.budgets import CallBudgets
from grader.grading.grade import solution_trace
from grader.jail.wire import Handle
from grader.grading.replay import Outcome, Trace, counterpart, remembered_replay, requests_digest, same
from grader.testkit import CheckFailure, fail, msg


@pytest.fixture(autouse=True)
def nothing_kept(monkeypatch):
    """Each test starts from a process that has kept nothing (and leaves the suite's alone)."""
    monkeypatch.setattr(explore, "_drawn", type(explore._drawn)())
    monkeypatch.setattr(replay, "_replayed", type(replay._replayed)())
    monkeypatch.setattr(replay, "_replayed_bytes", 0)
    monkeypatch.setattr(budgets, "_timings", type(budgets._timings)())


# -- exploration --------------------------------------------------------------------------------


@st.composite
def shaped(draw):
    """A case of the kind hidden tests draw: a dict with a tensor built from drawn numbers."""
    shape = (*draw(explore.batch_dims()), draw(explore.sizes(1, 9)))
    return {"x": explore.random_tensor(shape, dtype=draw(explore.float_dtypes()), seed=draw(explore.seeds())),
            "dim": draw(st.integers(-1, 0))}


def seen_by(prop_fails=lambda case: False):
    calls = []

    def prop(case):
        calls.append(case)
        if prop_fails(case):
            fail(msg("too wide"))

    return prop, calls


def test_cases_run_again_are_the_ones_hypothesis_draws_without_its_engine(monkeypatch):
    first, drawn = seen_by()
    explore.explore(shaped(), first)  # a fresh strategy object each time, as a re-run test makes
    assert len(explore._drawn) == 1

    def no_engine(*args, **kwargs):
        raise AssertionError("hypothesis ran again")

    monkeypatch.setattr(explore, "given", no_engine)
    again, reused = seen_by()
    explore.explore(shaped(), again)
    assert len(reused) == len(drawn) == explore.EXPLORE_EXAMPLES
    assert all(explore._same_case(a, b) for a, b in zip(drawn, reused, strict=True))
    assert all(a["x"] is not b["x"] for a, b in zip(drawn, reused, strict=True))  # copies: a check may write


def test_a_failure_among_cases_run_again_calls_the_learner_as_a_fresh_run_does():
    def wide(case):
        return case["x"].shape[-1] >= 5

    fresh, fresh_calls = seen_by(wide)
    with pytest.raises(CheckFailure) as fresh_failure:
        explore.explore(shaped(), fresh)
    assert not explore._drawn  # a run with a failure is not kept
    explore.explore(shaped(), seen_by()[0])  # a correct submission: the cases are kept
    warm, warm_calls = seen_by(wide)
    with pytest.raises(CheckFailure) as warm_failure:
        explore.explore(shaped(), warm)
    # the same calls, in the same order, the same smallest case: hypothesis shrank it as before
    assert len(warm_calls) == len(fresh_calls) > explore.EXPLORE_EXAMPLES
    assert all(explore._same_case(a, b) for a, b in zip(fresh_calls, warm_calls, strict=True))
    assert str(warm_failure.value) == str(fresh_failure.value)


def test_an_error_that_ends_a_check_ends_it_at_once_from_cases_run_again():
    explore.explore(shaped(), seen_by()[0])
    calls = []

    def broken(case):
        calls.append(case)
        raise ZeroDivisionError("the check's own bug")

    with pytest.raises(ZeroDivisionError):
        explore.explore(shaped(), broken)
    assert len(calls) == 1


def test_a_strategy_that_may_vary_unseen_is_explored_by_hypothesis_every_time():
    def closing_over(k):
        @st.composite
        def drawn(draw):
            return draw(st.integers(0, k))

        return drawn()

    assert explore._reuse_key(closing_over(3), 6)[0] is None  # its repr does not show k
    assert explore._reuse_key(st.just(torch.ones(3)), 6)[0] is None  # a tensor's repr rounds
    assert explore._reuse_key(st.sampled_from([object()]), 6)[0] is None
    key, namespaces = explore._reuse_key(shaped(), 6)
    assert key is not None and key == explore._reuse_key(shaped(), 6)[0]
    assert globals() in namespaces  # held, so that no other module's namespace takes its id
    assert key != explore._reuse_key(shaped(), 4)[0]


def test_a_draw_that_moves_torchs_generator_is_not_run_again():
    @st.composite
    def global_noise(draw):
        return torch.rand(draw(st.integers(1, 3)))

    explore.explore(global_noise(), seen_by()[0])
    assert not explore._drawn


def test_the_cases_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(explore, "EXPLORED_RUNS", 2)
    for high in (3, 4, 5):
        explore.explore(st.integers(0, high), seen_by()[0])
    assert len(explore._drawn) == 2


# -- replaying a failed check's requests on a mutant ---------------------------------------------

SCALE = {
    "scale.py": (
        "import torch\n\nclass Scale:\n    def __init__(self, k):\n        self.k = k\n\n"
        "    def __call__(self, x):\n        return x * self.k\n"
    )
}


def scale_events(n: int) -> list:
    trace = Trace()
    trace.begin("check")
    trace.record("call", {"module": "scale", "path": ["Scale"]}, 0, {"args": [3], "kwargs": {}},
                 Outcome("value", Handle(1, "Scale")))
    for i in range(n):
        x = torch.arange(4.0) + i
        trace.record("call", {"handle": 1}, 0, {"args": [x], "kwargs": {}}, Outcome("value", x * 3))
    return trace.events("check")


def test_a_remembered_replay_answers_as_a_fresh_one():
    modules = counterpart(SCALE, "test/warm-scale")
    events = scale_events(4)
    key = ("test/warm-scale", requests_digest(events))
    fresh = replay.replay(events, modules)
    assert all(same(a, b) for a, b in zip(fresh, remembered_replay(key, events, modules), strict=True))
    kept = remembered_replay(key, events, modules)
    assert all(same(a, b) for a, b in zip(fresh, kept, strict=True))
    # `until` is applied to what was kept: the same prefix as a fresh replay stopped there
    stop = remembered_replay(key, events, modules, until=lambda i, outcome: i == 2)
    assert len(stop) == len(replay.replay(events, modules, until=lambda i, outcome: i == 2)) == 3


def test_a_replay_stopped_early_is_replayed_again_when_more_is_asked(monkeypatch):
    modules = counterpart(SCALE, "test/warm-scale")
    events = scale_events(4)
    key = ("test/warm-scale", requests_digest(events))
    assert len(remembered_replay(key, events, modules, until=lambda i, outcome: i == 1)) == 2
    replays = []
    real = replay.replay
    monkeypatch.setattr(replay, "replay", lambda *a, **k: replays.append(1) or real(*a, **k))
    assert len(remembered_replay(key, events, modules, until=lambda i, outcome: i == 0)) == 1
    assert not replays  # within what was kept
    assert len(remembered_replay(key, events, modules)) == len(events)
    assert len(replays) == 1  # past it: replayed, and the whole of it kept
    remembered_replay(key, events, modules)
    assert len(replays) == 1


def test_requests_differing_in_one_value_are_other_requests():
    a, b = scale_events(2), scale_events(2)
    assert requests_digest(a) == requests_digest(b)
    b[-1].fields["args"][0][0] += 1e-6
    assert requests_digest(a) != requests_digest(b)
    c = scale_events(2)
    c[-1].fields["args"][0] = c[-1].fields["args"][0].double()  # equal values, another dtype
    assert requests_digest(a) != requests_digest(c)
    c[-1].fields["args"][0] = object()
    assert requests_digest(c) is None  # nothing kept for what cannot be hashed


def test_the_replays_kept_are_bounded_by_bytes(monkeypatch):
    monkeypatch.setattr(replay, "REPLAY_CACHE_BYTES", 3 * (replay.OUTCOME_BYTES * 3 + 2 * 16))
    modules = counterpart(SCALE, "test/warm-scale")
    events = scale_events(2)
    for i in range(5):
        remembered_replay((f"suspect-{i}", requests_digest(events)), events, modules)
    assert [k[0] for k in replay._replayed] == ["suspect-2", "suspect-3", "suspect-4"]
    kept = sum(r.size for r in replay._replayed.values())
    assert replay._replayed_bytes == kept <= replay.REPLAY_CACHE_BYTES


def test_a_solutions_failed_checks_replayed_from_memory_answer_as_in_the_jail():
    trace = solution_trace("day49-data")
    files = {p.name: p.read_text() for p in (EXERCISES_DIR / "day49-data" / "solution").glob("*.py")}
    modules = counterpart(files, "test/warm-day49-data")
    for check, events in trace.items():
        key = ("test/warm-day49-data", requests_digest(events))
        for _ in range(2):  # replayed, then remembered
            outcomes = remembered_replay(key, events, modules)
            for event, outcome in zip(events, outcomes, strict=True):
                if event.outcome is not None:
                    assert same(event.outcome, outcome), (check, event.op)


# -- budgets -------------------------------------------------------------------------------------


def test_another_session_is_not_timed_again(monkeypatch):
    chunk, make_xy = torch.arange(20), {"module": "data", "path": ["make_xy"]}
    first = CallBudgets(["data"], call_seconds=60)
    assert first.for_call(0, make_xy, [chunk], {}) == budgets.CALL_FLOOR_SECONDS
    assert first.for_call(0, {"module": "os", "path": ["system"]}, ["true"], {}) == 60

    def timed(*args):
        raise AssertionError("timed again")

    monkeypatch.setattr(CallBudgets, "_measure", timed)
    other = CallBudgets(["data"], call_seconds=30)
    assert other.for_call(0, make_xy, [chunk + 1], {}) == budgets.CALL_FLOOR_SECONDS
    # no counterpart: each session's own call_seconds, from the same remembered measurement
    assert other.for_call(0, {"module": "os", "path": ["system"]}, ["true"], {}) == 30


def test_the_timings_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(budgets, "BUDGET_SIGNATURES", 3)
    session = CallBudgets(["data"], call_seconds=60)
    for n in range(5):
        session.for_call(0, {"module": "data", "path": ["make_xy"]}, [torch.arange(20 + n)], {})
    assert len(budgets._timings) == 3


# -- the pytest session -----------------------------------------------------------------------------

HIDDEN = '''
from grader.testkit import check


@check(points=1, rule="r", day=1)
def test_doubles(submission):
    assert submission.double(2) == 4, "double(2) should be 4"


@check(points=1, rule="r", day=1, needs=("doubles",))
def test_doubles_again(submission):
    assert submission.double(3) == 6, "double(3) should be 6"
'''


def graded(folder, double) -> list:
    return [(c.id, c.passed, c.message, c.caused_by) for c in runner.run_hidden_tests(
        folder, SimpleNamespace(double=double)).results]


def test_a_kept_session_grades_as_pytest_main_does(tmp_path, monkeypatch):
    (tmp_path / "test_kept_runs.py").write_text(HIDDEN)
    monkeypatch.setattr(runner, "_kept", type(runner._kept)())
    right, wrong = (lambda x: 2 * x), (lambda x: 3 * x)
    kept = [graded(tmp_path, right), graded(tmp_path, wrong), graded(tmp_path, right)]
    (session,) = runner._kept.values()  # one session, run three times
    assert session is not None and session.collected
    monkeypatch.setattr(runner, "_run_kept", lambda args, collector: None)  # pytest.main, fresh each time
    assert kept == [graded(tmp_path, right), graded(tmp_path, wrong), graded(tmp_path, right)]
    assert kept[1][1][1] is False and kept[1][1][3] == ["doubles"]
    session.close()


def test_a_kept_session_leaves_the_process_as_it_found_it(tmp_path, monkeypatch):
    (tmp_path / "test_kept_state.py").write_text(HIDDEN)
    monkeypatch.setattr(runner, "_kept", type(runner._kept)())
    cwd, marks = os.getcwd(), pytest.mark._config
    graded(tmp_path, lambda x: 2 * x)
    graded(tmp_path, lambda x: 2 * x)
    assert (os.getcwd(), pytest.mark._config) == (cwd, marks)
    for session in runner._kept.values():
        if session is not None:
            session.close()


def test_a_changed_hidden_folder_or_a_broken_collection_is_not_run_from_a_kept_session(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "_kept", type(runner._kept)())
    (tmp_path / "test_kept_changed.py").write_text(HIDDEN)
    graded(tmp_path, lambda x: 2 * x)
    (tmp_path / "test_kept_more.py").write_text(HIDDEN.replace("def test_doubles", "def test_more_doubles")
                                                      .replace('"doubles"', '"more-doubles"'))
    assert len(graded(tmp_path, lambda x: 2 * x)) == 4  # the new file's checks are collected
    (tmp_path / "test_kept_broken.py").write_text("raise ImportError('a broken hidden test file')\n")
    with pytest.raises(RuntimeError, match="could not run"):  # reported, as pytest.main reports it
        graded(tmp_path, lambda x: 2 * x)
    assert runner._kept[next(reversed(runner._kept))] is None  # and pytest.main runs from now on
    for session in runner._kept.values():
        if session is not None:
            session.close()
