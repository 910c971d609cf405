"""Grade -> Gradescope's results.json (gradescope-autograders.readthedocs.io, "Autograder
Specifications", Output format). schemas/gradescope-results.schema.json is that page as a JSON
Schema; tests validate every results.json against it.

- `score`: the grade's score (Gradescope uses it over the tests' sum when given).
- `tests`: one per check: name (its title in the report's language), number, score, max_score,
  status passed/failed, output (the message, symptoms and evidence, text format), tags (rule, day),
  visibility "visible".
- `output`: a summary (score, error, diagnoses) for the whole submission.
- `stdout_visibility` "hidden": what the autograder script prints is for instructors only.
- `extra_data`: the exercise and the diagnosis as data.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from grader.models import Grade
from reports.jsonfmt import dumps, strict
from reports.junit import printed_text
from reports.terminal import curve_facts
from reports.view import (
    Budget,
    build_view,
    builds_on,
    fmt_points,
    labelled,
    listing,
    root_summary,
    rule_day,
    t,
    they_build_on,
)

SCHEMA = Path(__file__).with_name("schemas") / "gradescope-results.schema.json"


def results(grade: Grade, lang: str = "en", budget: Budget | None = None) -> dict:
    v = build_view(grade, lang, budget)
    tests = []
    for number, (c, cv) in enumerate(zip(grade.checks, v.checks, strict=True), 1):
        # a check failing because of a root cause says so first; a root lists what builds on it
        lines = [builds_on(cv, lang)] if cv.caused_by else []
        lines += [cv.message] if cv.message else []
        if not c.passed and cv.symptoms:
            lines.append(labelled(t("symptoms", lang), listing(cv.symptoms, lang), lang))
        lines += [labelled(k, val, lang) for k, val in cv.evidence]
        if cv.dependents:
            lines += [they_build_on(cv, lang)] + [f"- {d}" for d in cv.dependents]
        tests.append(
            {
                "name": f"{cv.title} ({cv.id})",
                "number": str(number),
                "score": c.points,
                "max_score": c.max_points,
                "status": "passed" if c.passed else "failed",
                "output": "\n".join(lines),
                "output_format": "text",
                "tags": [cv.rule, f"day-{c.day}"],
                "visibility": "visible",
                "extra_data": {
                    "id": cv.id,
                    "rule": cv.rule,
                    "day": c.day,
                    "symptoms": cv.symptom_ids,
                    "caused_by": cv.caused_by_ids,
                },
            }
        )
    summary = [
        labelled(
            v.exercise_title,
            f"{fmt_points(v.score)} / {fmt_points(v.max_score)} · "
            + (t("PASSED", lang) if v.passed else t("NOT PASSED", lang)),
            lang,
        )
    ]
    summary += [a.text for a in v.adjustments]
    if v.error_kind:
        summary.append(
            labelled(
                labelled(t("The submission could not be graded normally", lang), v.error_label or "", lang),
                v.error_message or "",
                lang,
            )
        )
    if v.root_causes:
        summary.append(t("Fix these first", lang))
        summary += ["- " + root_summary(r, lang) for r in v.root_causes]
    if v.diagnoses:
        summary.append(t("Diagnosis", lang))
        summary += [
            "- "
            + labelled(
                rule_day(d.rule_label, d.day, lang) + (f" [{d.mutant}]" if d.mutant else ""), d.message, lang
            )
            for d in v.diagnoses
        ]
    for curve in v.curves:
        summary.append(
            labelled(f"{t('Training probe', lang)} · {curve.check_title}", curve_facts(curve, lang), lang)
        )
    summary += [labelled(t("warning", lang), w, lang) for w in v.warnings]
    if v.output:
        summary += ["", t("What your code printed", lang), printed_text(v.output, lang)]
    data = {
        "score": grade.score,
        "execution_time": max(0, math.ceil(grade.duration_s)),
        "output": "\n".join(summary),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": strict(
            {
                "exercise": v.exercise,
                "student": v.student,
                "passed": grade.passed,
                "max_score": grade.max_score,
                "symptoms": [sid for sid, _ in v.symptoms],
                "diagnosis": [
                    {"rule": d.rule, "day": d.day, "mutant": d.mutant, "check": d.check_id}
                    for d in v.diagnoses
                ],
                "error": v.error_kind,
                "grader_version": v.grader_version,
                "language": v.lang,
            }
        ),
        "tests": tests,
    }
    return data


def render_gradescope(grade: Grade, lang: str = "en", budget: Budget | None = None) -> str:
    return dumps(results(grade, lang, budget))


def schema() -> dict:
    return json.loads(SCHEMA.read_text(encoding="utf-8"))
