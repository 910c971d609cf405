"""The course policy (grader/policy/course.py): course.toml's validation, deadlines and
extensions, lateness, the rate limit and its deadline grant, late days, which upload counts,
and what a learner may see of a grade now."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.errors import UsageError
from grader.catalog.exercises import all_exercises
from grader.models import CheckResult, Diagnosis, Grade, Printed, TrainingCurve
from grader.policy.course import (
    ON_TIME,
    CoursePolicy,
    Deadlines,
    Lateness,
    PastUpload,
    PolicyError,
    admit,
    counted,
    deadlines,
    lateness,
    load_policy,
    tokens_left,
    visible_view,
)

FIXTURE = Path(__file__).parent / "fixtures" / "course.toml"
EX = "day45-attention"
IDS = ["day45-attention", "day45-quiz", "day48-decoder"]
DUE = datetime(2026, 11, 8, 15, 59, tzinfo=UTC)
OPENS = DUE - timedelta(days=7)
CLOSES = DUE + timedelta(days=7)
HOUR, MINUTE, SECOND = timedelta(hours=1), timedelta(minutes=1), timedelta(seconds=1)


def policy(**exercise) -> CoursePolicy:
    base = dict(
        opens=OPENS,
        due=DUE,
        closes=CLOSES,
        late=dict(grace_minutes=15, penalty_per_day=0.1, max_penalty=0.5),
        rate=dict(capacity=3, refill_minutes=60),
    )
    return CoursePolicy.model_validate(
        {"timezone": "Asia/Taipei", "late_days": 2, "exercises": {EX: {**base, **exercise}}}
    )


def admit_now(p, now, past=(), *, extensions=None, left=2, use=False, learner="alice"):
    return admit(
        p, EX, learner, now, list(past), extensions=extensions or {}, late_days_left=left, use_late_day=use
    )


# -- course.toml ---------------------------------------------------------------------------------


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "course.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "zone",
    ["Mars/Base", "CST", "../../etc/passwd", "/etc/localtime", "Asia/Taipei\n", "", "x" * 100, 8],
)
def test_a_timezone_that_is_not_an_iana_zone_is_refused_naming_the_field(tmp_path, zone):
    value = f"{zone}" if isinstance(zone, int) else f'"{zone}"'.replace("\n", "\\n")
    with pytest.raises(PolicyError) as caught:
        load_policy(write(tmp_path, f"timezone = {value}\n"), IDS)
    [line] = str(caught.value).splitlines()
    assert line.startswith(f"{tmp_path / 'course.toml'}: timezone: "), line  # the file and the field


def test_a_course_name_is_text_of_a_sensible_length(tmp_path):
    for bad in ('name = 3\n', f'name = "{"x" * 201}"\n'):
        with pytest.raises(PolicyError, match=r"course.toml: name: "):
            load_policy(write(tmp_path, bad), IDS)


def test_the_course_names_itself_and_its_clock(tmp_path):
    p = load_policy(write(tmp_path, 'name = "LLM from scratch"\ntimezone = "Asia/Taipei"\n'), IDS)
    assert (p.name, p.timezone, p.shown(DUE)) == ("LLM from scratch", "Asia/Taipei", "2026-11-08 23:59 +08:00")
    default = load_policy(write(tmp_path, ""), IDS)
    assert (default.timezone, default.shown(DUE)) == ("UTC", "2026-11-08 15:59 +00:00")  # never bare UTC
    summer = load_policy(write(tmp_path, 'timezone = "Europe/Paris"\n'), IDS)  # the offset of that day
    assert summer.shown(datetime(2026, 7, 1, 12, tzinfo=UTC)) == "2026-07-01 14:00 +02:00"
    assert summer.shown(DUE) == "2026-11-08 16:59 +01:00"


def test_the_fixture_course_loads_for_the_shipped_exercises():
    ids = [e.id for e in all_exercises()]
    p = load_policy(FIXTURE, ids)
    assert set(p.exercises) == set(ids)
    assert p.late_days == 2
    codes = [e.id for e in all_exercises() if e.kind == "code"]
    for ex in codes:
        assert "after_due" in p.exercises[ex].visibility.checks.values(), ex
        assert p.exercises[ex].rate.capacity == 3 and p.exercises[ex].rate.refill_minutes == 60
    assert p.extensions[0].learner == "alice"


def test_no_course_file_means_everything_open_and_no_limits():
    p = load_policy(None, IDS)
    a = admit(p, EX, "bob", DUE, [PastUpload(DUE)] * 50, extensions={}, late_days_left=0, use_late_day=False)
    assert a.admitted and a.retry_at is None
    assert tokens_left(p, EX, "bob", DUE, []) == (None, None)


@pytest.mark.parametrize(
    "text, where",
    [
        (
            "late_dayz = 3\n",
            "course.toml: late_dayz: unknown key; known keys: name, timezone, late_days, exercises, extensions",
        ),
        (
            "[exercises.day45-attention]\nduee = 2026-11-08T23:59:00Z\n",
            "exercises.day45-attention.duee: unknown key",
        ),
        (
            "[exercises.day45-attention]\nlate = { grace = 3 }\n",
            "exercises.day45-attention.late.grace: unknown key; known keys: grace_minutes",
        ),
        (
            "[exercises.day45-attention]\nrate = { capacity = 3, refill_minutes = 6, burst = 1 }\n",
            ".rate.burst: unknown key",
        ),
        ("[exercises.day45-attention]\nvisibility = { hidden = [] }\n", ".visibility.hidden: unknown key"),
        (
            "[[extensions]]\nlearner = 'a'\nexercise = 'day45-attention'\n"
            "due = 2026-11-08T23:59:00Z\nwhy = 1\n",
            "course.toml: extensions[1].why: unknown key",
        ),
    ],
)
def test_an_unknown_key_is_refused_at_every_level(tmp_path, monkeypatch, text, where):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, text), IDS)
    assert where in str(e.value)


def test_a_policy_error_is_a_usage_error_exit_2(tmp_path):
    with pytest.raises(UsageError) as e:
        load_policy(write(tmp_path, "x = 1\n"), IDS)
    assert e.value.exit_code == 2


def test_a_penalty_out_of_range_names_the_field_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "[exercises.day45-attention]\nlate = { penalty_per_day = 1.5 }\n")
    with pytest.raises(PolicyError) as e:
        load_policy(path, IDS)
    assert str(e.value).startswith(
        "course.toml: exercises.day45-attention.late.penalty_per_day: must be between 0 and 1"
    )


@pytest.mark.parametrize(
    "value", ["2026-11-08T23:59:00", "2026-11-08", "'2026-11-08T23:59:00'", "'next friday'"]
)
def test_a_time_without_a_utc_offset_is_refused(tmp_path, value):
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, f"[exercises.day45-attention]\ndue = {value}\n"), IDS)
    assert "exercises.day45-attention.due:" in str(e.value)


def test_a_naive_time_says_why(tmp_path):
    with pytest.raises(PolicyError, match="needs a UTC offset"):
        load_policy(write(tmp_path, "[exercises.day45-attention]\nopens = 2026-11-08T23:59:00\n"), IDS)


def test_an_offset_string_or_z_is_taken(tmp_path):
    p = load_policy(
        write(
            tmp_path,
            "[exercises.day45-attention]\nopens = '2026-11-01T09:00:00+08:00'\ndue = 2026-11-08T15:59:00Z\n",
        ),
        IDS,
    )
    assert p.exercises[EX].due == DUE
    assert p.exercises[EX].opens == datetime(2026, 11, 1, 1, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "dates",
    [
        "opens = 2026-11-09T00:00:00Z\ndue = 2026-11-08T00:00:00Z",
        "due = 2026-11-09T00:00:00Z\ncloses = 2026-11-08T00:00:00Z",
        "opens = 2026-11-09T00:00:00Z\ncloses = 2026-11-08T00:00:00Z",
    ],
)
def test_dates_out_of_order_are_refused(tmp_path, dates):
    with pytest.raises(PolicyError, match="opens <= due <= closes"):
        load_policy(write(tmp_path, f"[exercises.day45-attention]\n{dates}\n"), IDS)


def test_an_extensions_learner_may_be_a_number(tmp_path):
    text = "[[extensions]]\nlearner = 12345\nexercise = 'day45-attention'\ndue = 2026-11-09T00:00:00Z\n"
    p = load_policy(write(tmp_path, text), IDS)
    assert p.extensions[0].learner == "12345"
    assert deadlines(p, EX, "12345", {}).due == datetime(2026, 11, 9, tzinfo=UTC)


def test_an_extension_closing_before_its_due_is_refused(tmp_path):
    text = (
        "[[extensions]]\nlearner='a'\nexercise='day45-attention'\n"
        "due=2026-11-09T00:00:00Z\ncloses=2026-11-08T00:00:00Z\n"
    )
    with pytest.raises(PolicyError, match=r"extensions\[1\]"):
        load_policy(write(tmp_path, text), IDS)


def test_a_bad_visibility_value_lists_the_good_ones(tmp_path):
    text = "[exercises.day45-attention]\nvisibility = { checks = { x = 'after-due' } }\n"
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, text), IDS)
    assert "exercises.day45-attention.visibility.checks.x: must be one of" in str(e.value)
    assert "'after_due'" in str(e.value) and "'after-due'" in str(e.value)
    text = "[exercises.day45-attention]\nvisibility = { default = 'secret' }\n"
    with pytest.raises(PolicyError, match=r"visibility\.default: must be one of"):
        load_policy(write(tmp_path, text), IDS)


def test_hidden_is_a_visibility_of_course_toml(tmp_path):
    text = "[exercises.day45-attention]\nvisibility = { default = 'hidden', checks = { x = 'visible' } }\n"
    p = load_policy(write(tmp_path, text), IDS, checks=lambda e: {"x", "y"}).exercise(EX).visibility
    assert (p.of("x"), p.of("y")) == ("visible", "hidden")


@pytest.mark.parametrize(
    "text, where",
    [
        ("[exercises.day46-nope]\n", "exercises.day46-nope: unknown exercise"),
        (
            "[[extensions]]\nlearner='a'\nexercise='day46-nope'\ndue=2026-11-09T00:00:00Z\n",
            "extensions[1].exercise: unknown exercise",
        ),
    ],
)
def test_an_unknown_exercise_names_the_valid_ones(tmp_path, text, where):
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, text), IDS)
    assert where in str(e.value)
    assert "day45-attention, day45-quiz, day48-decoder" in str(e.value)


def test_an_unknown_exercise_names_the_closest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, "[exercises.day45-atention]\n"), IDS)
    assert str(e.value).startswith(
        "course.toml: exercises.day45-atention: unknown exercise (did you mean day45-attention?); "
        "the exercises are: "
    )


def test_a_misspelled_check_id_names_the_file_the_key_and_the_closest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = (
        "[exercises.day45-attention]\nvisibility = { checks = { 'mha-has-no-future-leaks' = 'after_due' } }\n"
    )
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, text), IDS)
    assert str(e.value) == (
        "course.toml: exercises.day45-attention.visibility.checks.mha-has-no-future-leaks: "
        "day45-attention has no check mha-has-no-future-leaks (did you mean mha-has-no-future-leak?)"
    )
    assert e.value.exit_code == 2


def test_a_check_id_must_be_that_exercises_own(tmp_path):
    # a check of day45-attention named under day48-decoder: a real id, of another exercise
    text = "[exercises.day48-decoder]\nvisibility = { checks = { 'mha-has-no-future-leak' = 'sealed' } }\n"
    with pytest.raises(
        PolicyError, match=r"exercises\.day48-decoder\.visibility\.checks\.mha-has-no-future-leak: "
    ):
        load_policy(write(tmp_path, text), IDS)
    quiz = "[exercises.day45-quiz]\nvisibility = { checks = { d4_h2_d_k = 'sealed', d4_h2_dk = 'sealed' } }\n"
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, quiz), IDS)
    assert "checks.d4_h2_dk: day45-quiz has no check d4_h2_dk (did you mean d4_h2_d_k?)" in str(e.value)
    assert "checks.d4_h2_d_k:" not in str(e.value)


def test_the_check_ids_are_what_pytest_collects_and_the_keys_hold():
    """exercise_checks reads the hidden tests' source; pytest's own collection is the truth."""
    from types import SimpleNamespace

    from grader.catalog.exercises import exercise_dir
    from grader.catalog.quiz import load_key
    from grader.grading.runner import run_hidden_tests
    from grader.policy.course import exercise_checks

    for ex in all_exercises():
        if ex.kind == "quiz":
            assert exercise_checks(ex.id) == {q.id for q in load_key(ex.id)}, ex.id
        else:
            collected = run_hidden_tests(exercise_dir(ex.id) / "hidden", SimpleNamespace(), collect_only=True)
            assert exercise_checks(ex.id) == set(collected.needs), ex.id


def test_an_extension_for_a_learner_no_one_knows_names_the_closest(tmp_path, monkeypatch):
    from grader.policy.course import check_learners

    monkeypatch.chdir(tmp_path)
    text = "[[extensions]]\nlearner = 7777\nexercise = 'day45-attention'\ndue = 2026-11-09T00:00:00Z\n"
    path = write(tmp_path, text)
    p = load_policy(path, IDS)
    check_learners(p, path, {"7777", "alice"})
    with pytest.raises(PolicyError) as e:
        check_learners(p, path, {"7778", "alice"})
    assert str(e.value) == (
        "course.toml: extensions[1].learner: no learner '7777' in the gradebook or roster "
        "(did you mean 7778?)"
    )


def test_toml_syntax_errors_give_line_and_column(tmp_path):
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, "late_days = 2\n[exercises.day45-attention\n"), IDS)
    assert "not valid TOML" in str(e.value) and "line 2" in str(e.value) and "column" in str(e.value)


def test_a_file_that_is_not_utf8_is_a_policy_error(tmp_path):
    path = tmp_path / "course.toml"
    path.write_bytes(b"late_days = 2\n# \xff\xfe\n")
    with pytest.raises(PolicyError, match="not valid TOML"):
        load_policy(path, IDS)


def test_a_naive_time_is_shown_as_written(tmp_path):
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, "[exercises.day45-attention]\ndue = 2026-11-08T23:59:00\n"), IDS)
    assert "(got 2026-11-08T23:59:00)" in str(e.value)


def test_a_flood_of_problems_is_cut(tmp_path):
    text = "[exercises.day45-attention.visibility.checks]\n"
    text += "".join(f"c{i} = 'x'\n" for i in range(100))
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, text), IDS)
    lines = str(e.value).splitlines()
    assert len(lines) == 21 and lines[-1].endswith("... and 80 more")


def test_a_missing_file_is_a_policy_error(tmp_path):
    with pytest.raises(PolicyError, match="cannot be read"):
        load_policy(tmp_path / "nope.toml", IDS)


@pytest.mark.parametrize(
    "late, bad",
    [
        ("{ grace_minutes = -1 }", "grace_minutes: must be at least 0"),
        ("{ max_penalty = 2 }", "max_penalty: must be between 0 and 1"),
    ],
)
def test_late_policy_bounds(tmp_path, late, bad):
    with pytest.raises(PolicyError, match=bad):
        load_policy(write(tmp_path, f"[exercises.day45-attention]\nlate = {late}\n"), IDS)


@pytest.mark.parametrize(
    "rate, bad",
    [
        ("{ capacity = 0, refill_minutes = 60 }", "capacity: must be at least 1"),
        ("{ capacity = 3, refill_minutes = 0 }", "refill_minutes: must be more than 0"),
        ("{ capacity = 3 }", "rate.refill_minutes: missing"),
    ],
)
def test_rate_policy_bounds(tmp_path, rate, bad):
    with pytest.raises(PolicyError, match=bad):
        load_policy(write(tmp_path, f"[exercises.day45-attention]\nrate = {rate}\n"), IDS)


@pytest.mark.parametrize(
    "text, bad",
    [
        ("late_days = true\n", "late_days: Input should be a valid integer"),
        (
            "[exercises.day45-attention]\nlate = { penalty_per_day = '0.1' }\n",
            "penalty_per_day: Input should be",
        ),
        (
            "[exercises.day45-attention]\nrate = { capacity = 2.5, refill_minutes = 60 }\n",
            "capacity: Input should be",
        ),
        ("exercises = 3\n", "exercises: Input should be a valid dictionary"),
    ],
)
def test_values_of_the_wrong_type_are_refused_not_converted(tmp_path, text, bad):
    with pytest.raises(PolicyError, match=bad):
        load_policy(write(tmp_path, text), IDS)


def test_every_problem_is_named_at_once(tmp_path):
    text = "late_days = -1\n[exercises.day45-attention]\ncounts = 'first'\n"
    with pytest.raises(PolicyError) as e:
        load_policy(write(tmp_path, text), IDS)
    lines = str(e.value).splitlines()
    assert len(lines) == 2 and "late_days" in lines[0] and "counts" in lines[1]


# -- deadlines and extensions -----------------------------------------------------------------------


def test_without_an_extension_the_exercise_dates_apply():
    assert deadlines(policy(), EX, "alice", {}) == Deadlines(OPENS, DUE, CLOSES)
    assert deadlines(policy(), "day48-decoder", "alice", {}) == Deadlines(None, None, None)


def test_an_extension_moves_due_and_closes():
    new_due, new_closes = DUE + timedelta(days=2), CLOSES + timedelta(days=2)
    d = deadlines(policy(), EX, "alice", {("alice", EX): (new_due, new_closes)})
    assert d == Deadlines(OPENS, new_due, new_closes)
    assert deadlines(policy(), EX, "bob", {("alice", EX): (new_due, new_closes)}) == Deadlines(
        OPENS, DUE, CLOSES
    )


def test_an_extension_past_closes_moves_closes_to_the_new_due():
    past_closes = CLOSES + timedelta(days=3)
    d = deadlines(policy(), EX, "alice", {("alice", EX): (past_closes, None)})
    assert d.due == past_closes and d.closes == past_closes
    assert admit_now(policy(), past_closes - SECOND, extensions={("alice", EX): (past_closes, None)}).admitted
    # and closes is never before due, even when the extension names an earlier one
    d = deadlines(policy(), EX, "alice", {("alice", EX): (past_closes, CLOSES)})
    assert d.closes == past_closes


def test_an_extension_without_closes_keeps_the_exercise_closes():
    d = deadlines(policy(), EX, "alice", {("alice", EX): (DUE + HOUR, None)})
    assert d == Deadlines(OPENS, DUE + HOUR, CLOSES)


def test_the_gradebooks_extension_wins_over_the_files():
    p = CoursePolicy.model_validate(
        {
            "exercises": {EX: {"due": DUE, "closes": CLOSES}},
            "extensions": [{"learner": "alice", "exercise": EX, "due": DUE + HOUR}],
        }
    )
    assert deadlines(p, EX, "alice", {}).due == DUE + HOUR
    assert deadlines(p, EX, "alice", {("alice", EX): (DUE + 2 * HOUR, None)}).due == DUE + 2 * HOUR


# -- lateness -----------------------------------------------------------------------------------------

D = Deadlines(OPENS, DUE, CLOSES)


@pytest.mark.parametrize(
    "after, days, penalty",
    [
        (-SECOND, 0, 0.0),
        (timedelta(0), 0, 0.0),  # exactly at due
        (15 * MINUTE, 0, 0.0),  # the last moment of grace
        (15 * MINUTE + SECOND, 1, 0.1),  # one second after grace
        (15 * MINUTE + timedelta(days=1), 1, 0.1),
        (15 * MINUTE + timedelta(days=1) + SECOND, 2, 0.2),
        (timedelta(days=4, hours=23), 5, 0.5),
        (timedelta(days=30), 30, 0.5),  # the cap
    ],
)
def test_lateness_grace_days_and_cap(after, days, penalty):
    late = lateness(policy(), EX, DUE + after, D, 0)
    assert late.days == days and late.penalty == pytest.approx(penalty)
    assert late.minutes == pytest.approx(max(after / MINUTE, 0))


def test_spent_late_days_move_the_due_for_lateness():
    assert lateness(policy(), EX, DUE + timedelta(hours=30), D, 2).days == 0
    assert lateness(policy(), EX, DUE + timedelta(hours=30), D, 1).days == 1


def test_no_due_means_never_late():
    assert lateness(policy(), "day48-decoder", DUE, Deadlines(None, None, None), 0) == Lateness(0.0, 0, 0.0)


@settings(max_examples=200, deadline=None)
@given(
    a=st.integers(min_value=-10_000, max_value=100_000),
    b=st.integers(min_value=-10_000, max_value=100_000),
    per_day=st.floats(min_value=0, max_value=1),
    cap=st.floats(min_value=0, max_value=1),
    grace=st.integers(min_value=0, max_value=600),
)
def test_penalty_is_monotone_in_lateness_and_within_the_cap(a, b, per_day, cap, grace):
    p = policy(late=dict(grace_minutes=grace, penalty_per_day=per_day, max_penalty=cap))
    early, late = sorted((a, b))
    pe = lateness(p, EX, DUE + early * MINUTE, D, 0).penalty
    pl = lateness(p, EX, DUE + late * MINUTE, D, 0).penalty
    assert 0 <= pe <= pl <= cap


# -- admission: open, closed ----------------------------------------------------------------------------


def test_before_opens_is_not_open_until_opens():
    a = admit_now(policy(), OPENS - SECOND)
    assert (a.admitted, a.reason, a.retry_at) == (False, "not-open", OPENS)
    assert "this exercise opens at 2026-11-01 23:59 +08:00" == a.message  # the course's clock
    assert admit_now(policy(), OPENS).admitted


def test_after_closes_nothing_is_admitted_ever():
    assert admit_now(policy(), CLOSES).admitted
    a = admit_now(policy(), CLOSES + SECOND)
    assert (a.admitted, a.reason, a.retry_at) == (False, "closed", None)
    assert "2026-11-15 23:59 +08:00" in a.message
    a = admit_now(policy(), CLOSES + SECOND, use=True, left=100)
    assert a.reason == "closed" and a.late_days_spent == 0


def test_an_extension_reopens_a_closed_exercise_for_that_learner_only():
    ext = {("alice", EX): (CLOSES + timedelta(days=1), None)}
    assert admit_now(policy(), CLOSES + HOUR, extensions=ext).admitted
    assert admit_now(policy(), CLOSES + HOUR, extensions=ext, learner="bob").reason == "closed"


# -- the rate limit -----------------------------------------------------------------------------------


EARLY = DUE - timedelta(days=2)  # far from the due time: the deadline grant plays no part


def test_the_bucket_admits_capacity_then_refills_one_per_interval():
    p = policy()
    past = [PastUpload(EARLY)] * 3
    a = admit_now(p, EARLY + MINUTE, past)
    assert (a.admitted, a.reason, a.retry_at) == (False, "rate-limited", EARLY + HOUR)
    assert "2026-11-07 00:59 +08:00" in a.message
    assert not admit_now(p, EARLY + HOUR - SECOND, past).admitted
    assert admit_now(p, EARLY + HOUR, past).admitted
    assert tokens_left(p, EX, "alice", EARLY + MINUTE, past) == (0, EARLY + HOUR)
    assert tokens_left(p, EX, "alice", EARLY + HOUR, past) == (1, EARLY + 2 * HOUR)
    assert tokens_left(p, EX, "alice", EARLY + 3 * HOUR, past) == (3, None)
    assert tokens_left(p, EX, "alice", EARLY, []) == (3, None)


def test_a_refunded_upload_gives_the_token_back():
    p = policy()
    past = [PastUpload(EARLY)] * 2 + [PastUpload(EARLY, refunded=True)]
    assert admit_now(p, EARLY + MINUTE, past).admitted
    assert tokens_left(p, EX, "alice", EARLY + MINUTE, past)[0] == 1
    past = [PastUpload(EARLY)] * 3
    assert not admit_now(p, EARLY + MINUTE, past).admitted


def test_the_bucket_is_per_exercise():
    p = policy()
    p = p.model_copy(update={"exercises": {**p.exercises, "day45-quiz": p.exercises[EX]}})
    past = [PastUpload(EARLY)] * 3  # alice's uploads of day45-attention
    assert admit(
        p, "day45-quiz", "alice", EARLY, [], extensions={}, late_days_left=0, use_late_day=False
    ).admitted
    assert not admit_now(p, EARLY + MINUTE, past).admitted


def test_the_deadline_grant_never_locks_out_just_before_due():
    """Three uploads 61 minutes before due: the bucket's next token comes a minute before due.
    In the last refill interval before due the learner gets one submission at once, whenever
    in it they send it, and only one."""
    p = policy()
    past = [PastUpload(DUE - 61 * MINUTE)] * 3
    assert tokens_left(p, EX, "alice", DUE - 30 * MINUTE, past) == (0, DUE - MINUTE)
    granted = admit_now(p, DUE - 30 * MINUTE, past)
    assert granted.admitted
    assert admit_now(p, DUE - HOUR, past).admitted  # the grant's first moment
    assert admit_now(p, DUE, past).admitted  # and its last
    again = admit_now(p, DUE - 20 * MINUTE, [*past, PastUpload(DUE - 30 * MINUTE)])
    assert not again.admitted and again.reason == "rate-limited"
    assert again.retry_at == DUE + 59 * MINUTE  # the grant took a token: the bucket is behind
    after = [*past, PastUpload(DUE - 30 * MINUTE)]
    assert tokens_left(p, EX, "alice", DUE - 20 * MINUTE, after) == (0, DUE + 59 * MINUTE)
    assert tokens_left(p, EX, "alice", DUE - 20 * MINUTE, after, due=DUE) == (0, DUE + 59 * MINUTE)
    assert tokens_left(p, EX, "alice", DUE - 30 * MINUTE, past, due=DUE) == (1, DUE - MINUTE)


def test_the_grant_is_spent_by_any_upload_in_the_last_interval():
    p = policy()
    past = [PastUpload(DUE - 50 * MINUTE)] * 3
    a = admit_now(p, DUE - MINUTE, past)
    assert not a.admitted and a.retry_at == DUE + 10 * MINUTE
    # a refunded one does not spend it
    past = [PastUpload(DUE - 61 * MINUTE)] * 3 + [PastUpload(DUE - 50 * MINUTE, refunded=True)]
    assert admit_now(p, DUE - MINUTE, past).admitted


def test_retry_at_is_the_grants_start_when_that_comes_first():
    p = policy()
    past = [PastUpload(DUE - 75 * MINUTE)] * 3  # the next token: DUE - 15 min
    a = admit_now(p, DUE - 70 * MINUTE, past)
    assert a.reason == "rate-limited" and a.retry_at == DUE - HOUR
    assert "2026-11-08 22:59 +08:00" in a.message
    assert admit_now(p, DUE - HOUR, past).admitted


def test_the_deadline_grant_follows_the_learners_own_due():
    p = policy()
    new_due = DUE + timedelta(days=1)
    past = [PastUpload(new_due - 61 * MINUTE)] * 3
    ext = {("alice", EX): (new_due, None)}
    assert admit_now(p, new_due - 10 * MINUTE, past, extensions=ext).admitted
    assert not admit_now(p, new_due - 10 * MINUTE, past, learner="bob").admitted


def test_no_retry_time_when_the_next_token_comes_after_closes():
    p = policy(closes=DUE)
    past = [PastUpload(DUE - 30 * MINUTE)] * 3
    a = admit_now(p, DUE - 10 * MINUTE, past)
    assert (a.admitted, a.reason, a.retry_at) == (False, "rate-limited", None)
    assert "closes at 2026-11-08 23:59 +08:00" in a.message


@settings(max_examples=200, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=240), min_size=1, max_size=30),
    capacity=st.integers(min_value=1, max_value=4),
    refill=st.integers(min_value=1, max_value=120),
    start=st.integers(min_value=-600, max_value=60),
)
def test_the_bucket_never_admits_more_than_capacity_plus_refills(gaps, capacity, refill, start):
    """Attempts at arbitrary times around the due; in every window [a, b] of the admitted ones,
    at most capacity + (b - a) / refill + 1 (the deadline grant)."""
    p = policy(rate=dict(capacity=capacity, refill_minutes=refill), closes=None)
    now = DUE + start * MINUTE
    admitted: list[datetime] = []
    for gap in gaps:
        now += gap * MINUTE
        a = admit_now(p, now, [PastUpload(t) for t in admitted])
        if a.admitted:
            admitted.append(now)
        elif a.reason == "rate-limited":
            assert a.retry_at is not None and a.retry_at > now
    for i, first in enumerate(admitted):
        for j in range(i, len(admitted)):
            elapsed = (admitted[j] - first) / (refill * MINUTE)
            assert j - i + 1 <= capacity + elapsed + 1


@settings(max_examples=100, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=240), min_size=1, max_size=20),
    capacity=st.integers(min_value=1, max_value=4),
    refill=st.integers(min_value=1, max_value=120),
)
def test_retry_at_is_when_the_next_submission_is_taken(gaps, capacity, refill):
    p = policy(rate=dict(capacity=capacity, refill_minutes=refill), closes=None)
    now, admitted = DUE - timedelta(days=1), []
    for gap in gaps:
        now += gap * MINUTE
        a = admit_now(p, now, [PastUpload(t) for t in admitted])
        if a.admitted:
            admitted.append(now)
        else:
            past = [PastUpload(t) for t in admitted]
            assert not admit_now(p, a.retry_at - SECOND, past).admitted
            assert admit_now(p, a.retry_at, past).admitted


@settings(max_examples=200, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=240), min_size=1, max_size=20),
    capacity=st.integers(min_value=1, max_value=4),
    refill=st.integers(min_value=1, max_value=120),
    start=st.integers(min_value=-600, max_value=0),
)
def test_tokens_left_says_what_admit_will_do(gaps, capacity, refill, start):
    p = policy(rate=dict(capacity=capacity, refill_minutes=refill), closes=None)
    now, admitted = DUE + start * MINUTE, []
    for gap in gaps:
        now += gap * MINUTE
        past = [PastUpload(t) for t in admitted]
        left, nxt = tokens_left(p, EX, "alice", now, past, due=DUE)
        a = admit_now(p, now, past)
        assert a.admitted == (left > 0)
        if not a.admitted:
            assert nxt == a.retry_at
        else:
            admitted.append(now)


# -- late days ----------------------------------------------------------------------------------------


def test_late_days_are_spent_only_with_consent():
    now = DUE + timedelta(hours=30)
    a = admit_now(policy(), now, use=False)
    assert a.admitted and a.late_days_spent == 0
    a = admit_now(policy(), now, use=True, left=2)
    assert a.admitted and a.late_days_spent == 2
    assert lateness(policy(), EX, now, D, a.late_days_spent).on_time


def test_on_time_or_inside_grace_spends_nothing():
    assert admit_now(policy(), DUE - HOUR, use=True).late_days_spent == 0
    assert admit_now(policy(), DUE + 15 * MINUTE, use=True).late_days_spent == 0
    assert admit_now(policy(), DUE + 15 * MINUTE + SECOND, use=True).late_days_spent == 1


def test_not_enough_late_days_spends_nothing():
    now = DUE + timedelta(hours=30)
    a = admit_now(policy(), now, use=True, left=1)
    assert (a.admitted, a.reason, a.late_days_spent) == (False, "no-late-days", 0)
    assert a.retry_at == now  # the same files may go at once, without late days
    assert "2" in a.message and "1" in a.message
    assert admit_now(policy(), now, use=False, left=1).admitted


@settings(max_examples=200, deadline=None)
@given(
    minutes=st.integers(min_value=-3000, max_value=7 * 24 * 60),
    left=st.integers(min_value=0, max_value=10),
    grace=st.integers(min_value=0, max_value=120),
)
def test_spent_late_days_make_the_upload_on_time_and_never_overdraw(minutes, left, grace):
    p = policy(late=dict(grace_minutes=grace, penalty_per_day=0.1, max_penalty=0.5))
    now = DUE + minutes * MINUTE
    a = admit_now(p, now, use=True, left=left)
    without = lateness(p, EX, now, D, 0)
    if a.admitted:
        assert 0 <= a.late_days_spent <= left
        assert a.late_days_spent == without.days  # whole days, no more than it takes
        assert lateness(p, EX, now, D, a.late_days_spent).on_time
    else:
        assert a.reason == "no-late-days" and a.late_days_spent == 0 and without.days > left
    assert admit_now(p, now, use=False, left=left).late_days_spent == 0


def test_late_days_follow_an_extension():
    ext = {("alice", EX): (DUE + timedelta(days=1), None)}
    assert admit_now(policy(), DUE + timedelta(hours=30), use=True, extensions=ext).late_days_spent == 1


# -- which upload counts -------------------------------------------------------------------------------


@dataclass
class Up:
    id: int
    received_at: datetime
    score: float | None = 10.0
    late_days_spent: int = 0
    chosen: bool = False

    @property
    def grade(self) -> Grade | None:
        if self.score is None:
            return None
        return Grade(exercise=EX, passed=self.score == 10, score=self.score, max_score=10)


def counts(rule: str, uploads) -> int | None:
    return counted(policy(counts=rule), EX, uploads, D)


def test_last_on_time_is_the_last_graded_upload_before_due():
    ups = [Up(1, DUE - HOUR, 5), Up(2, DUE - MINUTE, 6), Up(3, DUE + HOUR, 10), Up(4, DUE - SECOND, None)]
    assert counts("last-on-time", ups) == 2


def test_last_on_time_counts_grace_and_spent_late_days_as_on_time():
    ups = [Up(1, DUE - HOUR), Up(2, DUE + 10 * MINUTE)]
    assert counts("last-on-time", ups) == 2
    ups = [Up(1, DUE - HOUR), Up(2, DUE + timedelta(hours=20), late_days_spent=1)]
    assert counts("last-on-time", ups) == 2
    ups = [Up(1, DUE - HOUR), Up(2, DUE + timedelta(hours=20))]
    assert counts("last-on-time", ups) == 1


def test_last_on_time_falls_back_to_the_last_graded():
    ups = [Up(1, DUE + HOUR, 3), Up(2, DUE + 2 * HOUR, 4), Up(3, DUE + 3 * HOUR, None)]
    assert counts("last-on-time", ups) == 2
    assert counts("last-on-time", [Up(1, DUE, None)]) is None
    assert counts("best", []) is None


def test_best_is_the_highest_score_after_the_penalty():
    ups = [Up(1, DUE - HOUR, 7), Up(2, DUE + timedelta(days=2), 10), Up(3, DUE + HOUR, None)]
    assert counts("best", ups) == 2  # two days late: 10 - 20% of 10 = 8 > 7
    ups = [Up(1, DUE - HOUR, 8.5), Up(2, DUE + timedelta(days=2), 10)]
    assert counts("best", ups) == 1
    ups = [Up(1, DUE - HOUR, 8), Up(2, DUE + timedelta(days=2), 10)]
    assert counts("best", ups) == 2  # equals: the later one


def test_chosen_is_the_learners_choice_else_last_on_time():
    ups = [Up(1, DUE - HOUR, 5, chosen=True), Up(2, DUE - MINUTE, 9)]
    assert counts("chosen", ups) == 1
    ups = [Up(1, DUE - HOUR, 5), Up(2, DUE - MINUTE, 9, chosen=True), Up(3, DUE - SECOND, None, chosen=True)]
    assert counts("chosen", ups) == 2
    ups = [Up(1, DUE - HOUR, 5), Up(2, DUE - MINUTE, 9)]
    assert counts("chosen", ups) == 2


# -- what a learner may see now ----------------------------------------------------------------------

SECRET = "PLANTED-SECRET-7f3a"


def grade_with(hidden_id: str = "mha-has-no-future-leak") -> Grade:
    return Grade.model_validate(
        dict(
            exercise=EX,
            passed=False,
            score=8.0,
            max_score=10.0,
            symptoms=["future-leak"],
            checks=[
                dict(
                    id="softmax-matches-reference",
                    passed=True,
                    points=2,
                    max_points=2,
                    rule="numerical-stability",
                    day=45,
                    title="softmax",
                ),
                dict(
                    id=hidden_id,
                    passed=False,
                    points=0,
                    max_points=2,
                    rule="causal-mask",
                    day=44,
                    title="no future leak",
                    title_i18n={"zh-TW": "不看未來"},
                    message=f"position 3 sees {SECRET}",
                    symptoms=["future-leak"],
                    evidence={"key": SECRET},
                    curve=dict(losses=[1.0, 0.5], ln_v=4.0, floor=0.1),
                ),
            ],
            diagnosis=[
                dict(rule="causal-mask", day=44, check=hidden_id, message=f"mask {SECRET}"),
                dict(rule="numerical-stability", day=45, check="softmax-matches-reference", message="fine"),
            ],
            output=dict(start=f"printed {SECRET}"),
        )
    )


def view(grade, p, *, now, d=D, released_at=None, late=ON_TIME):
    return visible_view(grade, p, EX, now=now, deadlines=d, released_at=released_at, lateness=late)


AFTER_DUE = {"checks": {"mha-has-no-future-leak": "after_due"}}


def test_before_due_an_after_due_check_shows_title_rule_and_pass_fail_only():
    g = grade_with()
    v = view(g, policy(visibility=AFTER_DUE), now=DUE - SECOND)
    c = v.checks[1]
    assert (c.id, c.title, c.title_i18n, c.rule, c.day, c.passed, c.points, c.max_points) == (
        "mha-has-no-future-leak",
        "no future leak",
        {"zh-TW": "不看未來"},
        "causal-mask",
        44,
        False,
        0,
        2,
    )
    assert (c.message, c.message_id, c.message_params, c.symptoms, c.evidence, c.curve) == (
        "",
        None,
        {},
        [],
        {},
        None,
    )
    assert [d.check for d in v.diagnosis] == ["softmax-matches-reference"]
    assert v.symptoms == [] and not v.output
    assert SECRET not in v.model_dump_json()
    assert v.checks[0] == g.checks[0]
    notice = v.warnings[-1]
    assert "until the due time, 2026-11-08 23:59 +08:00" in notice.message and notice.message_id
    assert not g.warnings
    assert g == grade_with()  # the stored grade is untouched


def test_a_diagnosis_naming_no_check_goes_while_any_check_is_hidden():
    g = grade_with()
    g = g.model_copy(
        update={"diagnosis": [*g.diagnosis, Diagnosis(rule="causal-mask", day=44, message=SECRET)]}
    )
    assert SECRET not in view(g, policy(visibility=AFTER_DUE), now=DUE - SECOND).model_dump_json()
    assert view(g, policy(visibility=AFTER_DUE), now=DUE) == g


def test_at_due_an_after_due_check_shows_everything():
    g = grade_with()
    assert view(g, policy(visibility=AFTER_DUE), now=DUE) == g


def test_after_due_follows_the_learners_own_due():
    g = grade_with()
    late_due = Deadlines(OPENS, DUE + HOUR, CLOSES)
    assert SECRET not in view(g, policy(visibility=AFTER_DUE), now=DUE, d=late_due).model_dump_json()
    assert view(g, policy(visibility=AFTER_DUE), now=DUE + HOUR, d=late_due) == g


def test_after_release_waits_for_the_release():
    g = grade_with()
    p = policy(visibility={"default": "after_release"})
    assert SECRET not in view(g, p, now=CLOSES).model_dump_json()
    assert SECRET not in view(g, p, now=CLOSES, released_at=CLOSES + SECOND).model_dump_json()
    assert view(g, p, now=CLOSES, released_at=CLOSES) == g


def test_with_no_due_an_after_due_check_waits_for_the_release():
    g = grade_with()
    none = Deadlines(None, None, None)
    assert SECRET not in view(g, policy(visibility=AFTER_DUE), now=CLOSES, d=none).model_dump_json()
    assert view(g, policy(visibility=AFTER_DUE), now=CLOSES, d=none, released_at=CLOSES) == g


@pytest.mark.parametrize(
    "visibility, before_due, at_due, released",
    [
        ("visible", True, True, True),
        ("after_due", False, True, True),
        ("after_release", False, False, True),
        ("hidden", False, False, False),
    ],
)
def test_shown_by_visibility(visibility, before_due, at_due, released):
    from grader.policy.course import shown

    assert shown(visibility, now=DUE - SECOND, deadlines=D, released_at=None) is before_due
    assert shown(visibility, now=DUE, deadlines=D, released_at=None) is at_due
    assert shown(visibility, now=CLOSES, deadlines=Deadlines(None, None, None), released_at=OPENS) is released


def test_a_hidden_check_never_shows_in_full_released_or_not():
    g = grade_with()
    p = policy(visibility={"checks": {"mha-has-no-future-leak": "hidden"}})
    for now, released_at in [(DUE - SECOND, None), (CLOSES, CLOSES), (CLOSES + timedelta(days=30), OPENS)]:
        v = view(g, p, now=now, released_at=released_at)
        assert SECRET not in v.model_dump_json()
        assert (v.checks[1].title, v.checks[1].passed, v.checks[1].points) == ("no future leak", False, 0)
        assert v.checks[0] == g.checks[0]
    notice = v.warnings[-1]
    assert "1 check(s)" in notice.message and "the instructor keeps their details" in notice.message
    assert "until" not in notice.message  # no moment will show it: the notice promises none


def test_the_notice_names_the_release_when_a_check_waits_for_it():
    v = view(grade_with(), policy(visibility={"default": "after_release"}), now=DUE)
    assert "2 check(s)" in v.warnings[-1].message and "releases" in v.warnings[-1].message


@pytest.mark.parametrize(
    "minutes, en, zh",
    [
        (0.01, "1 min", "1 分鐘"),
        (59, "59 min", "59 分鐘"),
        (61, "1 h 1 min", "1 小時 1 分鐘"),
        (60 * 24 + 60 * 6 + 1, "1 d 6 h 1 min", "1 天 6 小時 1 分鐘"),
    ],
)
def test_lateness_reads_as_days_hours_and_minutes(minutes, en, zh):
    from grader.policy.course import duration

    assert duration(minutes) == en and duration(minutes).render("zh-TW") == zh


def test_a_penalty_lowers_the_score_and_says_so():
    g = grade_with()
    late = lateness(policy(), EX, DUE + timedelta(hours=30), D, 0)
    v = view(g, policy(), now=CLOSES, late=late)
    assert late.penalty == pytest.approx(0.2)
    assert v.score == pytest.approx(6.0) and g.score == 8.0
    assert Grade.model_validate_json(v.model_dump_json()) == v
    note = v.warnings[-1]
    assert (
        note.message_id is not None
        and "2 started day(s) late" in note.message
        and "cost 2 of 10" in note.message
    )
    assert "submitted 1 d 6 h 0 min after the due time" in note.message
    from grader.locale import render

    assert "遲交扣分 20%" in render(note.message, "zh-TW", note.message_id, note.message_params)
    # never below 0
    poor = g.model_copy(update={"score": 1.0})
    assert view(poor, policy(), now=CLOSES, late=Lateness(3000.0, 5, 0.5)).score == 0.0


@settings(max_examples=100, deadline=None)
@given(
    checks=st.lists(
        st.tuples(st.sampled_from(["visible", "after_due", "after_release", "hidden"]), st.booleans()),
        min_size=1,
        max_size=6,
    ),
    before_due=st.booleans(),
    released=st.booleans(),
)
def test_visible_view_never_leaks_a_hidden_check(checks, before_due, released):
    grade = Grade(
        exercise=EX,
        passed=False,
        score=1,
        max_score=len(checks),
        checks=[
            CheckResult(
                id=f"c{i}",
                passed=ok,
                points=float(ok),
                max_points=1,
                rule="causal-mask",
                day=44,
                message=f"{SECRET}-m{i}",
                evidence={"k": f"{SECRET}-e{i}"},
                symptoms=["future-leak"],
                curve=TrainingCurve(losses=[float(i)], ln_v=1.0, floor=0.0),
                caused_by=[f"{SECRET}-r{i}"],
            )
            for i, (_, ok) in enumerate(checks)
        ],
        diagnosis=[
            Diagnosis(rule="causal-mask", day=44, check=f"c{i}", message=f"{SECRET}-d{i}")
            for i in range(len(checks))
        ],
        output=Printed(start=f"{SECRET}-out"),
    )
    p = policy(visibility={"checks": {f"c{i}": vis for i, (vis, _) in enumerate(checks)}})
    now = DUE - SECOND if before_due else DUE
    v = view(grade, p, now=now, released_at=now if released else None)
    text = v.model_dump_json()
    hidden = [
        i
        for i, (vis, _) in enumerate(checks)
        if (vis == "after_due" and before_due) or (vis == "after_release" and not released) or vis == "hidden"
    ]
    for i in hidden:
        assert f"{SECRET}-m{i}" not in text and f"{SECRET}-e{i}" not in text and f"{SECRET}-d{i}" not in text
        assert f"{SECRET}-r{i}" not in text  # which checks it builds on: what it found, too
        assert v.checks[i].curve is None and v.checks[i].passed == checks[i][1]
    if hidden:
        assert f"{SECRET}-out" not in text
    else:
        assert v == grade
    assert [c.id for c in v.checks] == [c.id for c in grade.checks]
    assert v.score == grade.score
    assert Grade.model_validate_json(v.model_dump_json()) == v  # what the API sends reads back the same


def test_everything_visible_and_on_time_is_the_identity():
    g = grade_with()
    assert view(g, policy(), now=DUE - timedelta(days=3)) == g
    assert view(g, load_policy(None, IDS), now=DUE) == g


@pytest.mark.parametrize("fmt", ["text", "json", "html", "markdown"])
@pytest.mark.parametrize("lang", ["en", "zh-TW"])
def test_no_report_of_the_view_contains_what_a_hidden_check_found(fmt, lang):
    from reports import render

    v = view(grade_with(), policy(visibility=AFTER_DUE), now=DUE - SECOND)
    out = render(v, fmt, lang=lang)
    assert SECRET not in out
    assert "softmax" in out  # the visible check is still there


# -- sealed: not even pass/fail before the due ---------------------------------------------------------

SEALED = {"checks": {"mha-has-no-future-leak": "sealed"}}


def quiz_grade(answers: list[bool]) -> Grade:
    """A multiple-choice quiz's grade: one check a question, 1 point each."""
    checks = [
        CheckResult(id=f"q{i}", passed=ok, points=float(ok), max_points=1, rule="causal-mask", day=44,
                    title=f"question {i}", message=f"{SECRET}-{i}")
        for i, ok in enumerate(answers)
    ]  # fmt: skip
    return Grade(exercise=EX, passed=all(answers), score=sum(answers), max_score=len(answers), checks=checks)


def test_before_due_a_sealed_check_is_not_in_the_grade_at_all():
    g = grade_with()
    g.checks[0].caused_by = ["mha-has-no-future-leak"]  # a visible check built on the sealed one
    v = view(g, policy(visibility=SEALED), now=DUE - SECOND)
    assert [c.id for c in v.checks] == ["softmax-matches-reference"]
    assert v.checks[0].caused_by == []  # naming it as a root cause would say it failed
    assert (v.score, v.max_score, v.passed) == (8.0, 8.0, True)  # 8 of 10, less the sealed 0 of 2
    # had it passed (2 more points), the learner's view is the same
    passed = g.model_copy(deep=True)
    passed.checks[1] = passed.checks[1].model_copy(update={"passed": True, "points": 2.0})
    passed.score = 10.0
    assert view(passed, policy(visibility=SEALED), now=DUE - SECOND) == v
    assert "mha-has-no-future-leak" not in v.model_dump_json() and SECRET not in v.model_dump_json()
    assert "no future leak" not in v.model_dump_json()
    notice = v.warnings[-1]
    assert "1 check(s) are sealed until the due time, 2026-11-08 23:59 +08:00" in notice.message
    assert notice.message_id is not None
    assert view(g, policy(visibility=SEALED), now=DUE) == g  # at the due: everything


def test_a_sealed_quiz_tells_nothing_that_tells_a_right_answer_from_a_wrong_one():
    p = policy(visibility={"default": "sealed"})
    seen = set()
    for answers in ([True, True, True], [True, False, True], [False, False, False]):
        v = view(quiz_grade(answers), p, now=DUE - SECOND)
        assert (v.checks, v.score, v.max_score, v.passed) == ([], 0.0, 0.0, False)
        for fmt in ("text", "json", "html", "markdown"):
            from reports import render

            seen.add(render(v, fmt))
    assert len(seen) == 4  # per format, the same report whatever was answered
    released = view(
        quiz_grade([True, False]), p, now=CLOSES, d=Deadlines(None, None, None), released_at=OPENS
    )
    assert released.score == 1 and [c.passed for c in released.checks] == [True, False]


def test_a_late_penalty_of_a_sealed_grade_is_of_what_is_shown():
    late = lateness(policy(), EX, DUE + timedelta(hours=30), D, 0)
    v = view(grade_with(), policy(visibility=SEALED), now=DUE - SECOND, late=late)
    assert v.score == pytest.approx(8.0 - 0.2 * 8.0) and "cost 1.6 of 8 points" in v.warnings[-1].message


def test_best_says_the_last_on_time_while_a_check_is_sealed():
    from grader.policy.course import sealed_now

    ups = [Up(1, DUE - HOUR, 9), Up(2, DUE - MINUTE, 5)]
    p = policy(counts="best", visibility={"default": "sealed"})
    assert counted(p, EX, ups, D) == 1 and counted(p, EX, ups, D, sealed=True) == 2
    assert sealed_now(p, EX, now=DUE - SECOND, deadlines=D, released_at=None)
    assert not sealed_now(p, EX, now=DUE, deadlines=D, released_at=None)
    assert not sealed_now(policy(counts="best"), EX, now=DUE - SECOND, deadlines=D, released_at=None)


ALICE_AND_PROF = (("alice", "student"), ("prof", "instructor"))


def test_the_server_applies_sealed_wherever_a_learner_reads_a_grade(tmp_path):
    """The JSON API (a submission, the list, the status, a report) and the home page, on a real
    Service and app (no jail: the grades are recorded as the dispatcher records them)."""
    from fastapi.testclient import TestClient

    from grader.service.app import create_app
    from grader.service.service import Service
    from grader.store.accounts import issue_token
    from grader.store.gradebook import Incoming, Outcome

    now = DUE - HOUR
    sealed = "mha-has-no-future-leak"
    course = write(
        tmp_path,
        f"[exercises.{EX}]\ndue = {DUE.isoformat()}\ncounts = 'best'\n"
        f"visibility = {{ checks = {{ {sealed} = 'sealed' }} }}\n",
    )
    service = Service.open(str(tmp_path / "g.db"), course, clock=lambda: now)
    try:
        tokens = {who: issue_token(service.gradebook, who, role=role) for who, role in ALICE_AND_PROF}
        failed, passed = grade_with(), grade_with()
        passed.checks[1] = passed.checks[1].model_copy(update={"passed": True, "points": 2.0})
        passed.score = 10.0
        ids = []
        for i, grade in enumerate((passed, failed)):  # the best first, then a worse one
            upload = service.queue.submit(
                "alice", EX, service.versions[EX], Incoming("alice", {"attention.py": b"# %d\n" % i}),
                received_at=now - timedelta(minutes=10 - i),
            )  # fmt: skip
            (lease,) = service.queue.lease()
            service.queue.complete(lease, Outcome("graded", grade))
            ids.append(upload.id)
        app = create_app(service)

        def get(who: str, path: str, **params):
            with TestClient(app) as web:
                r = web.get(path, params=params, headers={"Authorization": f"Bearer {tokens[who]}"})
            assert r.status_code == 200, r.text
            return r.text

        seen = [get("alice", f"/api/v1/submissions/{i}") for i in ids]
        seen += [
            get("alice", "/api/v1/submissions", exercise=EX),
            get("alice", "/api/v1/status", exercise=EX),
        ]
        seen += [
            get("alice", f"/api/v1/submissions/{i}/report", format=f) for i in ids for f in ("text", "html")
        ]
        from test_pages import form_csrf

        with TestClient(app, follow_redirects=False) as browser:
            form = browser.get("/")
            browser.post("/login", data={"csrf": form_csrf(form.text), "token": tokens["alice"]})
            pages = [browser.get(path) for path in ("/", *(f"/submissions/{i}" for i in ids))]
        assert all(page.status_code == 200 and "alice" in page.text for page in pages)
        for text in [*seen, *(page.text for page in pages)]:
            assert sealed not in text and "no future leak" not in text and SECRET not in text, text[:3000]
        best, worse = (json.loads(s) for s in seen[:2])
        assert best["score"] == worse["score"] == 8.0 and best["max_score"] == 8.0  # alike: 10 or 8 of 10
        assert not best["counted"] and worse["counted"]  # 'best' says the last until the due
        listed = json.loads(seen[2])["items"]
        assert [(s["score"], s["passed"]) for s in listed] == [(None, None), (None, None)]
        assert json.loads(seen[3])[0]["score"] == 8.0
        assert sealed in get("prof", f"/api/v1/submissions/{ids[1]}")  # the instructor sees it all
        now = DUE  # from the due, everything
        assert json.loads(get("alice", f"/api/v1/submissions/{ids[0]}"))["score"] == 10.0
        assert sealed in get("alice", f"/api/v1/submissions/{ids[1]}")
    finally:
        service.close()
