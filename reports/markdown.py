"""Grade -> Markdown (GitHub-flavoured): for a pull-request comment, an LMS or a README.

Learner text is HTML-escaped (Markdown renderers pass raw HTML through) and its Markdown syntax
characters are backslash-escaped, so it shows as the text it is: no links, no images, no HTML.
"""

from __future__ import annotations

import html
import re

from grader.models import Grade
from reports.terminal import clean, curve_facts, spark
from reports.view import (
    Budget,
    ReportView,
    build_view,
    builds_on,
    fmt_points,
    labelled,
    listing,
    root_of,
    rule_day,
    t,
    they_build_on,
)

_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_LINE_START = re.compile(r"^(\s*)([#>+\-=])", re.MULTILINE)
_NUMBERED = re.compile(r"^(\s*\d+)([.)])", re.MULTILINE)
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|www)([:.])")


def md(text: str) -> str:
    """Learner or grader text as inert Markdown text (line breaks kept): no markup, no links."""
    text = html.escape(clean(text), quote=False)
    text = _SPECIAL.sub(r"\\\1", text)
    text = _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
    text = _NUMBERED.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
    text = _AUTOLINK.sub(lambda m: m.group(1) + "\\" + m.group(2), text)  # no autolinks
    return text.replace("\n", "  \n")


def code(text: str) -> str:
    """An inline code span that no backtick in `text` can close (text in it is never markup)."""
    text = clean(text).replace("\n", " ")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(text: str) -> str:
    """A fenced code block that no line of `text` can close."""
    text = clean(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def render_view(v: ReportView) -> str:
    lang = v.lang
    status = "✅ " + t("PASSED", lang) if v.passed else "❌ " + t("NOT PASSED", lang)
    out = [
        f"# {md(v.exercise_title)}",
        "",
        code(v.exercise) + (f" · {t('learner', lang)} {code(v.student)}" if v.student else ""),
        "",
        f"**{fmt_points(v.score)} / {fmt_points(v.max_score)}** · {status}"
        + (
            " · " + t("{passed} of {total} checks passed", lang, passed=v.checks_passed, total=v.checks_total)
            if v.checks_total
            else ""
        ),
        "",
    ]
    if v.adjustments:
        out += [f"## {t('Score adjustments', lang)}", ""] + [f"- {md(a.text)}" for a in v.adjustments] + [""]
    if v.symptoms:
        out += [
            md(labelled(t("symptoms", lang), listing([label for _, label in v.symptoms], lang), lang)),
            "",
        ]
    if v.error_kind:
        heading = labelled(t("The submission could not be graded normally", lang), v.error_label or "", lang)
        out += [
            f"> **{md(heading)}**  ",
            f"> {md(v.error_message or '')}",
            "",
        ]
    if v.root_causes:
        out += [f"## {t('Fix these first', lang)}", ""]
        for root in v.root_causes:
            c = root.check
            out.append(f"- ❌ **{md(c.title)}** — {fmt_points(c.points)} / {fmt_points(c.max_points)}")
            if c.message:
                out.append(f"  {md(c.message)}".replace("\n", "\n  "))
            out.append(f"  _{md(they_build_on(c, lang))}_")
            out += [
                f"  - ❌ {md(d.title)} — {fmt_points(d.points)} / {fmt_points(d.max_points)}"
                for d in root.dependents
            ]
        out.append("")
    if v.diagnoses:
        out += [f"## {t('Diagnosis', lang)}", ""]
        # by level: only a reproduced bug is stated as a fact (reports/view.py diagnosis_groups)
        for group in v.diagnosis_groups:
            out += [f"### {md(group.heading)}", "", f"_{md(group.lead)}_", ""]
            for d in group.items:
                named = f" {code(d.mutant)}" if d.mutant else ""
                out.append(f"- **{md(rule_day(d.rule_label, d.day, lang))}**{named}: {md(d.said)}")
                if d.note:
                    out.append(f"  {md(d.note)}")
                if d.evidence:
                    out.append("  " + md(listing([f"{k} = {val}" for k, val in d.evidence], lang, "; ")))
            out.append("")
    for curve in v.curves:
        out += [
            f"## {t('Training probe', lang)}",
            "",
            f"{md(curve.check_title)}: `{spark(curve.curve.losses, 60)}`",
            "",
        ]
        out += [md(curve_facts(curve, lang)), ""]
    out += [f"## {t('Checks by rule and day', lang)}", ""]
    for g in v.groups:
        out += [
            f"### {md(g.rule_label)} · {md(t('day {day}', lang, day=g.day))} "
            f"({fmt_points(g.points)} / {fmt_points(g.max_points)})",
            "",
        ]
        for c in g.checks:
            mark = "✅" if c.passed else "❌"
            out.append(f"- {mark} **{md(c.title)}** — {fmt_points(c.points)} / {fmt_points(c.max_points)}")
            if c.caused_by:  # its own message is what its root cause makes: shown above instead
                out.append(f"  _{md(builds_on(c, lang))}_")
            elif c.dependents:
                out.append(f"  _{md(root_of(c, lang))}_")
            elif c.message:
                out.append(f"  {md(c.message)}".replace("\n", "\n  "))
        out.append("")
    if v.warnings:
        out += [f"## {t('Warnings', lang)}", ""] + [f"- {md(w)}" for w in v.warnings] + [""]
    if v.output:
        out += [f"## {t('What your code printed', lang)}", ""]
        out += [fence(v.output.start.removesuffix("\n")), ""] if v.output.start else []
        if v.output.cut_bytes:
            out += [f"_… {md(t('{bytes} bytes cut', lang, bytes=v.output.cut_bytes))} …_", ""]
        out += [fence(v.output.end.removesuffix("\n")), ""] if v.output.end else []
    isolation = f" · {md(t('isolation: {isolation}', lang, isolation=v.isolation))}" if v.isolation else ""
    out.append(f"<sub>{md(t('grader {version}', lang, version=v.grader_version or '?'))}{isolation}</sub>")
    return "\n".join(out) + "\n"


def render_markdown(
    grade: Grade, lang: str = "en", budget: Budget | None = None, *, learner: bool = False
) -> str:
    return render_view(build_view(grade, lang, budget, learner=learner))
