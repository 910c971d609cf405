"""Budgets per call, credit per check (issue 14): one broken piece of a submission costs only the
checks that reach it.

Learner-style cases built from the solutions: a `while True` inside one function, a function
left out, a syntax error in one file of several. Each grade here costs a second or two, plus the
per-call floor (CALL_FLOOR_SECONDS) for every call that runs over.
"""

import shutil
from pathlib import Path

import torch

import reference_model as ref
from grader.grading.budgets import CallBudgets, _reference_module
from grader.grading.grade import grade
from grader.jail.client import learner_frames
from grader.jail.wire import Handle
from grader.limits import CALL_FLOOR_SECONDS, STACK_FRAMES

EXERCISES = Path(__file__).resolve().parents[1] / "exercises"


def from_solution(tmp_path, exercise: str, file: str, edit) -> Path:
    """The exercise's solution in a folder of its own, with `edit(text) -> text` applied to `file`."""
    folder = tmp_path / exercise
    shutil.copytree(EXERCISES / exercise / "solution", folder)
    path = folder / file
    edited = edit(path.read_text())
    assert edited != path.read_text(), "the edit must change the file"
    path.write_text(edited)
    return folder


def line_of(folder: Path, file: str, text: str) -> int:
    return next(i for i, line in enumerate((folder / file).read_text().splitlines(), 1) if text in line)


def by_id(grade_) -> dict:
    return {c.id: c for c in grade_.checks}


def test_a_loop_in_a_helper_of_make_xy_fails_only_the_make_xy_checks_and_says_where(tmp_path):
    # a learner's helper that never returns: the report names it and the line of make_xy calling it
    sub = from_solution(
        tmp_path,
        "day49-data",
        "data.py",
        lambda t: t.replace(
            "def make_xy(chunk) -> tuple[Tensor, Tensor]:\n",
            "def wait_for_data():\n    while True:\n        pass\n\n\n"
            "def make_xy(chunk) -> tuple[Tensor, Tensor]:\n    wait_for_data()\n",
        ),
    )
    g = grade("day49-data", sub)
    assert g.error is None
    loop, call = line_of(sub, "data.py", "while True"), line_of(sub, "data.py", "    wait_for_data()")
    timed_out = [c for c in g.checks if not c.passed]
    assert timed_out and all(c.id.startswith("make-xy") for c in timed_out)
    for c in timed_out:  # every one in a fresh jail, each stopped where the loop is
        assert c.symptoms == ["timeout"]
        assert "make_xy" in c.message and f"{CALL_FLOOR_SECONDS:g} s budget" in c.message
        # the sample lands on `while True:` or on its `pass`: both are the loop
        assert any(f"wait_for_data at data.py line {n}" in c.message for n in (loop, loop + 1))
        assert f"called from make_xy at data.py line {call}" in c.message
    # get_batch and lm_loss never call make_xy: they run, after the timeout too, and pass
    assert [c.id for c in g.checks if c.passed] == [c.id for c in g.checks if not c.id.startswith("make-xy")]
    assert g.score == g.max_score - sum(c.max_points for c in timed_out)


def test_a_missing_function_fails_only_the_checks_that_call_it(tmp_path):
    sub = from_solution(tmp_path, "day49-data", "data.py", lambda t: t[: t.index("def lm_loss")])
    g = grade("day49-data", sub)
    assert g.error is None  # no longer an invalid submission: the other checks are graded
    for c in g.checks:
        if c.id.startswith("lm-loss"):
            assert not c.passed and "data.py does not define lm_loss" in c.message, c.message
            assert "make_xy, get_batch, lm_loss" in c.message  # what the exercise asks for
        else:
            assert c.passed, (c.id, c.message)


def test_a_syntax_error_in_one_file_fails_only_the_checks_that_use_it(tmp_path):
    unclosed = lambda t: t.replace("    return pe\n", "    return pe(\n", 1)  # noqa: E731
    sub = from_solution(tmp_path, "day48-decoder", "positions.py", unclosed)
    g = grade("day48-decoder", sub)
    checks = by_id(g)
    assert g.error is None
    line = line_of(sub, "positions.py", "return pe(")
    failed = [c for c in g.checks if not c.passed]
    uses_positions = {"sinusoidal-positions", "sinusoidal-rejects-odd-d", "apply-rope"}
    assert failed and all(c.id in uses_positions for c in failed)
    for c in failed:
        assert f"positions.py line {line}, column" in c.message and "syntax error" in c.message
    assert all(checks[i].passed for i in ("layernorm-matches-reference", "rmsnorm-matches-reference"))


# -- the parts, without a jail ----------------------------------------------------------------


DUMP = """\
Thread 0x00007f0000000002 (most recent call first):
  File "/submission/data.py", line 7 in background
Current thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/submission/data.py", line 12 in make_xy
  File "/tmp/data.py", line 1 in forged_outside_the_submission
  File "/submission/notes.txt", line 3 in not_a_learner_module
  File "/submission/worker.py", line 119 in op_call
  File "/jail/worker.py", line 119 in op_call
"""


def test_a_stack_sample_keeps_only_frames_of_the_learners_files():
    assert learner_frames(DUMP, {"data.py"}, "/submission") == [("make_xy", "data.py", 12)]
    # a helper the learner shipped is theirs; the jail's own worker.py (in /jail) is not
    assert learner_frames(DUMP, {"data.py", "worker.py"}, "/submission") == [
        ("make_xy", "data.py", 12),
        ("op_call", "worker.py", 119),
    ]


def test_a_stack_sample_is_read_as_untrusted_text():
    assert learner_frames("", {"data.py"}) == []
    assert learner_frames("\x00\xff garbage\n" * 1000, {"data.py"}) == []
    deep = "Current thread 0x1 (most recent call first):\n"
    deep += '  File "/submission/data.py", line 3 in f\n' * 500
    assert learner_frames(deep, {"data.py"}, "/submission") == [("f", "data.py", 3)] * STACK_FRAMES
    long_name = f'  File "/submission/data.py", line 3 in {"f" * 10_000}\n'
    assert learner_frames(long_name, {"data.py"}, "/submission") == []  # not the frame format
    # the interrupted thread was not in learner code: the first thread that was
    elsewhere = DUMP.replace('data.py", line 12', 'lib.py", line 12')
    assert learner_frames(elsewhere, {"data.py"}, "/submission") == [("background", "data.py", 7)]


def test_a_call_is_budgeted_from_its_reference_counterpart():
    budgets = CallBudgets(["data", "gpt"], call_seconds=60)
    chunk = torch.arange(20)
    rng = torch.get_rng_state()
    # data.make_xy is reference_model.data.make_xy: microseconds, so the floor
    assert budgets.for_call(0, {"module": "data", "path": ["make_xy"]}, [chunk], {}) == CALL_FLOOR_SECONDS
    assert torch.equal(torch.get_rng_state(), rng)  # the hidden tests' random inputs are untouched
    # no counterpart: the exercise's call_seconds
    assert budgets.for_call(0, {"module": "data", "path": ["learner_only"]}, [chunk], {}) == 60
    assert budgets.for_call(0, {"module": "os", "path": ["system"]}, ["true"], {}) == 60
    # a learner object's twin is rebuilt from the calls that made it: GPT(GPTConfig(...))
    cfg = dict(vocab_size=11, block_size=8, d_model=8, n_layer=1, n_head=2)
    budgets.for_call(0, {"module": "gpt", "path": ["GPTConfig"]}, [], cfg)
    budgets.made(0, Handle(1, "GPTConfig"), {"module": "gpt", "path": ["GPTConfig"]}, [], cfg)
    budgets.made(0, Handle(2, "GPT"), {"module": "gpt", "path": ["GPT"]}, [Handle(1, "GPTConfig")], {})
    assert isinstance(budgets._twin(0, 2), ref.GPT)
    idx = torch.zeros(2, 8, dtype=torch.long)
    assert CALL_FLOOR_SECONDS <= budgets.for_call(0, {"handle": 2, "path": []}, [idx], {}) < 60
    trained = budgets.for_training(0, {"handle": 2}, steps=5, batch_size=2, block_size=8)
    assert CALL_FLOOR_SECONDS <= trained < 60  # timed on the twin, not the fallback
    # measured once per signature: a second call of the same shapes is not timed again
    before = dict(budgets._seconds)
    budgets.for_call(0, {"module": "data", "path": ["make_xy"]}, [torch.arange(20, 40)], {})
    assert budgets._seconds == before


def test_a_module_the_reference_package_lacks_is_budgeted_from_the_exercise_solution():
    # the bug hunt's `bughunt` has no reference_model counterpart: its solution file is the one
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    target = {"module": "bughunt", "path": ["attention"]}
    without = CallBudgets(["bughunt"], call_seconds=60)
    assert without.for_call(0, target, [q, k, v], {}) == 60
    rng = torch.get_rng_state()
    timed = CallBudgets(["bughunt"], call_seconds=60, solution_dir=EXERCISES / "day49-bughunt" / "solution")
    assert timed.for_call(0, target, [q, k, v], {}) == CALL_FLOOR_SECONDS
    assert torch.equal(torch.get_rng_state(), rng)  # importing and timing it drew nothing
    # a learner object of that module: its twin is the solution's class, built the same way
    timed.for_call(0, {"module": "bughunt", "path": ["GPTConfig"]}, [], {})
    timed.made(0, Handle(1, "GPTConfig"), {"module": "bughunt", "path": ["GPTConfig"]}, [], {})
    timed.made(0, Handle(2, "Block"), {"module": "bughunt", "path": ["Block"]}, [Handle(1, "GPTConfig")], {})
    assert type(timed._twin(0, 2)).__name__ == "Block"
    assert CALL_FLOOR_SECONDS <= timed.for_call(0, {"handle": 2, "path": []}, [torch.randn(2, 7, 32)], {}) < 60


def test_a_reference_call_is_timed_no_longer_than_the_timing_cap(tmp_path):
    # work longer than CALL_TIMING_SECONDS is not run to its end just to be timed: call_seconds
    (tmp_path / "slow.py").write_text(
        "import time\nfinished = False\n\n"
        "def work():\n    global finished\n    time.sleep(5)\n    finished = True\n"
    )
    budgets = CallBudgets(["slow"], call_seconds=60, solution_dir=tmp_path)
    assert budgets.for_call(0, {"module": "slow", "path": ["work"]}, [], {}) == 60
    assert _reference_module("slow", tmp_path).finished is False  # stopped, not waited for


def test_the_grader_asks_for_the_stack_on_the_signal_the_jail_listens_to():
    import signal

    from grader.jail import client

    worker = (Path(client.__file__).with_name("worker.py")).read_text(encoding="utf-8")  # runs as a script
    line = next(s for s in worker.splitlines() if s.startswith("STACK_SIGNAL = "))
    assert eval(line.split("=", 1)[1].split("#")[0], {"signal": signal}) == client.STACK_SIGNAL
