"""Grade -> Gradescope's results.json (gradescope-autograders.readthedocs.io, "Autograder
Specifications", Output format). schemas/gradescope-results.schema.json is that page as a JSON
Schema; tests validate every results.json against it.

- `score`: the grade's score (Gradescope uses it over the tests' sum when given).
- `tests`: one per check: name (its title in the report's language), number, score, max_score,
  status passed/failed, output (the message, symptoms and evidence, text format), tags (rule, day),
  visibility: the check's from `visibility` (check id -> Gradescope's `hidden`, `after_due_date`,
  `after_published`, `visible`; the course policy's, translated by the autograder), else
  `default_visibility` ("visible" unless told).
- `visibility` (top level): `default_visibility`, which Gradescope's tests without their own take.
- `output`: a summary (score, error, diagnoses by level: only a reproduced bug is stated as a
  fact) for the whole submission. Gradescope has no visibility for it, so while any check is not
  `visible` it holds nothing of what such a check found (as the server's visible_view): that
  check's diagnoses move into its own test's output, shown when the check is, and the diagnoses
  naming no check, the training curves of such checks, the root causes that involve them and
  what the learner's code printed are left out.
- `stdout_visibility` "hidden": what the autograder script prints is for instructors only.
- `extra_data`: the exercise, the diagnosis (each with its level, and the call and function that
  show it) and the jail's isolation as data (for instructors).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from grader.models import Grade
from reports.jsonfmt import dumps, strict
from reports.junit import printed_text
from reports.terminal import curve_facts
from reports.view import (
    Budget,
    build_view,
    builds_on,
    diagnosis_lines,
    fmt_points,
    labelled,
    listing,
    root_summary,
    t,
    they_build_on,
)

SCHEMA = Path(__file__).with_name("schemas") / "gradescope-results.schema.json"


def results(
    grade: Grade,
    lang: str = "en",
    budget: Budget | None = None,
    visibility: Mapping[str, str] | None = None,
    default_visibility: str = "visible",
) -> dict:
    v = build_view(grade, lang, budget)
    # by the id shown (a view's ids are capped): what the diagnoses and root causes name
    shown_as = {
        cv.id: (visibility or {}).get(c.id, default_visibility)
        for c, cv in zip(grade.checks, v.checks, strict=True)
    }
    withheld = {cid for cid, vis in shown_as.items() if vis != "visible"}
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
        own = [d for d in v.diagnoses if d.check_id == cv.id] if cv.id in withheld else []
        if own:  # not in the summary: told here, when Gradescope shows this check
            lines += [t("Diagnosis", lang)] + diagnosis_lines(own, lang)
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
                "visibility": shown_as[cv.id],
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
    roots = [r for r in v.root_causes if not {r.check.id, *(d.id for d in r.dependents)} & withheld]
    if roots:
        summary.append(t("Fix these first", lang))
        summary += ["- " + root_summary(r, lang) for r in roots]
    # a diagnosis naming no check could be of a withheld one: it goes too (as on the server)
    diagnoses = [d for d in v.diagnoses if not withheld or (d.check_id and d.check_id not in withheld)]
    if diagnoses:
        summary.append(t("Diagnosis", lang))
        summary += diagnosis_lines(diagnoses, lang)
    for curve in v.curves:
        if (visibility or {}).get(curve.check_id, default_visibility) != "visible":
            continue
        summary.append(
            labelled(f"{t('Training probe', lang)} · {curve.check_title}", curve_facts(curve, lang), lang)
        )
    summary += [labelled(t("warning", lang), w, lang) for w in v.warnings]
    if v.output and not withheld:
        summary += ["", t("What your code printed", lang), printed_text(v.output, lang)]
    data = {
        "score": grade.score,
        "execution_time": max(0, math.ceil(grade.duration_s)),
        "output": "\n".join(summary),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": default_visibility,
        "stdout_visibility": "hidden",
        "extra_data": strict(
            {
                "exercise": v.exercise,
                "student": v.student,
                "passed": grade.passed,
                "max_score": grade.max_score,
                "symptoms": [sid for sid, _ in v.symptoms],
                "diagnosis": [
                    {
                        "rule": d.rule,
                        "day": d.day,
                        "mutant": d.mutant,
                        "check": d.check_id,
                        "level": d.level,
                        "call": d.call,
                        "function": d.function,
                    }
                    for d in v.diagnoses
                ],
                "error": v.error_kind,
                "grader_version": v.grader_version,
                "language": v.lang,
                "isolation": Budget(0).name(grade.isolation),  # an id, as the jail reported it
            }
        ),
        "tests": tests,
    }
    return data


def render_gradescope(grade: Grade, lang: str = "en", budget: Budget | None = None) -> str:
    return dumps(results(grade, lang, budget))


def schema() -> dict:
    return json.loads(SCHEMA.read_text(encoding="utf-8"))
