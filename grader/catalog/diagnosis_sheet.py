"""A bug hunt's diagnosis sheet (`diagnosis.toml`) read as learners write it, and judged.

Pure functions over the parsed TOML (grader.intake.submission reads the file; the hidden test of
day49-bughunt holds which rule and day each bug accepts and calls these):

- rule ids are case-insensitive, and `_` or spaces stand for `-`: "Causal-Mask", "causal_mask"
  and "causal mask" are `causal-mask`. A rule that is no rule id at all is told the valid ids,
  the closest first; a valid id that is not this bug's rule is told where to look.
- days are numbers: `day = 44`, `day = "44"`, `day = 44.0` and `day = "Day 44"` are 44.
- a bug's table may be written `[bugs.B]` or `[bugs.b]`; symptom letters as quiz choices
  ("B", "b", "(B)", "B)").
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from grader.catalog.answers import parse_choice
from grader.catalog.rules import all_rules
from grader.locale import Message, msg

# what a diagnosis may name: every rule but the quiz's, the exercises' own rules too
RULE_IDS = tuple(r for r in all_rules() if r != "quiz")
_DAY = re.compile(r"(?:day\s*)?(?P<day>\d{1,3})(?:\.0*)?", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True)
class AcceptedDiagnosis:
    """What one bug accepts: rule ids, curriculum days, and where to look when the rule is wrong."""

    rules: frozenset[str]
    days: frozenset[int]
    look: Message


def rule_id(raw: object) -> str:
    """A rule as written, in the form of the rule ids: "Causal_Mask " -> "causal-mask"."""
    text = unicodedata.normalize("NFKC", str(raw if raw is not None else "")).strip().casefold()
    return re.sub(r"[\s_\-]+", "-", text)


def day_number(raw: object) -> int | None:
    """A day as written: 44, "44", 44.0, "Day 44"; None when it is not a day number."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str) and (m := _DAY.fullmatch(unicodedata.normalize("NFKC", raw).strip())):
        return int(m["day"])
    return None


def closest_first(written: str, ids: Sequence[str] = RULE_IDS) -> list[str]:
    """Every id, the most similar to `written` first (ties in the given order)."""
    ratio = {i: difflib.SequenceMatcher(None, written, i).ratio() for i in ids}
    return sorted(ids, key=lambda i: -ratio[i])


def bug_entry(sheet: Mapping, bug: str) -> object:
    """The sheet's table of one bug: [bugs.B], or [bugs.b]."""
    bugs = sheet.get("bugs")
    if not isinstance(bugs, Mapping):
        return None
    return bugs.get(bug, bugs.get(bug.lower()))


def judge_bug(sheet: Mapping, bug: str, accepted: AcceptedDiagnosis) -> Message | None:
    """Why the sheet's diagnosis of `bug` is not accepted, or None when it is."""
    entry = bug_entry(sheet, bug)
    if not isinstance(entry, Mapping):
        return msg("diagnosis.toml has no [bugs.{bug}] table with rule and day.", bug=bug)
    written, rule = entry.get("rule", ""), rule_id(entry.get("rule", ""))
    if rule not in RULE_IDS:
        return msg(
            "bugs.{bug}.rule = {rule} is not a rule id; the rule ids are, the closest first: {ids}.",
            bug=bug,
            rule=repr(written),
            ids=", ".join(closest_first(rule)),
        )
    if rule not in accepted.rules:
        return msg(
            "bugs.{bug}.rule = {rule} is not the rule bug ({bug}) breaks. Look at {look}.",
            bug=bug,
            rule=repr(written),
            look=accepted.look,
        )
    raw_day = entry.get("day")
    day = day_number(raw_day)
    if day is None:
        return msg(
            "bugs.{bug}.day = {day} is not a day number: write the curriculum day, e.g. day = 44.",
            bug=bug,
            day=repr(raw_day),
        )
    if day not in accepted.days:
        return msg(
            "bugs.{bug}.day = {day} is not the curriculum day that teaches this rule.",
            bug=bug,
            day=repr(raw_day),
        )
    return None


def symptom_letter(raw: object, letters: str = "ABCD") -> str:
    """The bug letter a symptom names ("B", "b", "(B)", "B)"), or the text as written."""
    letter = parse_choice(raw, letters)
    return letter if isinstance(letter, str) else str(raw if raw is not None else "").strip()
