"""Grade -> text in a given format and language.

Every format gets its learner text from one place, reports/view.py: written visibly (`visible`)
and capped (64 KiB a message, MAX_SHORT a name) within a Budget; each renderer then escapes it
for its own syntax. `fit` keeps every report within MAX_REPORT bytes: should a format's escaping
make the report longer than that (HTML's `&lt;` is four bytes for one), it is made again with a
smaller budget for learner text, down to none.
"""

from __future__ import annotations

from collections.abc import Callable

from grader.locale import normalize_lang
from grader.models import Grade
from reports.view import LEARNER_BUDGET, MAX_REPORT, Budget, cap_bytes, utf8_len

FORMATS = ("text", "json", "html", "markdown", "junit", "gradescope", "csv")
BUDGETS = (LEARNER_BUDGET, LEARNER_BUDGET // 4, LEARNER_BUDGET // 16, 4096, 0)


def fit(make: Callable[[Budget], str], limit: int = MAX_REPORT) -> str:
    """The report `make` writes with the largest budget in BUDGETS that keeps it within `limit`."""
    for total in BUDGETS:
        out = make(Budget(total))
        if utf8_len(out) <= limit:
            return out
    return cap_bytes(out, limit)  # only names are left: a grade of very many checks


def renderer(fmt: str, learner: bool = False) -> Callable[[Grade, str, bool, Budget], str]:
    """`learner`: the report is the learner's own (the human-readable formats leave out what is
    the instructor's business: how the code was isolated)."""
    if fmt == "json":
        from reports.jsonfmt import render_json

        return lambda grade, lang, color, budget: render_json(grade, budget)
    if fmt == "text":
        from reports.terminal import render_text

        return lambda grade, lang, color, budget: render_text(grade, lang, color, budget, learner=learner)
    if fmt == "html":
        from reports.html import render_html

        return lambda grade, lang, color, budget: render_html(grade, lang, budget, learner=learner)
    if fmt == "markdown":
        from reports.markdown import render_markdown

        return lambda grade, lang, color, budget: render_markdown(grade, lang, budget, learner=learner)
    if fmt == "junit":
        from reports.junit import render_junit

        return lambda grade, lang, color, budget: render_junit(grade, lang, budget)
    if fmt == "gradescope":
        from reports.gradescope import render_gradescope

        return lambda grade, lang, color, budget: render_gradescope(grade, lang, budget)
    if fmt == "csv":
        from reports.gradebook import render_csv

        return lambda grade, lang, color, budget: render_csv([grade])
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def render(
    grade: Grade, fmt: str = "text", lang: str = "en", color: bool = False, *, learner: bool = False
) -> str:
    """The report of one grade. `lang` (en, zh-TW) applies to every format but json and csv,
    which are data (json keeps English text plus message ids and params). `learner`: the copy a
    learner reads (published, or served to their account): no isolation line."""
    lang = normalize_lang(lang)
    make = renderer(fmt, learner)
    return fit(lambda budget: make(grade, lang, color, budget))
