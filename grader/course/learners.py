"""A class's learners as the files of a batch name them: one safe file name per learner, and the
grade of a learner who could not be graded at all (a crash, nothing submitted)."""

from __future__ import annotations

import hashlib
import re

from grader import __version__
from grader.models import Exercise, Grade, GradeError


def failed(exercise: Exercise, kind: str, message, student: str | None) -> Grade:
    """A grade that failed as a whole; `message` is a Message (or, from the gradebook, text)."""
    return Grade(
        exercise=exercise.id,
        passed=False,
        score=0.0,
        max_score=float(exercise.points),
        error=GradeError(kind=kind, message=message),
        isolation="none",
        grader_version=__version__,
        student=student,
    )


HASHED = re.compile(r"-[0-9a-f]{10}$")


def safe_name(key: str, *, hashed: bool = False) -> str:
    """A file name for a learner id (never a path), one per learner: a name that had to be
    altered, or that ends like a hashed one (`a_b-0123456789`), ends in a hash of the id, so `a b`
    and `a_b-<hash>` never meet; `hashed` forces the hash (output_names, for case-blind disks)."""
    name = re.sub(r"[^A-Za-z0-9._@-]", "_", key)[:80].lstrip(".") or "learner"
    if hashed or name != key or HASHED.search(key):
        name += "-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return name


def output_names(learners) -> dict[str, str]:
    """learner -> file name, unique in the class even on a case-insensitive file system."""
    names = {key: safe_name(key) for key in learners}
    folded: dict[str, list[str]] = {}
    for key, name in names.items():
        folded.setdefault(name.casefold(), []).append(key)
    for keys in folded.values():
        if len(keys) > 1:
            names.update({key: safe_name(key, hashed=True) for key in keys})
    return names
