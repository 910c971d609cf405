"""Grade -> text in a given format. Learner text is escaped and capped by each renderer."""
from __future__ import annotations

import json

from grader.models import Grade

MAX_REPORT = 1 << 20
FORMATS = ("text", "json")


def render(grade: Grade, fmt: str = "text", lang: str = "en") -> str:
    if fmt == "json":
        return render_json(grade)
    if fmt == "text":
        return render_text(grade)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def render_json(grade: Grade) -> str:
    data = grade.model_dump(mode="json")
    return json.dumps(data, ensure_ascii=False, indent=2)


def _clean(text: str, limit: int = 2000) -> str:
    """Learner-controlled text in a terminal: no control characters (no escape sequences)."""
    text = "".join(ch if ch.isprintable() or ch == "\n" else "?" for ch in text)
    return text if len(text) <= limit else text[:limit] + " [cut]"


def render_text(grade: Grade) -> str:
    lines = [f"{grade.exercise}: {'PASSED' if grade.passed else 'NOT PASSED'}  "
             f"score {grade.score:g} / {grade.max_score:g}"]
    if grade.error:
        lines.append(f"error ({grade.error.kind}): {_clean(grade.error.message)}")
    for c in grade.checks:
        mark = "ok  " if c.passed else "FAIL"
        lines.append(f"  {mark} {c.id} [{c.rule}, day {c.day}] {c.points:g}/{c.max_points:g}")
        if not c.passed and c.message:
            for line in _clean(c.message).splitlines():
                lines.append(f"         {line}")
    if grade.diagnosis:
        lines.append("diagnosis:")
        for d in grade.diagnosis:
            named = f" ({d.mutant})" if d.mutant else ""
            lines.append(f"  - {d.rule} (day {d.day}){named}: {_clean(d.message)}")
    if grade.symptoms:
        lines.append(f"symptoms: {', '.join(grade.symptoms)}")
    for warning in grade.warnings:
        lines.append(f"warning: {_clean(warning)}")
    lines.append(f"isolation: {grade.isolation}")
    return "\n".join(lines)[:MAX_REPORT] + "\n"
