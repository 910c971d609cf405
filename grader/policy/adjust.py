"""The honest gradebook's rules, as pure functions: which stored submission counts, how late it is
by the LMS's own timestamps, and the grade a reader gets once the late penalty and an
instructor's override are applied (grader/store/gradebook.py reads the rows, this decides).

The graded Grade is never changed in the store: `adjusted` returns a copy whose `score` is the
final score and whose `adjustments` say, in order, how it got there (the late penalty first, then
the override, which replaces whatever score came before it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from grader.models import Adjustment, Grade
from grader.policy.course import (
    ON_TIME,
    CoursePolicy,
    Deadlines,
    Lateness,
    counted,
    lateness,
    score_after_penalty,
)


@dataclass(frozen=True)
class StoredUpload:
    """A stored submission as grader.policy.course.counted reads an upload (UploadLike): received
    when the LMS says it was, else when the grader first saw it; batch spends no late days."""

    id: int
    received_at: datetime
    chosen: bool
    grade: Grade | None
    late_days_spent: int = 0


def received_at(submitted_at: datetime | None, first_seen_at: datetime) -> datetime:
    return submitted_at if submitted_at is not None else first_seen_at


@dataclass(frozen=True)
class OverrideFact:
    """The override that applies (the newest not revoked), as the store holds it."""

    score: float
    reason: str
    author: str
    at: datetime | None = None


def counted_submission(
    policy: CoursePolicy | None,
    exercise: str,
    uploads: Sequence[StoredUpload],
    deadlines: Deadlines,
    *,
    last_seen: dict[int, datetime] | None = None,
) -> int | None:
    """The id of the submission that counts. With a course policy, its `counts` rule by the very
    function the server uses. Without one, as before the policy reached batch: the submission seen
    most recently (newest id on a tie), graded or not, unless an instructor chose a graded one
    (`grader gradebook choose`), which is a person's explicit word and wins. None: none counts yet."""
    if policy is not None:
        return counted(policy, exercise, uploads, deadlines)
    graded = [u for u in uploads if u.grade is not None]
    chosen = [u for u in graded if u.chosen]
    if chosen:
        return max(chosen, key=lambda u: u.id).id
    seen = last_seen or {}
    if not uploads:
        return None
    return max(uploads, key=lambda u: (seen.get(u.id, u.received_at), u.id)).id


@dataclass(frozen=True)
class LmsLateness:
    late: Lateness
    reason: str  # how it was measured, for the adjustment's reason (English, the instructor's)
    timed: bool = True  # False: only a flag said it was late (Canvas), its minutes are unknown


def lms_lateness(
    policy: CoursePolicy,
    exercise: str,
    deadlines: Deadlines,
    *,
    submitted_at: datetime | None,
    flagged_late: bool,
) -> LmsLateness:
    """How late a batch submission is, from the LMS export's own evidence: its timestamp
    (Gradescope `created_at`, Moodle's file times) against the learner's due (extensions count),
    else Canvas's `_LATE` flag, which gives no time: one started day after the grace period,
    which is the least it can mean. No evidence, or no due date and no flag: on time."""
    late_policy = policy.exercise(exercise).late
    if submitted_at is not None:
        found = lateness(policy, exercise, submitted_at, deadlines, 0)
        if found.on_time:
            return LmsLateness(ON_TIME, "")
        return LmsLateness(found, f"submitted {policy.shown(submitted_at)}, by the LMS's timestamp")
    if flagged_late:
        penalty = min(late_policy.penalty_per_day, late_policy.max_penalty)
        return LmsLateness(
            Lateness(late_policy.grace_minutes, 1, penalty),
            "the LMS marked it late without a time: counted as one started day late after the grace period",
            timed=False,
        )
    return LmsLateness(ON_TIME, "")


def late_adjustment(grade: Grade, found: LmsLateness) -> Adjustment | None:
    """The late penalty as an Adjustment, or None when it takes nothing (on time, or a policy that
    charges nothing for lateness: how late it was is still in the export's late columns)."""
    late = found.late
    if late.on_time or late.penalty <= 0:
        return None
    after = score_after_penalty(grade, late.penalty)
    return Adjustment(
        kind="late-penalty",
        before=grade.score,
        after=after,
        reason=f"{late.days} started day(s) late, {late.penalty:.0%} of the points; {found.reason}",
        late_minutes=late.minutes if found.timed else None,
        late_days=late.days,
        penalty=late.penalty,
    )


def override_adjustment(before: float, override: OverrideFact) -> Adjustment:
    return Adjustment(
        kind="override",
        before=before,
        after=override.score,
        reason=override.reason,
        author=override.author,
        at=override.at,
    )


def adjusted(grade: Grade, found: LmsLateness, override: OverrideFact | None) -> Grade:
    """The grade every reader gets: `score` the final score, `adjustments` how it got there.

    `passed` is the grader's verdict on the checks, and a late penalty leaves it alone (being late
    costs points, it does not make working code wrong). An override is a person's verdict on the
    whole grade: it passes exactly when the instructor gives the full points (an instructor who
    fixes a grade the checks got wrong gives full marks; one who takes points away does not mean
    the learner passed)."""
    steps: list[Adjustment] = []
    score, passed = grade.score, grade.passed
    penalty = late_adjustment(grade, found)
    if penalty is not None:
        steps.append(penalty)
        score = penalty.after
    if override is not None:
        steps.append(override_adjustment(score, override))
        score = override.score
        passed = override.score >= grade.max_score
    if not steps:
        return grade
    return grade.model_copy(update={"score": score, "passed": passed, "adjustments": steps})
