"""Publishing an exercise's feedback (grader/course/publish.py): each learner's report as a page and as
Markdown in their language, and the grade-import files of Canvas and Moodle (reports/lms.py).

A small gradebook of hand-made grades (Gradebook.record), published in English with a roster
that gives one learner zh-TW, and in zh-TW; the pages are parsed (BeautifulSoup, as every report
test here) and must fetch nothing; the CSVs are read back as the LMS reads them, their header rows
compared with the columns Canvas' and Moodle's importers read (written out here, from their
documentation and importers, not taken from the code under test). One real `grader batch --out`
of two learners on day49-data writes the same files.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from grader.catalog.exercises import load_exercise
from grader.models import CheckResult, Diagnosis, Grade, GradeError
from grader.course.publish import MANIFEST, publish
from grader.policy.roster import read_roster, roster_lang
from grader.store import Gradebook, Incoming, Outcome
from grader.store.schema import Learner

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = "day49-data"
# the columns as Canvas' gradebook import reads them (lib/gradebook_importer.rb; its export writes
# the same): the student columns, then the assignment as "Title (assignment id)"
CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
# Moodle's offline grading worksheet (mod/assign/feedback/offline): Identifier, Grade and
# "Last modified (grade)" are required by its importer, "Feedback comments" is the comments' column
MOODLE_WORKSHEET_HEADER = ["Identifier", "Full name", "Email address", "Grade", "Maximum grade",
                           "Last modified (grade)", "Feedback comments"]
FORMULA = ("=", "+", "-", "@", "\t", "\r")
CJK = re.compile(r"[\u4e00-\u9fff]")
HOSTILE_ID = "=cmd|' /C calc'!A0"
HOSTILE_NAME = '=HYPERLINK("http://evil.example/x","click")'
LATE_AT = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)  # 1.5 days after COURSE's due date
COURSE = """[exercises.day49-data]
due = 2026-11-09T00:00:00Z
late = { penalty_per_day = 0.1 }
"""


def check(cid: str, passed: bool, points: float, max_points: float = 5.0) -> CheckResult:
    return CheckResult(id=cid, passed=passed, points=points, max_points=max_points, rule="target-shift",
                       day=49, title=cid.replace("-", " "), message="" if passed else "wrong targets")


def grade(student: str, score: float, *, diagnosis: bool = False, error: bool = False) -> Grade:
    checks = [check("targets-shifted", score >= 10, min(score, 10.0), 10.0),
              check("windows-in-range", score >= 20, max(score - 10, 0.0), 10.0)]
    return Grade(
        exercise=EXERCISE, passed=score == 20, score=score, max_score=20.0, checks=[] if error else checks,
        diagnosis=[Diagnosis(rule="target-shift", day=49, mutant="unshifted-targets",
                             message="the targets are the inputs, not shifted by one",
                             message_i18n={"zh-TW": "目標就是輸入，沒有位移一格"})] if diagnosis else [],
        error=GradeError(kind="invalid-submission", message="data.py is missing") if error else None,
        isolation="none", student=student)


# learner -> (name, layout, grade): Canvas user ids, a Moodle participant, a hostile id and name
CLASS = {
    "1001": ("Chen, Mei", "canvas", grade("1001", 12.5, diagnosis=True)),
    "1002": (HOSTILE_NAME, "canvas", grade("1002", 20.0)),
    "1003": ("Lin, Wei", "canvas", grade("1003", 7.25, diagnosis=True)),
    "2001": ("Wang Fang", "moodle", grade("2001", 15.0, diagnosis=True)),
    HOSTILE_ID: (None, "folder", grade(HOSTILE_ID, 0.0, error=True)),
}


@pytest.fixture
def book(tmp_path):
    gb = Gradebook(str(tmp_path / "class.db"))
    ex = load_exercise(EXERCISE)
    version = gb.exercise_version(EXERCISE, "v" * 64, ex.points, ex.title.en)
    for learner, (name, layout, g) in CLASS.items():
        when = LATE_AT if learner == "1003" else None  # as the LMS timestamps it (Canvas' _LATE file)
        incoming = Incoming(learner=learner, name=name, layout=layout, files={"data.py": learner.encode()},
                            submitted_at=when)
        [sid] = gb.add_submissions(EXERCISE, [incoming])
        gb.record(sid, version, Outcome(status="graded", grade=g))
    yield gb
    gb.close()


@pytest.fixture
def roster(tmp_path) -> Path:
    """A Canvas gradebook export with a Language column: 1001 reads zh-TW (Canvas' zh-Hant)."""
    path = tmp_path / "roster.csv"
    path.write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,Language\n"
        "    Points Possible,,,,,\n"
        "\"Chen, Mei\",1001,S-1001,mei@example.edu,Section A,zh-Hant\n"
        f"\"{HOSTILE_NAME.replace(chr(34), chr(34) * 2)}\",1002,S-1002,x@example.edu,Section A,en\n"
        "\"Lin, Wei\",1003,S-1003,wei@example.edu,Section B,\n"
        "\"Not Handed In\",1999,S-1999,no@example.edu,Section B,zh-TW\n",
        encoding="utf-8")
    return path


def final_scores(gb) -> dict[str, float]:
    return {c.learner: c.grade.score for c in gb.current_grades(EXERCISE)}


def read_csv(path: Path) -> list[list[str]]:
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf"), "UTF-8 with a byte-order mark (Excel's cue)"
    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))


def assert_self_contained(doc: BeautifulSoup) -> None:
    """Nothing fetched: no script, link, frame or object; every href or src an anchor on the page."""
    assert doc.find("script") is None and doc.find("link") is None
    assert doc.find("iframe") is None and doc.find("object") is None and doc.find("img") is None
    for tag in doc.find_all(True):
        for attr in ("src", "href", "srcset", "xlink:href", "action", "data", "poster"):
            if tag.get(attr) is not None:
                assert str(tag[attr]).startswith("#"), (tag.name, attr, tag[attr])
    for style in doc.find_all("style"):
        assert "@import" not in style.text and "url(" not in style.text
        assert not re.search(r"https?://", style.text)


def page(out: Path, manifest: dict, learner: str) -> BeautifulSoup:
    return BeautifulSoup((out / manifest["learners"][learner]["files"]["html"]).read_text("utf-8"),
                         "html.parser")


def test_each_learner_gets_a_page_and_markdown_in_their_roster_language(book, roster, tmp_path):
    ex = load_exercise(EXERCISE)
    out = tmp_path / "out"
    publish(out, book, ex, "en", roster=read_roster(roster))
    manifest = json.loads((out / MANIFEST).read_text("utf-8"))
    assert set(manifest["learners"]) == set(CLASS)
    scores = final_scores(book)
    for learner, entry in manifest["learners"].items():
        doc = page(out, manifest, learner)
        assert doc.html is not None and doc.find("body") is not None
        assert_self_contained(doc)
        markdown = (out / entry["files"]["markdown"]).read_text("utf-8")
        assert f"**{scores[learner]:g} / 20**" in markdown
        assert entry["score"] == scores[learner] and entry["max_score"] == 20
        assert entry["files"]["html"].startswith("learners/") and entry["files"]["html"].endswith(".html")
        # how the code was isolated is the instructor's business (issue 31), in every language
        assert not re.search("isolation|隔離", doc.get_text() + markdown), learner
    # the roster's zh-Hant learner reads zh-TW, every other one the command's --lang
    assert manifest["learners"]["1001"]["lang"] == "zh-TW"
    assert page(out, manifest, "1001").html["lang"] == "zh-Hant-TW"
    assert "目標就是輸入" in page(out, manifest, "1001").get_text()
    for learner in set(CLASS) - {"1001"}:
        assert manifest["learners"][learner]["lang"] == "en"
        doc = page(out, manifest, learner)
        assert doc.html["lang"] == "en" and not CJK.search(doc.get_text()), learner
    # the languages are kept in the gradebook: the next publication, in zh-TW, keeps the roster's
    # (1001 zh-TW, 1002 en) and gives the others --lang
    with book.sessions() as s:
        assert s.get(Learner, 1).lang == "zh-TW"
    again = tmp_path / "again"
    publish(again, book, ex, "zh-TW")
    manifest = json.loads((again / MANIFEST).read_text("utf-8"))
    langs = {learner: e["lang"] for learner, e in manifest["learners"].items()}
    assert langs == {**{learner: "zh-TW" for learner in CLASS}, "1002": "en"}
    published = [e for e in book.audit_log(exercise=EXERCISE) if e["action"] == "publish"]
    assert [e["details"]["roster_recorded"] for e in published] == [3, 0]
    assert page(again, manifest, "1003").html["lang"] == "zh-Hant-TW"
    assert "分（滿分 20 分）" in (again / "moodle-import.csv").read_text("utf-8-sig")


def test_the_canvas_import_has_canvas_columns_and_the_final_scores(book, roster, tmp_path):
    out = tmp_path / "out"
    publish(out, book, load_exercise(EXERCISE), "en", roster=read_roster(roster),
            canvas_assignment="Day 49: data pipeline (12345)")
    header, *rows = read_csv(out / "canvas-import.csv")
    assert header == [*CANVAS_HEADER, "Day 49: data pipeline (12345)"]
    assert all(r[0].strip() != "Points Possible" for r in rows), "an existing assignment keeps its points"
    scores = final_scores(book)
    by_id = {r[1]: r for r in rows if r[1]}
    # the Canvas user ids (the others have none); 1999 is on the roster without a submission:
    # a row too, its score blank (--missing blank, the default: Canvas leaves it ungraded)
    assert set(by_id) == {"1001", "1002", "1003", "1999"}
    for uid, r in by_id.items():
        assert r[5] == "" if uid == "1999" else float(r[5]) == scores[uid]
    assert by_id["1001"][:5] == ["Chen, Mei", "1001", "S-1001", "mei@example.edu", "Section A"]
    assert by_id["1999"][:5] == ["Not Handed In", "1999", "S-1999", "no@example.edu", "Section B"]
    assert len(rows) == len(CLASS) + 1
    others = {r[0]: r for r in rows if not r[1]}
    assert float(others["Wang Fang"][5]) == scores["2001"]
    assert float(others["'" + HOSTILE_ID][5]) == 0.0

    # without --canvas-assignment: the exercise's title, matched by title, and the points row
    # that gives a new assignment its points
    default = tmp_path / "default"
    publish(default, book, load_exercise(EXERCISE), "en")
    header, points_row, *rows = read_csv(default / "canvas-import.csv")
    assert header == [*CANVAS_HEADER, load_exercise(EXERCISE).title.en]
    assert points_row[0] == "Points Possible" and float(points_row[5]) == 20
    assert sorted(float(r[5]) for r in rows) == sorted(scores.values())


def test_an_override_is_the_score_every_file_publishes(book, roster, tmp_path):
    book.override("1003", EXERCISE, 18.0, "regraded by hand: the windows check was too strict", "ta")
    out = tmp_path / "out"
    publish(out, book, load_exercise(EXERCISE), "en", roster=read_roster(roster),
            canvas_assignment="Data (1)")
    [current] = [c for c in book.current_grades(EXERCISE) if c.learner == "1003"]
    assert current.grade.score == 18.0 and current.graded_score == 7.25  # the gradebook's final score
    [canvas] = [r for r in read_csv(out / "canvas-import.csv") if r[1] == "1003"]
    [moodle] = [r for r in read_csv(out / "moodle-import.csv") if r[0] == "wei@example.edu"]
    assert float(canvas[5]) == float(moodle[2]) == 18.0
    assert json.loads((out / MANIFEST).read_text("utf-8"))["learners"]["1003"]["score"] == 18.0
    assert "**18 / 20**" in (out / "learners" / "1003.md").read_text("utf-8")


def by_email_of(rows):
    return {r[0]: r for r in rows if r[0]}


def test_the_moodle_files_have_moodle_columns_and_the_final_scores(book, roster, tmp_path):
    out = tmp_path / "out"
    ex = load_exercise(EXERCISE)
    publish(out, book, ex, "en", roster=read_roster(roster))
    scores = final_scores(book)
    header, *rows = read_csv(out / "moodle-import.csv")
    assert header == ["Email address", "Full name", ex.title.en, "Feedback"]
    assert len(rows) == len(CLASS) + 1  # and the roster's learner without a submission: blank
    assert by_email_of(rows)["no@example.edu"][2:] == ["", "未繳交"]  # "no submission", in their zh-TW
    rows = [r for r in rows if r[0] != "no@example.edu"]
    by_email = {r[0]: r for r in rows if r[0]}
    assert float(by_email["mei@example.edu"][2]) == scores["1001"]
    assert float(by_email["wei@example.edu"][2]) == scores["1003"]
    # feedback: the score, then the first thing to fix, in the learner's language (1001: zh-TW)
    assert by_email["wei@example.edu"][3].startswith("7.25 of 20 points")
    assert "the targets are the inputs" in by_email["wei@example.edu"][3]
    assert by_email["mei@example.edu"][3].startswith("12.5 分（滿分 20 分）")
    for r in rows:
        assert float(r[2]) in scores.values()

    header, *rows = read_csv(out / "moodle-worksheet.csv")
    assert header == MOODLE_WORKSHEET_HEADER
    [row] = rows  # only the learner whose id is a Moodle participant id
    assert row[0] == "Participant 2001" and float(row[3]) == scores["2001"] and float(row[4]) == 20
    assert row[5] and row[6].startswith("15 of 20 points")


def test_a_learner_id_or_name_that_starts_like_a_formula_stays_inert(book, roster, tmp_path):
    out = tmp_path / "out"
    publish(out, book, load_exercise(EXERCISE), "en", roster=read_roster(roster))
    for file in ("canvas-import.csv", "moodle-import.csv", "moodle-worksheet.csv"):
        for r in read_csv(out / file):
            for value in r:
                assert not value.startswith(FORMULA), (file, value)
    cells = {v for r in read_csv(out / "canvas-import.csv") for v in r}
    assert "'" + HOSTILE_ID in cells and "'" + HOSTILE_NAME in cells
    manifest = json.loads((out / MANIFEST).read_text("utf-8"))
    html_file = manifest["learners"][HOSTILE_ID]["files"]["html"]
    assert "=" not in html_file and "|" not in html_file and "'" not in html_file
    doc = page(out, manifest, HOSTILE_ID)
    assert_self_contained(doc)
    assert HOSTILE_ID in doc.get_text()  # shown as the text it is
    doc = page(out, manifest, "1002")
    assert_self_contained(doc)  # the name's URL is text, never a link


def test_a_removed_learner_is_not_published_and_their_old_page_goes(book, tmp_path):
    out = tmp_path / "out"
    ex = load_exercise(EXERCISE)
    publish(out, book, ex, "en")
    first = json.loads((out / MANIFEST).read_text("utf-8"))
    old_page = out / first["learners"]["1003"]["files"]["html"]
    assert old_page.exists()
    book.remove("1003", "withdrew from the course", "instructor")
    publish(out, book, ex, "en")
    manifest = json.loads((out / MANIFEST).read_text("utf-8"))
    assert "1003" not in manifest["learners"] and manifest["removed_learners"] == 1
    assert not old_page.exists() and not old_page.with_suffix(".md").exists()
    assert all(r[1] != "1003" and r[0] != "Lin, Wei" for r in read_csv(out / "canvas-import.csv"))
    assert len(read_csv(out / "moodle-import.csv")) == 1 + len(CLASS) - 1


@pytest.mark.parametrize("value, lang", [
    ("zh-TW", "zh-TW"), ("zh_TW", "zh-TW"), ("zh_tw", "zh-TW"), ("zh-Hant", "zh-TW"), ("ZH-HANT-TW", "zh-TW"),
    ("繁體中文", "zh-TW"), ("中文（台灣）", "zh-TW"), ("en", "en"), ("en_US.UTF-8", "en"), ("English", "en"),
    ("", None), ("  ", None), ("fr", None), ("Deutsch", None),
])
def test_a_roster_language_is_read_as_a_report_language(value, lang):
    assert roster_lang(value) == lang


def test_a_moodle_worksheet_roster_reads_its_preferred_language_column(tmp_path):
    path = tmp_path / "worksheet.csv"
    path.write_text("Identifier,Full name,Email address,Preferred language\n"
                    "Participant 2001,Wang Fang,fang@example.edu,zh_tw\n"
                    "Participant 2002,Ann Lee,ann@example.edu,\n", encoding="utf-8")
    rows = {r.learner: r for r in read_roster(path)}
    assert rows["2001"].lang == "zh-TW" and rows["2001"].lms == "moodle"
    assert rows["2002"].lang is None and rows["2002"].email == "ann@example.edu"


def grader(*args, env=None, timeout=600):
    proc = subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_the_publish_command_and_its_usage_errors(book, roster, tmp_path):
    db = book.url.removeprefix("sqlite:///")
    out = tmp_path / "out"
    proc = grader("gradebook", "publish", EXERCISE, "--db", db, "--out", out, "--lang", "en",
                  "--roster", roster, "--canvas-assignment", "Data (777)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "published 5 learner reports" in proc.stdout and "1 zh-TW" in proc.stdout
    assert read_csv(out / "canvas-import.csv")[0][-1] == "Data (777)"
    graded = {r[1]: float(r[5]) for r in read_csv(out / "canvas-import.csv")[1:] if r[1] not in ("", "1999")}
    assert "1 learners on the roster have no submission" in proc.stdout
    assert "Not Handed In (1999)" in proc.stdout
    zero = tmp_path / "zero"
    proc = grader("gradebook", "publish", EXERCISE, "--db", db, "--out", zero, "--roster", roster,
                  "--missing", "zero", "--canvas-assignment", "Data (777)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {r[1]: r[5] for r in read_csv(zero / "canvas-import.csv")[1:]}["1999"] == "0"

    # --course: the late learner's penalty is in every published score, as the gradebook has it
    course = tmp_path / "course.toml"
    course.write_text(COURSE, encoding="utf-8")
    late_out = tmp_path / "late"
    proc = grader("gradebook", "publish", EXERCISE, "--db", db, "--out", late_out, "--lang", "en",
                  "--course", course, "--canvas-assignment", "Data (777)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from grader.policy.course import load_policy
    policy = load_policy(course, [EXERCISE])
    with Gradebook(db) as gb:
        final = {c.learner: c.grade.score for c in gb.current_grades(EXERCISE, policy=policy)}
    penalized = {r[1]: float(r[5]) for r in read_csv(late_out / "canvas-import.csv")[1:] if r[1]}
    assert penalized == {uid: final[uid] for uid in penalized}
    assert penalized["1003"] < graded["1003"] and penalized["1001"] == graded["1001"]
    manifest = json.loads((late_out / MANIFEST).read_text("utf-8"))
    assert manifest["learners"]["1003"]["score"] == penalized["1003"]
    bad_roster = tmp_path / "bad.csv"
    bad_roster.write_text("who,what\n1,2\n", encoding="utf-8")
    bad_course = tmp_path / "course.toml"
    bad_course.write_text("[exercises.day49-data]\ndue = 'tomorrow'\n", encoding="utf-8")
    for args, names in [
        (("--roster", bad_roster), "--roster"),
        (("--course", bad_course), "--course"),
        (("--canvas-assignment", "  "), "--canvas-assignment"),
    ]:
        proc = grader("gradebook", "publish", EXERCISE, "--db", db, "--out", tmp_path / "x", *args)
        assert proc.returncode == 2 and names in proc.stderr, (args, proc.stderr)
    proc = grader("gradebook", "publish", "day48-quiz", "--db", db, "--out", tmp_path / "x")
    assert proc.returncode == 2 and "no grade of day48-quiz" in proc.stderr
    proc = grader("gradebook", "publish", EXERCISE, "--db", tmp_path / "missing.db", "--out", tmp_path / "x")
    assert proc.returncode == 2 and not (tmp_path / "missing.db").exists()


def test_grader_batch_out_publishes_the_same_files(tmp_path):
    """A real batch of two learners (a solution and a bug) on day49-data, then its --out."""
    import shutil

    from grader.course.sampleclass import make_class

    exercises = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises" / EXERCISE, exercises / EXERCISE,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(exercises / EXERCISE / "exercise.toml", "a") as f:
        f.write("\n[limits]\nwall_seconds = 30\ncall_seconds = 4\n")
    kinds = make_class(EXERCISE, tmp_path / "class", 2, only=("solution", "mutant:unshifted-targets"))
    db, out = tmp_path / "class.db", tmp_path / "out"
    proc = grader("batch", EXERCISE, tmp_path / "class", "--db", db, "--workers", 1, "--out", out,
                  "--lang", "zh-TW", env={"GRADER_EXERCISES_DIR": str(exercises)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((out / MANIFEST).read_text("utf-8"))
    assert set(manifest["learners"]) == set(kinds)
    with Gradebook(str(db)) as gb:
        scores = final_scores(gb)
    for learner, entry in manifest["learners"].items():
        assert (out / "grades" / f"{learner}.json").exists()  # the batch's own files stay
        assert entry["lang"] == "zh-TW" and entry["score"] == scores[learner]
        doc = page(out, manifest, learner)
        assert_self_contained(doc)
        assert doc.html["lang"] == "zh-Hant-TW"
        assert f"**{scores[learner]:g} / 20**" in (out / entry["files"]["markdown"]).read_text("utf-8")
    header, _points, *rows = read_csv(out / "canvas-import.csv")
    assert header[:5] == CANVAS_HEADER
    assert {r[0]: float(r[5]) for r in rows} == scores  # folder learners: their id as the name
    assert min(scores.values()) < 20 == max(scores.values())


# -- a class of 30 from a Canvas export, a roster of 34 learners and Canvas' Test Student -----------
# (issue 31: everyone on the roster accounted for, one set of numbers). Hand-made grades, as above:
# what is tested is what the roster does to the published files, not grading.

ROSTER_NAMES = ["陳美玲", "林志偉", "王小明", "黃怡君", "張家豪", "李佳穎", "吳俊傑", "劉淑芬"]


def roster_class(tmp_path, n_submitted=30, n_absent=4):
    """(gradebook path, roster path, learner id -> roster name): learners 2000.. submitted as a
    Canvas download names them (a slug: `chenmeiling`), the last n_absent did not, two were late."""
    db = tmp_path / "class.db"
    ex = load_exercise(EXERCISE)
    names = {str(2000 + i): f"{ROSTER_NAMES[i % 8]}{i}" for i in range(n_submitted + n_absent)}
    with Gradebook(str(db)) as gb:
        version = gb.exercise_version(EXERCISE, "v" * 64, ex.points, ex.title.en)
        for i, learner in enumerate(list(names)[:n_submitted]):
            incoming = Incoming(learner=learner, name=f"chenmeiling{i}", layout="canvas",
                                files={"data.py": learner.encode()},
                                submitted_at=LATE_AT if i in (3, 7) else None)
            [sid] = gb.add_submissions(EXERCISE, [incoming])
            gb.record(sid, version, Outcome(status="graded", grade=grade(learner, float(8 + i % 13))))
    roster = tmp_path / "roster.csv"
    lines = ["Student,ID,SIS User ID,SIS Login ID,Section,Email",
             "    Points Possible,,,,,"]
    lines += [f"{name},{uid},S-{uid},u{uid},Section A,u{uid}@example.edu" for uid, name in names.items()]
    lines.insert(7, "Test Student,9999,,,Section A,")  # Canvas' Student View account
    roster.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return db, roster, names


@pytest.mark.parametrize("missing", ["blank", "zero"])
def test_every_learner_on_the_roster_is_accounted_for_and_the_test_student_is_not(tmp_path, missing):
    db, roster, names = roster_class(tmp_path)
    absent = list(names)[30:]
    out = tmp_path / "out"
    args = ["--roster", roster, "--canvas-assignment", "Data (777)"]
    proc = grader("gradebook", "publish", EXERCISE, "--db", db, "--out", out, *args,
                  *(["--missing", missing] if missing == "zero" else []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "skipped 1 LMS test account" in proc.stdout and "Test Student (9999)" in proc.stdout
    assert "4 learners on the roster have no submission" in proc.stdout

    _header, *rows = read_csv(out / "canvas-import.csv")
    assert len(rows) == 34 and {r[1] for r in rows} == set(names)  # no Test Student, no Points row
    by_id = {r[1]: r for r in rows}
    with Gradebook(str(db)) as gb:
        scores = final_scores(gb)
    for uid, r in by_id.items():
        assert r[0] == names[uid]  # the roster's name, never the file's slug
        assert r[5] == ("" if missing == "blank" else "0") if uid in absent else float(r[5]) == scores[uid]

    doc = BeautifulSoup((out / "class.html").read_text("utf-8"), "html.parser")
    text = doc.get_text(" ")
    assert "陳美玲0" in text and "chenmeiling" not in text
    shown = {tr["data-learner"]: tr for tr in doc.select("tr.submission")}
    assert set(shown) == set(names)
    for uid in absent:
        assert "no submission" in shown[uid].get_text(" ")
    stat = {d["data-stat"]: d["data-value"] for d in doc.select("div.stat")}
    counted = list(scores.values()) + ([0.0] * 4 if missing == "zero" else [])
    assert float(stat["mean"]) == pytest.approx(100 * sum(counted) / len(counted) / 20, abs=0.005)
    assert int(stat["submissions"]) == len(counted)
    assert (stat.get("no-submission") == "4") == (missing == "blank")
    grades_csv = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text("utf-8"))))
    assert len(grades_csv) == 34
    blank = [g for g in grades_csv if g["score"] == ""]
    assert len(blank) == (4 if missing == "blank" else 0)
    assert all(g["error_kind"] == "no-submission" for g in grades_csv if g["student"] in absent)
    manifest = json.loads((out / MANIFEST).read_text("utf-8"))
    assert set(manifest["no_submission"]["learners"]) == set(absent)

    # the gradebook export has the roster's names now, and a batch's slug never undoes them
    proc = grader("gradebook", "export", "--db", db, "--exercise", EXERCISE)
    assert "陳美玲0" in proc.stdout and "chenmeiling" not in proc.stdout
    with Gradebook(str(db)) as gb:
        gb.add_submissions(EXERCISE, [Incoming(learner="2000", name="chenmeiling0", layout="canvas",
                                               files={"data.py": b"again"})])
        from sqlalchemy import select
        with gb.sessions() as s:
            assert s.scalar(select(Learner.name).where(Learner.key == "2000")) == "陳美玲0"

    if missing == "blank":  # the tokens: the roster's emails, none for the Test Student
        tokens = tmp_path / "tokens.csv"
        proc = grader("tokens", "issue", "--roster", roster, "--out", tokens, "--db", db)
        assert proc.returncode == 0, proc.stderr
        assert "skipped 1 LMS test account" in proc.stderr
        issued = list(csv.DictReader(io.StringIO(tokens.read_text("utf-8"))))
        assert len(issued) == 34 and "9999" not in {r["learner"] for r in issued}
        assert all(r["email"] == f"u{r['learner']}@example.edu" for r in issued)


def test_the_batch_summary_says_the_numbers_class_html_shows(tmp_path):
    """After late penalties (--course) and an override: the summary's mean is class.html's."""
    from grader.course.batch import Tally, final_numbers, summary
    from grader.policy.course import load_policy
    from grader.policy.roster import read_roster

    db, roster, _ = roster_class(tmp_path)
    course = tmp_path / "course.toml"
    course.write_text(COURSE, encoding="utf-8")
    policy = load_policy(course, [EXERCISE])
    ex = load_exercise(EXERCISE)
    out = tmp_path / "out"
    with Gradebook(str(db)) as gb:
        gb.override("2010", EXERCISE, 20.0, "regraded by hand", "instructor")
        rows = read_roster(roster)
        final = final_numbers(gb, ex, policy, rows, "zero")
        publish(out, gb, ex, "en", policy, roster=rows, missing="zero")
        raw = [c.graded_score for c in gb.current_grades(EXERCISE, policy=policy)]
    text = summary(ex, Tally(graded=30, passed=0, score=sum(raw)), final)
    mean = sum(final.scores) / len(final.scores)
    said = f"mean score: {mean:.2f} / 20 over 34 learners, after late penalties and overrides (3 adjusted)"
    assert said in text
    assert "4 on the roster without a submission count 0" in text
    assert mean != pytest.approx(sum(raw) / 30)  # the raw mean is not what is said
    doc = BeautifulSoup((out / "class.html").read_text("utf-8"), "html.parser")
    stat = {d["data-stat"]: d["data-value"] for d in doc.select("div.stat")}
    assert float(stat["mean"]) == pytest.approx(100 * mean / 20, abs=0.005)
    canvas = {r[1]: r[5] for r in read_csv(out / "canvas-import.csv")[1:] if r[1]}
    assert sum(float(v) for v in canvas.values()) / len(canvas) == pytest.approx(mean)
