"""The course's clock: the one way a time is shown to a person, and the course's time zone.

Every time a learner or an instructor reads (a page, a report's warning, a refusal, the CLI's
tables) is written by `shown`: to the minute, in the course's zone (course.toml `timezone`, an
IANA name such as `Asia/Taipei`), with that zone's offset: `2026-12-10 23:59 +08:00`. Never a
bare time, never UTC unless the course is in UTC. Machine formats keep ISO 8601 with the offset
(the API, JSON and CSV exports): this module is for people.

Light by design (the standard library only): the student's wheel ships it, and the client shows
the server's times in the course's zone (GET /api/v1/me names it), adding the learner's own
where this machine's clock is in another (`here`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DEFAULT_ZONE = "UTC"
ZONE_CHARS = 64  # the longest IANA name is 32 characters (America/Argentina/ComodRivadavia)
# an IANA key as the tz database writes them: Area/Location[/Sub], letters, digits, _ + -
ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2}")


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name` (`Asia/Taipei`); ValueError saying why it is not one (a path,
    an abbreviation such as CST that names several zones, a zone the tz database lacks)."""
    if not isinstance(name, str) or len(name) > ZONE_CHARS or not ZONE_NAME.fullmatch(name):
        raise ValueError("must be an IANA time zone name such as Asia/Taipei")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError("not a time zone the tz database knows (an IANA name such as Asia/Taipei)") from None


def aware(moment: datetime) -> datetime:
    """A time with its offset: one without (a store that dropped it) is UTC, the server's clock."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def offset(moment: datetime) -> str:
    """The UTC offset of an aware time as ISO writes it: `+08:00`, `+00:00`, `-03:30`."""
    delta = moment.utcoffset()
    minutes = int(delta.total_seconds() // 60) if delta is not None else 0
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{mins:02d}"


def shown(moment: datetime, tz: tzinfo | None = None, *, seconds: bool = False) -> str:
    """`moment` in `tz` (the course's zone; None: the offset it carries), to the minute (or the
    second), with the offset: `2026-12-10 23:59 +08:00`."""
    moment = aware(moment)
    if tz is not None:
        moment = moment.astimezone(tz)
    return f"{moment.strftime('%Y-%m-%d %H:%M:%S' if seconds else '%Y-%m-%d %H:%M')} {offset(moment)}"


def here(moment: datetime, tz: tzinfo | None = None) -> str | None:
    """`moment` on this machine's clock (`16:59 +01:00`, the date too when it is another day
    there), or None when this machine's offset at that moment is the course zone's own."""
    moment = aware(moment)
    course = moment.astimezone(tz) if tz is not None else moment
    local = moment.astimezone()  # this machine's zone (TZ, else /etc/localtime)
    if local.utcoffset() == course.utcoffset():
        return None
    when = local.strftime("%H:%M") if local.date() == course.date() else local.strftime("%Y-%m-%d %H:%M")
    return f"{when} {offset(local)}"


__all__ = ["DEFAULT_ZONE", "aware", "here", "offset", "shown", "zone"]
