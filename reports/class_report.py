"""The class report for batch grading: what a whole class's grades say at a glance.

    render_class_html(grades, lang="en") -> str    one self-contained HTML page, inline SVG plots
    render_class_csv(grades) -> str                the gradebook: a header and one row per grade

`summarize` computes every number both show, as plain data (tests compare it with the grades):
- the score histogram: percent of max_score in ten bins [0, 10), ..., [90, 100] (100 % in the last);
- the pass rate of each check: submissions that passed it / submissions that ran it;
- the pass rate of each rule: checks of that rule passed / checks of that rule run, over all
  submissions, with the points earned and available;
- the diagnoses, most frequent first: how many submissions each known bug (or, without a mutant
  name, each diagnosis message) was diagnosed in, counted once per submission;
- the root causes, most frequent first: how many submissions failed each check as the first
  broken thing that other failing checks build on (CheckResult.caused_by), and how many
  failures built on it there were in all;
- how many submissions could not be graded normally, by error kind ("no-submission" apart:
  reports.labels.error_kind).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from markupsafe import Markup

from grader.locale import normalize_lang
from grader.models import CheckResult, Grade
from grader.rules import all_rules
from reports import svg
from reports.gradebook import render_csv
from reports.html import HTML_LANG, environment, translator
from reports.labels import error_kind, error_label, rule_label
from reports.view import (
    check_title,
    diagnosis_message,
    exercise_title,
    fmt_points,
    root_causes_of,
    t,
)

BIN_EDGES = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]


def percent(grade: Grade) -> float:
    return 100.0 * grade.score / grade.max_score if grade.max_score else 0.0


def bin_of(p: float) -> int:
    return min(max(int(p // 10), 0), 9)


@dataclass
class CheckStat:
    exercise: str
    id: str
    rule: str
    day: int
    title: str
    passed: int = 0
    total: int = 0

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


@dataclass
class RuleStat:
    rule: str
    passed: int = 0
    total: int = 0
    points: float = 0.0
    max_points: float = 0.0

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


@dataclass
class DiagnosisStat:
    rule: str
    day: int
    mutant: str | None
    message: str  # one example, in the report's language
    count: int = 0  # submissions it was diagnosed in


@dataclass
class RootCauseStat:
    exercise: str
    id: str
    title: str
    count: int = 0  # submissions in which it was a root cause
    dependents: int = 0  # the failures that built on it, over those submissions


@dataclass
class ClassSummary:
    lang: str
    n: int
    passed: int
    mean_percent: float
    median_percent: float
    histogram: list[int]
    checks: list[CheckStat]
    rules: list[RuleStat]
    diagnoses: list[DiagnosisStat]
    errors: dict[str, int]
    exercises: list[str] = field(default_factory=list)
    root_causes: list[RootCauseStat] = field(default_factory=list)


def summarize(grades: list[Grade], lang: str = "en") -> ClassSummary:
    lang = normalize_lang(lang)
    percents = [percent(g) for g in grades]
    histogram = [0] * 10
    for p in percents:
        histogram[bin_of(p)] += 1
    checks: dict[tuple[str, str], CheckStat] = {}
    rules: dict[str, RuleStat] = {}
    diagnoses: dict[tuple, DiagnosisStat] = {}
    roots: dict[tuple[str, str], RootCauseStat] = {}
    for g in grades:
        built_on: Counter[int] = Counter()  # id(root) -> the failures built on it
        named: dict[int, CheckResult] = {}
        for causes in root_causes_of(g.checks).values():
            for root in causes:
                built_on[id(root)] += 1
                named[id(root)] = root
        for ref, n in built_on.items():
            root = named[ref]
            cause = roots.setdefault(
                (g.exercise, root.id), RootCauseStat(g.exercise, root.id, check_title(root, lang))
            )
            cause.count += 1
            cause.dependents += n
        for c in g.checks:
            stat = checks.get((g.exercise, c.id))
            if stat is None:
                stat = checks[(g.exercise, c.id)] = CheckStat(
                    g.exercise, c.id, c.rule, c.day, check_title(c, lang)
                )
            stat.total += 1
            stat.passed += c.passed
            r = rules.setdefault(c.rule, RuleStat(c.rule))
            r.total += 1
            r.passed += c.passed
            r.points += c.points
            r.max_points += c.max_points
        seen = set()
        for d in g.diagnosis:
            key = (d.rule, d.day, d.mutant) if d.mutant else (d.rule, d.day, None, d.message_id or d.message)
            if key in seen:
                continue
            seen.add(key)
            if key not in diagnoses:
                diagnoses[key] = DiagnosisStat(d.rule, d.day, d.mutant, diagnosis_message(d, lang))
            diagnoses[key].count += 1
    order = {rule: i for i, rule in enumerate(all_rules())}
    return ClassSummary(
        lang=lang,
        n=len(grades),
        passed=sum(g.passed for g in grades),
        mean_percent=statistics.fmean(percents) if percents else 0.0,
        median_percent=statistics.median(percents) if percents else 0.0,
        histogram=histogram,
        checks=sorted(checks.values(), key=lambda s: (s.exercise, s.day, s.rule, s.id)),
        rules=sorted(rules.values(), key=lambda r: (order.get(r.rule, len(order)), r.rule)),
        diagnoses=sorted(diagnoses.values(), key=lambda d: (-d.count, d.day, d.rule, d.mutant or "")),
        errors=dict(Counter(error_kind(g) or "" for g in grades if g.error)),
        exercises=sorted({g.exercise for g in grades}),
        root_causes=sorted(roots.values(), key=lambda r: (-r.count, -r.dependents, r.exercise, r.id)),
    )


def render_class_html(grades: list[Grade], lang: str = "en") -> str:
    """One self-contained HTML page (inline CSS and SVG, no script) summarising `grades`."""
    lang = normalize_lang(lang)
    s = summarize(grades, lang)
    multi = len(s.exercises) > 1
    hist = Markup(
        svg.histogram(
            s.histogram,
            BIN_EDGES,
            labels={
                "title": t("Score distribution", lang),
                "x": t("score (% of the maximum)", lang),
                "y": t("number of submissions", lang),
            },
        )
    )
    check_rows = [
        (f"{c.exercise}/{c.id}", (f"{c.exercise}: " if multi else "") + c.title, c.passed, c.total)
        for c in s.checks
    ]
    rule_rows = [(r.rule, rule_label(r.rule, lang), r.passed, r.total) for r in s.rules]
    rows = [
        {
            "student": g.student or "",
            "exercise": g.exercise,
            "score": fmt_points(g.score),
            "max_score": fmt_points(g.max_score),
            "percent": f"{percent(g):.0f}",
            "passed": g.passed,
            "error": error_label(error_kind(g) or "", lang) if g.error else "",
            "diagnosed": ", ".join(dict.fromkeys(d.mutant for d in g.diagnosis if d.mutant)),
        }
        for g in grades
    ]
    title = (
        exercise_title(s.exercises[0], lang)
        if len(s.exercises) == 1
        else t("{n} exercises", lang, n=len(s.exercises))
    )
    template = environment().get_template("class.html.j2")
    return template.render(
        s=s,
        title=title,
        hist=hist,
        rows=rows,
        fmt=fmt_points,
        html_lang=HTML_LANG[lang],
        check_bars=Markup(svg.rate_bars(check_rows, title=t("Pass rate per check", lang)))
        if check_rows
        else "",
        rule_bars=Markup(svg.rate_bars(rule_rows, title=t("Pass rate per rule", lang))) if rule_rows else "",
        rule_label=lambda r: rule_label(r, lang),
        error_label=lambda k: error_label(k, lang),
        _=translator(lang),
    )


def render_class_csv(grades: list[Grade]) -> str:
    """The gradebook of `grades`: reports.gradebook's columns, one row per grade."""
    return render_csv(grades)
