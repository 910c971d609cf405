"""`grader course` (the instructor's client commands) against a real `grader serve` on loopback.

The server, its private edition and its course.toml are tests/test_service.py's (imported, not
copied): day45-quiz was due an hour ago and closes in two days. alice's quiz sheet is graded on
the first start; then, with the server stopped, a job of bob's fails JOB_ATTEMPTS times through
grader.store.queue on the server's own gradebook (its last error full of escape sequences) and
is a dead letter when the server starts again. The CLI runs as a subprocess of this checkout,
with GRADER_SERVER / GRADER_TOKEN and a config folder of its own.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from test_client import PROBE
from test_service import Client, Server, course_toml, private_edition, quiz_sheet

from grader.cli.course import queue_text
from grader.client import show
from grader.client.course import DeadLetter, QueueState
from grader.limits import JOB_ATTEMPTS
from grader.store import Gradebook, Incoming
from grader.store.accounts import issue_token
from grader.store.queue import Queue
from reports.gradebook import CLASS_GRADE_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
QUIZ = "day45-quiz"
TAIPEI = timezone(timedelta(hours=8))  # an extension given in another offset than the server's UTC
# what a crashed worker might leave as its last error: an OSC title, a colour, a bidi override
HOSTILE_ERROR = "worker lost\x1b]0;pwned\x07 \x1b[31mred\u202e tail"
# what the light install lacks: `grader course` must import none of it (reports.gradebook is light)
FORMULA = '=HYPERLINK("http://evil.example/","open me")'  # bob's name, as a spreadsheet would run it
GRADING_ONLY = ("torch", "numpy", "sqlalchemy", "jinja2", "babel", "fastapi", "uvicorn", "alembic")


def make_dead_letter(db: str, like_upload: int) -> tuple[int, int]:
    """A job of bob's that failed JOB_ATTEMPTS times, on the stopped server's gradebook: (job, upload)."""
    with Gradebook(db) as gb:
        q = Queue(gb, "test:dead-letter:1")
        version = q.upload(like_upload).version_id
        sheet = Incoming(learner="?", files={"answers.toml": quiz_sheet(wrong=True)})
        up = q.submit("bob", QUIZ, version, sheet)
        for _ in range(JOB_ATTEMPTS):
            (lease,) = q.lease()
            state = q.fail(lease, HOSTILE_ERROR)
        assert state == "dead"
        (dead,) = q.dead_letters()
        assert dead["upload"] == up.id
        return dead["job"], up.id


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course-cli")
    exercises = private_edition(root / "exercises")
    db = str(root / "gradebook.db")
    with Gradebook(db) as gb:
        tokens = {"alice": issue_token(gb, "alice", name="Alice")}
        tokens["bob"] = issue_token(gb, "bob", name=FORMULA)
        tokens["prof"] = issue_token(gb, "prof", role="instructor", name="Prof")
        issue_token(gb, "carol")  # course.toml's extension is hers: the server refuses one for nobody
    (root / "course.toml").write_text(course_toml(datetime.now(UTC)))
    server = Server(root, db, exercises, root / "course.toml")
    try:
        server.start()
        alice = Client(server.url, tokens["alice"], student=False)
        r = alice.upload(QUIZ, {"answers.toml": quiz_sheet(wrong=False)})
        assert r.status_code == 202, r.text
        graded = alice.wait(r.json()["id"])
        assert graded["status"] == "graded", graded
        server.stop()
        job, upload = make_dead_letter(db, graded["id"])
        server.start()
        yield {
            "root": root,
            "db": db,
            "server": server,
            "tokens": tokens,
            "alice_upload": graded["id"],
            "dead_job": job,
            "dead_upload": upload,
        }
    finally:
        server.stop()


def cli(course, who: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "GRADER_SERVER": course["server"].url,
        "GRADER_TOKEN": course["tokens"][who],
        "XDG_CONFIG_HOME": str(course["root"] / "config"),  # never this machine's own login
        "LANG": "C.UTF-8",
    }
    out = subprocess.run(
        [sys.executable, "-m", "grader", "course", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert "Traceback" not in out.stderr, out.stderr
    return out


def status_of(course, who: str) -> dict:
    (row,) = (
        Client(course["server"].url, course["tokens"][who], student=False)
        .get("/status", params={"exercise": QUIZ})
        .json()
    )
    return row


# -- who may ---------------------------------------------------------------------------------------


def test_a_students_token_is_refused_with_the_servers_403_and_exit_2(course):
    due_before = status_of(course, "bob")["deadlines"]["due"]
    for args in (
        ["queue"],
        ["grades", QUIZ],
        ["release", QUIZ],
        ["retry", str(course["dead_job"])],
        ["extend", "bob", QUIZ, "--due", "2030-01-01T00:00:00Z"],
    ):
        out = cli(course, "bob", *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stderr.startswith("error: ") and out.stdout == "", (args, out.stderr)
    assert status_of(course, "bob")["deadlines"]["due"] == due_before, "the refused extension is not made"
    assert json.loads(cli(course, "prof", "queue", "--format", "json").stdout)["dead"] == 1


@pytest.mark.parametrize("option", ["--due", "--closes"])
def test_a_time_without_a_utc_offset_is_a_usage_error_naming_the_option(course, option):
    times = {"--due": "2030-01-01T00:00:00Z", "--closes": "2030-01-02T00:00:00+08:00"}
    times[option] = "2030-01-01T09:00"
    out = cli(course, "prof", "extend", "alice", QUIZ, "--due", times["--due"], "--closes", times["--closes"])
    assert out.returncode == 2 and f"'{option}'" in out.stderr and "UTC offset" in out.stderr, out.stderr
    assert cli(course, "prof", "extend", "alice", QUIZ, "--due", "tomorrow").returncode == 2


# -- the five commands -----------------------------------------------------------------------------


def test_an_extension_moves_that_learners_due_and_no_one_elses(course):
    bob_due = status_of(course, "bob")["deadlines"]["due"]
    due = (datetime.now(UTC) + timedelta(days=5)).replace(microsecond=0).astimezone(TAIPEI)
    out = cli(course, "prof", "extend", "alice", QUIZ, "--due", due.isoformat(), "--reason", "ill")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"alice, {QUIZ}: due "), out.stdout
    assert datetime.fromisoformat(status_of(course, "alice")["deadlines"]["due"]) == due
    assert status_of(course, "bob")["deadlines"]["due"] == bob_due


def test_an_extension_for_an_unknown_learner_or_exercise_is_refused_exit_2_naming_it(course):
    due = "2030-01-01T00:00:00Z"
    out = cli(course, "prof", "extend", "7777", QUIZ, "--due", due)
    assert out.returncode == 2 and out.stdout == "", (out.stdout, out.stderr)
    assert out.stderr == "error: no learner 7777 in the gradebook or roster\n"
    r = Client(course["server"].url, course["tokens"]["prof"], student=False).post(
        "/extensions", json={"learner": "7777", "exercise": QUIZ, "due": due}
    )
    assert r.status_code == 404 and r.json()["error"]["field"] == "learner", r.text
    out = cli(course, "prof", "extend", "alice", "day45-quizz", "--due", due)
    assert out.returncode == 2 and "no such exercise" in out.stderr, out.stderr
    with Gradebook(course["db"]) as gb:
        assert gb.learner("7777") is None  # refused before anything was made


def test_a_release_is_recorded_and_an_unknown_exercise_is_exit_2(course):
    out = cli(course, "prof", "release", QUIZ)
    assert out.returncode == 0 and out.stdout.startswith(f"{QUIZ} released at "), (out.stdout, out.stderr)
    with Gradebook(course["db"]) as gb:
        assert QUIZ in Queue(gb, "test:reader:1").releases()
    out = cli(course, "prof", "release", "no-such-exercise")
    assert out.returncode == 2 and out.stderr.startswith("error: "), out.stderr


def test_the_class_grades_as_text_json_and_a_guarded_csv_importing_nothing_that_grades(course):
    rows = json.loads(cli(course, "prof", "grades", QUIZ, "--format", "json").stdout)
    alice = next(r for r in rows if r["learner"] == "alice")
    assert alice["submission"] == course["alice_upload"] and alice["score"] is not None
    # carol has a token and no upload: a row of her own, "no submission"; the instructor is none
    carol = next(r for r in rows if r["learner"] == "carol")
    assert (carol["submissions"], carol["submission"], carol["score"]) == (0, None, None)
    assert "prof" not in {r["learner"] for r in rows}
    text = cli(course, "prof", "grades", QUIZ)
    assert text.returncode == 0 and "Alice" in text.stdout, text.stdout
    assert "no submission" in next(line for line in text.stdout.splitlines() if "carol" in line)
    assert f"{alice['score']:g}/{alice['max_score']:g}" in text.stdout
    out = cli(course, "prof", "grades", QUIZ, "--format", "csv")
    table = list(csv.DictReader(io.StringIO(out.stdout)))
    assert tuple(table[0]) == CLASS_GRADE_COLUMNS
    got = next(r for r in table if r["learner"] == "alice")
    assert (got["name"], got["submission"], got["passed"]) == (
        "Alice",
        str(alice["submission"]),
        str(alice["passed"]).lower(),
    )
    bob = next(r for r in table if r["learner"] == "bob")  # his one upload is the dead letter
    assert bob["name"] == "'" + FORMULA and bob["submission"] == "", bob
    env = {
        "GRADER_SERVER": course["server"].url,
        "GRADER_TOKEN": course["tokens"]["prof"],
        "XDG_CONFIG_HOME": str(course["root"] / "config"),
    }
    probe = subprocess.run(
        [sys.executable, "-c", PROBE % (GRADING_ONLY,), "course", "grades", QUIZ, "--format", "csv"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
        timeout=120,
    )
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == {"code": 0, "heavy": []}, probe.stderr


def test_the_queue_shows_the_dead_letter_and_its_last_error_sanitised(course):
    out = cli(course, "prof", "queue")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("queued 0, running 0, dead letters 1\n"), out.stdout
    line = next(x for x in out.stdout.splitlines() if "worker lost" in x)
    assert str(course["dead_job"]) in line and "bob" in line and QUIZ in line
    assert not any(c in out.stdout for c in "\x1b\x07\u202e"), repr(out.stdout)
    state = json.loads(cli(course, "prof", "queue", "--format", "json").stdout)
    (dead,) = state["dead_letters"]
    assert (dead["job"], dead["attempts"], dead["last_error"]) == (
        course["dead_job"],
        JOB_ATTEMPTS,
        HOSTILE_ERROR,
    )


def test_a_retried_dead_letter_is_graded_and_cannot_be_retried_twice(course):
    out = cli(course, "prof", "retry", str(course["dead_job"]))
    assert out.returncode == 0 and out.stdout == f"job {course['dead_job']}: queued again\n", out.stdout
    bob = Client(course["server"].url, course["tokens"]["bob"], student=False)
    assert bob.wait(course["dead_upload"])["status"] == "graded"
    assert json.loads(cli(course, "prof", "queue", "--format", "json").stdout)["dead"] == 0
    again = cli(course, "prof", "retry", str(course["dead_job"]))
    assert again.returncode == 2 and again.stderr.startswith("error: "), again.stderr


def test_the_queue_text_says_the_oldest_jobs_wait_in_either_language():
    now = datetime(2026, 11, 8, 12, 0, tzinfo=UTC)
    state = QueueState(
        queued=4,
        running=2,
        dead=1,
        oldest_queued_at=now - timedelta(hours=3, minutes=5),
        dead_letters=[
            DeadLetter(
                job=7,
                upload=9,
                learner="bob",
                exercise=QUIZ,
                attempts=3,
                last_error=HOSTILE_ERROR + "\nsecond line",
            )
        ],
    )
    text = queue_text(state, now, "en").splitlines()
    since = show.when(state.oldest_queued_at)
    assert text[:2] == [
        "queued 4, running 2, dead letters 1",
        f"the oldest queued job has waited 3 h 5 min (since {since})",
    ]
    assert text[2].split() == [
        "job",
        "submission",
        "learner",
        "exercise",
        "attempts",
        "failed",
        "at",
        "last",
        "error",
    ]
    assert text[3].split()[:6] == ["7", "9", "bob", QUIZ, "3", "-"] and len(text) == 4, text
    zh = queue_text(state, now, "zh-TW")
    assert zh.startswith("排隊中 4，評分中 2，無法處理的工作 1\n排最久的工作已等了 3 小時 5 分鐘"), zh


# -- grader course check, and grader serve --course: the file against the course ----------------------


def offline(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "grader", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"},
        timeout=120,
    )
    assert "Traceback" not in out.stderr, out.stderr
    return out


MISSPELLED = """
[exercises.day45-attention]
visibility = { default = "visible", checks = { "mha-has-no-future-leaks" = "after_due" } }
"""


def test_course_check_and_serve_refuse_a_misspelled_check_id_naming_the_closest(tmp_path):
    (tmp_path / "course.toml").write_text(MISSPELLED)
    named = (
        "course.toml: exercises.day45-attention.visibility.checks.mha-has-no-future-leaks: day45-attention "
        "has no check mha-has-no-future-leaks (did you mean mha-has-no-future-leak?)"
    )
    out = offline("course", "check", "course.toml", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr == f"error: {named}\n", out.stderr
    out = offline("serve", "--db", "g.db", "--course", "course.toml", "--port", "0", cwd=tmp_path)
    assert out.returncode == 2 and named in out.stderr, out.stderr
    (tmp_path / "course.toml").write_text(MISSPELLED.replace("leaks", "leak"))
    out = offline("course", "check", "course.toml", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout == "course.toml: fine (1 exercise(s), 0 extension(s))\n"


def test_course_check_and_serve_refuse_a_timezone_that_is_not_an_iana_zone(tmp_path):
    (tmp_path / "course.toml").write_text('name = "LLM"\ntimezone = "Taipei"\n')
    named = "course.toml: timezone: not a time zone the tz database knows (an IANA name such as Asia/Taipei)"
    for args in (("course", "check", "course.toml"),
                 ("serve", "--db", "g.db", "--course", "course.toml", "--port", "0")):  # fmt: skip
        out = offline(*args, cwd=tmp_path)
        assert out.returncode == 2 and named in out.stderr, out.stderr
    assert not (tmp_path / "g.db").exists()


def test_course_check_and_serve_refuse_an_extension_for_a_learner_not_in_the_gradebook(tmp_path):
    db = str(tmp_path / "g.db")
    with Gradebook(db) as gb:
        issue_token(gb, "12345")
    (tmp_path / "course.toml").write_text(
        "[[extensions]]\nlearner = 12354\nexercise = 'day45-quiz'\ndue = 2030-01-01T00:00:00Z\n"
    )
    named = (
        "course.toml: extensions[1].learner: no learner '12354' in the gradebook or roster "
        "(did you mean 12345?)"
    )
    out = offline("course", "check", "course.toml", "--db", db, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr == f"error: {named}\n", out.stderr
    out = offline("serve", "--db", db, "--course", "course.toml", "--port", "0", cwd=tmp_path)
    assert out.returncode == 2 and named in out.stderr, out.stderr
    (tmp_path / "roster.csv").write_text("Student,ID,SIS User ID,SIS Login ID,Section\nAnn,12354,,,\n")
    out = offline("course", "check", "course.toml", "--roster", "roster.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    out = offline("course", "check", "course.toml", cwd=tmp_path)  # nothing to check them against
    assert out.returncode == 0 and "give --roster or --db" in out.stderr
