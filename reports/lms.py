"""The grade-import files of the learning management systems: Canvas' and Moodle's, as they read them.

Three tables, each a pure function of `ImportRow`s (grader/course/publish.py gathers them):

- `render_canvas_csv`: Canvas' gradebook import (Grades → Import). Canvas reads the header row
  `Student, ID, SIS User ID, SIS Login ID, Section` (what its own export writes; its importer,
  lib/gradebook_importer.rb, wants `Student` and `ID` first and `Section` last of the student
  columns), then one column per assignment titled `Name (assignment id)`: the id picks the
  assignment; a title without one is matched by title, or makes a new assignment. A student is
  found by `ID` (the Canvas user id), else by SIS User ID or SIS Login ID, else by name. An
  optional second row `Points Possible` gives a new assignment its points; it is written only
  when no assignment id is given, so an existing assignment's points are never changed.
- `render_moodle_import_csv`: Moodle's gradebook import (Grades → Import → CSV file). Moodle maps
  the columns in its form: `Email address` maps to "Email address" (the learner), the grade column
  (named for the assignment) to the grade item, `Feedback` to "Feedback for" that item. Only
  learners with a known email can be matched (a roster gives them).
- `render_moodle_worksheet_csv`: the assignment's offline grading worksheet (Assignment → View all
  submissions → Upload grading worksheet; needs the "Offline grading worksheet" feedback type,
  and "Feedback comments" for the feedback column). Its importer
  (mod/assign/feedback/offline/importgradeslib.php) finds its columns by their English names:
  `Identifier` ("Participant 1234", the ids of a Moodle submissions download), `Grade`, `Last
  modified (grade)` (a grade Moodle changed later is kept unless the upload ignores it) and
  `Feedback comments`; the other columns are for the person reading it. A Moodle shown in
  another language names them in that language: rename the header row to match.

A learner of the roster without a submission is a row too: an empty score (`--missing blank`,
the default: left ungraded) or 0 (`--missing zero`), with the feedback "no submission".

Every text cell is a `reports.gradebook.cell` (shown visibly, capped, formula-guarded); scores
are plain numbers; the CSV itself is written by reports.gradebook.render_rows, as every CSV.
Moodle shows feedback as HTML, so its feedback text is HTML-escaped. The files are written in
ENCODING, UTF-8 with a byte-order mark: both importers read it (Canvas finds its columns by
substring, so `\\ufeffStudent` is `Student`; Moodle's csv_import_reader strips it), it is what
Canvas' own export writes when asked for Excel, and without it Excel opens a UTF-8 CSV in the
local code page and shows a Chinese name as mojibake.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import datetime

from grader.models import Grade
from reports.gradebook import cell, render_rows
from reports.view import build_view, fmt_points, labelled, t

ENCODING = "utf-8-sig"
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
CANVAS_TITLE_AND_ID = re.compile(r"^(.*\S)\s\((\d+)\)$")  # Canvas' Assignment.title_and_id
MOODLE_IMPORT_COLUMNS = ("Email address", "Full name")  # then the grade column, then MOODLE_FEEDBACK
MOODLE_FEEDBACK = "Feedback"
MOODLE_WORKSHEET_COLUMNS = (
    "Identifier",
    "Full name",
    "Email address",
    "Grade",
    "Maximum grade",
    "Last modified (grade)",
    "Feedback comments",
)
MOODLE_PARTICIPANT = "Participant {id}"  # the worksheet's Identifier (its word is "hiddenuser")


@dataclass(frozen=True)
class ImportRow:
    """One learner's final grade, with what each system identifies them by ("" when unknown)."""

    learner: str
    name: str
    email: str
    score: float | None  # final: after every adjustment (late penalty, override); None: blank
    max_score: float
    feedback: str  # plain text, in the learner's language
    graded_at: datetime | None
    canvas_id: str = ""  # the Canvas user id, when the learner's id is one
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    participant: str = ""  # the Moodle participant id, when the learner's id is one


def parse_canvas_assignment(text: str) -> tuple[str, str | None]:
    """`--canvas-assignment` as (title, assignment id or None); ValueError when it is no title."""
    text = text.strip()
    if not text or any(ch in text for ch in "\r\n\t"):
        raise ValueError(f"{text!r} is not an assignment title such as 'Day 49 data (12345)'")
    m = CANVAS_TITLE_AND_ID.match(text)
    return (m.group(1), m.group(2)) if m else (text, None)


def canvas_column(title: str, assignment_id: str | None) -> str:
    return f"{title} ({assignment_id})" if assignment_id else title


def points(x: float | None) -> str:
    """A score as both systems read it: a plain decimal, at most 4 places, no exponent; None (a
    learner of the roster without a submission, `--missing blank`) an empty cell, which both
    importers leave ungraded."""
    if x is None:
        return ""
    text = f"{x:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def feedback_text(grade: Grade, lang: str) -> str:
    """A short feedback comment: the score, and the first thing to fix (the error that stopped
    grading, else the first diagnosis by level: a known bug reproduced, else where the difference
    starts, else a possible known bug, said as a possibility)."""
    view = build_view(grade, lang)
    score = t(
        "{score} of {max_score} points",
        lang,
        score=fmt_points(view.score),
        max_score=fmt_points(view.max_score),
    )
    rank = {"reproduced": 0, "localized": 1, "candidate": 2}
    ranked = sorted(view.diagnoses, key=lambda d: rank.get(d.level, 3))
    first = view.error_message or (ranked[0].said if ranked else "")
    return labelled(score, first, lang) if first else score


def render_canvas_csv(rows: list[ImportRow], title: str, assignment_id: str | None) -> str:
    column = canvas_column(title, assignment_id)
    header = [*CANVAS_COLUMNS, cell(column)]
    body = []
    if assignment_id is None and rows:
        body.append([CANVAS_POINTS_ROW, "", "", "", "", points(rows[0].max_score)])
    for r in rows:
        body.append(
            [
                cell(r.name or r.learner),
                r.canvas_id,
                cell(r.sis_user_id),
                cell(r.sis_login_id or r.email),
                cell(r.section),
                points(r.score),
            ]
        )
    return render_rows(header, body)


def _moodle_feedback(text: str) -> str:
    return cell(html.escape(text, quote=False))


def render_moodle_import_csv(rows: list[ImportRow], item: str) -> str:
    header = [*MOODLE_IMPORT_COLUMNS, cell(item), MOODLE_FEEDBACK]
    body = [
        [cell(r.email), cell(r.name or r.learner), points(r.score), _moodle_feedback(r.feedback)]
        for r in rows
    ]
    return render_rows(header, body)


def render_moodle_worksheet_csv(rows: list[ImportRow]) -> str:
    """The rows of learners with a Moodle participant id only (the others have no Identifier)."""
    body = [
        [
            MOODLE_PARTICIPANT.format(id=r.participant),
            cell(r.name or r.learner),
            cell(r.email),
            points(r.score),
            points(r.max_score),
            r.graded_at.isoformat(timespec="seconds") if r.graded_at else "",
            _moodle_feedback(r.feedback),
        ]
        for r in rows
        if r.participant
    ]
    return render_rows(MOODLE_WORKSHEET_COLUMNS, body)
