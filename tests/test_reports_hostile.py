"""Hostile text never breaks a report (SPEC, "What a hostile or broken submission gets").

Lone surrogates, NUL and other controls, terminal escapes (colour, title, clipboard), bare CR,
backspace, C1 controls, bidi overrides and isolates, zero-width characters and very long strings,
put into every text field of a grade, whether the grade was validated (its text cleaned) or built
with model_construct (not cleaned): every format renders, parses and stays within 1 MiB, and the
people-facing formats show such characters written out (reports/view.py `visible`).
"""
import json
import re
import sys
import unicodedata

import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.models import CheckResult, Diagnosis, Grade, GradeError, Note, Printed
from reports import FORMATS, render
from reports.render import fit
from reports.terminal import render_text
from reports.view import (ACTING_CHARS, MAX_MESSAGE, MAX_REPORT, Budget, build_view, cap_bytes,
                          shown, visible)
from report_checks import check_report

PIECES = ["\ud800", "\udfff", "\x00", "\x1b[31m", "\x1b[2J", "\x1b]0;pwn\x07", "\x1b]52;c;aGk=\x07",
          "\r", "\b", "\x9b", "\x85", "\x7f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
          "\u2066", "\u2067", "\u2068", "\u2069", "\u200b", "\u200d", "\ufeff", "\u2028", "\ufffe",
          "\U000e0041", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "]]>", "&amp;",
          "{name}", "{0}", "`", "```", "**", "[x](http://evil)", "=cmd|' /C calc'!A0", "\n", "\t",
          "é", "中文", "\U0001f600", "x"]
hostile = st.lists(st.sampled_from(PIECES), max_size=12).map("".join) | st.text(max_size=40)


def hostile_grade(t: dict, construct: bool) -> Grade:
    """A grade with hostile text `t[field]` in every text field; built with model_construct (no
    cleaning, as other code or old JSON may give) or validated."""
    make = (lambda cls, **kw: cls.model_construct(**kw)) if construct else (lambda cls, **kw: cls(**kw))
    params = {"type": t["type"], "message": t["message"]}
    checks = [
        make(CheckResult, id="softmax-matches-reference", passed=False, points=0.0, max_points=2.0,
             rule="numerical-stability", day=45, title=t["title"], symptoms=["exception"],
             message=f"your code raised {t['type']}: {t['message']}",
             message_id="your code raised {type}: {message}", message_params=params,
             evidence={"got": t["evidence"], t["key"]: [t["evidence"], 1.5], "max_error": float("nan")},
             title_i18n={"zh-TW": t["title"]}),
        make(CheckResult, id=t["id"] if construct else "x", passed=True, points=1.0, max_points=1.0,
             rule="api-contract", day=45, title="n_head must divide d_model", symptoms=[], evidence={},
             title_i18n={}, message="", message_id=None, message_params={}),
    ]
    return make(
        Grade, exercise="day45-attention", passed=False, score=1.0, max_score=3.0, checks=checks,
        symptoms=["exception"],
        diagnosis=[make(Diagnosis, rule="causal-mask", day=44, mutant=t["id"], check="softmax-matches-reference",
                        message=t["message"], message_id=None, message_params={})],
        error=make(GradeError, kind="crash", message=f"importing attention.py raised {t['type']}: {t['message']}",
                   message_id=None, message_params={}),
        warnings=[make(Note, message=t["warning"], message_id=None, message_params={})],
        output=make(Printed, start=t["start"], end=t["end"], cut_bytes=12345),
        isolation="bubblewrap", grader_version=t["id"], student=t["student"],
        duration_s=1.0)


FIELDS = ("type", "message", "title", "evidence", "key", "id", "warning", "start", "end", "student")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({f: hostile for f in FIELDS}), st.booleans())
def test_hostile_text_in_every_field_renders_in_every_format_and_language(t, construct):
    grade = hostile_grade(t, construct)
    for fmt in FORMATS:
        for lang in ("en", "zh-TW"):
            check_report(fmt, render(grade, fmt, lang), lang)


def every_piece() -> dict:
    """Each field holding every hostile piece, and very long."""
    text = "".join(PIECES)
    return {f: text * 3 for f in FIELDS} | {"message": text * 4000, "start": (text + "\n") * 3000,
                                           "end": "line\n" * 30 + text}


@pytest.mark.parametrize("construct", [True, False])
def test_every_hostile_piece_at_once_and_too_much_of_it(construct):
    grade = hostile_grade(every_piece(), construct)
    for fmt in FORMATS:
        for lang in ("en", "zh-TW"):
            out = render(grade, fmt, lang)
            check_report(fmt, out, lang)
            if fmt == "text":       # written out, by the one convention
                assert "\\x1b]0;pwn\\x07" in out and "<U+202E>" in out and "\\x9b" in out
                assert "\\r" in out and "<U+200B>" in out
                if construct:         # not cleaned by the model: the view writes these out too
                    assert "<U+D800>" in out and "\\x00" in out
                else:                 # cleaned when the grade was made
                    assert "\ufffd" in out and "<U+D800>" not in out


def test_a_100_mb_message_and_output_cost_what_a_report_holds():
    huge = "\x1b[31m" + "A" * (100 * 1024 * 1024) + "\u202e"
    grade = Grade.model_construct(
        exercise="day45-attention", passed=False, score=0.0, max_score=1.0, symptoms=[], diagnosis=[],
        checks=[CheckResult.model_construct(id="c", passed=False, points=0.0, max_points=1.0, rule="quiz",
                                            day=45, title=huge, symptoms=[], evidence={"got": huge},
                                            title_i18n={}, message=huge, message_id=None, message_params={})],
        error=None, warnings=[], output=Printed.model_construct(start=huge, end=huge, cut_bytes=0),
        isolation=huge, grader_version="", student=huge, duration_s=0.0)
    for fmt in FORMATS:
        out = render(grade, fmt, "en")
        check_report(fmt, out)
    html = render(grade, "html", "en")
    msg = BeautifulSoup(html, "html.parser").select_one(".check .msg").get_text()
    assert MAX_MESSAGE - 8 <= len(msg.encode()) <= MAX_MESSAGE and msg.startswith("\\x1b[31mAAA")


# -- the one convention and the caps -------------------------------------------------------------

def test_visible_writes_out_what_would_act_and_keeps_the_rest():
    assert visible("a\x1b[31mb") == "a\\x1b[31mb"
    assert visible("\x1b]52;c;aGk=\x07") == "\\x1b]52;c;aGk=\\x07"
    assert visible("x\ry\r\nz\bw\x00") == "x\\ry\nz\\x08w\\x00"
    assert visible("\x9b\x85\x7f") == "\\x9b\\x85\\x7f"
    assert visible("\u202eevil\u2066\u200b\ufeff\ud800\U000e0041") == \
        "<U+202E>evil<U+2066><U+200B><U+FEFF><U+D800><U+E0041>"
    kept = "tab\there\nnew line, 中文、全形，é, \U0001f600, <tag> & \\x1b as typed"
    assert visible(kept) == kept


def test_every_format_character_of_this_python_is_written_out():
    """The hard-coded ranges in view.py cover every Cf, Zl, Zp and Cc character Unicode knows
    (as this Python's unicodedata does), but newline and tab."""
    missed = [hex(c) for c in range(sys.maxunicode + 1)
              if unicodedata.category(chr(c)) in ("Cf", "Zl", "Zp", "Cc", "Cs") and chr(c) not in "\n\t"
              and not ACTING_CHARS.fullmatch(chr(c))]
    assert missed == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=60) | hostile, st.integers(0, 80))
def test_cap_bytes_and_shown_never_raise_and_keep_the_limit(text, limit):
    for capped in (cap_bytes(text, limit), shown(text, limit)):
        assert len(capped.encode("utf-8", "surrogatepass")) <= limit
        assert capped == text or capped.endswith(" …") or capped == "" or capped != text
    assert cap_bytes(text, 10 ** 6) == text
    shown(text, limit).encode("utf-8")                 # shown text has no lone surrogate left
    assert cap_bytes("\ud800" * 10, 10) == "\ud800\ud800 …"


def test_a_budget_holds_all_learner_text_together():
    budget = Budget(100 * 1024)
    taken = [budget.take("é" * 50_000) for _ in range(5)]
    assert sum(len(x.encode()) for x in taken) <= 100 * 1024
    assert len(taken[0].encode()) <= MAX_MESSAGE and taken[-1] == ""


def test_fit_remakes_a_report_with_less_learner_text_until_it_fits():
    made = []

    def make(budget):
        made.append(budget.left)
        return "<" * (budget.left * 4)          # escaping that quadruples learner text
    out = fit(make)
    assert len(out) <= MAX_REPORT and made[0] > made[-1] and len(made) > 1


# -- what the code printed -------------------------------------------------------------------------

def printed_grade(start: str, end: str = "", cut: int = 0) -> Grade:
    return Grade(exercise="day45-attention", passed=False, score=0, max_score=1,
                 output=Printed(start=start, end=end, cut_bytes=cut))


def test_text_shows_the_start_and_the_end_of_what_was_printed_and_the_bytes_cut():
    start = "".join(f"start line {i}\n" for i in range(40))
    end = "".join(f"end line {i}\n" for i in range(40)) + "\x1b]0;pwn\x07 Traceback: the last words"
    text = render(printed_grade(start, end, cut=5000), "text", "en")
    section = text[text.index("What your code printed"):]
    lines = section.splitlines()
    assert lines[1] == "  start line 0" and "  start line 4" in lines and "  start line 5" not in lines
    assert "  \\x1b]0;pwn\\x07 Traceback: the last words" in lines
    assert "  end line 26" in lines and "  end line 25" not in lines            # the last 15 lines
    cut = next(line for line in lines if "bytes cut" in line)
    dropped = sum(len(f"start line {i}\n") for i in range(5, 40)) + sum(len(f"end line {i}\n") for i in range(26))
    assert cut == f"  … {5000 + dropped} bytes cut …"
    assert lines.index(cut) == 6
    zh = render(printed_grade(start, end, cut=5000), "text", "zh-TW")
    assert "位元組" in zh


def test_short_output_is_shown_whole_without_a_cut_line():
    text = render(printed_grade("hello\nworld\n"), "text", "en")
    assert "  hello\n  world\n" in text and "bytes cut" not in text


def test_html_shows_start_and_end_cut_at_line_breaks_with_the_count():
    start = "".join(f"word{i} " * 10 + "\n" for i in range(2000))         # about 120 KB
    end = "".join(f"tail{i} " * 10 + "\n" for i in range(2000))
    grade = printed_grade(start, end, cut=777)
    doc = BeautifulSoup(render(grade, "html", "en"), "html.parser")
    shown_start = doc.select_one("#output pre.start").get_text()
    shown_end = doc.select_one("#output pre.end").get_text()
    assert shown_start.startswith("word0 ") and shown_start.endswith("\n")      # whole lines
    assert shown_end.startswith("tail") and shown_end.endswith("tail1999 \n")
    assert re.fullmatch(r"(tail\d+ ){10}", shown_end.split("\n", 1)[0])
    cut = int(doc.select_one("#output .cut")["data-cut-bytes"])
    assert cut == 777 + len(start) + len(end) - len(shown_start) - len(shown_end)
    assert len(shown_start.encode()) + len(shown_end.encode()) <= 64 * 1024


def test_markdown_junit_gradescope_and_json_carry_start_end_and_count():
    grade = printed_grade("first words\n", "last words\n", cut=4096)
    md = render(grade, "markdown", "en")
    assert md.index("```text\nfirst words\n```") < md.index("_… 4096 bytes cut …_") \
        < md.index("```text\nlast words\n```")
    junit = render(grade, "junit", "en")
    out = re.search(r"<system-out>(.*)</system-out>", junit, re.S).group(1)
    assert out.startswith("first words") and "bytes cut" in out and out.rstrip().endswith("last words")
    gs = json.loads(render(grade, "gradescope", "en"))["output"]
    assert gs.index("first words") < gs.index("bytes cut") < gs.index("last words")
    data = json.loads(render(grade, "json"))["output"]
    assert data == {"start": "first words\n", "end": "last words\n", "cut_bytes": 4096}


def test_json_keeps_learner_text_as_data_with_acting_characters_escaped():
    text = "\x1b]0;pwn\x07 \u202e \x9b \ud800 \x00"
    grade = Grade.model_construct(**{**printed_grade("").model_dump(), "student": text,
                                     "output": Printed.model_construct(start=text, end="", cut_bytes=0)})
    out = render(grade, "json")
    assert "\\u001b]0;pwn\\u0007 \\u202e \\u009b" in out and "\u202e" not in out
    data = json.loads(out)
    assert data["student"] == "\x1b]0;pwn\x07 \u202e \x9b \ufffd \ufffd"


def test_the_terminal_escapes_what_the_view_missed_and_keeps_its_own_colours():
    grade = printed_grade("\x1b[2Jred?\n")
    coloured = render_text(grade, "en", color=True)
    assert "\x1b[2J" not in coloured and "\\x1b[2Jred?" in coloured and "\x1b[1m" in coloured
    assert build_view(grade).output.start == "\\x1b[2Jred?\n"
