"""What a check raises and attaches, and the tolerance rule it compares by: the pieces the
authoring API (grader.testkit), the explorer, the session and the runner share, below all four.
Hidden tests import them from grader.testkit."""

from __future__ import annotations

import math
from typing import NoReturn

import torch


class CheckFailure(AssertionError):
    """A failed check with its symptoms and diagnoses as data, not just text.

    `message` (and each diagnosis's "message") is best a `msg(...)`: English text that keeps its
    template and params, so the report can show it in the learner's language.
    """

    def __init__(self, message: str, symptoms=(), diagnosis=(), evidence=None):
        super().__init__(message)
        self.message = message
        self.symptoms = list(symptoms)
        self.diagnosis = list(diagnosis)  # [{"rule", "day", "mutant", "message"}]
        self.evidence = dict(evidence or {})


class Unusable(CheckFailure):
    """A check reached a learner file that cannot be used (its located problem) or a name its
    module lacks (grader.grading.session): no input changes that, so an explorer re-raises it as it is,
    never shrunk."""


def fail(message: str, *, symptoms=(), diagnosis=(), **evidence) -> NoReturn:
    raise CheckFailure(message, symptoms=symptoms, diagnosis=diagnosis, evidence=evidence)


# -- data a check attaches to its result, pass or fail (the runner collects it) -----------------

_ATTACHED: dict = {}


def attach(**data) -> None:
    """Attach data to the result of the check now running (e.g. curve=TrainingCurve)."""
    _ATTACHED.update(data)


def take_attachments() -> dict:
    data = dict(_ATTACHED)
    _ATTACHED.clear()
    return data


# The tolerance rule: a result computed in `dtype` whose entries each sum `reduction` terms may
# differ from the float64 truth by about eps * sqrt(reduction) (random-walk rounding); we allow 32
# times that, relative and absolute, so any correct order of operations passes while a real bug
# (a wrong scale, a missing term) is orders of magnitude larger. Never tuned per check.
TOLERANCE_FACTOR = 32.0


def tolerance(dtype: torch.dtype, reduction: int = 1) -> float:
    eps = torch.finfo(dtype).eps
    return TOLERANCE_FACTOR * eps * math.sqrt(max(reduction, 1))
