"""Grade -> text in a given format and language. Each renderer escapes and caps learner text."""
from __future__ import annotations

from grader.locale import normalize_lang
from grader.models import Grade
from reports.view import MAX_REPORT, cap_bytes

FORMATS = ("text", "json", "html", "markdown", "junit", "gradescope", "csv")


def render(grade: Grade, fmt: str = "text", lang: str = "en", color: bool = False) -> str:
    """The report of one grade. `lang` (en, zh-TW) applies to every format but json and csv,
    which are data (json keeps English text plus message ids and params)."""
    lang = normalize_lang(lang)
    if fmt == "json":
        from reports.jsonfmt import render_json
        return render_json(grade)
    if fmt == "text":
        from reports.terminal import render_text
        return cap_bytes(render_text(grade, lang, color), MAX_REPORT)
    if fmt == "html":
        from reports.html import render_html
        return render_html(grade, lang)
    if fmt == "markdown":
        from reports.markdown import render_markdown
        return cap_bytes(render_markdown(grade, lang), MAX_REPORT)
    if fmt == "junit":
        from reports.junit import render_junit
        return render_junit(grade, lang)
    if fmt == "gradescope":
        from reports.gradescope import render_gradescope
        return render_gradescope(grade, lang)
    if fmt == "csv":
        from reports.gradebook import render_csv
        return render_csv([grade])
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
