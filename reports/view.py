"""A grade as a reader sees it, in one language: the data every human-facing renderer shows.

Pure functions over the pydantic Grade. Everything a learner controls (their messages' quoted
text, exception text, printed output) is capped here: 64 KiB a message, and all of it together
within the 1 MiB a report may hold. Escaping is each renderer's job (HTML, Markdown, XML,
terminal each escape differently).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

from grader.limits import MESSAGE_BYTES as MAX_MESSAGE
from grader.limits import REPORT_BYTES as MAX_REPORT
from grader.limits import REPORT_CHROME_BYTES
from grader.locale import DEFAULT_LANG, join, normalize_lang, number, render, translate
from grader.models import Adjustment, CheckResult, Diagnosis, Grade, TrainingCurve
from grader.text import ACTING_CHARS as ACTING_CHARS  # re-exported: the renderers import it here
from grader.text import CUT as CUT
from grader.text import cap_bytes as cap_bytes
from grader.text import clean_text, shown, utf8_len, visible
from reports.labels import (
    HIDDEN_EVIDENCE,
    error_label,
    evidence_label,
    isolation_label,
    rule_label,
    symptom_label,
)

LEARNER_BUDGET = MAX_REPORT - REPORT_CHROME_BYTES  # what learner-influenced text may use
MAX_PRINTED = MAX_MESSAGE  # printed output a report shows (start and end together)
MAX_SHORT = 300  # bytes of an evidence value, a title, a name

# -- how learner text is shown: the one convention of every human-facing format ---------------
# grader/text.py holds it (`visible`, `shown`, `cap_bytes`), for the models and the CLI too.


def as_data(text) -> str:
    """The `form` of text kept as data (JSON): every character kept but those no encoder or
    store can hold (NUL, lone surrogates: models.clean_text). The format escapes the rest."""
    return clean_text(text if isinstance(text, str) else str(text))


class Budget:
    """How much learner-influenced text a report may still take."""

    def __init__(self, total: int = LEARNER_BUDGET):
        self.left = total

    def take(self, text, limit: int = MAX_MESSAGE, form=visible) -> str:
        text = shown(text, min(limit, max(self.left, 0)), form)
        self.left -= utf8_len(text)
        return text

    def name(self, text) -> str:
        """A name or a title (an id, a label): `shown` within MAX_SHORT bytes, charged to the
        budget but never emptied by it, so a report keeps its structure."""
        text = shown(text, MAX_SHORT)
        self.left -= utf8_len(text)
        return text


def t(text: str, lang: str, /, **params) -> str:
    """Report chrome: translate `text` (a msgid) and fill its {placeholders}."""
    return render(None, lang, msgid=text, params=params) if params else translate(text, lang)


def labelled(label: str, text: str, lang: str) -> str:
    """ "label: text", with the language's colon."""
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
        from grader.catalog.exercises import load_exercise

        title = load_exercise(exercise_id).title
    except Exception:  # noqa: BLE001 - a stored grade of an exercise this grader no longer has
        return exercise_id
    return title.zh_TW if normalize_lang(lang) == "zh-TW" else title.en


def check_title(check: CheckResult, lang: str) -> str:
    lang = normalize_lang(lang)
    if lang in check.title_i18n:
        return check.title_i18n[lang]
    return translate(check.title, lang) if check.title else check.id


def diagnosis_message(d: Diagnosis, lang: str) -> str:
    """A diagnosis in `lang`: its own text in that language when it carries one (a mutant's
    message, which is data), else its message rendered as any other."""
    lang = normalize_lang(lang)
    if lang in d.message_i18n:
        return d.message_i18n[lang]
    return message_text(d.message, d.message_id, d.message_params, lang)


def message_text(message: str, message_id: str | None, params: dict, lang: str) -> str:
    """A stored message in `lang`: from its msgid and params when it has them (the English
    message when they cannot be rendered, as from a grade built by hand or stored long ago)."""
    message = message if isinstance(message, str) else str(message or "")
    if normalize_lang(lang) == DEFAULT_LANG or not (message_id or message):
        return message
    try:
        return render(message, lang, msgid=message_id, params=params if isinstance(params, dict) else {})
    except Exception:  # noqa: BLE001 - a report shows the English text rather than fail
        return message


def evidence_items(evidence: dict, lang: str, budget: Budget | None = None) -> list[tuple[str, str]]:
    budget = budget or Budget()
    items = []
    for key, value in (evidence or {}).items():
        if key in HIDDEN_EVIDENCE:
            continue
        value = number(value) if isinstance(value, float) else value
        items.append((budget.take(evidence_label(str(key), lang), MAX_SHORT), budget.take(value, MAX_SHORT)))
    return items


@dataclass
class PrintedView:
    """What the learner's code printed, as shown: its start and its end (each cut at a line
    break, or a space, where one is near), and how many bytes are not shown between them."""

    start: str = ""
    end: str = ""
    cut_bytes: int = 0

    def __bool__(self) -> bool:
        return bool(self.start or self.end)

    @property
    def lines(self) -> int:
        text = self.start + ("\n" if self.start and self.end else "") + self.end
        return text.count("\n") + 1 if text else 0


def _head(text: str, limit: int, form=visible) -> str:
    """The longest start of `text` whose shown form takes at most `limit` bytes, ending after a
    line break (or at a space) in its last half when there is one."""
    k = min(len(text), limit)
    while k and utf8_len(form(text[:k])) > limit:
        k = max(k * limit // utf8_len(form(text[:k])) - 1, 0)
    if k < len(text):
        for sep in ("\n", " "):
            at = text.rfind(sep, k // 2, k)
            if at >= 0:
                return text[: at + 1]
    return text[:k]


def _tail(text: str, limit: int, form=visible) -> str:
    """The same as _head, for the end of `text`: starting after a line break (or a space)."""
    k = min(len(text), limit)
    while k and utf8_len(form(text[len(text) - k :])) > limit:
        k = max(k * limit // utf8_len(form(text[len(text) - k :])) - 1, 0)
    if k < len(text):
        piece = text[len(text) - k :]
        for sep in ("\n", " "):
            at = piece.find(sep, 0, (k + 1) // 2)
            if at >= 0:
                return piece[at + 1 :]
        return piece
    return text


def printed_view(printed, budget: Budget, limit: int = MAX_PRINTED, form=visible) -> PrintedView:
    """The start and the end of what the code printed, within `limit` bytes of the budget
    together, cut at line breaks; `cut_bytes` counts what the jail and this view left out."""
    start = getattr(printed, "start", "") if not isinstance(printed, str) else printed
    end = getattr(printed, "end", "") if not isinstance(printed, str) else ""
    start, end = (x if isinstance(x, str) else str(x or "") for x in (start, end))
    cut = getattr(printed, "cut_bytes", 0)
    cut = cut if isinstance(cut, int) and cut > 0 else 0
    room = max(min(limit, budget.left), 0)
    head = _head(start, room // 2 if end or utf8_len(start) > room else room, form)
    rest = room - utf8_len(form(head))
    if end:
        tail = _tail(end, rest, form)
    else:  # all was kept as the start, longer than the room: its end is shown too
        tail = _tail(start[len(head) :], rest, form) if len(head) < len(start) else ""
    dropped = utf8_len(start) + utf8_len(end) - utf8_len(head) - utf8_len(tail)
    shown_head, shown_tail = form(head), form(tail)
    budget.left -= utf8_len(shown_head) + utf8_len(shown_tail)
    return PrintedView(shown_head, shown_tail, cut + dropped)


@dataclass
class CurveView:
    check_id: str
    check_title: str
    curve: TrainingCurve
    first: str
    last: str
    lowest: str
    nonfinite_step: int | None  # the first step whose loss was NaN or inf
    passed: bool

    @property
    def points(self) -> list[tuple[int, float | None]]:
        return [(i * self.curve.stride, v) for i, v in enumerate(self.curve.losses)]


def curve_view(check: CheckResult, title: str) -> CurveView:
    curve = check.curve
    assert curve is not None, "only checks with a curve get a curve view"
    finite = [v for v in curve.losses if v is not None and math.isfinite(v)]
    bad = next((i for i, v in enumerate(curve.losses) if v is None or not math.isfinite(v)), None)
    return CurveView(
        check_id=check.id,
        check_title=title,
        curve=curve,
        first=number(curve.losses[0]) if curve.losses else "NaN",
        last=number(curve.losses[-1]) if curve.losses else "NaN",
        lowest=number(min(finite)) if finite else "NaN",
        nonfinite_step=None if bad is None else bad * curve.stride,
        passed=check.passed,
    )


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
    symptom_ids: list[str] = field(default_factory=list)
    # root causes (CheckResult.caused_by): the titles of the failed checks this one builds on;
    # of a root, the titles of the failed checks that build on it
    caused_by: list[str] = field(default_factory=list)
    caused_by_ids: list[str] = field(default_factory=list)
    dependents: list[str] = field(default_factory=list)


@dataclass
class RootCauseView:
    """A failed check that others fail because of, shown first, with those under it."""

    check: CheckView
    dependents: list[CheckView]


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
    # how much the evidence says (grader.models.Diagnosis.level): "reproduced" is a fact,
    # "candidate" one possibility among others, "localized" no known bug, only where it starts
    level: str = "reproduced"
    call: str | None = None  # the distinguishing input (reproduced), the smallest failing call (localized)
    function: str | None = None  # localized: the learner function where the difference starts
    # the message as its level lets a report say it: a candidate's as a possibility
    said: str = ""
    # localized: every known bug was compared (False: the search ran out of time first, and the
    # report does not say that no known bug explains the outputs)
    searched: bool = True
    # what the report says under it: of a reproduced bug with a `call`, the input that told it
    # apart from the other possible known bugs ("" when there is nothing to add)
    note: str = ""


@dataclass
class DiagnosisGroup:
    """The diagnoses of one level, under the heading and the sentence that say how sure they are."""

    level: str
    heading: str
    lead: str
    items: list[DiagnosisView]


LEVELS = ("reproduced", "candidate", "localized")  # the order a report shows them in


def diagnosis_groups(diagnoses: list[DiagnosisView], lang: str) -> list[DiagnosisGroup]:
    """The diagnoses grouped by level (reproduced, candidate, localized; each in its order), each
    group with its heading and lead: only a reproduced bug is stated as a fact; candidates are
    one possibility among the others; localized says that no known bug explains the outputs (or,
    when the grader's search ran out of time, that it found none) and where the difference starts."""
    groups = []
    for level in LEVELS:
        items = [d for d in diagnoses if d.level == level]
        if not items:
            continue
        one = len(items) == 1
        if level == "reproduced":
            heading = t("Known bugs in your code", lang)
            lead = (
                t("Your outputs on every failing call are exactly what this known bug gives.", lang)
                if one
                else t("Your outputs on every failing call are exactly what these known bugs give.", lang)
            )
        elif level == "candidate":
            heading = t("Possible known bugs", lang)
            lead = (
                t(
                    "Your outputs are consistent with this known bug, but the grader could not confirm it.",
                    lang,
                )
                if one
                else t(
                    "Your outputs are consistent with one of these known bugs; "
                    "the grader could not tell which.",
                    lang,
                )
            )
        elif all(d.searched for d in items):
            heading = t("No known bug explains your outputs", lang)
            lead = t(
                "The grader found where your code starts to differ from the reference, but none of its known "
                "bugs gives your outputs.",
                lang,
            )
        else:
            heading = t("The grader found no known bug that explains your outputs", lang)
            lead = t(
                "The grader found where your code starts to differ from the reference, but ran out of time "
                "before it had compared every known bug.",
                lang,
            )
        groups.append(DiagnosisGroup(level, heading, lead, items))
    return groups


def diagnosis_line(d: DiagnosisView, lang: str) -> str:
    """A diagnosis as one line of text: its rule and day, its known bug, what it says."""
    head = rule_day(d.rule_label, d.day, lang) + (f" [{d.mutant}]" if d.mutant else "")
    return labelled(head, d.said, lang)


def diagnosis_lines(diagnoses: list[DiagnosisView], lang: str) -> list[str]:
    """The diagnoses as plain text lines (Gradescope's output, a summary): by level, each group's
    heading and lead, then one "- " line per diagnosis and its note indented under it."""
    lines = []
    for g in diagnosis_groups(diagnoses, lang):
        lines += [labelled(g.heading, g.lead, lang)]
        for d in g.items:
            lines.append("- " + diagnosis_line(d, lang))
            lines += ["  " + d.note] if d.note else []
    return lines


@dataclass
class AdjustmentView:
    """A change to the score after grading (grader.models.Adjustment), as one line to read."""

    kind: str  # late-penalty, override
    before: float
    after: float
    text: str  # the whole line, in the report's language: what, by whom, why


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
    checks: list[CheckView]  # the grade's checks, in its order
    root_causes: list[RootCauseView]  # in the grade's order
    diagnoses: list[DiagnosisView]
    curves: list[CurveView]
    symptoms: list[tuple[str, str]]  # (id, label)
    warnings: list[str]
    output: PrintedView
    isolation: str | None  # None in a learner's own report: the instructor's business
    grader_version: str
    duration_s: float
    extra: dict = field(default_factory=dict)
    # how the score got from the graded one to `score` (late penalty, override), in order
    adjustments: list[AdjustmentView] = field(default_factory=list)

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0

    @property
    def diagnosis_groups(self) -> list[DiagnosisGroup]:
        return diagnosis_groups(self.diagnoses, self.lang)


def fmt_points(x: float) -> str:
    return f"{x:g}"


def root_causes_of(checks: list[CheckResult]) -> dict[int, list[CheckResult]]:
    """id(failed check) -> the failed checks of the grade it is caused by (its `caused_by` that
    name one with a message; the first of each id). Only a check with no cause of its own is a
    root, so a grade whose causes chain (stored by hand) still shows each failure once."""
    # a check whose details a learner may not see yet (policy.visible_view: no message) shows
    # only its title and result: it is no root, and is listed under none
    failed: dict[str, CheckResult] = {}
    for c in checks:
        if not c.passed and c.message:
            failed.setdefault(c.id, c)
    named = {
        id(c): [failed[r] for r in dict.fromkeys(c.caused_by) if r in failed and r != c.id]
        for c in failed.values()
    }
    dependent = {id(c) for c in failed.values() if named[id(c)]}
    out = {}
    for c in checks:
        if failed.get(c.id) is not c:
            continue
        roots = [r for r in named[id(c)] if id(r) not in dependent]
        if roots:
            out[id(c)] = roots
    return out


def quoted(titles: list[str], lang: str) -> str:
    """Check titles quoted as the language quotes them, listed: “a”, “b” / 「a」、「b」."""
    return listing([t("“{title}”", lang, title=x) for x in titles], lang)


def builds_on(c: CheckView, lang: str) -> str:
    """What a report says of a check that fails because of its root causes, instead of its
    own message (which that failure makes): what to fix first."""
    if len(c.caused_by) > 1:
        return t(
            "also failing because it builds on {checks}: fix those first",
            lang,
            checks=quoted(c.caused_by, lang),
        )
    return t(
        "also failing because it builds on {checks}: fix that first", lang, checks=quoted(c.caused_by, lang)
    )


def root_of(c: CheckView, lang: str) -> str:
    """What the list of checks says of a root cause, whose message is shown first."""
    return t(
        "fix this first: {count} other failing check(s) build on it (shown first, above)",
        lang,
        count=len(c.dependents),
    )


def root_summary(root: RootCauseView, lang: str) -> str:
    """A root cause and the checks that fail because of it, in one line (a summary's)."""
    return t(
        "{check}: {count} other failing check(s) build on it ({checks})",
        lang,
        check=quoted([root.check.title], lang),
        count=len(root.dependents),
        checks=listing([d.title for d in root.dependents], lang),
    )


def they_build_on(c: CheckView, lang: str) -> str:
    """The line under a root cause's message, before the checks that fail because of it."""
    return t(
        "also failing because they build on {check}: fix that first", lang, check=quoted([c.title], lang)
    )


def adjustment_text(a: Adjustment, lang: str, budget: Budget) -> str:
    """One adjustment as a sentence: a late penalty by its days and share of the points (a Canvas
    flag without a time said so), an override by its author with their reason."""
    change = {"before": fmt_points(a.before), "after": fmt_points(a.after)}
    if a.kind == "late-penalty":
        percent = f"{100 * (a.penalty or 0):g}%"
        if a.late_minutes is None:
            return t(
                "Late penalty: marked late by the LMS without a time, counted as one started day late; "
                "{percent} of the points taken ({before} → {after})",
                lang,
                percent=percent,
                **change,
            )
        return t(
            "Late penalty: {days} started days late after the grace period; "
            "{percent} of the points taken ({before} → {after})",
            lang,
            days=a.late_days or 0,
            percent=percent,
            **change,
        )
    return t(
        "Score set by {author} ({before} → {after}); reason: {reason}",
        lang,
        author=budget.name(a.author) if a.author else t("the instructor", lang),
        reason=budget.take(a.reason, 4096),
        **change,
    )


def diagnosis_view(
    d: Diagnosis, check: CheckResult | None, titles: dict[str, str], lang: str, budget: Budget
) -> DiagnosisView:
    """One diagnosis as shown: its message in `lang` (a localized one without a message said from
    its function and call), said as its level allows, and the call that told a reproduced bug
    apart from the others under it."""
    name = budget.name
    call = budget.take(d.call, 2 * MAX_SHORT) if d.call else None
    function = name(d.function) if d.function else None
    message = diagnosis_message(d, lang)
    if not message and d.level == "localized" and function:
        message = t(
            "the difference from the reference starts in {function}: its smallest failing call is {call}, "
            "and no known bug explains it",
            lang,
            function=function,
            call=call or "?",
        )
    message = budget.take(message)
    said = t("(possibly) {message}", lang, message=message) if d.level == "candidate" else message
    note = ""
    if d.level == "reproduced" and call:
        note = t(
            "Told apart from the other possible known bugs by {call}: there your code gives what this bug "
            "gives, and not what the others give.",
            lang,
            call=call,
        )
    return DiagnosisView(
        rule=name(d.rule),
        rule_label=name(rule_label(d.rule, lang)),
        day=d.day,
        mutant=name(d.mutant) if d.mutant else None,
        message=message,
        check_id=name(d.check) if d.check else None,
        check_title=titles.get(d.check or "", ""),
        symptoms=[name(symptom_label(s, lang)) for s in (check.symptoms if check else [])],
        evidence=evidence_items(check.evidence, lang, budget) if check else [],
        level=d.level,
        call=call,
        function=function,
        said=said,
        note=note,
        searched=d.searched,
    )


def build_view(
    grade: Grade, lang: str = DEFAULT_LANG, budget: Budget | None = None, *, learner: bool = False
) -> ReportView:
    """The grade in `lang`, grouped by rule and curriculum day. Every text in it is `shown`:
    written visibly (see `visible`) and capped, messages at 64 KiB, names at MAX_SHORT bytes,
    and all of it within `budget`. `learner`: the learner's own copy, without the isolation
    (how their code was jailed is the instructor's business; the grade keeps it as data)."""
    lang = normalize_lang(lang)
    budget = budget or Budget()
    name = budget.name
    by_id = {c.id: c for c in grade.checks}
    titles = {c.id: name(check_title(c, lang)) for c in grade.checks}

    views: dict[int, CheckView] = {}  # id(check) -> its view: ids shown may collide
    groups: dict[tuple[str, int], GroupView] = {}
    for c in sorted(grade.checks, key=lambda c: (c.day, c.rule)):
        key = (c.rule, c.day)
        if key not in groups:
            groups[key] = GroupView(name(c.rule), name(rule_label(c.rule, lang)), c.day, [])
        text = "" if c.passed else budget.take(message_text(c.message, c.message_id, c.message_params, lang))
        views[id(c)] = CheckView(
            id=name(c.id),
            title=titles[c.id],
            passed=c.passed,
            points=c.points,
            max_points=c.max_points,
            rule=name(c.rule),
            day=c.day,
            message=text,
            symptoms=[name(symptom_label(s, lang)) for s in c.symptoms],
            evidence=[] if c.passed else evidence_items(c.evidence, lang, budget),
            has_curve=c.curve is not None,
            symptom_ids=[name(s) for s in c.symptoms],
        )
        groups[key].checks.append(views[id(c)])

    causes = root_causes_of(grade.checks)
    root_causes: dict[int, RootCauseView] = {}
    for c in grade.checks:
        for root in causes.get(id(c), []):
            views[id(c)].caused_by.append(views[id(root)].title)
            views[id(c)].caused_by_ids.append(views[id(root)].id)
            views[id(root)].dependents.append(views[id(c)].title)
            root_causes.setdefault(id(root), RootCauseView(views[id(root)], [])).dependents.append(
                views[id(c)]
            )
    root_order = [root_causes[id(c)] for c in grade.checks if id(c) in root_causes]

    diagnoses = []
    # the diagnoses of root causes and lone failures first, then those of checks that fail
    # because of them; a known bug that several checks found is named once, by the first, and
    # a bug reproduced is never listed again as a mere candidate
    dependent_ids = {c.id for c in grade.checks if id(c) in causes}
    reproduced = {(d.rule, d.day, d.mutant) for d in grade.diagnosis if d.mutant and d.level == "reproduced"}
    said_once: set[tuple] = set()
    for d in sorted(grade.diagnosis, key=lambda d: d.check in dependent_ids):
        said: tuple = (
            (d.level, d.rule, d.day, d.mutant) if d.mutant else (d.level, d.rule, d.day, d.function, d.call)
        )
        if d.mutant and d.level == "candidate" and (d.rule, d.day, d.mutant) in reproduced:
            continue
        if said in said_once and (d.mutant or d.level == "localized"):
            continue
        said_once.add(said)
        diagnoses.append(diagnosis_view(d, by_id.get(d.check or ""), titles, lang, budget))

    curves = [curve_view(c, titles[c.id]) for c in grade.checks if c.curve is not None]
    error = grade.error
    warnings = [
        budget.take(message_text(w.message, w.message_id, w.message_params, lang), 4096)
        for w in grade.warnings
    ]
    return ReportView(
        lang=lang,
        exercise=name(grade.exercise),
        exercise_title=name(exercise_title(grade.exercise, lang)),
        student=name(grade.student) if grade.student else None,
        passed=grade.passed,
        score=grade.score,
        max_score=grade.max_score,
        checks_passed=sum(c.passed for c in grade.checks),
        checks_total=len(grade.checks),
        error_kind=name(error.kind) if error else None,
        error_label=name(error_label(error.kind, lang)) if error else None,
        error_message=budget.take(message_text(error.message, error.message_id, error.message_params, lang))
        if error
        else None,
        groups=list(groups.values()),
        checks=[views[id(c)] for c in grade.checks],
        root_causes=root_order,
        diagnoses=diagnoses,
        curves=curves,
        symptoms=[(name(s), name(symptom_label(s, lang))) for s in grade.symptoms],
        warnings=warnings,
        output=printed_view(grade.output, budget),
        isolation=None if learner else name(isolation_label(grade.isolation, lang)),
        grader_version=name(grade.grader_version),
        duration_s=grade.duration_s,
        adjustments=[
            AdjustmentView(a.kind, a.before, a.after, adjustment_text(a, lang, budget))
            for a in grade.adjustments
        ],
    )


def grade_data(grade: Grade, budget: Budget | None = None) -> dict:
    """The whole grade as plain data for a data format (JSON): every string `as_data` and capped
    within `budget` (64 KiB each, keys and names MAX_SHORT), printed output last, as its start
    and end within MAX_PRINTED bytes and the count of bytes cut between them."""
    budget = budget or Budget()
    data = grade.model_dump(mode="python", warnings=False)
    data.pop("output", None)

    def walk(value):
        if isinstance(value, str):
            return budget.take(value, form=as_data)
        if isinstance(value, dict):
            return {shown(k, MAX_SHORT, as_data): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    data = walk(data)
    printed = printed_view(grade.output, budget, form=as_data)
    data["output"] = {"start": printed.start, "end": printed.end, "cut_bytes": printed.cut_bytes}
    return data
