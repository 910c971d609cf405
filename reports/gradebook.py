"""Grades -> CSV gradebook rows: one row per grade, the same columns for every exercise.

Columns: student, exercise, score, max_score, percent, passed, error_kind, checks_passed,
checks_total, one `score:<rule>` column per rule of SPEC (points earned on that rule's checks;
empty when the exercise has none), then the diagnosed mutants and the symptoms (each `;`-joined).
Text cells are shown as every report shows learner text (reports/view.py `shown`: control and
invisible characters written out, 1 KiB at most), and a cell that a spreadsheet would run as a
formula (=, +, -, @ or a tab first) is prefixed with '.
"""
from __future__ import annotations

import csv
import io

from grader.models import RULES, Grade
from reports.view import shown

MAX_CELL = 1024

COLUMNS = (["student", "exercise", "score", "max_score", "percent", "passed", "error_kind",
            "checks_passed", "checks_total"] + [f"score:{rule}" for rule in RULES]
           + ["diagnosed", "symptoms"])


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    text = shown(value, MAX_CELL)
    if text[:1] in ("=", "+", "-", "@", "\t", "\r"):
        text = "'" + text                     # not a formula in a spreadsheet
    return text


def row(grade: Grade) -> dict[str, str]:
    by_rule: dict[str, float] = {}
    for c in grade.checks:
        by_rule[c.rule] = by_rule.get(c.rule, 0.0) + c.points
    percent = round(100.0 * grade.score / grade.max_score, 2) if grade.max_score else 0.0
    values = {
        "student": grade.student, "exercise": grade.exercise, "score": grade.score,
        "max_score": grade.max_score, "percent": percent, "passed": grade.passed,
        "error_kind": grade.error.kind if grade.error else None,
        "checks_passed": sum(c.passed for c in grade.checks), "checks_total": len(grade.checks),
        "diagnosed": ";".join(dict.fromkeys(d.mutant for d in grade.diagnosis if d.mutant)),
        "symptoms": ";".join(grade.symptoms),
    }
    values.update({f"score:{rule}": by_rule.get(rule) for rule in RULES})
    return {k: _cell(values[k]) for k in COLUMNS}


def render_csv(grades: list[Grade]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for grade in grades:
        writer.writerow(row(grade))
    return buf.getvalue()
