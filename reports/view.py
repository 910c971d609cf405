"""A grade as a reader sees it, in one language: the data every human-facing renderer shows.

Pure functions over the pydantic Grade. Everything a learner controls (their messages' quoted
text, exception text, printed output) is capped here: 64 KiB a message, and all of it together
within the 1 MiB a report may hold. Escaping is each renderer's job (HTML, Markdown, XML,
terminal each escape differently).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache

from grader.limits import MESSAGE_BYTES as MAX_MESSAGE, REPORT_BYTES as MAX_REPORT, REPORT_CHROME_BYTES
from grader.locale import DEFAULT_LANG, join, normalize_lang, number, render, translate
from grader.models import CheckResult, Grade, TrainingCurve
from reports.labels import (HIDDEN_EVIDENCE, error_label, evidence_label, isolation_label, rule_label,
                            symptom_label)

LEARNER_BUDGET = MAX_REPORT - REPORT_CHROME_BYTES   # what learner-influenced text may use
CUT = "…"


def cap_bytes(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes (never inside a character), marked when cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:max(limit - 4, 0)].decode("utf-8", errors="ignore") + f" {CUT}"


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def no_controls(text: str) -> str:
    """Control characters (escape sequences, NUL, ...) out of learner text: shown as "?"."""
    return _CONTROL.sub("?", text)


class Budget:
    """How much learner-influenced text a report may still take."""

    def __init__(self, total: int = LEARNER_BUDGET):
        self.left = total

    def take(self, text: str, limit: int = MAX_MESSAGE) -> str:
        text = cap_bytes(no_controls(text), min(limit, max(self.left, 0)))
        self.left -= len(text.encode("utf-8"))
        return text


def t(text: str, lang: str, /, **params) -> str:
    """Report chrome: translate `text` (a msgid) and fill its {placeholders}."""
    return render(None, lang, msgid=text, params=params) if params else translate(text, lang)


def labelled(label: str, text: str, lang: str) -> str:
    """"label: text", with the language's colon."""
    return t("{label}: {text}", lang, label=label, text=text)


def listing(items, lang: str, sep: str = ", ") -> str:
    """Items joined with the language's separator ("a, b" / "a、b"; sep "; " gives "a; b" / "a；b")."""
    items = list(items)
    return render(join(items, sep), lang) if items else ""


def rule_day(rule_label_text: str, day: int, lang: str) -> str:
    return t("{rule} (day {day})", lang, rule=rule_label_text, day=day)


@cache
def exercise_title(exercise_id: str, lang: str) -> str:
    try:
        from grader.exercises import load_exercise
        title = load_exercise(exercise_id).title
    except Exception:
        return exercise_id
    return title.zh_TW if normalize_lang(lang) == "zh-TW" else title.en


def check_title(check: CheckResult, lang: str) -> str:
    lang = normalize_lang(lang)
    if lang in check.title_i18n:
        return check.title_i18n[lang]
    return translate(check.title, lang) if check.title else check.id


def message_text(message: str, message_id: str | None, params: dict, lang: str) -> str:
    """A stored message in `lang`: from its msgid and params when it has them."""
    if normalize_lang(lang) == DEFAULT_LANG or not (message_id or message):
        return message
    return render(message, lang, msgid=message_id, params=params)


def evidence_items(evidence: dict, lang: str) -> list[tuple[str, str]]:
    items = []
    for key, value in evidence.items():
        if key in HIDDEN_EVIDENCE:
            continue
        if isinstance(value, float):
            shown = number(value)
        elif isinstance(value, list):
            shown = cap_bytes(str(value), 300)
        else:
            shown = cap_bytes(str(value), 300)
        items.append((evidence_label(key, lang), shown))
    return items


@dataclass
class CurveView:
    check_id: str
    check_title: str
    curve: TrainingCurve
    first: str
    last: str
    lowest: str
    nonfinite_step: int | None        # the first step whose loss was NaN or inf
    passed: bool

    @property
    def points(self) -> list[tuple[int, float | None]]:
        return [(i * self.curve.stride, v) for i, v in enumerate(self.curve.losses)]


def curve_view(check: CheckResult, title: str) -> CurveView:
    curve = check.curve
    finite = [v for v in curve.losses if v is not None and math.isfinite(v)]
    bad = next((i for i, v in enumerate(curve.losses) if v is None or not math.isfinite(v)), None)
    return CurveView(check_id=check.id, check_title=title, curve=curve,
                     first=number(curve.losses[0]) if curve.losses else "NaN",
                     last=number(curve.losses[-1]) if curve.losses else "NaN",
                     lowest=number(min(finite)) if finite else "NaN",
                     nonfinite_step=None if bad is None else bad * curve.stride,
                     passed=check.passed)


@dataclass
class CheckView:
    id: str
    title: str
    passed: bool
    points: float
    max_points: float
    rule: str
    day: int
    message: str
    symptoms: list[str]
    evidence: list[tuple[str, str]]
    has_curve: bool


@dataclass
class GroupView:
    rule: str
    rule_label: str
    day: int
    checks: list[CheckView]

    @property
    def points(self) -> float:
        return sum(c.points for c in self.checks)

    @property
    def max_points(self) -> float:
        return sum(c.max_points for c in self.checks)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


@dataclass
class DiagnosisView:
    rule: str
    rule_label: str
    day: int
    mutant: str | None
    message: str
    check_id: str | None
    check_title: str
    symptoms: list[str]
    evidence: list[tuple[str, str]]


@dataclass
class ReportView:
    lang: str
    exercise: str
    exercise_title: str
    student: str | None
    passed: bool
    score: float
    max_score: float
    checks_passed: int
    checks_total: int
    error_kind: str | None
    error_label: str | None
    error_message: str | None
    groups: list[GroupView]
    diagnoses: list[DiagnosisView]
    curves: list[CurveView]
    symptoms: list[tuple[str, str]]          # (id, label)
    warnings: list[str]
    output: str
    isolation: str
    grader_version: str
    duration_s: float
    extra: dict = field(default_factory=dict)

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0


def fmt_points(x: float) -> str:
    return f"{x:g}"


def build_view(grade: Grade, lang: str = DEFAULT_LANG, budget: Budget | None = None) -> ReportView:
    """The grade in `lang`, grouped by rule and curriculum day, learner text capped."""
    lang = normalize_lang(lang)
    budget = budget or Budget()
    by_id = {c.id: c for c in grade.checks}
    titles = {c.id: check_title(c, lang) for c in grade.checks}

    groups: dict[tuple[str, int], GroupView] = {}
    for c in sorted(grade.checks, key=lambda c: (c.day, c.rule)):
        key = (c.rule, c.day)
        if key not in groups:
            groups[key] = GroupView(c.rule, rule_label(c.rule, lang), c.day, [])
        text = "" if c.passed else budget.take(message_text(c.message, c.message_id, c.message_params, lang))
        groups[key].checks.append(CheckView(
            id=c.id, title=titles[c.id], passed=c.passed, points=c.points, max_points=c.max_points,
            rule=c.rule, day=c.day, message=text,
            symptoms=[symptom_label(s, lang) for s in c.symptoms],
            evidence=[] if c.passed else evidence_items(c.evidence, lang), has_curve=c.curve is not None))

    diagnoses = []
    for d in grade.diagnosis:
        check = by_id.get(d.check or "")
        diagnoses.append(DiagnosisView(
            rule=d.rule, rule_label=rule_label(d.rule, lang), day=d.day, mutant=d.mutant,
            message=budget.take(message_text(d.message, d.message_id, d.message_params, lang)),
            check_id=d.check, check_title=titles.get(d.check or "", ""),
            symptoms=[symptom_label(s, lang) for s in (check.symptoms if check else [])],
            evidence=evidence_items(check.evidence, lang) if check else []))

    curves = [curve_view(c, titles[c.id]) for c in grade.checks if c.curve is not None]
    error = grade.error
    warnings = [budget.take(message_text(w.message, w.message_id, w.message_params, lang), 4096)
                for w in grade.warnings]
    printed = grade.output.start + (f"\n{CUT}\n" if grade.output.cut_bytes else "") + grade.output.end
    return ReportView(
        lang=lang, exercise=grade.exercise, exercise_title=exercise_title(grade.exercise, lang),
        student=no_controls(grade.student) if grade.student else None, passed=grade.passed,
        score=grade.score, max_score=grade.max_score,
        checks_passed=sum(c.passed for c in grade.checks), checks_total=len(grade.checks),
        error_kind=error.kind if error else None,
        error_label=error_label(error.kind, lang) if error else None,
        error_message=budget.take(message_text(error.message, error.message_id, error.message_params,
                                                lang)) if error else None,
        groups=list(groups.values()), diagnoses=diagnoses, curves=curves,
        symptoms=[(s, symptom_label(s, lang)) for s in grade.symptoms],
        warnings=warnings, output=budget.take(printed, MAX_MESSAGE) if printed else "",
        isolation=isolation_label(grade.isolation, lang), grader_version=grade.grader_version,
        duration_s=grade.duration_s)
