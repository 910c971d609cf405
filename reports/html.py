"""Grade -> one self-contained HTML page (jinja2, autoescaped; CSS and SVG inline; no script)."""

from __future__ import annotations

from functools import cache, partial
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from grader.locale import normalize_lang, number
from grader.models import Grade
from reports import svg
from reports.terminal import curve_facts
from reports.view import (
    Budget,
    ReportView,
    build_view,
    builds_on,
    fmt_points,
    labelled,
    root_of,
    t,
    they_build_on,
)

TEMPLATES = Path(__file__).with_name("templates")
HTML_LANG = {"en": "en", "zh-TW": "zh-Hant-TW"}


@cache
def environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def translator(lang: str):
    """The `_` of the templates: _("msgid {name}", name=...) in the report's language."""
    return partial(_translate, lang=lang)


def _translate(template: str, /, lang: str, **params) -> str:
    return t(template, lang, **params)  # positional-only: a param may be called `text`


def curve_labels(lang: str, view) -> dict:
    curve = view.curve
    return {
        "title": t("training loss of “{check}”", lang, check=view.check_title),
        "step": t("step", lang),
        "loss": t("loss (nats)", lang),
        "ln_v": t("ln(V) = {value}", lang, value=number(curve.ln_v, 3)),
        "floor": t("entropy floor {value}", lang, value=number(curve.floor, 3)),
        "nonfinite": t("NaN / inf", lang),
        "below_floor": t("below the entropy floor: the model sees its targets", lang),
        "empty": t("no loss of this run is a finite number: nothing to draw but the NaN band", lang),
    }


def render_view(view: ReportView) -> str:
    lang = view.lang
    curves = [
        {
            "view": c,
            "svg": Markup(svg.loss_curve(c.curve, labels=curve_labels(lang, c))),
            "caption": labelled(c.check_title, curve_facts(c, lang), lang),
        }
        for c in view.curves
    ]
    template = environment().get_template("report.html.j2")
    return template.render(
        v=view,
        curves=curves,
        _=translator(lang),
        fmt=fmt_points,
        num=lambda x: number(x, 4),
        html_lang=HTML_LANG[lang],
        builds_on=lambda c: builds_on(c, lang),
        root_of=lambda c: root_of(c, lang),
        they_build_on=lambda c: they_build_on(c, lang),
    )


def render_html(
    grade: Grade, lang: str = "en", budget: Budget | None = None, *, learner: bool = False
) -> str:
    return render_view(build_view(grade, normalize_lang(lang), budget, learner=learner))
