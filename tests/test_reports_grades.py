"""Real grades for the report tests, each graded once per test session (in-process, through the
same path as `grader grade`), and what the grades themselves must carry for the reports: message
ids and params, and the training probe's loss curve on a pass and on a fail.

Other report test modules import the builders below; functools.cache makes every grade once.
"""
import math
import tempfile
from functools import cache
from pathlib import Path

import grade_store
import pytest

from grader.grading.grade import grade
from grader.models import CheckResult, Diagnosis, Grade, GradeError
from grader.catalog.mutants import apply_mutant, load_mutants

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ROOT / "exercises"
FOUR_BUGS = ["scale-by-d-model", "mask-diagonal-0", "post-ln", "unshifted-targets"]
HOSTILE = "<script>alert('x')</script><img src=https://evil.example/x.png> \x1b[2J\x1b]0;pwned\x07 {name} \x00"


@cache
def starter_grade() -> Grade:
    """The bug-hunt starter: four bugs, NaN at the first step of training."""
    return grade_store.shared().grade("day49-bughunt", EXERCISES / "day49-bughunt" / "starter", student="s-starter")


@cache
def only_bug_d_grade() -> Grade:
    """The fixed bug hunt with bug (D) put back: the training loss collapses below the floor."""
    mutant = next(m for m in load_mutants() if m.id == "unshifted-targets")
    with tempfile.TemporaryDirectory() as tmp:
        path = apply_mutant(mutant, "day49-bughunt", Path(tmp) / "submission")
        return grade_store.shared().grade("day49-bughunt", path, student="s-only-d")


@cache
def solution_grade() -> Grade:
    return grade_store.shared().grade("day49-bughunt", EXERCISES / "day49-bughunt" / "solution", student="s-solution")


@cache
def quiz_pass_grade() -> Grade:
    return grade("day45-quiz", EXERCISES / "day45-quiz" / "solution")   # the default variant


@cache
def quiz_wrong_grade() -> Grade:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "answers.toml"
        path.write_text('[answers]\nd4_h2_d_k = 3\nmedium_attn_no_bias = "4.19e6"\n'
                        'trace_head0_weights = [[0, 1], [0.9442, 0.0558]]\nmc_d_k = "(B)"\n'
                        'bogus_id = 1\n', encoding="utf-8")
        return grade("day45-quiz", path, student="s-quiz-wrong")


@cache
def invalid_grade() -> Grade:
    """A submission that cannot be graded: a symbolic link (the error text comes from
    grader/intake/submission.py as plain English)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sub"
        folder.mkdir()
        (folder / "real.py").write_text("x = 1\n")
        (folder / "attention.py").symlink_to(folder / "real.py")
        return grade("day45-attention", folder, student="s-invalid")


NO_CAUSAL_MASK = next(m.message for m in load_mutants() if m.id == "no-causal-mask")


def hostile_grade() -> Grade:
    """Learner text everywhere a learner can put some, and far too much of it."""
    huge = "A" * (300 * 1024)
    return Grade(
        exercise="day45-attention", passed=False, score=1.0, max_score=30.0, student="<b>eve</b>",
        checks=[
            CheckResult(id="softmax-matches-reference", passed=False, points=0, max_points=2,
                        rule="numerical-stability", day=45, title="softmax matches the definition",
                        message=f"your code raised ValueError: {HOSTILE}", symptoms=["exception"],
                        message_id="your code raised {type}: {message}",
                        message_params={"type": "ValueError", "message": HOSTILE}),
            CheckResult(id="huge", passed=False, points=0, max_points=2, rule="causal-mask", day=44,
                        title="causal attention matches the reference", message=huge + huge,
                        message_id="your code raised {type}: {message}",
                        message_params={"type": "MemoryError", "message": huge + huge}),
            CheckResult(id="ok", passed=True, points=1, max_points=1, rule="api-contract", day=45,
                        title="n_head must divide d_model"),
        ],
        diagnosis=[Diagnosis(rule="causal-mask", day=44, mutant="no-causal-mask", check="huge",
                             message=NO_CAUSAL_MASK.en,
                             message_i18n={"en": NO_CAUSAL_MASK.en, "zh-TW": NO_CAUSAL_MASK.zh_TW})],
        error=GradeError(kind="crash", message=f"importing attention.py raised RuntimeError: {HOSTILE}"),
        warnings=[HOSTILE], output=(HOSTILE + "\n") * 40000, isolation="bubblewrap",
        grader_version="test")


# -- what a grade carries for its reports ---------------------------------------------------------

def test_starter_names_the_four_bugs_with_translatable_messages():
    g = starter_grade()
    rules = {m.id: m.rule for m in load_mutants()}
    for bug in FOUR_BUGS:  # each named on a failed check of its own rule, by the replay
        assert any(d.mutant == bug and d.rule == rules[bug] for d in g.diagnosis), bug
    for d in g.diagnosis:  # a msgid, or a mutant's own text in both languages
        assert d.message and (d.message_id or d.message_i18n.get("zh-TW"))
    for c in g.checks:
        assert c.passed or c.message_id, c.id


def test_the_training_curve_is_attached_on_fail_and_on_pass():
    nan_curve = next(c.curve for c in starter_grade().checks if c.id == "training-on-a-markov-corpus")
    assert nan_curve.losses and nan_curve.losses[0] is None          # NaN stored as null
    assert nan_curve.ln_v == pytest.approx(math.log(100)) and nan_curve.floor == pytest.approx(math.log(4))
    collapse = next(c for c in only_bug_d_grade().checks if c.id == "training-on-a-markov-corpus")
    assert not collapse.passed and collapse.curve.losses[-1] < collapse.curve.floor - 0.25
    honest = next(c for c in solution_grade().checks if c.id == "training-on-a-markov-corpus")
    assert honest.passed and honest.curve is not None and honest.curve.losses[-1] > honest.curve.floor
    assert [c.id for c in starter_grade().checks if c.curve] == ["training-on-a-markov-corpus"]


def test_message_params_render_back_to_the_english_message():
    from grader.locale import render
    for g in (starter_grade(), only_bug_d_grade(), quiz_wrong_grade()):
        for c in g.checks:
            if c.message_id:
                assert render(None, "en", msgid=c.message_id, params=c.message_params) == c.message
