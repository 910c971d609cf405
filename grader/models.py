"""The one data contract: what flows from the check runner to the store and the renderers."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from grader.limits import Limits
from grader.locale import Message, message_fields

SYMPTOMS = (
    "nan-forward",
    "nan-training",
    "loss-collapse",
    "first-loss-off",
    "future-leak",
    "fp16-overflow",
    "softmax-overflow",
    "shape-mismatch",
    "value-mismatch",
    "exception",
    "timeout",
    "memory-limit",
)
RULES = (
    "attention-scaling",
    "causal-mask",
    "numerical-stability",
    "head-split",
    "pre-ln-residual",
    "normalization",
    "positional-encoding",
    "weight-tying",
    "parameter-count",
    "target-shift",
    "data-windows",
    "loss-flattening",
    "api-contract",
    "quiz",
)

Symptom = Literal[SYMPTOMS]  # type: ignore[valid-type]
Rule = Literal[RULES]  # type: ignore[valid-type]
ErrorKind = Literal["timeout", "memory", "crash", "sandbox", "invalid-submission"]


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(value: str) -> str:
    """Text every store and encoder keeps unchanged: NUL and lone surrogates (which a learner's
    exception message may carry; UTF-8 cannot encode them, PostgreSQL refuses NUL) become U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", value)


def clean_data(value: Any) -> Any:
    """clean_text on every string inside plain data (dict keys included)."""
    if isinstance(value, Message):  # keeps its id: its text is rebuilt from clean params
        return Message.from_data(clean_data(value.to_data())) if _UNSTORABLE.search(value) else value
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_data(k): clean_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_data(v) for v in value]
    return value


class Record(BaseModel):
    """A part of a grade. Its text is clean when it is made, so a grade stored and read back, or
    rendered in any format, is the grade that was made."""

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: clean_data(v) for k, v in cls._prepare(data).items()}
        return data

    @classmethod
    def _prepare(cls, data: dict) -> dict:
        return data


class Said(Record):
    """A learner-facing message: English `message`, and the msgid and params it was made from
    (grader.locale), from which a report renders it in any language. Give `message` a Message
    (`msg(...)`) and its id and params are kept; plain text has no id and stays English. Either
    is capped to one message's length (limits.MESSAGE_CHARS) here, wherever it was made."""

    message: str = ""
    message_id: str | None = None
    message_params: dict[str, Any] = {}

    @classmethod
    def _prepare(cls, data: dict) -> dict:
        if isinstance(data.get("message"), str):
            data = {**data, **message_fields(data["message"])}
        return data


class Note(Said):
    """A warning about a submission as a whole (an unknown question id, a missing table)."""


class Printed(Record):
    """What the learner's code printed (stdout and stderr, as they interleaved), capped: its
    `start` and its `end`, and how many bytes were cut between them."""

    start: str = ""
    end: str = ""
    cut_bytes: int = 0

    def __bool__(self) -> bool:
        return bool(self.start or self.end)


class Title(BaseModel):
    en: str
    zh_TW: str = Field(alias="zh-TW")

    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class Exercise(BaseModel):
    """An exercise folder's exercise.toml. Unknown keys are errors (a typo never means a default);
    `limits` is grader.limits.Limits."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["code", "quiz"] = "code"
    title: Title
    day: int
    days: list[int] = []
    files: list[str]
    names: dict[str, list[str]] = {}  # learner file -> names it must define
    points: float
    limits: Limits = Limits()

    @property
    def modules(self) -> list[str]:
        return [f.removesuffix(".py") for f in self.files if f.endswith(".py")]


class TrainingCurve(Record):
    """The per-step losses of a training probe and the two lines they are judged by.

    A loss that was NaN or inf is stored as None (JSON has no NaN); `stride` > 1 when a long run
    was thinned for the report (every stride-th step is kept); `steps` is the run's length.
    """

    losses: list[float | None]
    ln_v: float
    floor: float
    stride: int = 1
    steps: int = 0


class CheckResult(Said):
    id: str
    passed: bool
    points: float
    max_points: float
    rule: Rule
    day: int
    title: str = ""
    symptoms: list[Symptom] = []
    evidence: dict[str, float | int | str | list] = {}
    title_i18n: dict[str, str] = {}  # lang -> title, where the title is data (quiz questions)
    curve: TrainingCurve | None = None  # the training probe's losses, pass or fail


class Diagnosis(Said):
    rule: Rule
    day: int
    mutant: str | None = None
    check: str | None = None


class GradeError(Said):
    kind: ErrorKind


class Grade(Record):
    exercise: str
    passed: bool
    score: float
    max_score: float
    checks: list[CheckResult] = []
    symptoms: list[Symptom] = []
    diagnosis: list[Diagnosis] = []
    error: GradeError | None = None
    isolation: str = "process"
    warnings: list[Note] = []
    output: Printed = Printed()
    duration_s: float = 0.0
    grader_version: str = ""
    student: str | None = None

    @field_validator("warnings", mode="before")
    @classmethod
    def _notes(cls, value: Any) -> Any:
        # a warning given as a message or as text (grades stored before warnings had ids)
        return [{"message": v} if isinstance(v, str) else v for v in value or []]

    @field_validator("output", mode="before")
    @classmethod
    def _printed(cls, value: Any) -> Any:
        return {"start": value} if isinstance(value, str) else value
