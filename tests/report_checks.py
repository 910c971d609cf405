"""What every report of a hostile grade must be, format by format (used by the report tests and
the adversarial corpus): it parses as its format, it is within 1 MiB, and no character that acts
instead of showing (an escape sequence's ESC, BEL, a C1 control, a bidi override, a lone
surrogate) is in it raw where a person or a terminal would meet it.
"""
from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET

import jsonschema
from bs4 import BeautifulSoup
from junitparser import JUnitXml

from reports.gradebook import COLUMNS
from reports.gradescope import schema
from reports.terminal import width
from reports.view import ACTING_CHARS, MAX_REPORT

# the tags and attributes the HTML report itself writes; a learner can add none
HTML_TAGS = {"html", "head", "meta", "title", "style", "body", "main", "header", "div", "h1", "h2",
             "h3", "p", "code", "span", "ul", "li", "section", "strong", "article", "a", "dl", "dt",
             "dd", "figure", "figcaption", "br", "ol", "details", "summary", "pre", "footer", "svg",
             "g", "line", "text", "path", "rect", "polyline", "circle", "title", "desc", "tspan",
             "defs", "clippath", "polygon"}
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
LAYOUT = {"\n", "\t", "\r"}       # a format may lay text out with these (CSV and XML may hold \r\n)


def raw_acting(text: str) -> list[str]:
    """The characters in `text` that act instead of show (newline, tab and CR of layout aside)."""
    return sorted({ch for ch in ACTING_CHARS.findall(text) if ch not in LAYOUT})


def check_report(fmt: str, text: str, lang: str = "en") -> None:
    """Assert that `text`, a report in `fmt`, is what a hostile grade must give."""
    assert isinstance(text, str) and text, fmt
    text.encode("utf-8")                                   # no lone surrogate: it encodes
    assert len(text.encode("utf-8")) <= MAX_REPORT, (fmt, len(text.encode("utf-8")))
    assert raw_acting(text) == [], (fmt, raw_acting(text)[:10])
    CHECKS[fmt](text)


def _text(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert all(width(line) <= 80 for line in text.splitlines()), \
        [line for line in text.splitlines() if width(line) > 80][:2]


def _json(text: str) -> None:
    data = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(c)))
    for key in ("exercise", "passed", "score", "max_score", "checks", "symptoms", "diagnosis", "error"):
        assert key in data


def _html(text: str) -> None:
    doc = BeautifulSoup(text, "html.parser")
    tags = {tag.name for tag in doc.find_all(True)}
    assert tags <= HTML_TAGS, tags - HTML_TAGS
    assert doc.find("script") is None and doc.find("img") is None
    assert not BIDI.search(text)
    for tag in doc.find_all(True):
        for attr in tag.attrs:
            assert not attr.startswith("on"), (tag.name, attr)


def _markdown(text: str) -> None:
    # outside fenced blocks (which show text as it is) no raw HTML tag and no link or image
    outside = re.sub(r"(?ms)^(`{3,})text\n.*?^\1$", "", text)
    outside = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", outside)          # inline code spans
    assert not re.search(r"<(?!/?sub>)[A-Za-z!/?]", outside), re.findall(r"<[^ ]{0,20}", outside)[:5]
    assert "](" not in outside.replace("\\](", "")
    assert "\x1b" not in text and not BIDI.search(text)


def _junit(text: str) -> None:
    ET.fromstring(text.encode("utf-8"))
    suites = list(JUnitXml.fromstring(text.encode("utf-8")))
    assert len(suites) == 1


def _gradescope(text: str) -> None:
    jsonschema.Draft202012Validator(schema()).validate(json.loads(text))


def _csv(text: str) -> None:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == COLUMNS and len(rows) == 2, rows[:3]
    for cell in rows[1]:
        assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r"), cell[:40]


CHECKS = {"text": _text, "json": _json, "html": _html, "markdown": _markdown, "junit": _junit,
          "gradescope": _gradescope, "csv": _csv}
