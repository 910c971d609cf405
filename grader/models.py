"""The one data contract: what flows from the check runner to the store and the renderers."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.limits import Limits

SYMPTOMS = ("nan-forward", "nan-training", "loss-collapse", "first-loss-off", "future-leak",
            "fp16-overflow", "softmax-overflow", "shape-mismatch", "value-mismatch", "exception",
            "timeout", "memory-limit")
RULES = ("attention-scaling", "causal-mask", "numerical-stability", "head-split",
         "pre-ln-residual", "normalization", "positional-encoding", "weight-tying",
         "parameter-count", "target-shift", "data-windows", "loss-flattening", "api-contract", "quiz")

Symptom = Literal[SYMPTOMS]  # type: ignore[valid-type]
Rule = Literal[RULES]  # type: ignore[valid-type]
ErrorKind = Literal["timeout", "memory", "crash", "sandbox", "invalid-submission"]


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
    names: dict[str, list[str]] = {}      # learner file -> names it must define
    points: float
    limits: Limits = Limits()

    @property
    def modules(self) -> list[str]:
        return [f.removesuffix(".py") for f in self.files if f.endswith(".py")]


class TrainingCurve(BaseModel):
    """The per-step losses of a training probe and the two lines they are judged by.

    A loss that was NaN or inf is stored as None (JSON has no NaN); `stride` > 1 when a long run
    was thinned for the report (every stride-th step is kept); `steps` is the run's length.
    """
    losses: list[float | None]
    ln_v: float
    floor: float
    stride: int = 1
    steps: int = 0


class CheckResult(BaseModel):
    id: str
    passed: bool
    points: float
    max_points: float
    rule: Rule
    day: int
    title: str = ""
    message: str = ""
    symptoms: list[Symptom] = []
    evidence: dict[str, float | int | str | list] = {}
    # For reports in other languages (grader.locale): `message` is English; message_id is its
    # template (msgid) and message_params fill it, so a report can render it in zh-TW.
    message_id: str | None = None
    message_params: dict[str, Any] = {}
    title_i18n: dict[str, str] = {}        # lang -> title, where the title is data (quiz questions)
    curve: TrainingCurve | None = None     # the training probe's losses, pass or fail


class Diagnosis(BaseModel):
    rule: Rule
    day: int
    mutant: str | None = None
    message: str
    check: str | None = None
    message_id: str | None = None
    message_params: dict[str, Any] = {}


class GradeError(BaseModel):
    kind: ErrorKind
    message: str
    message_id: str | None = None
    message_params: dict[str, Any] = {}


class Grade(BaseModel):
    exercise: str
    passed: bool
    score: float
    max_score: float
    checks: list[CheckResult] = []
    symptoms: list[Symptom] = []
    diagnosis: list[Diagnosis] = []
    error: GradeError | None = None
    isolation: str = "process"
    warnings: list[str] = []
    output: str = ""                # what the learner's code printed, capped
    duration_s: float = 0.0
    grader_version: str = ""
    student: str | None = None
