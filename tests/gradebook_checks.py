"""Checks shared by the gradebook tests: store a grade, read it back, and say what differs."""
from __future__ import annotations

import math

from grader.models import Grade
from grader.store import Gradebook, Incoming, Outcome


def same(a, b) -> bool:
    """Equal, where NaN equals NaN (a NaN loss is evidence, and NaN != NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def differences(a: Grade, b: Grade) -> list[str]:
    da, db = a.model_dump(), b.model_dump()
    return [k for k in da if not same(da[k], db[k])]


class Recorder:
    """One gradebook; each grade is stored for a learner of its own and read back."""

    def __init__(self, db: str):
        self.book = Gradebook(db)
        self.n = 0

    def round_trip(self, g: Grade) -> Grade:
        self.n += 1
        learner = f"learner-{self.n}"
        version = self.book.exercise_version(g.exercise, f"{self.n:064d}", g.max_score)
        [sid] = self.book.add_submissions(g.exercise, [Incoming(learner=learner, files={"f": b"%d" % self.n})])
        assert self.book.record(sid, version, Outcome(status="graded", grade=g)) is not None
        [current] = self.book.current_grades(g.exercise, learner)
        return current.grade
