"""Grade -> JSON: SPEC's fields (and the rest of the grade), strict JSON (no NaN/Infinity tokens).

English text stays in `message`; `message_id`/`message_params` let another system render it in
another language. A non-finite number (a NaN loss as evidence) becomes the string "NaN", "inf"
or "-inf", since JSON has no such numbers.
"""
from __future__ import annotations

import json
import math

from grader.models import Grade
from reports.view import MAX_MESSAGE, MAX_REPORT, cap_bytes


def strict(value):
    """`value` with every non-finite float replaced by a string, so json.dumps(allow_nan=False) works."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def cap_strings(value, limit: int):
    """Every string in `value` cut to `limit` UTF-8 bytes."""
    if isinstance(value, str):
        return cap_bytes(value, limit)
    if isinstance(value, dict):
        return {k: cap_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [cap_strings(v, limit) for v in value]
    return value


def render_json(grade: Grade) -> str:
    """The grade as JSON within SPEC's caps: 64 KiB a string, 1 MiB in all (longer text is cut,
    learner output first, every string shorter after that)."""
    data = cap_strings(strict(grade.model_dump(mode="python")), MAX_MESSAGE)
    text = json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False, default=str) + "\n"
    for limit in (16 * 1024, 4096, 1024, 256, 64):
        if len(text.encode("utf-8")) <= MAX_REPORT:
            break
        data["output"] = cap_strings(data.get("output") or {}, limit)
        data = cap_strings(data, limit * 4) if limit < 16 * 1024 else data
        text = json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False, default=str) + "\n"
    return text
