"""What the client prints: tables, times and messages, in the learner's language.

Everything the server sent is untrusted text: it reaches the terminal through
grader.text.terminal (no escape sequence, bare CR or bidi control acts), and tables are laid out
by display width (a CJK character takes two columns).
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, tzinfo

from grader.client.errors import Refused, ServerFailure
from grader.errors import GraderError
from grader.limits import SHORT_CHARS
from grader.locale import Message, msg
from grader.policy import clock
from grader.text import terminal


def say(message, lang: str) -> str:
    """A Message in `lang` (the student's wheel reads its own compiled catalog, grader.locale)."""
    if not isinstance(message, Message):
        return str(message)
    return message.render(lang)


def cell(value) -> str:
    """One table cell: a short line of sanitised text ("-" for nothing)."""
    if value is None or value == "":
        return "-"
    text = terminal(str(value), SHORT_CHARS * 4).replace("\n", " ").replace("\t", " ")
    return text if len(text) <= SHORT_CHARS else text[: SHORT_CHARS - 1] + "…"


def width(text: str) -> int:
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text
    )


def table(headers: list[str], rows: list[list]) -> str:
    """Rows under headers, columns padded to the widest cell, two spaces apart."""
    cells = [[cell(h) for h in headers]] + [[cell(v) for v in row] for row in rows]
    widths = [max(width(r[i]) for r in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c + " " * (w - width(c)) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    ]
    return "\n".join(lines)


def local_zone() -> tzinfo | None:
    return datetime.now().astimezone().tzinfo  # this machine's (TZ, else /etc/localtime)


def when(moment: datetime | None, zone: tzinfo | None = None) -> str:
    """A server time in the course's `zone` (None: this machine's), to the minute, with the
    offset: `2026-11-08 23:59 +08:00` (grader.policy.clock.shown)."""
    if moment is None:
        return "-"
    return clock.shown(moment, zone or local_zone())


def when_here(moment: datetime, zone: tzinfo | None = None):
    """`when`, and this machine's clock after it where it differs: `2026-11-08 23:59 +08:00
    (16:59 +01:00 here)` (a Message then)."""
    course = when(moment, zone)
    local = clock.here(moment, zone) if zone is not None else None
    return course if local is None else msg("{time} ({local} here)", time=course, local=local)


def zone_note(moments, zone: tzinfo | None, name: str):
    """Under a table of times: which zone they are in, and this machine's offset where some of
    them differ from it (None: nothing to say, the course's clock is this machine's)."""
    if zone is None:
        return None
    differs = [m for m in moments if m is not None and clock.here(m, zone) is not None]
    if not differs:
        return None
    local = clock.offset(clock.aware(differs[0]).astimezone())
    return msg("times are the course's ({zone}); this machine's clock is {offset}", zone=name, offset=local)


def wait_for(moment: datetime, now: datetime):
    """How long until `moment`, roughly: `3 h 5 min`, `12 min`, `40 s` (a Message)."""
    seconds = max(0, int((moment - now).total_seconds()))
    if seconds < 60:
        return msg("{seconds} s", seconds=seconds)
    minutes = (seconds + 59) // 60
    if minutes < 60:
        return msg("{minutes} min", minutes=minutes)
    days, hours = divmod(minutes // 60, 24)
    if days:
        return msg("{days} d {hours} h", days=days, hours=hours)
    return msg("{hours} h {minutes} min", hours=hours, minutes=minutes % 60)


def later(moment: datetime | None) -> bool:
    """Whether `moment` is still to come (a next-submission time that has passed says nothing)."""
    if moment is None:
        return False
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)) > datetime.now(UTC)


def score(value: float | None, max_value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}/{max_value:g}" if max_value is not None else f"{value:g}"


# -- shared by the commands and the notebook ------------------------------------------------
STATUSES = {
    "queued": msg("queued"),
    "grading": msg("grading"),
    "graded": msg("graded"),
    "failed": msg("could not be graded"),  # the server's failure; "failed" reads as "did not pass"
}


def status_text(status: str):
    return STATUSES.get(status, status)


def hints(exc: GraderError) -> list:
    code = getattr(exc, "code", None)
    out = []
    retry_at = getattr(exc, "retry_at", None)
    if isinstance(exc, Refused | ServerFailure) and retry_at is not None:
        now = datetime.now(UTC)
        out.append(
            msg(
                "the next submission is possible at {when} (in {wait})",
                when=when_here(retry_at, getattr(exc, "zone", None)),
                wait=wait_for(retry_at, now),
            )
        )
    elif isinstance(exc, Refused) and code == "closed":
        out.append(msg("this exercise no longer takes submissions"))
    if getattr(exc, "hint", None) is not None:
        out.append(exc.hint)  # type: ignore[attr-defined]
    return out


def course_zone(api) -> tzinfo | None:
    """The course's time zone, as the server names it (None: it names none, or cannot be asked now:
    the times are then shown on this machine's clock). Never the reason a command fails."""
    try:
        me = api.me()
    except GraderError:
        return None
    return me.course.zone if me.course else None


def uploaded_lines(sub, digest: str, exercise: str, wait: bool) -> list[tuple[str, Message]]:
    """What a learner is told once an upload is answered, as (kind, message): "note" when the files
    are those of the latest submission (nothing stored or spent), "warning" when the server's digest
    is not `digest`, and "next", without `wait`, where the report will be once graded."""
    lines = []
    if sub.repeat:  # nothing stored, nothing spent: the server answered with that submission
        lines.append(
            (
                "note",
                msg(
                    "these files are the same as your latest submission {id} of {exercise}: "
                    "not stored again, and no submission or late day spent",
                    id=sub.id,
                    exercise=exercise,
                ),
            )
        )
    if sub.digest and sub.digest != digest:
        lines.append(("warning", msg("warning: the server computed the digest {digest}", digest=sub.digest)))
    if not wait:
        lines.append(
            (
                "next",
                msg(
                    "submission {id}: {status}. Its report, once graded: grader report {id}",
                    id=sub.id,
                    status=status_text(sub.status),
                ),
            )
        )
    return lines


def packed_lines(packed, lang: str) -> list[str]:
    """What a submission would send, a line each: each file, its size and the notebook cells it
    comes from, the notes of what a notebook left out, the warnings, the digest, and each problem
    that would fail it at once (packing.Packed)."""
    lines = []
    for name in sorted(packed.files):
        origin = packed.origins.get(name)
        line = f"  {name}  {len(packed.files[name]):,} bytes"
        lines.append(line + (f"  {say(origin, lang)}" if origin else ""))
    lines += [say(msg("note: {note}", note=note), lang) for note in packed.notes]
    lines += [say(msg("warning: {warning}", warning=warning), lang) for warning in packed.warnings]
    lines.append(say(msg("digest (SHA-256): {digest}", digest=packed.digest), lang))
    lines += [say(msg("problem: {problem}", problem=problem), lang) for problem in packed.problems]
    return lines
