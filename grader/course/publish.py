"""Publish an exercise's feedback: every learner's report, and the grades for the LMS to import.

`publish(out, gradebook, exercise, lang, policy)` is what `grader gradebook publish` and `grader
batch --out` both call. From the gradebook's current grades (after the course policy's late
penalties and the instructors' overrides: the final scores, the one set of numbers every file
below and the batch's summary show), it writes under OUT:

    class.html, grades.csv, items.csv   the class report (reports/class_report.py)
    learners/<name>.html   the learner's report, one self-contained page (reports/html.py: CSS
                           and SVG inline, no script, nothing fetched)
    learners/<name>.md     the same report in Markdown (reports/markdown.py)
    canvas-import.csv      Canvas' gradebook import        } reports/lms.py: their columns, and
    moodle-import.csv      Moodle's gradebook CSV import   } which import of each system reads
    moodle-worksheet.csv   Moodle's offline grading worksheet (learners with a participant id)
    published.json         the manifest: learner -> name, lang, score, files (for tests and the
                           class report, which links each learner's row to their page)

<name> is grader.course.learners.output_names' (the names of grades/*.json). Each report is in the
learner's language where the gradebook has one (Learner.lang, from a roster), else in `lang`.
A removed learner (Learner.removed_at) is not published. `record_roster` stores a roster's
names, emails and languages for the learners the gradebook knows, before publishing.

With a roster, every learner on it is accounted for: one without a current grade of the exercise
(and not removed) is a "no submission" row of the class report and of each LMS import, scored
by `missing`: "blank" (the default; an empty cell the LMS leaves ungraded, and in no statistic
of the class report) or "zero" (a 0, counted as any other). LMS test accounts are not on it
(grader.policy.roster.read_roster leaves them out).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import distinct, func, select

from grader.course.learners import failed, output_names
from grader.errors import UsageError
from grader.models import Exercise
from grader.policy.roster import RosterRow
from grader.store.schema import Learner, Submission

LEARNERS = "learners"
CANVAS_FILE = "canvas-import.csv"
MOODLE_FILE = "moodle-import.csv"
MOODLE_WORKSHEET_FILE = "moodle-worksheet.csv"
MANIFEST = "published.json"
MISSING = ("blank", "zero")  # how a roster learner without a submission is scored


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


def absent_learners(gradebook, roster: list[RosterRow], shown) -> list[RosterRow]:
    """The roster's learners without a current grade (`shown`), removed learners left out."""
    have = {c.learner for c in shown}
    keys = [r.learner for r in roster if r.learner not in have]
    if not keys:
        return []
    with gradebook.sessions() as s:
        removed = set(
            s.scalars(select(Learner.key).where(Learner.key.in_(keys), Learner.removed_at.is_not(None)))
        )
    return [r for r in roster if r.learner in keys and r.learner not in removed]


def no_submission_grade(exercise: Exercise, learner: str):
    """The grade of a learner who handed in nothing: 0, "no submission" (is_no_submission)."""
    from grader.intake.incoming import no_files_submitted

    return failed(exercise, "invalid-submission", no_files_submitted(exercise.files), learner)


def _ids(learner: str, lms: str, roster: RosterRow | None) -> dict:
    return {
        "canvas_id": learner if lms == "canvas" and learner.isdigit() else "",
        "sis_user_id": roster.sis_user_id if roster else "",
        "sis_login_id": roster.sis_login_id if roster else "",
        "section": roster.section if roster else "",
        "participant": learner if lms == "moodle" and learner.isdigit() else "",
    }


def _import_row(c, person: Person, lang: str, roster: RosterRow | None):
    from reports.lms import ImportRow, feedback_text

    return ImportRow(
        learner=c.learner,
        name=person.name or "",
        email=person.email or "",
        score=c.grade.score,
        max_score=c.grade.max_score,
        feedback=feedback_text(c.grade, lang),
        graded_at=c.graded_at,
        **_ids(c.learner, roster.lms if roster else person.layout, roster),
    )


def _absent_row(row: RosterRow, exercise: Exercise, lang: str, missing: str):
    from reports.lms import ImportRow
    from reports.view import t

    return ImportRow(
        learner=row.learner,
        name=row.name or "",
        email=row.email or "",
        score=0.0 if missing == "zero" else None,
        max_score=float(exercise.points),
        feedback=t("no submission", lang),
        graded_at=None,
        **_ids(row.learner, row.lms, row),
    )


def write_class_report(
    out: Path, gradebook, exercise: Exercise, lang: str, shown, names, absent, missing
) -> str:
    """class.html, grades.csv and items.csv under `out`, of the grades `shown` and the roster's
    learners without one (`absent`, scored by `missing`); the line to echo."""
    try:
        from reports.class_report import (
            ClassEntry,
            class_entries,
            render_class_csv,
            render_class_html,
            render_items_csv,
        )
    except ImportError as exc:
        return (
            f"WARNING: no class report or CSV written: reports.class_report is not available ({exc}); "
            "`grader gradebook export --format csv` exports the grades"
        )
    from grader.catalog.starters import starter_files

    # learner rows link to learners/<name>.html (published beside class.html); copies read the files
    counted = gradebook.submissions(exercise.id, [c.submission_id for c in shown])
    entries = class_entries(shown, counted, names) + [
        ClassEntry(
            learner=r.learner,
            name=r.name,
            grade=no_submission_grade(exercise, r.learner),
            unscored=missing == "blank",
        )
        for r in absent
    ]
    starter = starter_files(exercise)
    (out / "class.html").write_text(
        render_class_html(entries, exercise=exercise.id, starter=starter, lang=lang), encoding="utf-8"
    )
    (out / "grades.csv").write_text(render_class_csv(entries), encoding="utf-8")
    (out / "items.csv").write_text(render_items_csv(entries, lang), encoding="utf-8")
    return f"wrote {out / 'class.html'}, {out / 'grades.csv'} and {out / 'items.csv'}"


def publish(
    out: Path,
    gradebook,
    exercise: Exercise,
    lang: str,
    policy=None,
    *,
    roster: list[RosterRow] | None = None,
    canvas_assignment: str | None = None,
    missing: str = "blank",
) -> list[str]:
    """Write the class report, the reports, the LMS import files and the manifest under `out`;
    lines to echo. A roster is recorded first (record_roster). UsageError for a bad
    --canvas-assignment or --missing, or an `out` that cannot be written."""
    from reports import render
    from reports.lms import (
        ENCODING,
        parse_canvas_assignment,
        render_canvas_csv,
        render_moodle_import_csv,
        render_moodle_worksheet_csv,
    )

    if missing not in MISSING:
        raise UsageError(f"--missing: {missing!r} is not one of {', '.join(MISSING)}")
    try:
        title, assignment_id = parse_canvas_assignment(canvas_assignment or exercise.title.en or exercise.id)
    except ValueError as exc:
        raise UsageError(f"--canvas-assignment: {exc}") from None
    lines = []
    recorded = 0
    if roster:
        recorded, _unknown = record_roster(gradebook, roster)
        lines.append(f"recorded the roster's names, emails and languages of {recorded} learners")
    on_roster = {r.learner: r for r in roster or []}
    # the final scores: the policy's late penalties, then the overrides (Grade.adjustments);
    # removed learners and submissions are left out
    shown = gradebook.current_grades(exercise.id, policy=policy)
    absent = absent_learners(gradebook, roster or [], shown)
    who = people(gradebook, shown)
    names = output_names(c.learner for c in shown)  # as grades/*.json: the same name per learner
    removed = removed_learners(gradebook, exercise.id)

    folder = out / LEARNERS
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lines.append(write_class_report(out, gradebook, exercise, lang, shown, names, absent, missing))
        for old in folder.glob("*"):  # a learner removed since the last publication is unpublished
            if old.suffix in (".html", ".md") and old.is_file():
                old.unlink()
        manifest: dict = {"exercise": exercise.id, "lang": lang, "learners": {}}
        rows = []
        for c in shown:
            person, name = who[c.learner], names[c.learner]
            their_lang = person.lang or lang
            files = {"html": f"{LEARNERS}/{name}.html", "markdown": f"{LEARNERS}/{name}.md"}
            # the learner's own copies: without the isolation line (the instructor's business)
            for fmt in ("html", "markdown"):
                (out / files[fmt]).write_text(
                    render(c.grade, fmt, their_lang, learner=True), encoding="utf-8"
                )
            manifest["learners"][c.learner] = {
                "name": person.name,
                "lang": their_lang,
                "score": c.grade.score,
                "max_score": c.grade.max_score,
                "passed": c.grade.passed,
                "files": files,
            }
            rows.append(_import_row(c, person, their_lang, on_roster.get(c.learner)))
        rows += [_absent_row(r, exercise, r.lang or lang, missing) for r in absent]
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
        manifest["no_submission"] = {
            "missing": missing,
            "learners": {
                r.learner: {"name": r.name, "score": 0.0 if missing == "zero" else None} for r in absent
            },
        }
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--out: cannot write {exc.filename or out}: {exc.strerror or exc}") from None
    _audit(
        gradebook,
        exercise.id,
        {"out": str(out), "learners": len(shown), "roster_recorded": recorded, "no_submission": len(absent)},
    )

    by_lang: dict[str, int] = {}
    for entry in manifest["learners"].values():
        by_lang[entry["lang"]] = by_lang.get(entry["lang"], 0) + 1
    lines.append(
        f"published {len(shown)} learner reports to {folder}/ ("
        + ", ".join(f"{n} {code}" for code, n in sorted(by_lang.items()))
        + ")"
        + (f"; {removed} removed learners left out" if removed else "")
    )
    if absent:
        lines.append(
            f"{len(absent)} learners on the roster have no submission: "
            + (
                "a blank score (ungraded in the LMS; --missing zero makes it 0)"
                if missing == "blank"
                else "a score of 0 (--missing zero)"
            )
            + " in the class report and the LMS imports: "
            + ", ".join(f"{r.name or r.learner} ({r.learner})" for r in absent[:10])
            + (f" and {len(absent) - 10} more" if len(absent) > 10 else "")
        )
    no_email = sum(not r.email for r in rows)
    participants = sum(bool(r.participant) for r in rows)
    lines.append(
        f"wrote {out / CANVAS_FILE} ({len(rows)} learners), {out / MOODLE_FILE}"
        + (f" ({no_email} learners without an email: Moodle cannot match them)" if no_email else "")
        + f", {out / MOODLE_WORKSHEET_FILE} ({participants} Moodle participants) and {out / MANIFEST}"
    )
    return lines


def _audit(gradebook, exercise: str, details: dict) -> None:
    """A publication is recorded in the gradebook's audit, as every batch and correction."""
    from grader.store.gradebook import os_user

    gradebook.audit(os_user(), "publish", None, exercise, details)
