"""Grade -> JSON: SPEC's fields (and the rest of the grade), strict JSON (no NaN/Infinity tokens).

Learner text is kept as the data it is (reports/view.py `grade_data`: capped, NUL and lone
surrogates replaced); control and invisible characters are written as JSON escapes. English
text stays in `message`; `message_id`/`message_params` let another system render it in another
language. A non-finite number (a NaN loss as evidence) becomes the string "NaN", "inf"
or "-inf", since JSON has no such numbers.
"""

from __future__ import annotations

import json
import math

from grader.models import Grade
from reports.view import ACTING_CHARS, Budget, grade_data


def strict(value):
    """`value` with every non-finite float replaced by a string, so json.dumps(allow_nan=False) works."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def dumps(data) -> str:
    """Strict JSON (no NaN tokens) in UTF-8 text, with every character `visible` would write out
    written as a JSON escape (json escapes C0 itself; this adds DEL, C1 and the invisible
    formatting characters), so the JSON shown in a terminal cannot drive it and reads back the
    same. Those characters only ever stand inside strings, where an escape means the same."""
    text = json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False, default=str)
    return ACTING_CHARS.sub(lambda m: json.dumps(m.group())[1:-1], text) + "\n"


def render_json(grade: Grade, budget: Budget | None = None) -> str:
    """The grade as JSON: every string as data (NUL and lone surrogates replaced), 64 KiB at
    most, all within `budget`; printed output as its start, its end and the bytes cut between."""
    return dumps(strict(grade_data(grade, budget)))
