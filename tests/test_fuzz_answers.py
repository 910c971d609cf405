"""Fuzzing the quiz answer parser (grader/catalog/answers.py), bounded in examples and time.

The documented contract: `parse_answer` gives a Number, a NumberArray or a ParseError and
`parse_choice` a letter or a ParseError, never an exception; `check_answer` never raises and
never falls back to its "internal-error" result on learner input; no answer (at most 200
characters) takes long, however it is built.
"""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.catalog.answers import (
    ChoiceQuestion,
    InfQuestion,
    IntegerQuestion,
    Number,
    NumberArray,
    ParseError,
    RealQuestion,
    check_answer,
    parse_answer,
    parse_choice,
)

# generous: a single answer is parsed in well under a millisecond; a bomb would take seconds or hang
SECONDS_PER_ANSWER = 1.0
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

QUESTIONS = [
    IntegerQuestion(id="n", answer=4194304),
    RealQuestion(id="x", answer=4.6052, tol=5e-3),
    RealQuestion(id="r", answer=4.0e6, tol_kind="rel", tol=0.01),
    RealQuestion(id="s", answer=0.0001234, tol_kind="sigfigs", sigfigs=2),
    InfQuestion(id="inf"),
    ChoiceQuestion(id="c", options={letter: f"option {letter}" for letter in "ABCD"}, answer="B"),
]

BOMBS = [
    "1e999999999",
    "-1e-999999999",
    "10**10**10",
    "9**9**9",
    "10^10^10",
    "2**-99999",
    "(-8)**(1/3)",
    "0**-1",
    "1/0",
    "0/0",
    "exp(exp(exp(100)))",
    "log(0)",
    "sqrt(-1)",
    "log(1, 1)",
    "9" * 200,
    "9" * 201,
    "1" + "0" * 199,
    "(" * 99 + "1" + ")" * 99,
    "(" * 200,
    "-" * 199 + "1",
    "+-" * 99 + "1",
    "[" * 100 + "]" * 100,
    "[[" * 50 + "1" + "]]" * 50,
    "1e400",
    "1e-400",
    "0x10",
    "1_000_000_000_000_000_000_000",
    "lambda: 1",
    "__import__('os')",
    "().__class__",
    "pi**pi**pi**pi",
    "e" * 200,
    "sqrt(" * 40 + "2" + ")" * 40,
    "10**400 - 10**400",
    "2**4096 * 2**4096",
    "1" + "*1" * 99,
    "９" * 100,
    "10³³³³³³³³³³³",
    "∞" * 50,
    "\u200b" * 200 + "1",
    "\ud800",
    "1,000,000,000,000,000",
    "[4,194,304]",
]


def timed(fn, *args):
    start = time.process_time()
    result = fn(*args)
    return result, time.process_time() - start


def check_parsed(raw) -> None:
    result, seconds = timed(parse_answer, raw)
    assert isinstance(result, (Number, NumberArray, ParseError)), (raw, result)
    assert seconds < SECONDS_PER_ANSWER, (raw, seconds)
    for question in QUESTIONS:
        verdict, seconds = timed(check_answer, question, raw)
        assert verdict.code != "internal-error", (question.id, raw, verdict.message)
        assert seconds < SECONDS_PER_ANSWER, (question.id, raw, seconds)


def test_known_bombs_are_answered_quickly():
    for raw in BOMBS:
        check_parsed(raw)


ATOMS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["pi", "e", "inf", "nan", "∞", "-0", ".5", "1e308", "1e-308", "4,194,304", "1_0"]),
)


def expressions():
    return st.recursive(
        ATOMS,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "**", "^", "%", "//"]), inner).map(
                lambda t: f"{t[0]}{t[1]}{t[2]}"
            ),
            inner.map(lambda x: f"({x})"),
            inner.map(lambda x: f"-{x}"),
            st.tuples(
                st.sampled_from(["ln", "log", "log2", "log10", "exp", "sqrt", "abs", "Log"]), inner
            ).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(inner, inner).map(lambda t: f"log({t[0]}, {t[1]})"),
            st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        ),
        max_leaves=30,
    )


@FUZZ
@given(expressions())
def test_expressions_are_parsed_or_refused(text):
    check_parsed(text)


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("0123456789.eE+-*/^()[], _pilnogqrtx∞−×÷³⁻ ")), max_size=220))
def test_random_calculator_text_is_parsed_or_refused(text):
    check_parsed(text)


@FUZZ
@given(st.text(max_size=220))
def test_any_unicode_is_parsed_or_refused(text):
    check_parsed(text)
    choice, _ = timed(parse_choice, text, "ABCD")
    assert choice in ("A", "B", "C", "D") or isinstance(choice, ParseError)


TOML_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(),
        st.text(max_size=30),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=40,
)


@FUZZ
@given(TOML_VALUES)
def test_any_toml_value_is_parsed_or_refused(value):
    check_parsed(value)
    choice, _ = timed(parse_choice, value, "ABCD")
    assert choice in ("A", "B", "C", "D") or isinstance(choice, ParseError)


SHAPE_FORMS = [  # how Python, PyTorch and NumPy print a shape or a 1-D integer tensor
    lambda d: "(" + ", ".join(map(str, d)) + ("," if len(d) == 1 else "") + ")",
    lambda d: "x".join(map(str, d)),
    lambda d: " × ".join(map(str, d)),
    lambda d: "torch.Size([" + ", ".join(map(str, d)) + "])",
    lambda d: "[" + " ".join(map(str, d)) + "]",
    lambda d: "tensor([" + ", ".join(map(str, d)) + "])",
]


@FUZZ
@given(st.lists(st.integers(0, 99_999), min_size=2, max_size=5), st.sampled_from(SHAPE_FORMS))
def test_a_printed_shape_reads_back_as_its_list(dims, form):
    question = IntegerQuestion(id="shape", answer=dims)
    assert check_answer(question, form(dims)).passed, form(dims)
    wrong = [*dims[:-1], dims[-1] + 1]
    result = check_answer(question, form(wrong))
    assert not result.passed and result.code == "wrong-elements", form(wrong)
