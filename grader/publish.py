"""Publish an exercise's feedback: every learner's report, and the grades for the LMS to import.

`publish(out, gradebook, exercise, lang, policy)` is what `grader gradebook publish` and `grader
batch --out` both call. From the gradebook's current grades (after the course policy's late
penalties and the instructors' overrides: the final scores), it writes under OUT:

    learners/<name>.html   the learner's report, one self-contained page (reports/html.py: CSS
                           and SVG inline, no script, nothing fetched)
    learners/<name>.md     the same report in Markdown (reports/markdown.py)
    canvas-import.csv      Canvas' gradebook import        } reports/lms.py: their columns, and
    moodle-import.csv      Moodle's gradebook CSV import   } which import of each system reads
    moodle-worksheet.csv   Moodle's offline grading worksheet (learners with a participant id)
    published.json         the manifest: learner -> name, lang, score, files (for tests and the
                           class report, which links each learner's row to their page)

<name> is grader.batch.output_names' (the names of grades/*.json). Each report is in the
learner's language where the gradebook has one (Learner.lang, from a roster), else in `lang`.
A removed learner (Learner.removed_at) is not published. `record_roster` stores a roster's
names, emails and languages for the learners the gradebook knows, before publishing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import distinct, func, select

from grader.errors import UsageError
from grader.models import Exercise
from grader.service.roster import RosterRow
from grader.store.schema import Learner, Submission

LEARNERS = "learners"
CANVAS_FILE = "canvas-import.csv"
MOODLE_FILE = "moodle-import.csv"
MOODLE_WORKSHEET_FILE = "moodle-worksheet.csv"
MANIFEST = "published.json"


@dataclass(frozen=True)
class Person:
    """What the gradebook knows of a learner beyond their grade."""

    name: str | None
    email: str | None
    lang: str | None
    layout: str  # of their current submission: canvas, moodle, gradescope, folder


def record_roster(gradebook, rows: list[RosterRow]) -> tuple[int, list[str]]:
    """Store each roster row's name, email and language on the learner it names, if the gradebook
    knows them (a roster does not add learners). (how many were recorded, the unknown ids)."""
    by_key = {r.learner: r for r in rows}
    with gradebook.sessions() as s:
        known = {who.key: who for who in s.scalars(select(Learner).where(Learner.key.in_(list(by_key))))}
        for key, who in known.items():
            row = by_key[key]
            who.name = row.name or who.name
            who.email = row.email or who.email
            who.lang = row.lang or who.lang
        s.commit()
    return len(known), [key for key in by_key if key not in known]


def people(gradebook, current) -> dict[str, Person]:
    """learner -> Person, for these current grades (one query each for learners and layouts)."""
    keys = [c.learner for c in current]
    with gradebook.sessions() as s:
        learners = {w.key: w for w in s.scalars(select(Learner).where(Learner.key.in_(keys)))} if keys else {}
        ids = [c.submission_id for c in current]
        layouts = dict(
            s.execute(select(Submission.id, Submission.layout).where(Submission.id.in_(ids))).all()
        )
    out = {}
    for c in current:
        who = learners[c.learner]
        out[c.learner] = Person(
            name=who.name,
            email=who.email,
            lang=who.lang,
            layout=layouts.get(c.submission_id, ""),
        )
    return out


def removed_learners(gradebook, exercise: str) -> int:
    """How many learners with a submission of `exercise` are removed (current_grades leaves them out)."""
    with gradebook.sessions() as s:
        q = (
            select(func.count(distinct(Learner.id)))
            .join(Submission, Submission.learner_id == Learner.id)
            .where(Submission.exercise == exercise, Learner.removed_at.is_not(None))
        )
        return s.scalar(q) or 0


def _import_row(c, person: Person, lang: str, roster: RosterRow | None):
    from reports.lms import ImportRow, feedback_text

    lms = roster.lms if roster else person.layout
    return ImportRow(
        learner=c.learner,
        name=person.name or "",
        email=person.email or "",
        score=c.grade.score,
        max_score=c.grade.max_score,
        feedback=feedback_text(c.grade, lang),
        graded_at=c.graded_at,
        canvas_id=c.learner if lms == "canvas" and c.learner.isdigit() else "",
        sis_user_id=roster.sis_user_id if roster else "",
        sis_login_id=roster.sis_login_id if roster else "",
        section=roster.section if roster else "",
        participant=c.learner if lms == "moodle" and c.learner.isdigit() else "",
    )


def publish(
    out: Path,
    gradebook,
    exercise: Exercise,
    lang: str,
    policy=None,
    *,
    roster: list[RosterRow] | None = None,
    canvas_assignment: str | None = None,
) -> list[str]:
    """Write the reports, the LMS import files and the manifest under `out`; lines to echo.
    A roster is recorded first (record_roster). UsageError for a bad --canvas-assignment or an
    `out` that cannot be written."""
    from grader.batch import output_names
    from reports import render
    from reports.lms import (
        ENCODING,
        parse_canvas_assignment,
        render_canvas_csv,
        render_moodle_import_csv,
        render_moodle_worksheet_csv,
    )

    try:
        title, assignment_id = parse_canvas_assignment(canvas_assignment or exercise.title.en or exercise.id)
    except ValueError as exc:
        raise UsageError(f"--canvas-assignment: {exc}") from None
    lines = []
    recorded = 0
    if roster:
        recorded, unknown = record_roster(gradebook, roster)
        lines.append(
            f"recorded the roster's names, emails and languages of {recorded} learners"
            + (f"; {len(unknown)} on it have no submission in the gradebook" if unknown else "")
        )
    on_roster = {r.learner: r for r in roster or []}
    # the final scores: the policy's late penalties, then the overrides (Grade.adjustments);
    # removed learners and submissions are left out
    shown = gradebook.current_grades(exercise.id, policy=policy)
    who = people(gradebook, shown)
    names = output_names(c.learner for c in shown)  # as grades/*.json: the same name per learner
    removed = removed_learners(gradebook, exercise.id)

    folder = out / LEARNERS
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*"):  # a learner removed since the last publication is unpublished
            if old.suffix in (".html", ".md") and old.is_file():
                old.unlink()
        manifest: dict = {"exercise": exercise.id, "lang": lang, "learners": {}}
        rows = []
        for c in shown:
            person, name = who[c.learner], names[c.learner]
            their_lang = person.lang or lang
            files = {"html": f"{LEARNERS}/{name}.html", "markdown": f"{LEARNERS}/{name}.md"}
            (out / files["html"]).write_text(render(c.grade, "html", their_lang), encoding="utf-8")
            (out / files["markdown"]).write_text(render(c.grade, "markdown", their_lang), encoding="utf-8")
            manifest["learners"][c.learner] = {
                "name": person.name,
                "lang": their_lang,
                "score": c.grade.score,
                "max_score": c.grade.max_score,
                "passed": c.grade.passed,
                "files": files,
            }
            rows.append(_import_row(c, person, their_lang, on_roster.get(c.learner)))
        tables = {
            CANVAS_FILE: render_canvas_csv(rows, title, assignment_id),
            MOODLE_FILE: render_moodle_import_csv(rows, title),
            MOODLE_WORKSHEET_FILE: render_moodle_worksheet_csv(rows),
        }
        for file, text in tables.items():
            (out / file).write_text(text, encoding=ENCODING, newline="")
        manifest["files"] = {
            "canvas": CANVAS_FILE,
            "moodle": MOODLE_FILE,
            "moodle_worksheet": MOODLE_WORKSHEET_FILE,
        }
        manifest["removed_learners"] = removed
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--out: cannot write {exc.filename or out}: {exc.strerror or exc}") from None
    _audit(gradebook, exercise.id, {"out": str(out), "learners": len(shown), "roster_recorded": recorded})

    by_lang: dict[str, int] = {}
    for entry in manifest["learners"].values():
        by_lang[entry["lang"]] = by_lang.get(entry["lang"], 0) + 1
    lines.append(
        f"published {len(shown)} learner reports to {folder}/ ("
        + ", ".join(f"{n} {code}" for code, n in sorted(by_lang.items()))
        + ")"
        + (f"; {removed} removed learners left out" if removed else "")
    )
    no_email = sum(not r.email for r in rows)
    participants = sum(bool(r.participant) for r in rows)
    lines.append(
        f"wrote {out / CANVAS_FILE}, {out / MOODLE_FILE}"
        + (f" ({no_email} learners without an email: Moodle cannot match them)" if no_email else "")
        + f", {out / MOODLE_WORKSHEET_FILE} ({participants} Moodle participants) and {out / MANIFEST}"
    )
    return lines


def _audit(gradebook, exercise: str, details: dict) -> None:
    """A publication is recorded in the gradebook's audit, as every batch and correction."""
    from grader.cli.common import os_user

    gradebook.audit(os_user(), "publish", None, exercise, details)
