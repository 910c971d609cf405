"""How text a learner controls is kept and shown: the one cap-and-sanitise path.

Every string that reaches a grade (grader.models), the gradebook, a grade file, an export or a
terminal goes through here: `clean_text` (what any store can hold), `bounded` (plain data within a
byte budget, as a grade keeps its messages, params and evidence), `visible` and `shown` (what a
reader sees: reports/view.py), `terminal` (what the command line echoes). Imports nothing of the
grader but its limits, so the models, the store, the reports and the CLI can all use it.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from grader.limits import DATA_DEPTH, DATA_ITEMS, MESSAGE_BYTES, MSGID_CHARS, SHORT_CHARS

CUT = "…"

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(value: str) -> str:
    """Text every store and encoder keeps unchanged: NUL and lone surrogates (which a learner's
    exception message may carry; UTF-8 cannot encode them, PostgreSQL refuses NUL) become U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", value)


# -- how learner text is shown: the one convention of every human-facing format ---------------
#
# Text a learner controls (messages with their quoted exception text and type names, evidence,
# warnings, printed output, and any name a hand-made grade may carry) is shown as the characters
# it is, except those that would act instead of show:
#   - newline and tab stay (each format lays them out); CR LF becomes a newline;
#   - every other control character, C0, DEL and C1, is written as Python writes it in a repr:
#     ESC as `\x1b`, BEL as `\x07`, a bare CR as `\r`, NUL as `\x00`, CSI (U+009B) as `\x9b`;
#   - invisible formatting characters (bidi embeddings, overrides, isolates and marks, zero-width
#     characters, the BOM, soft hyphen, line and paragraph separators, tag characters), lone
#     surrogates and noncharacters are written as `<U+202E>`.
# A backslash the learner wrote stays a backslash. `visible` applies it; escaping for HTML,
# Markdown or XML comes after, in each renderer.

_C0_C1 = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_INVISIBLE = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"  # Unicode's format characters (Cf, Zl, Zp)
    "\ud800-\udfff"  # lone surrogates
    "\ufdd0-\ufdef\ufffe\uffff" + "".join(f"\\U{p:04x}fffe\\U{p:04x}ffff" for p in range(1, 17))
)
_ACTING = re.compile(f"\r\n|[{_C0_C1}{_INVISIBLE}]")
ACTING_CHARS = re.compile(f"[{_C0_C1}{_INVISIBLE}]")  # what `visible` writes out


def _shown_char(m: re.Match) -> str:
    ch = m.group()
    if ch == "\r\n":
        return "\n"
    if ch == "\r":
        return "\\r"
    return f"\\x{ord(ch):02x}" if ord(ch) <= 0x9F else f"<U+{ord(ch):04X}>"


def visible(text) -> str:
    """`text` with every character that would act rather than show written out (see above)."""
    text = text if isinstance(text, str) else str(text)
    return _ACTING.sub(_shown_char, text)


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def cap_bytes(text, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes (never inside a character), marked when cut.
    Never raises: a lone surrogate counts as the three bytes it would take."""
    text = text if isinstance(text, str) else str(text)
    limit = max(limit, 0)
    if len(text) <= limit // 4:  # cannot be too long: no character takes more than 4 bytes
        return text
    data = text[: limit + 1].encode("utf-8", "surrogatepass")  # each character takes >= 1 byte
    if len(data) <= limit and len(text) <= limit:
        return text
    marker = f" {CUT}"
    if limit < len(marker.encode()):
        return ""
    end = limit - len(marker.encode())
    while end > 0 and (data[end] & 0xC0) == 0x80:  # back to a character's start
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass") + marker


def shown(text, limit: int = MESSAGE_BYTES, form=visible) -> str:
    """Learner text as a report shows it: `visible` (or another `form`), then within `limit`
    UTF-8 bytes. Work is bounded by `limit`, not by the text: a 100 MB string costs what its
    first `limit` characters do."""
    text = text if isinstance(text, str) else str(text)
    return cap_bytes(form(text[: max(limit, 0) + 1]), limit)


def terminal(text, limit: int = MESSAGE_BYTES) -> str:
    """Text for an instructor's terminal (every click echo of data): `shown`, so no control
    character, escape sequence (OSC, CSI), bare CR or bidi control reaches it raw; newlines and
    tabs stay. Within `limit` UTF-8 bytes."""
    return shown(text, limit)


# -- data a grade keeps: bounded in size, count and depth -------------------------------------


class Room:
    """How many bytes of text a value may still take (numbers and structure count a little)."""

    def __init__(self, left: int):
        self.left = left

    def take(self, n: int) -> None:
        self.left -= n


_SCALAR_BYTES = 8  # what a number, a boolean or None is charged


def bounded(value: Any, room: Room, depth: int = 0, *, in_message: bool = False) -> Any:
    """`value` as plain data a grade may keep: every string `clean_text` and cut (marked) to what
    `room` has left, at most DATA_ITEMS entries in a list or dict (entries that find no room are
    dropped), nothing nested deeper than DATA_DEPTH. Work is bounded by the room, not the value:
    a 100 MB string costs what its first bytes that fit do. The id of a nested message
    (`{"id": ..., "params": ...}`) is kept whole, so the message still renders, and messages
    nested in messages (the grader's own structure, as `join` makes it) do not count as depth."""
    if value is None or isinstance(value, (bool, int, float)):
        room.take(_SCALAR_BYTES)
        return value
    if isinstance(value, str):
        text = cap_bytes(clean_text(value[: max(room.left, 0) + 1]), room.left)
        room.take(utf8_len(text) + 2)
        return text
    if depth >= DATA_DEPTH and not in_message:
        room.take(2)
        return [] if isinstance(value, (list, tuple)) else {} if isinstance(value, dict) else ""
    if isinstance(value, dict):
        return _bounded_dict(value, room, depth, in_message)
    if isinstance(value, (list, tuple)):
        items = []
        for i, item in enumerate(value):
            if i >= DATA_ITEMS or room.left <= 0:
                break
            items.append(bounded(item, room, depth + 1))
            room.take(1)
        return items
    return bounded(str(value)[: max(room.left, 0) + 1], room, depth)


def _bounded_dict(value: dict, room: Room, depth: int, in_message: bool) -> dict:
    """`bounded` for a dict. When it does not fit, its room is shared out as water fills: the
    entries that need less than an equal share keep all they need, the others an equal share
    of the rest, so one huge param cannot crowd out the others a message needs to render."""
    is_message = _is_message(value)
    entries = [(clean_text(str(k)[:SHORT_CHARS]), v) for k, v in itertools.islice(value.items(), DATA_ITEMS)]

    def entry(name: str, item: Any, part: Room) -> Any:
        if is_message and name == "id":  # the grader's msgid: whole, or the message cannot render
            part.take(len(str(item)[:MSGID_CHARS]))
            return clean_text(str(item)[:MSGID_CHARS])
        if is_message and name == "params" and isinstance(item, dict):
            return bounded(item, part, depth, in_message=True)
        if in_message and _is_message(item):  # a message inside a message is not nesting
            return bounded(item, part, depth)
        return bounded(item, part, depth + 1)

    available = max(room.left, 0)
    needs = []
    for name, item in entries:  # what each entry takes within all the room there is
        probe = Room(available)
        entry(name, item, probe)
        needs.append(available - probe.left + utf8_len(name) + 4)
    shares = list(needs)
    if sum(needs) > available:
        left, count = available, len(entries)
        for i in sorted(range(len(entries)), key=needs.__getitem__):
            shares[i] = min(needs[i], left // count)
            left, count = left - shares[i], count - 1
    out: dict = {}
    for (name, item), share in zip(entries, shares, strict=True):
        cost = utf8_len(name) + 4
        if share <= cost:
            continue  # no room for this entry at all
        part = Room(share - cost)
        out[name] = entry(name, item, part)
        room.take(share - part.left)
    return out


def _is_message(value: Any) -> bool:
    """Whether `value` is a message as data (grader.locale.Message.to_data)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("params", {}), dict)
    )


def data_bytes(value: Any) -> int:
    """What `bounded` charges for `value` (kept data: already bounded, so this is cheap)."""
    room = Room(1 << 62)
    bounded(value, room)
    return (1 << 62) - room.left
