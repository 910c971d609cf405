"""The gradebook is lossless: a grade read back equals the grade that was recorded, field for field.

Over real grades (every exercise's solution, starter, alternatives and mutants, graded for real;
the adversarial corpus does the same for each attack in test_jail_adversarial.py) and over
grades full of hostile text (hypothesis), into SQLite and into a real PostgreSQL.
"""
from __future__ import annotations

import pytest
from gradebook_checks import Recorder, differences
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.catalog.exercises import all_exercises, exercise_dir
from grader.grading.grade import grade
from grader.locale import msg
from grader.models import (
    RULES,
    SYMPTOMS,
    CheckResult,
    Diagnosis,
    Grade,
    GradeError,
    Note,
    Printed,
    TrainingCurve,
)
from grader.mutation.verify import cases, verify
from grader.catalog.quiz import starter_text


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def recorder(request, tmp_path_factory):
    if request.param == "sqlite":
        db = str(tmp_path_factory.mktemp("lossless") / "gradebook.db")
    else:
        db = request.getfixturevalue("postgres").create_database()
    rec = Recorder(db)
    yield rec
    rec.book.close()


@pytest.fixture(scope="module")
def real_grades(tmp_path_factory, corpus_grades) -> list[tuple[str, Grade]]:
    """Every case `grader mutants verify` grades (from the run's grade store), and each quiz's key
    and starter."""
    verdicts = verify(cases(), grade_with=corpus_grades.grade)
    out = [(f"{v.case.kind} {v.case.exercise} {v.case.name}", v.grade) for v in verdicts]
    for ex in all_exercises():
        if ex.kind != "quiz":
            continue
        starter = tmp_path_factory.mktemp(f"{ex.id}-starter")
        (starter / ex.files[0]).write_text(starter_text(ex, "learner-7"), encoding="utf-8")
        out.append((f"key {ex.id}", grade(ex, exercise_dir(ex.id) / "solution", student="learner-7")))
        out.append((f"starter {ex.id}", grade(ex, starter, student="learner-7")))
    return out


def test_the_real_grades_are_varied_enough_to_prove_something(real_grades):
    grades = [g for _, g in real_grades]
    assert len(grades) >= 50
    assert any(c.curve is not None for g in grades for c in g.checks)           # training curves
    assert any(c.message_id for g in grades for c in g.checks)                  # translatable
    assert any(c.title_i18n for g in grades for c in g.checks)                  # quiz questions
    assert any(d.message_id for g in grades for d in g.diagnosis)               # named mutants
    assert any(g.warnings for g in grades) and any(g.output for g in grades)


def test_every_real_grade_reads_back_equal(recorder, real_grades):
    for name, g in real_grades:
        back = recorder.round_trip(g)
        assert differences(back, g) == [], f"{name}: {differences(back, g)}"


# -- hostile text in every field --------------------------------------------------------------------

# every code point, lone surrogates and NUL included: what a learner's exception may carry
any_text = st.text(st.characters(codec=None, categories=None), max_size=40)
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**53, 2**53))
params = st.dictionaries(st.sampled_from(["type", "message", "where", "got"]), any_text, max_size=3)


@st.composite
def hostile_grades(draw) -> Grade:
    def said(**kw):
        template = draw(st.sampled_from(["your code raised {type}: {message}",
                                         "your code raised {type} at {where}: {message}", None]))
        message = msg(template, **draw(params)) if template else draw(any_text)
        return dict(message=message, **kw)

    checks = [CheckResult(id=draw(any_text), passed=draw(st.booleans()), points=0.0, max_points=1.0,
                          rule=draw(st.sampled_from(RULES)), day=draw(st.integers(1, 90)), title=draw(any_text),
                          symptoms=draw(st.lists(st.sampled_from(SYMPTOMS), max_size=2)),
                          evidence=draw(st.dictionaries(any_text, st.one_of(numbers, any_text), max_size=3)),
                          title_i18n={"zh-TW": draw(any_text)},
                          curve=draw(st.one_of(st.none(), st.builds(
                              TrainingCurve, losses=st.lists(st.one_of(st.none(), st.floats(0, 20)), max_size=5),
                              ln_v=st.floats(0, 20), floor=st.floats(0, 20)))),
                          caused_by=draw(st.lists(any_text, max_size=2)),
                          **said())
              for _ in range(draw(st.integers(0, 3)))]
    return Grade(exercise="day45-attention", passed=False, score=0.0, max_score=34.0, checks=checks,
                 diagnosis=[Diagnosis(rule="causal-mask", day=44, mutant=draw(any_text),
                                      message_i18n={"en": draw(any_text), "zh-TW": draw(any_text)}, **said())],
                 error=draw(st.one_of(st.none(), st.just(GradeError(kind="crash", **said())))),
                 warnings=[Note(**said())], output=Printed(start=draw(any_text), end=draw(any_text), cut_bytes=3),
                 isolation=draw(any_text), student=draw(any_text))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(g=hostile_grades())
def test_hostile_text_reads_back_equal(recorder, g):
    back = recorder.round_trip(g)
    assert differences(back, g) == []


def test_a_lone_surrogate_and_nul_are_cleaned_when_the_grade_is_made():
    g = Grade(exercise="x", passed=False, score=0, max_score=1, output="a\ud800b\x00",
              error=GradeError(kind="crash", message=msg("your code raised {type}: {message}",
                                                         type="ValueError", message="\udfff")))
    assert g.output.start == "a\ufffdb\ufffd"
    assert g.error.message == "your code raised ValueError: \ufffd"
    assert g.error.message_params == {"type": "ValueError", "message": "\ufffd"}
    g.model_dump_json()                  # encodable: no lone surrogate is left anywhere


def test_a_message_is_capped_where_the_model_is_made_whether_text_or_msg():
    huge = "x" * (1 << 20)
    for message in (huge, msg("your code raised {type}: {message}", type="ValueError", message=huge)):
        error = GradeError(kind="crash", message=message)
        # the message and its params together within one message's 64 KiB, the cut marked
        kept = error.model_dump()
        assert error.message.startswith("x" if message is huge else "your code raised ValueError: x")
        assert error.message.endswith(" …") and len(error.message) > 16 * 1024
        assert len(repr(kept).encode()) <= 64 * 1024 + 256
