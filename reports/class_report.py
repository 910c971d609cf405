"""The class report: what a whole class's grades say at a glance, and where to look closer.

    render_class_html(entries, exercise=None, starter=None, lang="en") -> str   one self-contained
                                          HTML page, inline SVG plots, no script
    render_class_csv(entries) -> str      the gradebook: a header and one row per grade
    render_items_csv(summary) -> str      items.csv: one row per check, hardest first

`entries` are ClassEntry (a learner, their grade as the gradebook gives it, their files, lateness
and the link to their published report), or bare Grades (as a grading server's page has them).
`summarize` computes every number the page shows, as plain data (tests compare it with the grades):
- the score histogram: percent of max_score in ten bins [0, 10), ..., [90, 100] (100 % in the last),
  and the mean, median, standard deviation (of the class itself: population), min and max percent;
  scores as the gradebook gives them, so after a late penalty or an override;
- per check: the pass rate (submissions that passed it / submissions that ran it) and its
  discrimination (DISCRIMINATION below); the checks hardest first (lowest pass rate) in `items`;
- the pass rate of each rule: checks of that rule passed / checks of that rule run, over all
  submissions, with the points earned and available;
- the diagnoses, most frequent first: how many submissions each known bug was diagnosed in (as
  a fact: level "reproduced"; or, without a mutant name, each diagnosis message), counted once per
  submission, and apart, how many more named it only as a candidate (one of several possible
  known bugs: never counted as diagnosed); the submissions no known bug explains, by the function
  where the difference starts (level "localized"), are rows of their own with no known bug;
- the root causes, most frequent first: how many submissions failed each check as the first
  broken thing that other failing checks build on (CheckResult.caused_by), and how many
  failures built on it there were in all;
- lateness: how many were late, the median minutes late (where the time is known), the late
  penalties and overrides applied (Grade.adjustments) and the points they moved;
- copies (grader.course.copies): identical submissions and near copies with the starter excluded, each a
  hint for a person to look at, never a verdict;
- how many submissions could not be graded normally, by error kind ("no-submission" apart:
  reports.labels.error_kind).

DISCRIMINATION is the upper-lower index D = p_upper - p_lower (Kelley's 27 % groups), corrected:
the learners who ran the check are ranked by their score on every OTHER check (percent of those
checks' points, so the check does not rank learners by itself, and a late penalty never does),
ties by learner id; p_upper is the pass rate of the top 27 % (round(0.27 n), at least 1), p_lower
that of the bottom 27 %. D runs from -1 to 1: near 1, the check separates strong learners from
weak ones; near 0 (as for a check everyone passes), it does not; below 0, weak learners pass it
more often than strong ones (look at the check). Undefined (None, shown as "–") under 2 learners.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

from markupsafe import Markup
from pydantic import BaseModel, ConfigDict

from grader.catalog.rules import all_rules
from grader.course.copies import Copies, code_text, find_copies, segments
from grader.limits import COPY_PAIRS_SHOWN, COPY_VIEW_CHARS, COPY_VIEWS
from grader.locale import normalize_lang
from grader.models import CheckResult, Diagnosis, Grade
from grader.text import visible
from reports import svg
from reports.gradebook import diagnosed, render_csv
from reports.gradebook import render_items_csv as _items_csv
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
UPPER_LOWER = 0.27  # Kelley's groups for the discrimination index D (module docstring)


class ClassEntry(BaseModel):
    """One learner of a class report: their grade as the gradebook gives it (`score` after any
    late penalty or override, listed in grade.adjustments), the files they handed in (for the
    copies), whether they were late and by how much where that is known, and the link to their
    published report (relative to the class report)."""

    model_config = ConfigDict(frozen=True)

    learner: str
    grade: Grade
    name: str | None = None
    files: dict[str, bytes] = {}
    digest: str = ""
    late: bool = False
    late_minutes: float | None = None
    late_days: int | None = None
    report_href: str | None = None
    # on the roster, no submission in the gradebook, and `--missing blank`: a row saying "no
    # submission" with no score, in no statistic (with `--missing zero` it is a 0 as any other)
    unscored: bool = False

    @property
    def minutes_late(self) -> float | None:
        """Minutes after the due: as given, else from the grade's late penalty."""
        if self.late_minutes is not None:
            return self.late_minutes
        return next((a.late_minutes for a in self.penalties if a.late_minutes is not None), None)

    @property
    def penalties(self):
        return [a for a in self.grade.adjustments if a.kind == "late-penalty"]

    @property
    def is_late(self) -> bool:
        return self.late or bool(self.penalties) or bool(self.late_minutes)


def class_entries(current, stored, names: Mapping[str, str] | None = None) -> list[ClassEntry]:
    """ClassEntries from the gradebook: its current grades (grader.store CurrentGrade) and stored
    submissions (StoredSubmission, with their files); `names` (learner -> file name, as
    grader.course.learners.output_names gives them) links each row to `learners/<name>.html`."""
    files = {s.id: s.files for s in stored}
    return [
        ClassEntry(
            learner=c.learner,
            name=c.name,
            grade=c.grade,
            files=files.get(c.submission_id, {}),
            digest=c.digest,
            late=c.late,
            # minutes are known only from an LMS time (a bare Canvas _LATE flag has none)
            late_minutes=c.late_minutes if c.submitted_at is not None and c.late_days else None,
            late_days=c.late_days or None,
            report_href=f"learners/{names[c.learner]}.html" if names and c.learner in names else None,
        )
        for c in current
    ]


def entries_of(items: Sequence[ClassEntry | Grade]) -> list[ClassEntry]:
    """ClassEntries of `items`: a bare Grade is a learner named by its `student`, without files."""
    return [i if isinstance(i, ClassEntry) else ClassEntry(learner=i.student or "", grade=i) for i in items]


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
    discrimination: float | None = None  # D (module docstring); None: under 2 learners ran it

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
    count: int = 0  # submissions it was diagnosed in (a localized row: that no known bug explains)
    candidates: int = 0  # submissions that named it only as a candidate (not in `count`)
    level: str = "reproduced"  # "localized": a row of the submissions no known bug explains


@dataclass
class RootCauseStat:
    exercise: str
    id: str
    title: str
    count: int = 0  # submissions in which it was a root cause
    dependents: int = 0  # the failures that built on it, over those submissions


@dataclass
class LatenessStat:
    late: int = 0  # learners whose submission was late
    known: int = 0  # of those, how many with a known time
    median_minutes: float | None = None  # over those
    penalties: int = 0  # grades with a late penalty applied
    penalty_points: float = 0.0  # points the penalties took, in all
    overrides: int = 0  # grades an instructor overrode


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
    std_percent: float = 0.0
    min_percent: float = 0.0
    max_percent: float = 0.0
    lateness: LatenessStat = field(default_factory=LatenessStat)
    copies: Copies = field(default_factory=Copies)
    compared: int = 0  # learners whose files the copies compared (none: a page of bare grades)
    unscored: int = 0  # roster learners without a submission, in no number above (ClassEntry.unscored)

    @property
    def items(self) -> list[CheckStat]:
        """The checks hardest first: lowest pass rate, then the least discriminating."""
        return sorted(
            self.checks,
            key=lambda c: (
                c.rate,
                c.discrimination if c.discrimination is not None else 2.0,
                c.exercise,
                c.id,
            ),
        )


def stat_message(d: Diagnosis, lang: str) -> str:
    """What a row of the diagnoses says: the known bug's message; for the submissions no known bug
    explains, where the difference starts (the function, not one learner's failing call)."""
    if d.level == "localized" and not d.mutant and d.function:
        return t("no known bug named; the difference starts in {function}", lang, function=d.function)
    return diagnosis_message(d, lang)


def discrimination(ranked: Sequence[tuple[float, str, bool]]) -> float | None:
    """D of one check from (score on the other checks, learner, passed this one) of each learner
    who ran it: p_upper - p_lower over the top and bottom 27 % (module docstring)."""
    n = len(ranked)
    if n < 2:
        return None
    g = max(1, round(UPPER_LOWER * n))
    order = sorted(ranked, key=lambda r: (-r[0], r[1]))
    upper, lower = order[:g], order[n - g :]
    return sum(r[2] for r in upper) / g - sum(r[2] for r in lower) / g


def rest_percent(grade: Grade, check: CheckResult) -> float:
    """The learner's score on every check of the grade but `check`, in percent of those points."""
    available = sum(c.max_points for c in grade.checks) - check.max_points
    earned = sum(c.points for c in grade.checks) - check.points
    return 100.0 * earned / available if available > 0 else 0.0


def lateness(entries: Sequence[ClassEntry]) -> LatenessStat:
    late = [e for e in entries if e.is_late]
    minutes = [m for e in late if (m := e.minutes_late) is not None]
    taken = [[a.before - a.after for a in e.penalties if a.after < a.before] for e in entries]
    return LatenessStat(
        late=len(late),
        known=len(minutes),
        median_minutes=statistics.median(minutes) if minutes else None,
        penalties=sum(bool(points) for points in taken),
        penalty_points=sum(sum(points) for points in taken),
        overrides=sum(any(a.kind == "override" for a in e.grade.adjustments) for e in entries),
    )


def class_copies(entries: Sequence[ClassEntry], starter: Mapping[str, bytes] | None) -> Copies:
    """grader.course.copies over the learners who handed in files (one exercise: a report of several
    compares only within each)."""
    by_exercise: dict[str, dict[str, dict[str, bytes]]] = {}
    for e in entries:
        if e.files:
            by_exercise.setdefault(e.grade.exercise, {})[e.learner] = e.files
    found = [find_copies(subs, starter or {}) for subs in by_exercise.values()]
    if len(found) == 1:
        return found[0]
    return Copies(
        identical=[g for c in found for g in c.identical],
        near=sorted((p for c in found for p in c.near), key=lambda p: (-p.similarity, p.a, p.b)),
        unchanged_starter=sorted(w for c in found for w in c.unchanged_starter),
    )


def summarize(
    items: Sequence[ClassEntry | Grade],
    lang: str = "en",
    starter: Mapping[str, bytes] | None = None,
    *,
    with_copies: bool = True,
) -> ClassSummary:
    """Every number of the class report (module docstring); with_copies=False leaves the copies
    out (items.csv has no use for them, and they are the costly part)."""
    lang = normalize_lang(lang)
    every = entries_of(items)
    entries = [e for e in every if not e.unscored]
    grades = [e.grade for e in entries]
    percents = [percent(g) for g in grades]
    histogram = [0] * 10
    for p in percents:
        histogram[bin_of(p)] += 1
    checks: dict[tuple[str, str], CheckStat] = {}
    ranked: dict[tuple[str, str], list[tuple[float, str, bool]]] = {}
    rules: dict[str, RuleStat] = {}
    diagnoses: dict[tuple, DiagnosisStat] = {}
    roots: dict[tuple[str, str], RootCauseStat] = {}
    for e in entries:
        g = e.grade
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
            ranked.setdefault((g.exercise, c.id), []).append((rest_percent(g, c), e.learner, c.passed))
            r = rules.setdefault(c.rule, RuleStat(c.rule))
            r.total += 1
            r.passed += c.passed
            r.points += c.points
            r.max_points += c.max_points
        # a known bug counts as diagnosed only where it is a fact (reproduced); a candidate is
        # counted apart, once per submission that does not also have it as a fact
        facts = {(d.rule, d.day, d.mutant) for d in g.diagnosis if d.mutant and d.level == "reproduced"}
        seen = set()
        for d in g.diagnosis:
            if d.mutant:
                key: tuple = (d.rule, d.day, d.mutant)
            elif d.level == "localized":
                key = (d.rule, d.day, None, "localized", d.function or d.message_id or d.message)
            else:
                key = (d.rule, d.day, None, d.message_id or d.message)
            if key in seen or (d.level == "candidate" and key in facts):
                continue
            seen.add(key)
            if key not in diagnoses:
                diagnoses[key] = DiagnosisStat(
                    d.rule,
                    d.day,
                    d.mutant,
                    stat_message(d, lang),
                    level="localized" if d.level == "localized" else "reproduced",
                )
            if d.level == "candidate":
                diagnoses[key].candidates += 1
            else:
                diagnoses[key].count += 1
    for check_key, stat in checks.items():
        stat.discrimination = discrimination(ranked[check_key])
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
        diagnoses=sorted(
            diagnoses.values(),
            key=lambda d: (-d.count, -d.candidates, d.day, d.rule, d.mutant or "", d.message),
        ),
        errors=dict(Counter(error_kind(g) or "" for g in grades if g.error)),
        exercises=sorted({g.exercise for g in grades}),
        root_causes=sorted(roots.values(), key=lambda r: (-r.count, -r.dependents, r.exercise, r.id)),
        std_percent=statistics.pstdev(percents) if percents else 0.0,
        min_percent=min(percents, default=0.0),
        max_percent=max(percents, default=0.0),
        lateness=lateness(entries),
        copies=class_copies(entries, starter) if with_copies else Copies(),
        compared=sum(bool(e.files) for e in entries) if with_copies else 0,
        unscored=len(every) - len(entries),
    )


def copy_views(copies: Copies, entries: Sequence[ClassEntry]) -> list[dict]:
    """The side-by-side views of the most similar near-copy pairs (COPY_VIEWS of them): per file,
    each side's text cut into (piece, matched) segments, every piece `visible` (no control or
    bidi character acts; the template escapes the rest)."""
    files = {e.learner: e.files for e in entries}
    views = []
    for pair in copies.near[:COPY_VIEWS]:
        sides = []
        for f in pair.files:
            a = code_text(files.get(pair.a, {}).get(f.name, b""))
            b = code_text(files.get(pair.b, {}).get(f.name, b""))
            sides.append(
                {
                    "name": f.name,
                    "a": [(visible(p), m) for p, m in segments(a, f.a_regions, COPY_VIEW_CHARS)],
                    "b": [(visible(p), m) for p, m in segments(b, f.b_regions, COPY_VIEW_CHARS)],
                    "cut": len(a) > COPY_VIEW_CHARS or len(b) > COPY_VIEW_CHARS,
                }
            )
        views.append({"pair": pair, "files": sides})
    return views


def fmt_d(value: float | None) -> str:
    return "–" if value is None else f"{value:+.2f}"


def render_class_html(
    items: Sequence[ClassEntry | Grade],
    lang: str = "en",
    *,
    exercise=None,
    starter: Mapping[str, bytes] | None = None,
) -> str:
    """One self-contained HTML page (inline CSS and SVG, no script) summarising `items`.
    `exercise` (an id or an Exercise) names the page when no grade does; `starter` (file name ->
    bytes) is the boilerplate the copies leave out."""
    lang = normalize_lang(lang)
    entries = entries_of(items)
    s = summarize(entries, lang, starter)
    exercises = s.exercises or ([getattr(exercise, "id", exercise)] if exercise else [])
    multi = len(exercises) > 1
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
    in_copies = s.copies.learners
    rows = [
        {
            "student": e.learner,
            "name": e.name or "",
            "href": e.report_href,
            "exercise": e.grade.exercise,
            "score": "–" if e.unscored else fmt_points(e.grade.score),
            "max_score": fmt_points(e.grade.max_score),
            "percent": "" if e.unscored else f"{percent(e.grade):.0f}",
            "passed": e.grade.passed,
            "late": e.is_late,
            "adjusted": bool(e.grade.adjustments),
            "copies": e.learner in in_copies,
            "error": error_label(error_kind(e.grade) or "", lang) if e.grade.error else "",
            "diagnosed": ", ".join(diagnosed(e.grade)),
        }
        for e in entries
    ]
    hrefs = {e.learner: e.report_href for e in entries}
    title = (
        exercise_title(exercises[0], lang)
        if len(exercises) == 1
        else t("{n} exercises", lang, n=len(exercises))
    )
    template = environment().get_template("class.html.j2")
    return template.render(
        s=s,
        exercises=exercises,
        title=title,
        hist=hist,
        rows=rows,
        hrefs=hrefs,
        near=s.copies.near[:COPY_PAIRS_SHOWN],
        views=copy_views(s.copies, entries),
        threshold=f"{100 * s.copies.threshold:.0f}",
        fmt=fmt_points,
        fmt_d=fmt_d,
        html_lang=HTML_LANG[lang],
        check_bars=Markup(svg.rate_bars(check_rows, title=t("Pass rate per check", lang)))
        if check_rows
        else "",
        rule_bars=Markup(svg.rate_bars(rule_rows, title=t("Pass rate per rule", lang))) if rule_rows else "",
        rule_label=lambda r: rule_label(r, lang),
        error_label=lambda k: error_label(k, lang),
        _=translator(lang),
    )


def render_class_csv(items: Sequence[ClassEntry | Grade]) -> str:
    """The gradebook of `items`: reports.gradebook's columns, one row per grade."""
    entries = entries_of(items)
    return render_csv([e.grade for e in entries], frozenset(i for i, e in enumerate(entries) if e.unscored))


def item_rows(s: ClassSummary) -> list[dict]:
    """The item statistics, hardest first: what items.csv holds (reports.gradebook.ITEM_COLUMNS)."""
    return [
        {
            "exercise": c.exercise,
            "check": c.id,
            "title": c.title,
            "rule": c.rule,
            "day": c.day,
            "passed": c.passed,
            "ran": c.total,
            "pass_rate": round(c.rate, 4),
            "discrimination": None if c.discrimination is None else round(c.discrimination, 4),
        }
        for c in s.items
    ]


def render_items_csv(items: Sequence[ClassEntry | Grade], lang: str = "en") -> str:
    """items.csv beside class.html: one row per check, hardest first, titles in `lang`."""
    return _items_csv(item_rows(summarize(items, lang, with_copies=False)))


# -- the course overview: one row per exercise (`grader gradebook overview`) ----------------------


@dataclass
class ExerciseRow:
    exercise: str
    title: str
    learners: int  # learners with a current grade
    mean_percent: float
    passed: int
    late: int
    copies: int  # learners in an identical group or a near-copy pair
    href: str  # that exercise's class report, relative to the overview

    @property
    def pass_rate(self) -> float:
        return self.passed / self.learners if self.learners else 0.0


def exercise_row(
    exercise: str, entries: Sequence[ClassEntry], starter: Mapping[str, bytes] | None, lang: str = "en"
) -> ExerciseRow:
    """An exercise's line of the course overview, from the same numbers as its class report. The
    link assumes the published layout: the overview at ROOT/index.html (or any file in ROOT),
    each exercise's class report at ROOT/<exercise>/class.html (`grader batch --out ROOT/<exercise>`)."""
    s = summarize(entries, lang, starter)
    return ExerciseRow(
        exercise=exercise,
        title=exercise_title(exercise, lang),
        learners=s.n,
        mean_percent=s.mean_percent,
        passed=s.passed,
        late=s.lateness.late,
        copies=len(s.copies.learners),
        href=f"{quote(exercise, safe='')}/class.html",  # a path, never a scheme (`javascript:`)
    )


def render_overview_html(rows: Sequence[ExerciseRow], lang: str = "en") -> str:
    """The course overview: one self-contained page, a table of every exercise."""
    lang = normalize_lang(lang)
    template = environment().get_template("overview.html.j2")
    return template.render(rows=rows, html_lang=HTML_LANG[lang], _=translator(lang))
