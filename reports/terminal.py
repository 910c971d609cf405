"""Grade -> a compact terminal report, 80 columns, coloured only when asked (a tty or --color).

Learner text never reaches the terminal raw: the view (reports/view.py, `visible`) has written
every control character and escape sequence out (ESC as `\x1b`, a bidi override as `<U+202E>`),
so a submission cannot recolour, move the cursor, retitle the terminal or reorder a line; what
the grader itself colours (with --color) is its own chrome.
"""

from __future__ import annotations

import math
import unicodedata

from grader.locale import number
from grader.models import Grade
from reports.view import (
    Budget,
    PrintedView,
    ReportView,
    build_view,
    builds_on,
    diagnosis_line,
    fmt_points,
    labelled,
    listing,
    root_of,
    t,
    they_build_on,
    utf8_len,
)

WIDTH = 80
PRINTED_HEAD, PRINTED_TAIL = 5, 15  # lines of printed output shown: the first and the last
SPARKS = "▁▂▃▄▅▆▇█"
NO_LINE_START = set("。，、；：？！）」』》〉.,;:?!)]}")  # never the first character of a line


class Style:
    def __init__(self, color: bool):
        self.color = color

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def ok(self, text):
        return self._wrap("32", text)

    def bad(self, text):
        return self._wrap("31", text)

    def warn(self, text):
        return self._wrap("33", text)

    def bold(self, text):
        return self._wrap("1", text)

    def dim(self, text):
        return self._wrap("2", text)

    def head(self, text):
        return self._wrap("1;36", text)


def clean(text: str) -> str:
    """Tabs become spaces; any control character left (the view has written them all out) "?"."""
    text = text.replace("\t", "    ")
    return "".join(
        ch if ch == "\n" or (ch.isprintable() and unicodedata.category(ch) != "Cf") else "?" for ch in text
    )


def width(text: str) -> int:
    """Columns `text` takes in a terminal: CJK wide and full-width characters take two."""
    return sum(
        2 if unicodedata.east_asian_width(ch) in "WF" else 0 if unicodedata.combining(ch) else 1
        for ch in text
    )


def wrap(text: str, cols: int, indent: str = "") -> list[str]:
    """Greedy wrapping at spaces, and between any two wide (CJK) characters; a word longer than
    a line is cut. Closing punctuation may hang into the two columns kept free for it."""
    lines: list[str] = []
    room = max(cols - width(indent), 10)
    avail = room - 2  # two columns kept for closing punctuation (kinsoku)
    for para in clean(text).split("\n"):
        tokens, word = [], ""
        for ch in para:
            if ch == " " or unicodedata.east_asian_width(ch) in "WF":
                if word:
                    tokens.append(word)
                    word = ""
                tokens.append(ch)
            else:
                word += ch
        if word:
            tokens.append(word)
        line, used = "", 0
        for tok in tokens:
            w = width(tok)
            if used + w <= avail or (tok in NO_LINE_START and line.strip() and used + w <= room):
                line, used = line + tok, used + w
                continue
            if line.strip():
                lines.append(indent + line.rstrip())
            line, used = ("", 0) if tok == " " else (tok, w)
            if used > avail:  # one word longer than a line
                chunk, cw = "", 0
                for ch in line:
                    chw = width(ch)
                    if cw + chw > avail:
                        lines.append(indent + chunk)
                        chunk, cw = "", 0
                    chunk, cw = chunk + ch, cw + chw
                line, used = chunk, cw
        if line.strip() or not lines:
            lines.append(indent + line.rstrip())
    return lines


def pad(text: str, cols: int) -> str:
    return text + " " * max(cols - width(text), 0)


def spark(losses: list[float | None], cols: int = 48) -> str:
    """A one-line plot of the losses; NaN/inf shows as ×."""
    if not losses:
        return ""
    step = max(1, math.ceil(len(losses) / cols))
    picked = losses[::step]
    finite = [v for v in picked if v is not None]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    span = (hi - lo) or 1.0
    return "".join(
        "×" if v is None else SPARKS[min(int((v - lo) / span * (len(SPARKS) - 1) + 0.5), len(SPARKS) - 1)]
        for v in picked
    )


def curve_facts(c, lang: str) -> str:
    """first/lowest/last loss, where it went NaN, ln(V) and the floor: one sentence."""
    facts = [
        t(
            "first loss {first}, lowest {lowest}, last {last}",
            lang,
            first=c.first,
            lowest=c.lowest,
            last=c.last,
        )
    ]
    if c.nonfinite_step is not None:
        facts.insert(0, t("the loss is NaN/inf from step {step}", lang, step=c.nonfinite_step))
    facts.append(
        listing(
            [
                t("ln(V) = {value}", lang, value=number(c.curve.ln_v, 3)),
                t("entropy floor {value}", lang, value=number(c.curve.floor, 3)),
            ],
            lang,
        )
    )
    return listing(facts, lang, "; ")


def render_lines(v: ReportView, s: Style) -> list[str]:
    lang = v.lang
    status_text = t("PASSED", lang) if v.passed else t("NOT PASSED", lang)
    status = s.ok(status_text) if v.passed else s.bad(status_text)
    right = f"{fmt_points(v.score)} / {fmt_points(v.max_score)}  "
    room = WIDTH - width(right) - width(status_text) - 2
    title = clean(v.exercise_title)
    if width(title) > room:
        while width(title) > room - 1:
            title = title[:-1]
        title += "…"
    gap = " " * max(WIDTH - width(title) - width(right) - width(status_text), 2)
    lines = [s.bold(title) + gap + right + status]
    who = f" · {t('learner', lang)} {clean(v.student)}" if v.student else ""
    tally = (
        " · " + t("{passed} of {total} checks passed", lang, passed=v.checks_passed, total=v.checks_total)
        if v.checks_total
        else ""  # a submission that did not load ran no check: its error says why
    )
    lines += [s.dim(x) for x in wrap(f"{v.exercise}{who}{tally}", WIDTH)]
    for a in v.adjustments:
        lines += [s.warn(x) for x in wrap(a.text, WIDTH)]
    lines.append(s.dim("─" * WIDTH))
    if v.error_kind:
        lines.append(
            s.bad(labelled(t("The submission could not be graded normally", lang), v.error_label or "", lang))
        )
        lines += wrap(v.error_message or "", WIDTH, "  ")
    if v.root_causes:
        lines.append(s.bad(s.bold(t("Fix these first", lang))))
        for root in v.root_causes:
            lines += check_line(root.check, s, "  ")
            lines += wrap(root.check.message, WIDTH, "      ") if root.check.message else []
            lines += [s.warn(x) for x in wrap(they_build_on(root.check, lang), WIDTH, "      ")]
            for c in root.dependents:
                lines += check_line(c, s, "        ")
        lines.append(s.dim("─" * WIDTH))
    for g in v.groups:
        head = f"{g.rule_label} · {t('day {day}', lang, day=g.day)}"
        pts = f"{fmt_points(g.points)}/{fmt_points(g.max_points)}"
        lines.append(s.head(pad(head, WIDTH - len(pts))) + (s.ok(pts) if g.passed else s.bad(pts)))
        for c in g.checks:
            lines += check_line(c, s, "  ")
            if c.caused_by:  # its own message is what its root cause makes: shown above instead
                lines += [s.warn(x) for x in wrap(builds_on(c, lang), WIDTH, "      ")]
            elif c.dependents:
                lines += wrap(root_of(c, lang), WIDTH, "      ")
            elif c.message:
                lines += wrap(c.message, WIDTH, "      ")
    if v.diagnoses:
        lines.append(s.dim("─" * WIDTH))
        lines.append(s.warn(s.bold(t("Diagnosis", lang))))
        # by level: only a reproduced bug is stated as a fact (reports/view.py diagnosis_groups)
        for group in v.diagnosis_groups:
            lines.append("  " + s.bold(group.heading))
            lines += [s.dim(x) for x in wrap(group.lead, WIDTH, "  ")]
            for d in group.items:
                body = wrap(diagnosis_line(d, lang), WIDTH, "    ")
                body[0] = {"candidate": "  ○ ", "localized": "  ▸ "}.get(d.level, "  ● ") + body[0][4:]
                lines += [s.warn(body[0])] + body[1:]
                lines += [s.dim(x) for x in wrap(d.note, WIDTH, "      ")] if d.note else []
    for curve in v.curves:
        lines.append(s.dim("─" * WIDTH))
        lines.append(s.bold(t("Training probe", lang)) + f" · {clean(curve.check_title)}")
        lines.append("  " + spark(curve.curve.losses, WIDTH - 4))
        lines += wrap(curve_facts(curve, lang), WIDTH, "  ")
    if v.symptoms:
        lines.append(s.dim("─" * WIDTH))
        lines += wrap(
            labelled(t("symptoms", lang), listing([label for _, label in v.symptoms], lang), lang), WIDTH
        )
    for w in v.warnings:
        lines += [s.warn(x) for x in wrap(labelled(t("warning", lang), w, lang), WIDTH)]
    if v.output:
        lines.append(s.dim("─" * WIDTH))
        lines.append(s.bold(t("What your code printed", lang)))
        lines += [s.dim(x) if x.startswith("  " + CUT_MARK) else x for x in printed_lines(v.output, lang)]
    if v.isolation:
        lines += [s.dim(x) for x in wrap(t("isolation: {isolation}", lang, isolation=v.isolation), WIDTH)]
    return lines


def check_line(c, s: Style, indent: str) -> list[str]:
    """A check's mark, title (wrapped) and points, the points at the right edge."""
    mark = s.ok("✓") if c.passed else s.bad("✗")
    pts = f"{fmt_points(c.points)}/{fmt_points(c.max_points)}"
    lead = width(indent) + 2
    name = wrap(c.title, WIDTH - lead - 1 - len(pts), "")
    first = name[0] if name else ""
    return [f"{indent}{mark} " + pad(first, WIDTH - lead - len(pts)) + s.dim(pts)] + [
        indent + "  " + n for n in name[1:]
    ]


CUT_MARK = "… "


def clip(line: str, cols: int) -> str:
    """One line within `cols` columns, "…" at its end when cut."""
    line = clean(line)
    if width(line) <= cols:
        return line
    while width(line) > cols - 1:
        line = line[: max(len(line) - max((width(line) - cols) // 2, 1), 0)]
    return line + "…"


def printed_lines(p: PrintedView, lang: str) -> list[str]:
    """The first PRINTED_HEAD and the last PRINTED_TAIL lines of what the code printed, each
    clipped to the terminal's width, and between them one line saying how many bytes are not
    shown (cut by the jail, the view or here)."""

    def split(text: str) -> list[str]:
        return text.removesuffix("\n").split("\n") if text else []

    if p.cut_bytes:
        head, tail, cut = split(p.start), split(p.end), p.cut_bytes
    else:  # the start and the end join: one text
        head, tail, cut = split(p.start + p.end), [], 0
        if len(head) > PRINTED_HEAD + PRINTED_TAIL:
            head, tail = head[:PRINTED_HEAD], head[PRINTED_HEAD:]
    if cut or tail:
        dropped = head[PRINTED_HEAD:] + tail[:-PRINTED_TAIL]
        head, tail = head[:PRINTED_HEAD], tail[-PRINTED_TAIL:]
        cut += sum(utf8_len(x) + 1 for x in dropped)
    out = ["  " + clip(x, WIDTH - 2) for x in head]
    if cut:
        out.append("  " + CUT_MARK + t("{bytes} bytes cut", lang, bytes=cut) + " …")
    return out + ["  " + clip(x, WIDTH - 2) for x in tail]


def render_text(
    grade: Grade,
    lang: str = "en",
    color: bool = False,
    budget: Budget | None = None,
    *,
    learner: bool = False,
) -> str:
    return "\n".join(render_lines(build_view(grade, lang, budget, learner=learner), Style(color))) + "\n"
