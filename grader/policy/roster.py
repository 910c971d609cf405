"""Class rosters in (a Canvas or Moodle CSV) and access tokens out (a CSV to hand them out with).

- **Canvas**: the gradebook export (Grades → Export), columns `Student`, `ID`, `SIS User ID`,
  `SIS Login ID`, `Section`, then one per assignment. Learner id: `ID`, the Canvas user id (what
  `grader batch` reads from Canvas' submission files). Canvas' own "Points Possible" row, and
  rows with neither a student nor an id, are skipped. An email is the `Email` column's (Canvas'
  export has none: the instructor may add one, from People or a user export; also `Email address`
  or `E-mail`), else the `SIS Login ID` when it is one. Canvas' "Test Student" (the account of
  its Student View, no SIS id) is an LMS test account: read apart (`read_roster_accounts`), never
  a learner, issued no token.
- **Moodle**: the assignment's grading worksheet (Download grading worksheet), columns
  `Identifier` ("Participant 1234"), `Full name`, `Email address`, .... Learner id: the participant
  id, 1234 (what `grader batch` reads from Moodle's submission folders).
- **The report language** (either): neither LMS puts it in these files, so it is one extra column
  the instructor adds or keeps from a user export, named `Language`, `Lang`, `Preferred language`
  (Moodle's user profile field) or `Locale` (Canvas' user setting), any case. Its values, as the
  systems spell them or a person would: `en`, `en_US`, `English` -> en; `zh-TW`, `zh_TW`, `zh_tw`
  (Moodle's language pack), `zh-Hant` (Canvas' locale), `繁體中文`, `中文` ... -> zh-TW (the
  only Chinese the reports are written in); empty or any other language: none, the command's
  `--lang` applies.

Learner ids are canonical as grader.intake.sources.canonical_name makes them, so they meet the ids a batch
finds. A roster that cannot be read is a RosterError naming the file, the row (the header is row 1)
and the column; nothing is issued from it. The tokens file is written only if it does not exist,
readable by its owner only (it holds live tokens), its text cells formula-guarded as every CSV of
the grader (reports.gradebook.cell).
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

from grader.errors import UsageError
from grader.intake.sources import canonical_name

CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_COLUMNS = ("Identifier", "Full name", "Email address")
LANGUAGE_COLUMNS = ("language", "lang", "preferred language", "locale")  # compared casefolded
CANVAS_OWN_ROWS = ("", "Points Possible")  # the `Student` of Canvas' rows that are no student
CANVAS_TEST_STUDENT = "test student"  # Student View's account (casefolded), without a SIS id
EMAIL_COLUMNS = ("email", "email address", "e-mail", "e-mail address")  # compared casefolded
MOODLE_IDENTIFIER = re.compile(r"^\D*?(\d+)$")  # "Participant 1234" (the word is translated)
ROSTER_BYTES = 16 * 1024 * 1024  # a roster of a very large class is well under this


class RosterError(UsageError):
    """A roster CSV that cannot be read as Canvas' or Moodle's: names the file, row and column."""


@dataclass(frozen=True)
class RosterRow:
    learner: str
    name: str | None
    email: str | None
    lang: str | None = None  # en or zh-TW, from the language column; None: the command's --lang
    lms: str = ""  # canvas or moodle: whose ids `learner` is
    sis_user_id: str = ""  # Canvas' own columns, for its grade import file (grader/course/publish.py)
    sis_login_id: str = ""
    section: str = ""


_ENGLISH = ("english", "英文", "英語")
_CHINESE = (
    "繁體中文",
    "正體中文",
    "简体中文",
    "簡體中文",
    "chinese",
    "traditional chinese",
    "chinese (traditional)",
)


def roster_lang(value: str) -> str | None:
    """A roster's language cell as a report language: en, zh-TW, or None (blank, or a language
    the reports are not written in: the command's --lang applies)."""
    text = value.strip().casefold()
    if not text:
        return None
    tag = text.split(".")[0].split("@")[0].replace("_", "-")
    if tag == "en" or tag.startswith("en-") or text in _ENGLISH:
        return "en"
    if tag == "zh" or tag.startswith("zh-") or text in _CHINESE or text.startswith("中文"):
        return "zh-TW"
    return None


def _language_column(header: list[str]) -> str | None:
    return next((h for h in header if h.casefold() in LANGUAGE_COLUMNS), None)


def _text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RosterError(f"--roster: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > ROSTER_BYTES:
        raise RosterError(f"{path}: larger than {ROSTER_BYTES // (1024 * 1024)} MiB; is it a roster?")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        row = data[: exc.start].count(b"\n") + 1
        raise RosterError(f"{path}: row {row}: not UTF-8 text (export the roster as CSV UTF-8)") from None


def read_roster(path: Path) -> list[RosterRow]:
    """The learners of a Canvas or Moodle roster, in its order (RosterError when it is malformed);
    LMS test accounts left out (read_roster_accounts says which)."""
    return read_roster_accounts(path)[0]


def read_roster_accounts(path: Path) -> tuple[list[RosterRow], list[RosterRow]]:
    """(the learners, the LMS test accounts) of a roster, each in its order."""
    text = _text(path)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise RosterError(f"{path}: row 1: empty file, no header")
        header = [h.strip() for h in header]
        if all(c in header for c in ("Student", "ID")):
            rows = _canvas(path, header, reader)
        elif all(c in header for c in MOODLE_COLUMNS[:2]):
            rows = _moodle(path, header, reader)
        else:
            raise RosterError(
                f"{path}: row 1: not a Canvas gradebook export (columns {', '.join(CANVAS_COLUMNS[:2])}) "
                f"nor a Moodle grading worksheet (columns {', '.join(MOODLE_COLUMNS)})"
            )
    except csv.Error as exc:
        raise RosterError(f"{path}: row {reader.line_num}: not CSV: {exc}") from None
    if not rows:
        raise RosterError(f"{path}: no learners in it")
    seen: dict[str, int] = {}
    for n, row in rows:
        if row.learner in seen:
            raise RosterError(
                f"{path}: row {n}, column {_id_column(header)!r}: learner {row.learner!r} "
                f"is on row {seen[row.learner]} already"
            )
        seen[row.learner] = n
    learners = [row for _, row in rows if not is_test_account(row)]
    return learners, [row for _, row in rows if is_test_account(row)]


def is_test_account(row: RosterRow) -> bool:
    """Canvas' "Test Student" (Student View): the name, and no SIS id (a real learner has one,
    or at least a login, when the school names someone so)."""
    return (
        row.lms == "canvas"
        and (row.name or "").strip().casefold() == CANVAS_TEST_STUDENT
        and not row.sis_user_id
        and not row.sis_login_id
    )


def _email_column(header: list[str]) -> str | None:
    return next((h for h in header if h.casefold() in EMAIL_COLUMNS), None)


def _id_column(header: list[str]) -> str:
    return "ID" if "ID" in header else "Identifier"


def _cells(path: Path, header: list[str], record: list[str], n: int) -> dict[str, str]:
    if len(record) > len(header):
        raise RosterError(f"{path}: row {n}: {len(record)} cells, the header has {len(header)}")
    return {h: (record[i].strip() if i < len(record) else "") for i, h in enumerate(header)}


def _learner(path: Path, n: int, column: str, raw: str) -> str:
    if not raw.isdigit() or not raw.isascii():
        raise RosterError(f"{path}: row {n}, column {column!r}: {raw!r} is not a user id (digits)")
    return canonical_name(raw)


def _canvas(path: Path, header: list[str], reader) -> list[tuple[int, RosterRow]]:
    language = _language_column(header)
    email = _email_column(header)
    out = []
    for record in reader:
        n = reader.line_num
        if not any(c.strip() for c in record):
            continue
        cells = _cells(path, header, record, n)
        if not cells["ID"] and cells["Student"] in CANVAS_OWN_ROWS:
            continue
        if not cells["ID"]:
            raise RosterError(f"{path}: row {n}, column 'ID': empty (student {cells['Student']!r})")
        login = cells.get("SIS Login ID", "")
        out.append(
            (
                n,
                RosterRow(
                    learner=_learner(path, n, "ID", cells["ID"]),
                    name=cells["Student"] or None,
                    email=(cells[email] if email and "@" in cells[email] else None)
                    or (login if "@" in login else None),
                    lang=roster_lang(cells[language]) if language else None,
                    lms="canvas",
                    sis_user_id=cells.get("SIS User ID", ""),
                    sis_login_id=login,
                    section=cells.get("Section", ""),
                ),
            )
        )
    return out


def _moodle(path: Path, header: list[str], reader) -> list[tuple[int, RosterRow]]:
    language = _language_column(header)
    out = []
    for record in reader:
        n = reader.line_num
        if not any(c.strip() for c in record):
            continue
        cells = _cells(path, header, record, n)
        m = MOODLE_IDENTIFIER.match(cells["Identifier"])
        if m is None:
            raise RosterError(
                f"{path}: row {n}, column 'Identifier': {cells['Identifier']!r} "
                "is not like 'Participant 1234'"
            )
        out.append(
            (
                n,
                RosterRow(
                    learner=_learner(path, n, "Identifier", m.group(1)),
                    name=cells["Full name"] or None,
                    email=cells.get("Email address") or None,
                    lang=roster_lang(cells[language]) if language else None,
                    lms="moodle",
                ),
            )
        )
    return out


def create_private(out: Path):
    """`out` opened for writing, made now and readable by its owner only; a file that exists is
    refused (a UsageError), never overwritten: it may hold the tokens handed out last time."""
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UsageError(
            f"--out: {out} exists; refusing to overwrite it (it may hold issued tokens)"
        ) from None
    except OSError as exc:
        raise UsageError(f"--out: cannot create {out}: {exc.strerror or exc}") from None
    return os.fdopen(fd, "w", encoding="utf-8", newline="")
