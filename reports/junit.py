"""Grade -> JUnit XML for CI dashboards: one <testcase> per check, a <failure> with its message.

Layout (the common Jenkins/Surefire schema): <testsuites> holding one <testsuite> per grade, named
after the exercise, with properties (score, max_score, student, and one `diagnosis:<level>` per
diagnosis: `diagnosis:reproduced` a known bug stated as a fact, `diagnosis:candidate` one of
several possible known bugs, `diagnosis:localized` where the difference starts when no known bug
explains it), one <testcase> per check (classname = exercise.rule, name = check id and
title), and, when the submission could not be graded normally, one more <testcase
name="grading"> carrying an <error>. Learner text is stripped of characters XML 1.0 cannot
hold; ElementTree escapes the rest.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from grader.models import Grade
from reports.view import (
    MAX_SHORT,
    Budget,
    PrintedView,
    build_view,
    builds_on,
    diagnosis_line,
    fmt_points,
    labelled,
    listing,
    shown,
    t,
    they_build_on,
)

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text) -> str:
    return _NOT_XML.sub("?", str(text))


def first_line(text: str, limit: int = 240) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def printed_text(p: PrintedView, lang: str) -> str:
    """What the code printed as one text: its start, a line counting the bytes cut, its end."""
    cut = f"\n… {t('{bytes} bytes cut', lang, bytes=p.cut_bytes)} …\n" if p.cut_bytes else ""
    return p.start + cut + p.end


def suite(grade: Grade, lang: str = "en", budget: Budget | None = None) -> ET.Element:
    v = build_view(grade, lang, budget)
    failures = sum(not c.passed for c in grade.checks)
    errors = 1 if grade.error else 0
    el = ET.Element(
        "testsuite",
        {
            "name": v.exercise,
            "tests": str(len(grade.checks) + errors),
            "failures": str(failures),
            "errors": str(errors),
            "skipped": "0",
            "time": f"{grade.duration_s:.3f}",
        },
    )
    props = ET.SubElement(el, "properties")
    for name, value in (
        ("score", fmt_points(grade.score)),
        ("max_score", fmt_points(grade.max_score)),
        ("passed", str(grade.passed).lower()),
        ("student", v.student or ""),
        ("grader_version", v.grader_version),
        ("isolation", shown(grade.isolation, MAX_SHORT)),
        ("language", v.lang),
    ):
        ET.SubElement(props, "property", {"name": name, "value": xml_text(value)})
    for a in v.adjustments:
        ET.SubElement(props, "property", {"name": f"adjustment:{a.kind}", "value": xml_text(a.text)})
    for d in v.diagnoses:  # named by level: only diagnosis:reproduced is a fact
        text = diagnosis_line(d, lang) + (f"\n{d.note}" if d.note else "")
        ET.SubElement(props, "property", {"name": f"diagnosis:{d.level}", "value": xml_text(text)})
    for c, cv in zip(grade.checks, v.checks, strict=True):
        case = ET.SubElement(
            el,
            "testcase",
            {
                "classname": xml_text(f"{v.exercise}.{cv.rule}"),
                "name": xml_text(f"{cv.id}: {cv.title}"),
                "time": "0",
                "file": xml_text(v.exercise),
            },
        )
        if not c.passed:
            # a check failing because of a root cause says so first; a root lists what builds on it
            lead = builds_on(cv, lang) if cv.caused_by else ""
            body = [lead, cv.message]
            if cv.dependents:
                body += [they_build_on(cv, lang)] + [f"- {d}" for d in cv.dependents]
            if cv.symptoms:
                body.append(labelled(t("symptoms", lang), listing(cv.symptoms, lang), lang))
            body += [labelled(k, val, lang) for k, val in cv.evidence]
            body.append(
                labelled(t("points", lang), f"{fmt_points(c.points)} / {fmt_points(c.max_points)}", lang)
            )
            failure = ET.SubElement(
                case,
                "failure",
                {
                    "message": xml_text(first_line(lead or cv.message) or t("failed", lang)),
                    "type": xml_text(cv.symptom_ids[0] if cv.symptom_ids else cv.rule),
                },
            )
            failure.text = xml_text("\n".join(b for b in body if b))
    if grade.error:
        case = ET.SubElement(
            el, "testcase", {"classname": xml_text(f"{v.exercise}.grading"), "name": "grading", "time": "0"}
        )
        error = ET.SubElement(
            case,
            "error",
            {"message": xml_text(first_line(v.error_message or "")), "type": xml_text(v.error_kind)},
        )
        error.text = xml_text(labelled(v.error_label or "", v.error_message or "", lang))
    if v.output:
        ET.SubElement(el, "system-out").text = xml_text(printed_text(v.output, lang))
    return el


def render_junit(grade: Grade, lang: str = "en", budget: Budget | None = None) -> str:
    return render_junit_many([grade], lang, budget)


def render_junit_many(grades: list[Grade], lang: str = "en", budget: Budget | None = None) -> str:
    root = ET.Element("testsuites", {"name": "gpt-bughunt-grader"})
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for g in grades:
        s = suite(g, lang, budget)
        root.append(s)
        for k in totals:
            totals[k] += int(s.get(k) or 0)
    for k, value in totals.items():
        root.set(k, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
