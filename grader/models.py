"""The one data contract: what flows from the check runner to the store and the renderers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from grader.limits import (
    DATA_ITEMS,
    GRADE_PART_BYTES,
    GRADE_TEXT_BYTES,
    MESSAGE_BYTES,
    MSGID_CHARS,
    SHORT_CHARS,
    Limits,
)
from grader.locale import N_, Message, message_fields
from grader.text import _UNSTORABLE, Room, bounded, clean_text, data_bytes

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
# The shipped rule catalog: id -> English title (an N_ msgid, translated in the .po). An
# exercise may declare rules of its own in exercise.toml `[[rules]]` (grader.catalog.rules joins them).
SHIPPED_RULES = {
    "attention-scaling": N_("attention scaling"),
    "causal-mask": N_("causal mask"),
    "numerical-stability": N_("numerical stability"),
    "head-split": N_("splitting heads"),
    "pre-ln-residual": N_("Pre-LN residual"),
    "normalization": N_("normalization"),
    "positional-encoding": N_("positional encoding"),
    "weight-tying": N_("weight tying"),
    "parameter-count": N_("parameter count"),
    "target-shift": N_("target shift"),
    "data-windows": N_("data windows"),
    "loss-flattening": N_("loss flattening"),
    "api-contract": N_("API contract"),
    "quiz": N_("quiz"),
}
RULES = tuple(SHIPPED_RULES)
RULE_ID = r"^[a-z0-9]+(-[a-z0-9]+)*$"

Symptom = Literal[SYMPTOMS]  # type: ignore[valid-type]
# A rule is an open id (shipped or declared by an exercise): whether a check may use it is
# checked against the exercise's catalog where the hidden tests are collected (grader.grading.runner),
# so a stored grade of any rule stays readable.
Rule = Annotated[str, StringConstraints(pattern=RULE_ID, max_length=64)]
ErrorKind = Literal["timeout", "memory", "crash", "sandbox", "invalid-submission"]


TEXT_LIMIT = "text_limit"  # validation context: the bytes one part's text may take


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
    rendered in any format, is the grade that was made. Every string a learner may have filled is
    bounded here too (grader.text.bounded), whatever the jail sent: no grade is larger than
    GRADE_TEXT_BYTES of text besides its printed output."""

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict):
            limit = (info.context or {}).get(TEXT_LIMIT, MESSAGE_BYTES)
            data = cls._prepare(dict(data), Room(limit))
            return {k: v if k in cls._parts else clean_data(v) for k, v in data.items()}
        return data

    _parts: ClassVar[tuple[str, ...]] = ()  # fields that are Records: they clean themselves

    @classmethod
    def _prepare(cls, data: dict, room: Room) -> dict:
        """The fields, with the learner-filled ones bounded within `room`."""
        return data


class Said(Record):
    """A learner-facing message: English `message`, and the msgid and params it was made from
    (grader.locale), from which a report renders it in any language. Give `message` a Message
    (`msg(...)`) and its id and params are kept; plain text has no id and stays English. Message
    and params together are capped to one message's size (limits.MESSAGE_BYTES: the params take
    at most half of it), wherever it was made."""

    message: str = ""
    message_id: str | None = None
    message_params: dict[str, Any] = {}
    _text_bytes: int = PrivateAttr(0)

    @classmethod
    def _prepare(cls, data: dict, room: Room) -> dict:
        if isinstance(data.get("message"), str):
            # cut one past the room, so that `bounded` below marks the cut
            data = {**data, **message_fields(data["message"], limit=max(room.left, 0) + 1)}
        if data.get("message_id") is not None:
            data["message_id"] = clean_text(str(data["message_id"])[:MSGID_CHARS])
        params = data.get("message_params")
        if isinstance(params, dict):
            half = Room(room.left // 2)
            data["message_params"] = bounded(params, half, in_message=True)
            room.take(room.left // 2 - half.left)
        if isinstance(data.get("message"), str):
            data["message"] = bounded(data["message"], room)
        return data

    @model_validator(mode="after")
    def _measure(self):
        self._text_bytes = self.text_bytes()
        return self

    def text_bytes(self) -> int:
        """What this part's learner-filled text takes, as `bounded` counts it."""
        return data_bytes(self.message) + data_bytes(self.message_params)

    def within(self, limit: int):
        """This part again, its text within `limit` bytes (a grade sharing out its room)."""
        return type(self).model_validate(self.model_dump(), context={TEXT_LIMIT: limit})


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
    """A text in every language the grader speaks (grader.locale.LANGS): none may be empty."""

    en: str = Field(min_length=1)
    zh_TW: str = Field(alias="zh-TW", min_length=1)

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    def text(self, lang: str) -> str:
        return self.zh_TW if lang == "zh-TW" else self.en


class DeclaredRule(BaseModel):
    """A rule an exercise declares in its exercise.toml `[[rules]]`, next to the shipped ones."""

    model_config = ConfigDict(extra="forbid")

    id: Rule
    day: int
    title: Title


class Mutation(BaseModel):
    """exercise.toml `[mutation]`: the auto-mutation score the hidden tests must reach."""

    model_config = ConfigDict(extra="forbid")

    floor: float = Field(0.95, ge=0, le=1)


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
    rules: list[DeclaredRule] = []
    # the starter is the solution with these mutants' bugs (a bug hunt): each must be caught and
    # named, and these symptoms reported (grader.mutation.verify.cases)
    starter_mutants: list[str] = []
    starter_symptoms: list[Symptom] = []
    mutation: Mutation = Mutation()

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
    # the failed checks this failed one builds on, followed down to their own root
    # (grader.grading.runner.root_causes): the report shows those first and this one under them
    caused_by: list[str] = []

    _parts = ("curve",)

    @classmethod
    def _prepare(cls, data: dict, room: Room) -> dict:
        # evidence first, within a quarter of the room; the message shares what is left
        for name in ("evidence", "title_i18n"):
            if isinstance(data.get(name), dict):
                part = Room(room.left // 4)
                data[name] = bounded(data[name], part)
                room.take(room.left // 4 - part.left)
        for name in ("id", "title"):
            if isinstance(data.get(name), str):
                data[name] = bounded(data[name], Room(GRADE_PART_BYTES))
        if isinstance(data.get("symptoms"), (list, tuple)):
            data["symptoms"] = list(dict.fromkeys(data["symptoms"]))[:DATA_ITEMS]
        if isinstance(data.get("caused_by"), (list, tuple)):
            data["caused_by"] = [
                bounded(c, Room(GRADE_PART_BYTES)) if isinstance(c, str) else c
                for c in data["caused_by"][:DATA_ITEMS]
            ]
        return super()._prepare(data, room)

    def text_bytes(self) -> int:
        return super().text_bytes() + data_bytes(self.evidence) + data_bytes(self.title_i18n)


# how much the evidence says (docs/diagnosis.md): "reproduced" - the learner's outputs on every
# failing call are what this known bug gives (a fact); "candidate" - one of several bugs that
# reproduce them alike (never a fact); "localized" - no known bug explains them: where the
# difference starts
DiagnosisLevel = Literal["reproduced", "candidate", "localized"]


class Diagnosis(Said):
    rule: Rule
    day: int
    mutant: str | None = None
    check: str | None = None
    message_i18n: dict[str, str] = {}  # lang -> message, where the message is data (a mutant's TOML)
    level: DiagnosisLevel = "reproduced"
    # the call that shows it, written as code: for "reproduced", the input on which the learner's
    # code matched this bug and not the other candidates (None when no other reproduced the
    # failing calls); for "localized", the smallest failing call
    call: str | None = None
    function: str | None = None  # "localized": the learner function where the difference starts
    searched: bool = True  # "localized": every known bug was compared (else the search ran out of time)

    @classmethod
    def _prepare(cls, data: dict, room: Room) -> dict:
        # the translations within half the room (they are what a report in any language shows);
        # the English message shares what is left
        if isinstance(data.get("message_i18n"), dict):
            part = Room(room.left // 2)
            data["message_i18n"] = bounded(data["message_i18n"], part)
            room.take(room.left // 2 - part.left)
        for key in ("call", "function"):  # written by the grader from its own requests: short
            if isinstance(data.get(key), str):
                data[key] = data[key][: 2 * SHORT_CHARS]
        return super()._prepare(data, room)

    def text_bytes(self) -> int:
        return super().text_bytes() + data_bytes(self.message_i18n)


class GradeError(Said):
    kind: ErrorKind


class Adjustment(Record):
    """A change to a grade's score made after grading, by the course's rules or by a person:
    a late penalty (by the course policy, from the LMS's own timestamps) or an instructor's
    override (with its reason and author). The grade keeps its checks as graded; `score` of the
    adjusted grade is `after` of its last adjustment (grader/store/gradebook.py applies them)."""

    kind: Literal["late-penalty", "override"]
    before: float  # the score before this adjustment
    after: float  # the score after it
    reason: str = ""  # the instructor's words (override), or how late and by which rule
    author: str = ""  # who overrode it ("" for a policy's penalty)
    at: datetime | None = None  # when the override was made
    late_minutes: float | None = None  # late-penalty: after the learner's due
    late_days: int | None = None  # late-penalty: started days late after the grace period
    penalty: float | None = None  # late-penalty: fraction of max_score taken


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
    naming_s: float = 0.0  # of duration_s, the time naming the bugs took (grader.grading.fingerprints)
    grader_version: str = ""
    student: str | None = None
    adjustments: list[Adjustment] = []  # applied when read from the gradebook, never by grading

    _parts = ("checks", "diagnosis", "error", "warnings", "output")

    @classmethod
    def _prepare(cls, data: dict, room: Room) -> dict:
        for name in ("exercise", "isolation", "grader_version", "student"):
            if isinstance(data.get(name), str):
                data[name] = bounded(data[name], Room(GRADE_PART_BYTES))
        for name in ("checks", "diagnosis", "warnings"):
            if isinstance(data.get(name), (list, tuple)):
                data[name] = list(data[name][:DATA_ITEMS])
        if isinstance(data.get("symptoms"), (list, tuple)):
            data["symptoms"] = list(dict.fromkeys(data["symptoms"]))[:DATA_ITEMS]
        return data

    @field_validator("warnings", mode="before")
    @classmethod
    def _notes(cls, value: Any) -> Any:
        # a warning given as a message or as text (grades stored before warnings had ids)
        return [{"message": v} if isinstance(v, str) else v for v in value or []]

    @model_validator(mode="after")
    def _within_total(self):
        """All the grade's messages, params and evidence within GRADE_TEXT_BYTES: when they take
        more, the room is shared out, the smaller parts kept whole and the larger cut to an
        equal share (GRADE_PART_BYTES at least), so every check keeps the start of its message."""
        parts: list[Said] = [
            *([self.error] if self.error else []),
            *self.checks,
            *self.diagnosis,
            *self.warnings,
        ]
        if sum(p._text_bytes for p in parts) <= GRADE_TEXT_BYTES:
            return self
        limits: dict[int, int] = {}
        # shared out a little below the cap, so that the grade read back is not cut again
        left, count = GRADE_TEXT_BYTES - GRADE_TEXT_BYTES // 16, len(parts)
        floor = min(GRADE_PART_BYTES, left // count)
        for i in sorted(range(count), key=lambda i: parts[i]._text_bytes):
            share = max(floor, left // max(count, 1))
            if parts[i]._text_bytes > share:
                limits[i] = share
            left -= min(parts[i]._text_bytes, share)
            count -= 1
        shrunk = [p.within(limits[i]) if i in limits else p for i, p in enumerate(parts)]
        start = 1 if self.error else 0
        n_checks, n_diag = len(self.checks), len(self.diagnosis)
        if self.error:
            self.error = shrunk[0]  # type: ignore[assignment]
        self.checks = shrunk[start : start + n_checks]  # type: ignore[assignment]
        self.diagnosis = shrunk[start + n_checks : start + n_checks + n_diag]  # type: ignore[assignment]
        self.warnings = shrunk[start + n_checks + n_diag :]  # type: ignore[assignment]
        return self

    @field_validator("output", mode="before")
    @classmethod
    def _printed(cls, value: Any) -> Any:
        return {"start": value} if isinstance(value, str) else value
