"""Every CSV the grader writes: its columns, its rows, and the formula-injection guard.

Three tables, each written only here:

- `render_csv(grades)`: one row per Grade, the same columns for every exercise (`grader grade
  --format csv`, and grades.csv of a batch's class report). Columns (COLUMNS): student, exercise,
  score, max_score, percent, passed, error_kind (SPEC's kinds, and `no-submission` for a learner
  who submitted no file: reports.labels.error_kind), checks_passed, checks_total, one `score:<rule>`
  column per rule of SPEC (points earned on that rule's checks; empty when the exercise has
  none), then the diagnosed mutants (those reproduced: stated as facts), the candidates (known
  bugs named only as one of several possible ones), the symptoms and the root causes (failed
  checks others fail because of, CheckResult.caused_by; each `;`-joined).
- `render_export_csv(current)`: the gradebook export (`grader gradebook export --format csv`),
  one row per learner and exercise from the store's current grades (EXPORT_COLUMNS, `export_row`,
  which `--format json` shares).
- `render_class_grades_csv(rows)`: `grader course grades --format csv`, one row per learner of the
  server's GET /api/v1/class/{ex}/grades (CLASS_GRADE_COLUMNS). Light: the student install's
  client writes it, so this module imports nothing that grades.
- `render_items_csv(rows)`: items.csv beside a class report, one row per check with its pass
  rate and discrimination (ITEM_COLUMNS; the numbers from reports.class_report.summarize).
- `render_tokens(rows)`: the access tokens of `grader tokens issue --roster`, one row per learner
  (TOKEN_COLUMNS; a token never starts with a formula character).

The LMS grade-import files (reports/lms.py knows their columns and rows) are written by
`render_rows`.

Every text cell of both is a `cell`: shown as every report shows learner text (grader/text.py
`shown`: control and invisible characters written out, MAX_CELL bytes at most), then `guard`ed.
`guard` is the one formula-injection guard: a cell that a spreadsheet would run as a formula
(=, +, -, @, a tab or a carriage return first) is prefixed with '.
"""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

from grader.models import RULES, Grade
from reports.labels import error_kind
from reports.view import root_causes_of, shown

if TYPE_CHECKING:  # the student's wheel has no roster: a type only
    from grader.policy.roster import RosterRow

MAX_CELL = 1024


def _rules() -> list[str]:
    """A score column per rule: the shipped ones and those the exercises declare (grader.catalog.rules;
    the shipped ones alone on an install without the exercises)."""
    try:
        from grader.catalog.rules import all_rules
    except ImportError:
        return list(RULES)
    return all_rules()


RULE_COLUMNS = _rules()

COLUMNS = (
    [
        "student",
        "exercise",
        "score",
        "max_score",
        "percent",
        "passed",
        "error_kind",
        "checks_passed",
        "checks_total",
    ]
    + [f"score:{rule}" for rule in RULE_COLUMNS]
    + ["diagnosed", "candidates", "symptoms", "root_causes"]
)


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def guard(text: str) -> str:
    """No formula injection: text that a spreadsheet would run as a formula gets a leading '."""
    return "'" + text if text[:1] in FORMULA_START else text


def cell(text) -> str:
    """A text cell of any CSV: `shown` (no control character, escape sequence or bidi control
    left raw), MAX_CELL bytes at most, then `guard`ed. Ids and file names as messages."""
    return guard(shown(text, MAX_CELL))


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return cell(value)


def diagnosed(grade: Grade) -> list[str]:
    """The known bugs diagnosed in `grade` as facts (level "reproduced"), each once, in order."""
    return list(dict.fromkeys(d.mutant for d in grade.diagnosis if d.mutant and d.level == "reproduced"))


def candidates(grade: Grade) -> list[str]:
    """The known bugs `grade` names only as candidates (one of several possible), each once."""
    facts = set(diagnosed(grade))
    return list(
        dict.fromkeys(
            d.mutant for d in grade.diagnosis if d.mutant and d.level == "candidate" and d.mutant not in facts
        )
    )


def row(grade: Grade) -> dict[str, str]:
    by_rule: dict[str, float] = {}
    for c in grade.checks:
        by_rule[c.rule] = by_rule.get(c.rule, 0.0) + c.points
    percent = round(100.0 * grade.score / grade.max_score, 2) if grade.max_score else 0.0
    values = {
        "student": grade.student,
        "exercise": grade.exercise,
        "score": grade.score,
        "max_score": grade.max_score,
        "percent": percent,
        "passed": grade.passed,
        "error_kind": error_kind(grade),
        "checks_passed": sum(c.passed for c in grade.checks),
        "checks_total": len(grade.checks),
        "diagnosed": ";".join(diagnosed(grade)),
        "candidates": ";".join(candidates(grade)),
        "symptoms": ";".join(grade.symptoms),
        "root_causes": ";".join(
            dict.fromkeys(r.id for roots in root_causes_of(grade.checks).values() for r in roots)
        ),
    }
    values.update({f"score:{rule}": by_rule.get(rule) for rule in RULE_COLUMNS})
    return {k: _cell(values[k]) for k in COLUMNS}


def _table(columns, rows) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(r)
    return buf.getvalue()


def render_csv(grades: list[Grade], blank: frozenset[int] = frozenset()) -> str:
    """`blank`: the positions of grades whose score is none (a learner of the roster without a
    submission, `--missing blank`): their score and percent cells are empty."""

    def cells(i: int, g: Grade) -> dict[str, str]:
        r = row(g)
        return {**r, "score": "", "percent": "", "passed": ""} if i in blank else r

    return _table(COLUMNS, (cells(i, g) for i, g in enumerate(grades)))


# -- the gradebook export -------------------------------------------------------------------------

EXPORT_COLUMNS = (
    "learner",
    "name",
    "email",
    "exercise",
    "score",
    "max_score",
    "passed",
    "status",
    "error_kind",
    "failed_checks",
    "diagnosis",
    "candidates",
    "late",
    "late_days",
    "penalty",
    "graded_score",
    "override_score",
    "override_reason",
    "override_author",
    "graded_at",
    "exercise_version",
    "submission",
    "origin",
    "isolation",
    "grader_version",
)


def export_row(c) -> dict:
    """One current grade of the store (grader.store.CurrentGrade) as plain values, unguarded (the
    JSON export uses them as they are; `render_export_csv` guards the text). `score` is the final
    score (after the late penalty and an override); `graded_score` the score as graded; the
    override's score, reason and author are empty when none applies, `penalty` is the fraction of
    max_score lateness took, `late_days` the started days late after the grace period."""
    g = c.grade
    o = c.override
    return {
        "learner": c.learner,
        "name": c.name or "",
        "email": c.email or "",
        "exercise": c.exercise,
        "score": g.score,
        "max_score": g.max_score,
        "passed": g.passed,
        "status": c.status,
        "error_kind": error_kind(g) or "",
        "failed_checks": " ".join(ch.id for ch in g.checks if not ch.passed),
        "diagnosis": " ".join(sorted({d.mutant or d.rule for d in g.diagnosis if d.level == "reproduced"})),
        "candidates": " ".join(sorted(candidates(g))),
        "late": c.late,
        "late_days": c.late_days,
        "penalty": c.penalty,
        "graded_score": g.score if c.graded_score is None else c.graded_score,
        "override_score": o.score if o else "",
        "override_reason": o.reason if o else "",
        "override_author": o.author if o else "",
        "graded_at": c.graded_at.isoformat() if c.graded_at else "",
        "exercise_version": c.version[:12],
        "submission": c.digest[:12],
        "origin": c.origin,
        "isolation": g.isolation,
        "grader_version": g.grader_version,
    }


def render_export_csv(current) -> str:
    """The gradebook export: EXPORT_COLUMNS, one row per current grade. Text cells are `cell`s,
    as in every CSV here; numbers and booleans are written as Python writes them (7.0, True), as
    this export always has."""
    rows = ({k: cell(v) if isinstance(v, str) else v for k, v in export_row(c).items()} for c in current)
    return _table(EXPORT_COLUMNS, rows)


# -- the server's class grades (grader course grades) ------------------------------------------------

CLASS_GRADE_COLUMNS = (
    "learner",
    "name",
    "submission",
    "submissions",
    "score",
    "max_score",
    "passed",
    "late_minutes",
    "late_days",
    "penalty",
)


def render_class_grades_csv(rows: list[dict]) -> str:
    """One row per learner, by CLASS_GRADE_COLUMNS: whole numbers as they are, every other cell a
    guarded `_cell` (the server's text is as untrusted as a learner's)."""

    def value(v) -> str:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else _cell(v)

    return _table(CLASS_GRADE_COLUMNS, ({k: value(r.get(k)) for k in CLASS_GRADE_COLUMNS} for r in rows))


# -- the LMS import files (reports/lms.py: their columns and rows) --------------------------------


def render_rows(header, rows) -> str:
    """A table whose cells are already made (`cell`-guarded text, numbers as text), with CRLF
    line ends (RFC 4180, as Canvas and Moodle write theirs): the LMS import files."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


# -- the item statistics beside a class report (reports.class_report) ------------------------------

ITEM_COLUMNS = (
    "exercise",
    "check",
    "title",
    "rule",
    "day",
    "passed",
    "ran",
    "pass_rate",
    "discrimination",
)


def render_items_csv(rows) -> str:
    """items.csv: one row per check (a dict of ITEM_COLUMNS), hardest first; text cells `cell`s,
    an undefined discrimination (too few learners ran the check) empty."""
    return _table(ITEM_COLUMNS, ({k: _cell(r[k]) for k in ITEM_COLUMNS} for r in rows))


# -- access tokens out (grader tokens issue --roster) ---------------------------------------------

TOKEN_COLUMNS = ("learner", "name", "email", "token")


def render_tokens(rows: list[tuple[RosterRow, str]]) -> str:
    """The tokens CSV: learner,name,email,token (a token never starts with a formula character)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(TOKEN_COLUMNS)
    for row, token in rows:
        writer.writerow([cell(row.learner), cell(row.name or ""), cell(row.email or ""), token])
    return buf.getvalue()
