"""The course policy: when an exercise opens, is due and closes; what lateness costs; how often a
learner may submit; which upload counts; what a learner may see of a grade now.

Pure functions over pydantic data and datetimes: no database, no HTTP, no clock of its own (`now`
is always a parameter; the server's clock is the only clock). course.toml is read once, by
`load_policy`, and validated strictly: unknown keys are refused at every level and every time
carries a UTC offset.

The course names itself and its clock: `name` and `timezone` (an IANA name, `Asia/Taipei`;
default UTC). Times in learner-facing messages are in that zone with its offset, as
grader.policy.clock.shown writes every time a person reads (`2026-12-10 23:59 +08:00`).
"""

from __future__ import annotations

import ast
import difflib
import itertools
import math
import tomllib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol
from zoneinfo import ZoneInfo

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from grader.errors import ExerciseFileError, UsageError, shown_path
from grader.locale import Message, msg
from grader.models import CheckResult, Grade, Note, Printed
from grader.policy import clock

Visibility = Literal["visible", "after_due", "after_release", "hidden", "sealed"]
# The same moments in Gradescope's results.json (its "Controlling Test Case Visibility"): the one
# place a visibility is translated, for the autograder (grader/course/autograder.py)
GradescopeVisibility = Literal["visible", "after_due_date", "after_published", "hidden"]
GRADESCOPE_VISIBILITY: dict[Visibility, GradescopeVisibility] = {
    "visible": "visible",
    "after_due": "after_due_date",
    "after_release": "after_published",
    "hidden": "hidden",
    # Gradescope hides an after_due_date test, its score included, until the due date
    "sealed": "after_due_date",
}
Counts = Literal["last-on-time", "best", "chosen"]
Extensions = Mapping[tuple[str, str], tuple[datetime, "datetime | None"]]

DAY = timedelta(days=1)
SHOWN_PROBLEMS = 20  # of a malformed course.toml, at once: enough to fix, not a flood


class PolicyError(UsageError):
    """course.toml is malformed (exit 2); the message names the file and the field path."""


# -- course.toml ------------------------------------------------------------------------------


def _aware(value: Any) -> Any:
    """A time with a UTC offset: a naive one would be read in the server's local zone."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("must be a date and time such as 2026-11-08T23:59:00+08:00") from None
    if not isinstance(value, datetime):
        raise ValueError("must be a date and time such as 2026-11-08T23:59:00+08:00")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            "needs a UTC offset (e.g. 2026-11-08T23:59:00+08:00 or ...Z): a time without one "
            "would be read in the server's own zone"
        )
    return value


def _between(low: float, high: float):
    def check(value: float) -> float:
        if not low <= value <= high:
            raise ValueError(f"must be between {low:g} and {high:g}")
        return value

    return AfterValidator(check)


def _at_least(low: float, strictly: bool = False):
    def check(value: float) -> float:
        if value < low or (strictly and value == low):
            raise ValueError(f"must be {'more than' if strictly else 'at least'} {low:g}")
        return value

    return AfterValidator(check)


def _learner_id(value: Any) -> Any:
    """A Canvas or Moodle id is a number: written unquoted, it is still that learner's id."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Time = Annotated[datetime, BeforeValidator(_aware)]
LearnerId = Annotated[str, BeforeValidator(_learner_id)]
Fraction = Annotated[float, _between(0, 1)]


class _Strict(BaseModel):
    # strict: TOML has types, so `late_days = true` or `penalty_per_day = "0.1"` is a mistake
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class LatePolicy(_Strict):
    """What lateness costs: nothing inside `grace_minutes` after due, then `penalty_per_day` of
    the exercise's points for every started day late, at most `max_penalty`."""

    grace_minutes: Annotated[float, _at_least(0)] = 0
    penalty_per_day: Fraction = 0
    max_penalty: Fraction = 1


class RatePolicy(_Strict):
    """A token bucket per learner and exercise: `capacity` submissions, one more every
    `refill_minutes`."""

    capacity: Annotated[int, _at_least(1)]
    refill_minutes: Annotated[float, _at_least(0, strictly=True)]

    @property
    def interval(self) -> timedelta:
        return timedelta(minutes=self.refill_minutes)


class VisibilityPolicy(_Strict):
    """When a learner sees a check's diagnosis: `default` for every check, `checks` by check id
    (each one of the exercise's checks: load_policy refuses any other). `visible` always;
    `after_due` from the learner's due; `after_release` once the instructor releases the
    exercise; `hidden` never (its title and result only; on Gradescope not even those); `sealed`
    nothing at all until the learner's due, not even pass/fail or points (a quiz's answers could
    be found from pass/fail alone), then everything."""

    default: Visibility = "visible"
    checks: dict[str, Visibility] = {}

    def of(self, check: str) -> Visibility:
        return self.checks.get(check, self.default)

    @property
    def seals(self) -> bool:
        """Does some check of the exercise wait `sealed`?"""
        return self.default == "sealed" or "sealed" in self.checks.values()


def _in_order(opens, due, closes) -> None:
    named = [(n, t) for n, t in (("opens", opens), ("due", due), ("closes", closes)) if t is not None]
    for (a, ta), (b, tb) in itertools.pairwise(named):
        if ta > tb:
            raise ValueError(
                f"{b} ({clock.shown(tb)}) is before {a} ({clock.shown(ta)}): opens <= due <= closes"
            )


class ExercisePolicy(_Strict):
    opens: Time | None = None
    due: Time | None = None
    closes: Time | None = None
    counts: Counts = "last-on-time"
    late: LatePolicy = LatePolicy()
    rate: RatePolicy | None = None
    visibility: VisibilityPolicy = VisibilityPolicy()

    @model_validator(mode="after")
    def _ordered(self):
        _in_order(self.opens, self.due, self.closes)
        return self


class Extension(_Strict):
    """One learner's own dates for one exercise (course.toml `[[extensions]]`)."""

    learner: LearnerId
    exercise: str
    due: Time
    closes: Time | None = None
    reason: str = ""

    @model_validator(mode="after")
    def _ordered(self):
        _in_order(None, self.due, self.closes)
        return self


def _zone_name(value: str) -> str:
    clock.zone(value)  # ValueError saying why it is not an IANA zone
    return value


COURSE_NAME_CHARS = 200


class CoursePolicy(_Strict):
    """course.toml. An exercise it does not name is open at all times, with no limits. `name` is
    the course's, as its pages show it; `timezone` the zone its times are shown in (IANA)."""

    name: Annotated[str, Field(max_length=COURSE_NAME_CHARS)] = ""
    timezone: Annotated[str, AfterValidator(_zone_name)] = clock.DEFAULT_ZONE
    late_days: Annotated[int, _at_least(0)] = 0
    exercises: dict[str, ExercisePolicy] = {}
    extensions: list[Extension] = []

    def exercise(self, exercise: str) -> ExercisePolicy:
        return self.exercises.get(exercise) or ExercisePolicy()

    @property
    def zone(self) -> ZoneInfo:
        return clock.zone(self.timezone)

    def shown(self, when: datetime) -> str:
        """A time as this course's learners are told it: grader.policy.clock.shown in its zone."""
        return clock.shown(when, self.zone)


def exercise_checks(exercise_id: str) -> frozenset[str]:
    """The check ids of an exercise, read without running anything (no pytest, no torch): a
    quiz's are its key's question ids; a code exercise's are its hidden tests marked
    `@check(...)` as grader.grading.runner.check_id names them (`test_` dropped, `_` written `-`), read
    from the files' syntax trees (tests/test_policy.py holds this to pytest's own collection)."""
    from grader.catalog.exercises import exercise_dir, load_exercise
    from grader.catalog.quiz import load_key

    if load_exercise(exercise_id).kind == "quiz":
        return frozenset(q.id for q in load_key(exercise_id))
    ids = set()
    for path in sorted((exercise_dir(exercise_id) / "hidden").rglob("test_*.py")):
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError) as exc:  # the exercise's bug: exit 2, naming the file
            raise ExerciseFileError(f"{shown_path(path)}: cannot be read as Python: {exc}") from None
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and _marked(node):
                ids.add(node.name.removeprefix("test_").replace("_", "-"))
    return frozenset(ids)


def _marked(node: ast.FunctionDef) -> bool:
    """Is this test decorated `@check(...)` (or `@pytest.mark.check(...)`)?"""
    for d in node.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if (isinstance(f, ast.Name) and f.id == "check") or (
            isinstance(f, ast.Attribute) and f.attr == "check"
        ):
            return True
    return False


def _closest(word: str, valid: Iterable[str]) -> str:
    """` (did you mean X?)` for the closest valid id, or nothing when none is close."""
    close = difflib.get_close_matches(word, list(valid), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def load_policy(
    path: Path | None,
    exercises: Iterable[str],
    checks: Callable[[str], Collection[str]] = exercise_checks,
) -> CoursePolicy:
    """course.toml at `path`, checked against the course's exercise ids and each exercise's
    check ids (`checks(exercise)`, read only for an exercise whose visibility names checks); None:
    everything open, no limits. Any problem is a PolicyError, one line per problem, naming the
    closest valid id."""
    if path is None:
        return CoursePolicy()
    shown = shown_path(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:  # its text gives the line and column
        raise PolicyError(f"{shown}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{shown}: not valid TOML: not UTF-8 at byte {exc.start}") from None
    except OSError as exc:
        raise PolicyError(f"{shown}: cannot be read: {exc.strerror or exc}") from None
    try:
        policy = CoursePolicy.model_validate(data)
    except ValidationError as exc:
        problems = _problems(exc)
        if len(problems) > SHOWN_PROBLEMS:
            more = len(problems) - SHOWN_PROBLEMS
            problems = [*problems[:SHOWN_PROBLEMS], f"... and {more} more"]
        raise PolicyError("\n".join(f"{shown}: {p}" for p in problems)) from None
    valid = sorted(set(exercises))
    known = ", ".join(valid) or "(none)"
    unknown = [(f"exercises.{e}", e) for e in policy.exercises if e not in valid] + [
        (f"extensions[{i}].exercise", x.exercise)
        for i, x in enumerate(policy.extensions, 1)
        if x.exercise not in valid
    ]
    if unknown:
        raise PolicyError(
            "\n".join(
                f"{shown}: {where}: unknown exercise{_closest(e, valid)}; the exercises are: {known}"
                for where, e in unknown
            )
        )
    problems = []
    for e, ex in policy.exercises.items():
        named = ex.visibility.checks
        ids = sorted(checks(e)) if named else []
        problems += [
            f"{shown}: exercises.{e}.visibility.checks.{c}: {e} has no check {c}{_closest(c, ids)}"
            for c in named
            if c not in ids
        ]
    if problems:
        raise PolicyError("\n".join(problems[:SHOWN_PROBLEMS]))
    return policy


def check_learners(policy: CoursePolicy, path: Path, known: Collection[str]) -> None:
    """Refuse (PolicyError) an `[[extensions]]` entry for a learner not in `known` (the
    gradebook's learners, or a roster's): an extension for a mistyped id extends nobody."""
    shown = shown_path(path)
    problems = [
        f"{shown}: extensions[{i}].learner: no learner {x.learner!r} in the gradebook or roster"
        f"{_closest(x.learner, known)}"
        for i, x in enumerate(policy.extensions, 1)
        if x.learner not in known
    ]
    if problems:
        raise PolicyError("\n".join(problems[:SHOWN_PROBLEMS]))


def _field_path(loc: Sequence) -> str:
    """A pydantic location as a field path: exercises.day45-attention.late.penalty_per_day,
    extensions[1].due (counted from 1, as the file's tables are read)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part + 1}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(top level)"


def _model_at(loc: Sequence) -> type[BaseModel] | None:
    """The model of the table at `loc` of course.toml, to list its keys."""
    model: Any = CoursePolicy
    nested = {"late": LatePolicy, "rate": RatePolicy, "visibility": VisibilityPolicy}
    parts = [p for p in loc if not isinstance(p, int)]
    if parts[:1] == ["exercises"]:
        model, parts = (ExercisePolicy, parts[2:]) if len(parts) >= 2 else (None, [])
    elif parts[:1] == ["extensions"]:
        model, parts = Extension, parts[1:]
    for part in parts:
        model = nested.get(part) if model is ExercisePolicy else None
    return model


def _problems(error: ValidationError) -> list[str]:
    problems = []
    for e in error.errors():
        loc = tuple(e["loc"])
        where = _field_path(loc)
        if e["type"] == "extra_forbidden":
            model = _model_at(loc[:-1])
            known = f"; known keys: {', '.join(model.model_fields)}" if model else ""
            problems.append(f"{where}: unknown key{known}")
        elif e["type"] == "missing":
            problems.append(f"{where}: missing")
        else:
            text = e["msg"].removeprefix("Value error, ")
            if e["type"] == "literal_error":
                text = f"must be one of {e['ctx']['expected']}"
            got = e.get("input")
            if isinstance(got, (datetime, date)):
                shown = f" (got {got.isoformat()})"
            else:
                shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
            problems.append(f"{where}: {text}{shown}"[:500])
    return problems


# -- deadlines ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deadlines:
    opens: datetime | None
    due: datetime | None
    closes: datetime | None


def deadlines(policy: CoursePolicy, exercise: str, learner: str, extensions: Extensions) -> Deadlines:
    """One learner's dates for an exercise. An extension (course.toml's, else the newest in the
    gradebook: `extensions`, which wins over the file) sets due, and closes when it names one;
    closes always moves at least to the new due, so an extension is never closed before it is due."""
    ex = policy.exercise(exercise)
    granted: tuple[datetime, datetime | None] | None = None
    for x in policy.extensions:  # the last one in the file wins
        if x.learner == learner and x.exercise == exercise:
            granted = (x.due, x.closes)
    granted = extensions.get((learner, exercise), granted)
    if granted is None:
        return Deadlines(ex.opens, ex.due, ex.closes)
    due, closes = granted
    closes = closes if closes is not None else ex.closes
    if closes is not None and closes < due:
        closes = due
    return Deadlines(ex.opens, due, closes)


# -- lateness -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lateness:
    minutes: float  # after the due (late days spent included); 0 when before it
    days: int  # started days late after the grace period; 0: on time
    penalty: float  # fraction of max_score

    @property
    def on_time(self) -> bool:
        return self.days == 0


ON_TIME = Lateness(0.0, 0, 0.0)


def late_days_needed(policy: CoursePolicy, exercise: str, received_at: datetime, deadlines: Deadlines) -> int:
    """The started days an upload is late after the grace period: the late days that make it on time."""
    return lateness(policy, exercise, received_at, deadlines, 0).days


def lateness(
    policy: CoursePolicy, exercise: str, received_at: datetime, deadlines: Deadlines, late_days_spent: int
) -> Lateness:
    """How late an upload is against the learner's due moved by the late days it spent. Inside
    the grace period it is on time; after it, every started day (counted from the end of the
    grace period) costs penalty_per_day, up to max_penalty."""
    if deadlines.due is None:
        return ON_TIME
    late = policy.exercise(exercise).late
    after = received_at - (deadlines.due + late_days_spent * DAY)
    if after <= timedelta(0):
        return ON_TIME
    beyond = after - timedelta(minutes=late.grace_minutes)
    days = math.ceil(beyond / DAY) if beyond > timedelta(0) else 0
    return Lateness(after / timedelta(minutes=1), days, min(days * late.penalty_per_day, late.max_penalty))


# -- admission: open, closed, the rate limit, late days --------------------------------------------


@dataclass(frozen=True)
class PastUpload:
    received_at: datetime
    refunded: bool = False
    late_days_spent: int = 0


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str | None  # None, 'not-open', 'closed', 'rate-limited', 'no-late-days'
    message: Message | None  # for the learner
    retry_at: datetime | None  # when the next submission is possible (None: never)
    late_days_spent: int = 0  # what the caller records in the ledger for this upload


def _bucket(rate: RatePolicy, past: Sequence[PastUpload]) -> datetime | None:
    """The bucket as a GCRA's theoretical arrival time: after the uploads so far (refunded ones
    give their token back), a token is free from tat - capacity * interval on, and the bucket is
    full from tat on. None: no upload yet (full)."""
    tat: datetime | None = None
    for t in sorted(p.received_at for p in past if not p.refunded):
        tat = max(tat or t, t) + rate.interval
    return tat


def tokens_left(
    policy: CoursePolicy,
    exercise: str,
    learner: str,
    now: datetime,
    past: Sequence[PastUpload],
    *,
    due: datetime | None = None,
) -> tuple[int | None, datetime | None]:
    """The submissions the bucket allows now and when the next one is possible (None: the bucket
    is full). (None, None): the exercise has no rate limit. Given the learner's `due`
    (`deadlines(...).due`), the deadline grant of `admit` is counted too: an empty bucket inside
    it has one submission left, and one outside it has its next at the grant's start when that
    comes before the next token, so this says what `admit` will do."""
    rate = policy.exercise(exercise).rate
    if rate is None:
        return None, None
    tat = _bucket(rate, past)
    if tat is None or now >= tat:
        return rate.capacity, None
    # ceil: a token not yet whole is none; after a deadline grant the bucket may owe more than one
    n = max(rate.capacity - math.ceil((tat - now) / rate.interval), 0)
    nxt = tat - (rate.capacity - n - 1) * rate.interval
    if n == 0 and due is not None:
        if _granted(rate, due, now, past):
            return 1, nxt
        if now < due - rate.interval < nxt:
            return 0, due - rate.interval
    return n, nxt


def _next_token(rate: RatePolicy, past: Sequence[PastUpload]) -> datetime | None:
    tat = _bucket(rate, past)
    return None if tat is None else tat - (rate.capacity - 1) * rate.interval


def _granted(rate: RatePolicy, due: datetime | None, now: datetime, past: Sequence[PastUpload]) -> bool:
    """The deadline grant: in the last refill interval before the learner's due, a learner whose
    bucket is empty still gets one submission, if none of theirs was received in that interval
    yet. So nobody who worked all day is locked out at the end, and the grant adds at most one
    upload per due to what the bucket allows."""
    if due is None or not due - rate.interval <= now <= due:
        return False
    return not any(not p.refunded and due - rate.interval <= p.received_at <= now for p in past)


def admit(
    policy: CoursePolicy,
    exercise: str,
    learner: str,
    now: datetime,
    past: Sequence[PastUpload],
    *,
    extensions: Extensions,
    late_days_left: int,
    use_late_day: bool,
) -> Admission:
    """Whether an upload received `now` is taken, checked in this order:

    - before `opens`: 'not-open', retry_at = opens;
    - after `closes` (the learner's own, extension included): 'closed', retry_at None;
    - the rate limit (a token bucket per learner and exercise over the past uploads that were not
      refunded): 'rate-limited', retry_at = the next token, or the start of the deadline grant
      when that is sooner, or None when neither comes before closes. The deadline grant never
      locks anyone out just before the due time: in the last refill interval before their due a
      learner always gets one submission, even with an empty bucket, unless they already
      submitted in that interval;
    - with `use_late_day` (the learner's consent; without it nothing is spent), a late upload
      spends as many whole days as it is late after grace, if `late_days_left` allows, else
      'no-late-days' (nothing spent; retry_at = now: the same files may go without late days).
    """
    d = deadlines(policy, exercise, learner, extensions)
    ex = policy.exercise(exercise)
    if d.opens is not None and now < d.opens:
        return Admission(
            False, "not-open", msg("this exercise opens at {opens}", opens=policy.shown(d.opens)), d.opens
        )
    if d.closes is not None and now > d.closes:
        return Admission(
            False,
            "closed",
            msg(
                "this exercise closed at {closes}: no more submissions are taken",
                closes=policy.shown(d.closes),
            ),
            None,
        )
    if ex.rate is not None:
        nxt = _next_token(ex.rate, past)
        if nxt is not None and now < nxt and not _granted(ex.rate, d.due, now, past):
            retry_at: datetime | None = nxt
            if d.due is not None and now < d.due - ex.rate.interval:
                retry_at = min(nxt, d.due - ex.rate.interval)  # the grant's start, no upload in it yet
            if retry_at is not None and d.closes is not None and retry_at > d.closes:
                retry_at = None
            message = (
                msg(
                    "submission limit reached (at most {capacity} at a time, one more every "
                    "{minutes} minutes): the next submission is possible at {when}",
                    capacity=ex.rate.capacity,
                    minutes=f"{ex.rate.refill_minutes:g}",
                    when=policy.shown(retry_at),
                )
                if retry_at is not None
                else msg(
                    "submission limit reached (at most {capacity} at a time), and no new one comes "
                    "before this exercise closes at {closes}",
                    capacity=ex.rate.capacity,
                    closes=policy.shown(d.closes),  # type: ignore[arg-type]  # retry_at is None only by closes
                )
            )
            return Admission(False, "rate-limited", message, retry_at)
    spent = 0
    if use_late_day:
        needed = late_days_needed(policy, exercise, now, d)
        if needed > late_days_left:
            return Admission(
                False,
                "no-late-days",
                msg(
                    "this submission is {needed} day(s) late but you have {left} late day(s) "
                    "left: nothing was spent; submit without using late days to take the late "
                    "penalty instead",
                    needed=needed,
                    left=late_days_left,
                ),
                now,
            )
        spent = needed
    return Admission(True, None, None, None, spent)


# -- which upload counts ------------------------------------------------------------------------


class Scored(Protocol):
    """What `counted` reads of a grade: a Grade, or a list's summary of one (queue.RunSummary)."""

    @property
    def score(self) -> float: ...
    @property
    def max_score(self) -> float: ...


class UploadLike(Protocol):
    """What `counted` reads of an upload (grader.store.queue.Upload has it)."""

    @property
    def id(self) -> int: ...
    @property
    def received_at(self) -> datetime: ...
    @property
    def late_days_spent(self) -> int: ...
    @property
    def chosen(self) -> bool: ...
    @property
    def grade(self) -> Scored | None: ...


def score_after_penalty(grade: Scored, penalty: float) -> float:
    return max(grade.score - penalty * grade.max_score, 0.0)


def counted(
    policy: CoursePolicy,
    exercise: str,
    uploads: Sequence[UploadLike],
    deadlines: Deadlines,
    *,
    sealed: bool = False,
) -> int | None:
    """The id of the upload that counts, among the graded ones (None: none is graded yet):
    'last-on-time' the last received on time (after extensions and spent late days), else the
    last graded; 'best' the highest score after the late penalty (the later of equals); 'chosen'
    the one the learner chose, else as 'last-on-time'. `sealed` (sealed_now, for the learner's
    own view): 'best' says 'last-on-time' until then, since which upload scored best is a result."""
    graded = sorted((u for u in uploads if u.grade is not None), key=lambda u: (u.received_at, u.id))
    if not graded:
        return None

    def late(u: UploadLike) -> Lateness:
        return lateness(policy, exercise, u.received_at, deadlines, u.late_days_spent)

    rule = policy.exercise(exercise).counts
    if rule == "best" and not sealed:
        return max(
            graded,
            key=lambda u: (score_after_penalty(u.grade, late(u).penalty), u.received_at, u.id),  # type: ignore[arg-type]
        ).id
    if rule == "chosen":
        chosen = [u for u in graded if u.chosen]
        if chosen:
            return chosen[-1].id
    on_time = [u for u in graded if late(u).on_time]
    return (on_time or graded)[-1].id


# -- what a learner may see now --------------------------------------------------------------------


def shown(
    visibility: Visibility, *, now: datetime, deadlines: Deadlines, released_at: datetime | None
) -> bool:
    """Whether a check of this visibility is shown in full now. `after_due` and `sealed` apply at
    the learner's own due; with no due date they wait for the release (a hidden check never shows
    by default); `hidden` is never shown in full, release or not (the instructor keeps its details)."""
    released = released_at is not None and released_at <= now
    if visibility == "visible":
        return True
    if visibility == "hidden":
        return False
    if visibility in ("after_due", "sealed"):
        return now >= deadlines.due if deadlines.due is not None else released
    return released


def sealed_now(
    policy: CoursePolicy, exercise: str, *, now: datetime, deadlines: Deadlines, released_at: datetime | None
) -> bool:
    """Whether a `sealed` check of `exercise` still hides its result from the learner now: a list
    of their uploads then shows no score or result, and 'best' does not say which one counts."""
    return policy.exercise(exercise).visibility.seals and not shown(
        "sealed", now=now, deadlines=deadlines, released_at=released_at
    )


def duration(minutes: float) -> Message:
    """A lateness as days, hours and minutes (whole minutes, rounded up: a second late is late)."""
    total = math.ceil(minutes)
    days, rest = divmod(total, 24 * 60)
    hours, mins = divmod(rest, 60)
    if days:
        return msg("{days} d {hours} h {minutes} min", days=days, hours=hours, minutes=mins)
    if hours:
        return msg("{hours} h {minutes} min", hours=hours, minutes=mins)
    return msg("{minutes} min", minutes=mins)


def _sealed_notice(count: int, deadlines: Deadlines, tz: tzinfo) -> Message:
    """Why some checks are missing from the grade, and until when."""
    if deadlines.due is not None:
        return msg(
            "{count} check(s) are sealed until the due time, {due}: their results and points are "
            "not in this grade yet",
            count=count,
            due=clock.shown(deadlines.due, tz),
        )
    return msg(
        "{count} check(s) are sealed until the instructor releases them: their results and points "
        "are not in this grade yet",
        count=count,
    )


def _hidden_notice(
    grade: Grade, hidden: set[str], visibility: VisibilityPolicy, deadlines: Deadlines, tz: tzinfo
) -> Message:
    """Why some checks show only their title and result, and until when."""
    count = sum(1 for c in grade.checks if c.id in hidden)
    if all(visibility.of(c) == "hidden" for c in hidden):
        return msg(
            "{count} check(s) show only their title and result: the instructor keeps their details",
            count=count,
        )
    if deadlines.due is not None and all(visibility.of(c) == "after_due" for c in hidden):
        return msg(
            "{count} check(s) show only their title and result until the due time, {due}; their "
            "details follow then",
            count=count,
            due=clock.shown(deadlines.due, tz),
        )
    return msg(
        "{count} check(s) show only their title and result until the instructor releases their details",
        count=count,
    )


def visible_view(
    grade: Grade,
    policy: CoursePolicy,
    exercise: str,
    *,
    now: datetime,
    deadlines: Deadlines,
    released_at: datetime | None,
    lateness: Lateness,
) -> Grade:
    """What a learner may see of `grade` now: a new Grade (the stored one is never changed).

    A check whose visibility has not applied yet keeps id, title, title_i18n, rule, day, passed,
    points and max_points, and loses its message, symptoms, evidence, curve and root causes; the diagnoses of
    it go; while any check is hidden the grade's own symptoms, the diagnoses that name no check and
    the printed output go too (they may tell what a hidden check found), and a warning says why.
    A `sealed` check not due yet goes whole, with its diagnoses: the score and max_score are those
    of the other checks, and `passed` says whether they all passed (False when none is left), so
    neither its result nor its points can be read off the grade; a warning says how many are
    sealed and until when. A late penalty lowers the score (never below 0) and adds a warning
    saying how late and what it cost."""
    visibility = policy.exercise(exercise).visibility
    withheld = {
        c.id
        for c in grade.checks
        if not shown(visibility.of(c.id), now=now, deadlines=deadlines, released_at=released_at)
    }
    sealed = {c for c in withheld if visibility.of(c) == "sealed"}
    hidden = withheld - sealed
    view = grade.model_copy(deep=True)
    if sealed:
        gone = [c for c in view.checks if c.id in sealed]
        # a check built on a sealed one would tell, by naming it as its root cause, that it failed
        view.checks = [
            CheckResult.model_validate(
                {**c.model_dump(), "caused_by": [r for r in c.caused_by if r not in sealed]}
            )
            if sealed & set(c.caused_by)
            else c
            for c in view.checks
            if c.id not in sealed
        ]
        view.adjustments = []  # their before and after are of the whole score
        view.score = max(view.score - sum(c.points for c in gone), 0.0)
        view.max_score = max(view.max_score - sum(c.max_points for c in gone), 0.0)
        view.passed = view.error is None and bool(view.checks) and all(c.passed for c in view.checks)
        view.diagnosis = [d for d in view.diagnosis if d.check not in sealed]
        view.warnings = [*view.warnings, Note(message=_sealed_notice(len(gone), deadlines, policy.zone))]
    if withheld:
        # a diagnosis naming no check, the grade's symptoms and its printed output could be of a
        # withheld check: they go too
        view.diagnosis = [d for d in view.diagnosis if d.check is not None]
        view.symptoms = []
        view.output = Printed()
    if hidden:
        view.checks = [
            # validated anew (not model_copy): its measured text size must be the new one's
            CheckResult.model_validate(
                {
                    **c.model_dump(),
                    **dict(
                        message="",
                        message_id=None,
                        message_params={},
                        symptoms=[],
                        evidence={},
                        curve=None,
                        caused_by=[],
                    ),
                }
            )
            if c.id in hidden
            else c
            for c in view.checks
        ]
        view.diagnosis = [d for d in view.diagnosis if d.check not in hidden]
        view.warnings = [
            *view.warnings,
            Note(message=_hidden_notice(grade, hidden, visibility, deadlines, policy.zone)),
        ]
    if lateness.penalty > 0:
        score = score_after_penalty(view, lateness.penalty)
        view.warnings = [
            *view.warnings,
            Note(
                message=msg(
                    "submitted {late} after the due time ({days} started day(s) late after the "
                    "grace period): the late penalty of {percent}% cost {points} of {max_score} "
                    "points",
                    late=duration(lateness.minutes),
                    days=lateness.days,
                    percent=f"{lateness.penalty * 100:g}",
                    points=f"{view.score - score:g}",
                    max_score=f"{view.max_score:g}",
                )
            ),
        ]
        view.score = score
    return view
