"""The student client (grader/client, grader/cli/client.py) against a stub server on loopback.

The stub (tests/client_stub.py) is a real HTTP server on 127.0.0.1 serving the contract's
endpoints with canned JSON; the client reaches it over real sockets. What is held: the login
file is 0600 in a 0700 folder; a token never goes over plain http:// to another machine; an
upload whose answer is lost is retried with the same Idempotency-Key and stored once; the exit
codes 0/1/2/3/4; Retry-After shown; the files packed are the ones grader.intake.sources picks; the
digest is the gradebook's; the server's text is sanitised; nothing heavy is imported.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import threading
import tomllib
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from client_stub import TOKEN, Stub, digest, isolate_client, retry_in

from grader.cli import COMMANDS, GRADING_IMPORTS, GRADING_MODULES, main
from grader.client.config import check_token_url, is_loopback, normalize_server, read_login, save_login
from grader.client.errors import ClientError, Refused, ServerFailure, from_answer, retry_after
from grader.client.models import ExerciseInfo, Submission
from grader.client.packing import pack, unpack_starter
from grader.client.wait import Spinner, wait_until_finished
from grader.catalog.exercises import load_exercise
from grader.limits import LONG_POLL_SECONDS
from grader.intake.sources import read_source
from grader.intake.incoming import Incoming

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numpy", "sqlalchemy", "jinja2", "babel", "yaml", "fastapi", "uvicorn", "reports")


@pytest.fixture
def stub():
    with Stub() as s:
        yield s


@pytest.fixture
def env(tmp_path, monkeypatch):
    return isolate_client(tmp_path, monkeypatch)


@pytest.fixture
def logged_in(env, stub, monkeypatch):
    monkeypatch.setenv("GRADER_SERVER", stub.url)
    monkeypatch.setenv("GRADER_TOKEN", TOKEN)
    return stub


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def work(tmp_path: Path, text: str = "def load():\n    return 1\n") -> Path:
    folder = tmp_path / "work"
    folder.mkdir(exist_ok=True)
    (folder / "data.py").write_text(text)
    return folder


# -- login ---------------------------------------------------------------------------------------


def test_login_checks_the_token_and_keeps_it_in_a_0600_file(env, stub):
    result = run("login", "--server", stub.url + "/", input=f"  {TOKEN} \n")  # as pasted
    assert result.exit_code == 0, result.output
    assert TOKEN not in result.stdout  # the prompt hides the token
    assert "alice" in result.stdout
    path = env / "config" / "gpt-bughunt-grader" / "login.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text()) == {"server": stub.url, "token": TOKEN}
    assert not [p for p in path.parent.iterdir() if p.name != "login.json"]  # no temporary file left
    assert read_login(path, environ={}).token == TOKEN


def test_login_with_a_refused_token_stores_nothing(env, stub):
    result = run("login", "--server", stub.url, "--token", "wrong")
    assert result.exit_code == 2
    # what was wrong with the token just given, naming the server: not "log in again"
    assert result.stderr.splitlines() == [
        f"error: {stub.url} did not accept the token: it is mistyped, revoked, or another course's; "
        "nothing was kept"
    ]
    assert not (env / "config" / "gpt-bughunt-grader" / "login.json").exists()


def test_a_token_refused_after_login_says_so_and_names_the_server(env, stub, monkeypatch):
    monkeypatch.setenv("GRADER_SERVER", stub.url)
    monkeypatch.setenv("GRADER_TOKEN", "revoked-since")
    for args in (["status"], ["history", "day49-data"], ["report", "day49-data"]):
        result = run(*args)
        assert result.exit_code == 2, args
        assert result.stderr.splitlines() == [
            f"error: {stub.url} did not accept the token: it is mistyped, revoked, or another course's",
            f"ask your instructor for your token, then run: grader login --server {stub.url}",
        ], args
    zh = run("status", "--lang", "zh-TW")
    assert stub.url in zh.stderr and "權杖" in zh.stderr and "did not accept" not in zh.stderr  # the glossary's token


def test_a_token_that_cannot_be_one_is_refused_before_it_is_sent(env, stub):
    for bad in ("", "two words", "tok\r\nX-Evil: 1", "t\u00f6ken", "x" * 2000):
        result = run("login", "--server", stub.url, "--token", bad)
        assert result.exit_code == 2 and "not one the server issues" in result.stderr, repr(bad)
    assert stub.languages == []  # nothing reached the server


def test_the_login_file_then_the_environment(env, stub, monkeypatch, tmp_path):
    path = tmp_path / "login.json"
    save_login(stub.url, "file-token", path)
    assert read_login(path, environ={}) == read_login(path, environ={"GRADER_SERVER": stub.url + "/"})
    assert read_login(path, environ={"GRADER_TOKEN": "env"}).token == "env"
    # another server named by GRADER_SERVER never gets the file's token
    other = read_login(path, environ={"GRADER_SERVER": "https://elsewhere.example"})
    assert (other.server, other.token) == ("https://elsewhere.example", None)
    # nor does an explicit --server (grader starter --server), nor GRADER_TOKEN meant for GRADER_SERVER
    assert read_login(path, environ={}, server="https://elsewhere.example").token is None
    env2 = {"GRADER_SERVER": stub.url, "GRADER_TOKEN": "env"}
    assert read_login(path, environ=env2, server="https://elsewhere.example").token is None
    path.write_text("{not json")
    with pytest.raises(ClientError, match="not a login file"):
        read_login(path, environ={})


# -- a token over plain http:// ------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "[::1]", "localhost", "LOCALHOST."])
def test_plain_http_to_this_machine_is_allowed(host):
    check_token_url(normalize_server(f"http://{host}:8000"), insecure=False)


@pytest.mark.parametrize(
    "host", ["example.com", "10.0.0.1", "[::ffff:8.8.8.8]", "127.0.0.1.nip.io", "localhost.evil"]
)
def test_plain_http_to_another_machine_is_refused_unless_insecure(host):
    url = normalize_server(f"http://{host}:8000")
    with pytest.raises(ClientError, match="plain http://"):
        check_token_url(url, insecure=False)
    check_token_url(url, insecure=True)
    check_token_url(normalize_server(f"https://{host}:8000"), insecure=False)
    assert not is_loopback(host)


def test_the_commands_refuse_plain_http_before_sending_anything(env, monkeypatch, tmp_path):
    # nothing listens on 10.255.255.1: had the client tried, this would be a network error (exit 4)
    result = run("login", "--server", "http://10.255.255.1:9", "--token", "t")
    assert result.exit_code == 2 and "plain http://" in result.stderr
    monkeypatch.setenv("GRADER_SERVER", "http://10.255.255.1:9")
    monkeypatch.setenv("GRADER_TOKEN", "t")
    for args in (["submit", "day49-data", str(work(tmp_path))], ["status"], ["history", "day49-data"]):
        result = run(*args)
        assert result.exit_code == 2 and "plain http://" in result.stderr, (args, result.output)
    result = run("starter", "day49-data", str(tmp_path / "s"), "--server", "http://10.255.255.1:9")
    assert result.exit_code == 2 and "plain http://" in result.stderr


def test_a_server_url_that_is_not_one_is_a_usage_error(env):
    for url in ("ftp://host", "host:8000", "https://user:pw@host", "https://host/?q=1"):
        result = run("login", "--server", url, "--token", "t")
        assert result.exit_code == 2, url


# -- submitting ----------------------------------------------------------------------------------


def test_submit_shows_files_and_digest_and_the_submission_id(logged_in, tmp_path):
    folder = work(tmp_path)
    result = run("submit", "day49-data", str(folder))
    assert result.exit_code == 0, result.output
    files = {"data.py": (folder / "data.py").read_bytes()}
    assert "data.py  25 bytes" in result.stderr
    assert digest(files) in result.stderr  # the gradebook's rule, computed independently
    assert Incoming(learner="alice", files=files).digest == digest(files)
    assert "submission 100: queued" in result.stdout and "grader report 100" in result.stdout  # not status
    [upload] = logged_in.uploads
    assert upload["files"] == files and upload["exercise"] == "day49-data"
    assert logged_in.posts[0]["query"] == {"use_late_day": "false"}


def test_a_lost_answer_is_retried_with_the_same_key_and_stored_once(logged_in, tmp_path):
    logged_in.drop_posts = 2  # the upload arrives, the answer does not: twice
    result = run("submit", "day49-data", str(work(tmp_path)))
    assert result.exit_code == 0, result.output
    keys = [p["key"] for p in logged_in.posts]
    assert len(keys) == 3 and len(set(keys)) == 1
    assert len(logged_in.uploads) == 1
    # a second submit is a new submission: a new key
    run("submit", "day49-data", str(work(tmp_path)))
    assert len({p["key"] for p in logged_in.posts}) == 2 and len(logged_in.uploads) == 2


def test_use_late_day_is_sent(logged_in, tmp_path):
    assert run("submit", "day49-data", str(work(tmp_path)), "--use-late-day").exit_code == 0
    assert logged_in.posts[0]["query"] == {"use_late_day": "true"}


@pytest.mark.parametrize(("passed", "code"), [(True, 0), (False, 1)])
def test_wait_prints_the_report_and_exits_as_grader_grade(logged_in, tmp_path, passed, code):
    logged_in.passed = passed
    logged_in.polls_before_done = 3
    result = run("submit", "day49-data", str(work(tmp_path)), "--wait", "--format", "json", "--lang", "zh-TW")
    assert result.exit_code == code, result.output
    assert result.stdout == f"REPORT 100 format=json lang=zh-TW passed={passed}\n"  # the report alone
    assert logged_in.polls[100] == 3
    assert logged_in.waits and all(0 < float(w) <= LONG_POLL_SECONDS for w in logged_in.waits), "long polls"
    assert set(logged_in.languages) == {"zh-TW"}  # the server words its errors in the learner's language
    assert "\r" not in result.stderr  # no spinner: stderr is not a terminal


def test_a_failed_grading_exits_4_and_says_it_does_not_count(logged_in, tmp_path):
    logged_in.final_status = "failed"
    result = run("submit", "day49-data", str(work(tmp_path)), "--wait")
    assert result.exit_code == 4
    assert "does not count against you" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("status", "code", "headers", "exit_code"),
    [
        (429, "rate-limited", retry_in(125), 3),
        (409, "closed", {}, 3),
        (409, "not-open", retry_in(3600), 3),
        (429, "queue-full", retry_in(30), 4),
        (500, "server-error", {}, 4),
        (422, "bad-upload", {}, 2),
        (413, "too-large", {}, 2),
    ],
)
def test_refusals_and_failures_have_their_exit_codes(logged_in, tmp_path, status, code, headers, exit_code):
    logged_in.refuse = (status, {"code": code, "message": f"the server says {code}", "field": None}, headers)
    result = run("submit", "day49-data", str(work(tmp_path)), "--wait")
    assert result.exit_code == exit_code, result.output
    assert f"error: the server says {code}" in result.stderr
    if headers:
        assert "the next submission is possible at" in result.stderr


def test_retry_after_is_shown_as_a_time_and_a_wait(logged_in, tmp_path):
    logged_in.refuse = (
        429,
        {"code": "rate-limited", "message": "3 submissions an hour", "field": None},
        retry_in(125),
    )
    result = run("submit", "day49-data", str(work(tmp_path)))
    assert result.exit_code == 3
    assert "(in 3 min)" in result.stderr or "(in 2 min)" in result.stderr
    expected = (datetime.now(UTC) + timedelta(seconds=125)).astimezone().strftime("%Y-%m-%d %H:")
    assert expected in result.stderr


def test_an_unreachable_server_exits_4(env, monkeypatch, tmp_path):
    with Stub() as s:
        url = s.url  # a port that was free, now closed
    monkeypatch.setenv("GRADER_SERVER", url)
    monkeypatch.setenv("GRADER_TOKEN", TOKEN)
    result = run("submit", "day49-data", str(work(tmp_path)))
    assert result.exit_code == 4
    assert f"cannot reach {url}" in result.stderr and "tried 4 times" in result.stderr


def test_not_logged_in_is_a_usage_error(env, tmp_path):
    result = run("submit", "day49-data", str(work(tmp_path)))
    assert result.exit_code == 2 and "grader login --server URL" in result.stderr


def test_an_exercise_the_server_does_not_have(logged_in, tmp_path):
    result = run("submit", "day99-nothing", str(work(tmp_path)))
    assert result.exit_code == 2 and "no exercise day99-nothing" in result.stderr
    assert logged_in.posts == []


def test_missing_files_are_refused_before_anything_is_sent(logged_in, tmp_path):
    folder = tmp_path / "decoder"
    folder.mkdir()
    (folder / "attention.py").write_text("x = 1\n")
    result = run("submit", "day48-decoder", str(folder))
    assert result.exit_code == 2
    assert "norms.py, positions.py, gpt.py" in result.stderr
    assert logged_in.posts == []


# -- packing: the files grader.intake.sources picks -----------------------------------------------------


def test_packing_picks_what_the_grader_picks(tmp_path):
    """A class folder read by grader.intake.sources (as `grader batch` and the server read it), and
    each learner's entry packed by the client alone: the same files, byte for byte."""
    decoder = load_exercise("day48-decoder")
    data = load_exercise("day49-data")
    cls = tmp_path / "class"
    alice = cls / "alice"
    for name in decoder.files:  # nested copies: the shallowest one is the submission
        (alice / "mywork" / "old").mkdir(parents=True, exist_ok=True)
        (alice / "mywork" / name).write_text(f"# alice {name}\n")
        (alice / "mywork" / "old" / name).write_text(f"# old {name}\n")
    (alice / "notes.txt").write_text("not a learner file")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in decoder.files:
            zf.writestr(f"submission/{name}", f"# bob {name}\n")
            zf.writestr(f"submission/backup/{name}", "# backup\n")
    (cls / "bob.zip").write_bytes(buf.getvalue())
    found = {i.learner: i.files for i in read_source(cls, decoder).incoming}
    assert (
        pack(decoder, alice).files == found["alice"] == {n: f"# alice {n}\n".encode() for n in decoder.files}
    )
    assert pack(decoder, cls / "bob.zip").files == found["bob"]
    assert found["bob"]["gpt.py"] == b"# bob gpt.py\n"

    one = tmp_path / "one"
    (one / "dave").mkdir(parents=True)
    (one / "carol.py").write_text("def load(): ...\n")  # a class's layout: carol's data.py ...
    (one / "dave" / "data.py").write_text("def load(): ...\n")
    found = {i.learner: i.files for i in read_source(one, data).incoming}
    assert found["carol"] == found["dave"] == {"data.py": b"def load(): ...\n"}
    with pytest.raises(ClientError, match="never renames a file"):  # ... but never renamed for a submit
        pack(data, one / "carol.py")
    packed = pack(data, one / "dave")
    assert packed.files == found["dave"]
    assert packed.digest == Incoming(learner="dave", files=found["dave"]).digest
    with zipfile.ZipFile(io.BytesIO(packed.archive)) as zf:
        assert zf.namelist() == ["data.py"] and zf.read("data.py") == b"def load(): ...\n"
    assert pack(data, one / "dave").archive == packed.archive  # the same files, the same zip


def test_packing_refuses_what_the_grader_refuses(tmp_path):
    data = load_exercise("day49-data")
    two = tmp_path / "two"
    two.mkdir()
    (two / "a.py").write_text("a = 1\n")
    (two / "b.py").write_text("b = 1\n")
    with pytest.raises(ClientError, match=r"only a\.py, b\.py: the grader never renames a file"):
        pack(data, two)
    link = tmp_path / "link"
    link.symlink_to(two)
    with pytest.raises(ClientError, match="symbolic link"):
        pack(data, link)
    (two / "b.py").unlink()
    (two / "data.py").symlink_to(two / "a.py")
    with pytest.raises(ClientError, match="symbolic link"):
        pack(data, two)
    with pytest.raises(ClientError, match="does not exist"):
        pack(data, tmp_path / "nothing")


def test_exercise_file_names_from_the_server_are_plain_names():
    base = {"id": "x", "files": ["data.py"]}
    assert ExerciseInfo.model_validate(base).exercise().files == ["data.py"]
    for bad in ("../evil.py", "a/b.py", "..", "c:\\x.py", "x\x1b.py", "x\u202e.py", ""):
        with pytest.raises(ValueError, match="plain file name"):
            ExerciseInfo.model_validate({**base, "files": [bad]})


# -- the server's text is untrusted --------------------------------------------------------------


def test_tables_and_reports_are_sanitised(logged_in, tmp_path):
    logged_in.exercises[0]["id"] = "day49-data"
    logged_in.report_extra = "\x1b]0;owned\x07\x1b[2J\u202e"
    logged_in.status_rows = [
        {"exercise": "ev\x1b[31mil\u202e", "deadlines": {}, "submissions": 1, "tokens_left": 0}
    ]
    result = run("status")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert "ev\\x1b[31mil<U+202E>" in result.stdout
    result = run("submit", "day49-data", str(work(tmp_path)), "--wait")
    assert result.exit_code == 0
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    logged_in.refuse = (
        409,
        {"code": "closed", "message": "closed\x1b[2J\r\x1b]52;c;AAAA\x07", "field": None},
        {},
    )
    result = run("submit", "day49-data", str(work(tmp_path)))
    assert result.exit_code == 3 and "\x1b" not in result.stderr and "\r" not in result.stderr


def test_status_and_history_tables_and_json(logged_in, tmp_path):
    run("submit", "day49-data", str(work(tmp_path)), "--wait")
    result = run("history", "day49-data")
    assert result.exit_code == 0
    header, row = result.stdout.splitlines()
    assert header.split()[:3] == ["submission", "received", "status"]
    assert row.split()[:2] == ["*", "100"] and "10/10" in row and "1 d, -10%" in row
    data = json.loads(run("history", "day49-data", "--format", "json").stdout)
    assert [s["id"] for s in data] == [100] and data[0]["status"] == "graded"
    data = json.loads(run("status", "day49-data", "--format", "json").stdout)
    assert [r["exercise"] for r in data] == ["day49-data"] and data[0]["submissions"] == 1
    assert "day49-data" in run("status").stdout


# -- grader report ---------------------------------------------------------------------------------


def graded(stub, *statuses: str) -> list[int]:
    """Uploads of day49-data stored in the stub with these statuses, oldest first: their ids."""
    now = datetime.now(UTC).isoformat()
    for status in statuses:
        files = {"data.py": f"x = {len(stub.uploads)}\n".encode()}
        stub.uploads.append({"id": 100 + len(stub.uploads), "key": None, "exercise": "day49-data",
                             "files": files, "status": status, "received_at": now})  # fmt: skip
    return [u["id"] for u in stub.uploads]


def test_report_prints_the_latest_graded_report_of_an_exercise(logged_in):
    graded(logged_in, "graded", "graded")
    result = run("report", "day49-data", "--format", "markdown", "--lang", "zh-TW")
    assert result.exit_code == 0, result.output
    assert result.stdout == "REPORT 101 format=markdown lang=zh-TW passed=True\n"
    assert logged_in.list_queries[-1]["order"] == "newest"
    logged_in.passed = False
    result = run("report", "100")  # a submission by its id
    assert (result.exit_code, result.stdout) == (1, "REPORT 100 format=text lang=en passed=False\n")
    assert "submission 100 of day49-data, received" in result.stderr
    assert run("report").stdout.startswith("REPORT 101 ")  # the latest of any exercise


def test_report_of_an_exercise_whose_latest_is_not_graded_yet(logged_in):
    logged_in.polls_before_done = 99  # the stub's submissions stay as they are
    graded(logged_in, "graded", "queued")
    result = run("report", "day49-data")
    assert result.exit_code == 0 and result.stdout.startswith("REPORT 100 ")
    assert "your latest submission 101 is queued; this is the report of 100" in result.stderr
    result = run("report", "101")
    assert result.exit_code == 3 and "submission 101 is queued: it has no report until" in result.stderr
    graded(logged_in, "failed")
    result = run("report", "102")
    assert result.exit_code == 4 and "does not count against you" in result.stderr


def test_report_reads_a_server_that_lists_oldest_first_whole(logged_in):
    ids = graded(logged_in, *["graded"] * 5)
    logged_in.oldest_only, logged_in.page_size = True, 2  # `order` ignored, pages of two
    result = run("report", "day49-data")
    assert result.exit_code == 0 and result.stdout.startswith(f"REPORT {ids[-1]} ")


def test_report_without_a_submission_or_of_an_unknown_exercise(logged_in):
    result = run("report", "day49-data")
    assert result.exit_code == 2 and "no submission of day49-data yet: grader submit day49-data" in result.stderr
    result = run("report", "day99-nothing")
    assert result.exit_code == 2 and "no exercise day99-nothing" in result.stderr
    result = run("report", "12345")
    assert result.exit_code == 2 and "no such submission" in result.stderr
    result = run("report", "\u0661\u0662")  # digits, but not ASCII ones: not an id, no exercise either
    assert result.exit_code == 2 and "no exercise" in result.stderr


# -- status: late days, the next submission, the course's clock, in zh-TW ---------------------------

# Everything `grader status --lang zh-TW` may print in Latin letters: exercise ids, the course's
# zone, a command to type
IDS = re.compile(r"day\d+-[a-z]+|Asia/Taipei|grader [a-z]+(?: --[a-z-]+)*")


def test_status_shows_late_days_the_next_submission_and_whether_the_counted_one_was_late(logged_in):
    soon = (datetime.now(UTC) + timedelta(minutes=42)).isoformat()
    logged_in.status_rows = [
        {"exercise": "day49-data", "deadlines": {"due": "2026-12-10T15:59:00Z", "closes": None},
         "submissions": 3, "counted": 102, "late": {"minutes": 90.0, "days": 1, "penalty": 0.1},
         "score": 9.0, "max_score": 10.0, "tokens_left": 0, "next_submission_at": soon},
        {"exercise": "day48-decoder", "deadlines": {}, "submissions": 1, "counted": 7,
         "late": {"minutes": 0, "days": 0, "penalty": 0}, "score": 20.0, "max_score": 20.0,
         "tokens_left": None, "next_submission_at": None},
    ]  # fmt: skip
    result = run("status")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["exercise", "due", "closes", "submissions", "counts", "score", "late",
                                "left", "next", "submission"]  # fmt: skip
    assert "1 d, -10%" in lines[1] and "on time" in lines[2]
    assert "day49-data: no submission left now; the next is possible at" in result.stdout
    assert "(in 42 min)" in result.stdout or "(in 41 min)" in result.stdout
    assert "late days left: 2 of 3" in result.stdout


@pytest.mark.parametrize("tz", ["Asia/Taipei", "Europe/Paris"])
def test_times_are_the_courses_with_its_offset_and_this_machines_where_it_differs(logged_in, monkeypatch, tz):
    import time

    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        logged_in.course = {"name": "LLM from scratch", "timezone": "Asia/Taipei"}
        logged_in.status_rows = [
            {"exercise": "day49-data", "deadlines": {"due": "2026-12-10T15:59:00Z"}, "submissions": 0,
             "tokens_left": 0, "next_submission_at": (datetime.now(UTC) + timedelta(hours=2)).isoformat()}
        ]  # fmt: skip
        result = run("status")
        assert "2026-12-10 23:59 +08:00" in result.stdout  # the course's clock, never bare UTC
        note = "times are the course's (Asia/Taipei); this machine's clock is +01:00"
        assert (note in result.stderr) == (tz != "Asia/Taipei")
        assert ("here)" in result.stdout) == (tz != "Asia/Taipei")  # the next submission, on both clocks
        graded(logged_in, "graded")
        history = run("history", "day49-data")
        assert "+08:00" in history.stdout and "+0800" not in history.stdout
    finally:
        monkeypatch.undo()
        time.tzset()


def test_status_in_zh_tw_has_no_english_words_but_ids_and_numbers(logged_in, monkeypatch):
    import time

    monkeypatch.setenv("TZ", "Europe/Paris")  # the note on this machine's clock is said too
    time.tzset()
    try:
        logged_in.course = {"name": "LLM", "timezone": "Asia/Taipei"}
        soon = (datetime.now(UTC) + timedelta(minutes=30)).isoformat()
        logged_in.status_rows = [
            {"exercise": "day49-data", "deadlines": {"due": "2026-12-10T15:59:00Z", "closes": None},
             "submissions": 3, "counted": 102, "late": {"minutes": 90.0, "days": 1, "penalty": 0.1},
             "score": 9.0, "max_score": 10.0, "tokens_left": 0, "next_submission_at": soon},
            {"exercise": "day48-decoder", "deadlines": {}, "submissions": 1, "counted": 7, "score": 20.0,
             "max_score": 20.0, "tokens_left": None},
        ]  # fmt: skip
        result = run("status", "--lang", "zh-TW")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert result.exit_code == 0, result.output
    shown = result.stdout + result.stderr
    assert "繳交" in shown and "遲交" in shown and "2026-12-10 23:59 +08:00" in shown
    words = re.findall(r"[A-Za-z]{2,}", IDS.sub("", shown))
    assert words == [], words
    graded(logged_in, "graded")
    history = run("history", "day49-data", "--lang", "zh-TW")
    words = re.findall(r"[A-Za-z]{2,}", IDS.sub("", history.stdout))
    assert words == [], words


def test_a_course_zone_this_machine_cannot_load_shows_its_own_clock(logged_in):
    for bad in ("../../etc/passwd", "Mars/Base", "x" * 300, "Asia/Taipei\x1b[2J"):
        logged_in.course = {"name": "c", "timezone": bad}
        result = run("status")
        assert result.exit_code in (0, 4), (bad, result.output)
        assert "\x1b" not in result.output


def test_a_malformed_answer_is_a_server_failure(logged_in, tmp_path):
    logged_in.exercises[:] = [{"id": "day49-data", "files": "data.py"}]  # not a list
    result = run("submit", "day49-data", str(work(tmp_path)))
    assert result.exit_code == 4 and "not what this client understands" in result.stderr


# -- starter --server ----------------------------------------------------------------------------


def test_starter_from_the_server_writes_only_the_exercise_files(logged_in, tmp_path):
    logged_in.starter_members = {"data.py": b"# your variant\n", "../evil.py": b"x", "extra.sh": b"rm -rf ~"}
    target = tmp_path / "start"
    result = run("starter", "day49-data", str(target), "--server", logged_in.url)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in target.iterdir()) == ["data.py"]
    assert (target / "data.py").read_bytes() == b"# your variant\n"
    assert not (tmp_path / "evil.py").exists()
    result = run("starter", "day49-data", str(target), "--server", logged_in.url)
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert (target / "data.py").read_bytes() == b"# your variant\n"


def test_starter_after_login_is_the_courses_and_the_sample_only_with_sample(env, stub, tmp_path):
    assert run("login", "--server", stub.url, "--token", TOKEN).exit_code == 0
    stub.starter_members = {"data.py": b"# the course's own starter\n"}
    result = run("starter", "day49-data", str(tmp_path / "course"))  # no --server: the login's
    assert result.exit_code == 0, result.output
    assert (tmp_path / "course" / "data.py").read_bytes() == b"# the course's own starter\n"
    assert "wrote" in result.stdout and "grading install" not in result.output
    result = run("starter", "day49-data", str(tmp_path / "sample"), "--sample")
    assert result.exit_code == 0, result.output
    sample = ROOT / "exercises" / "day49-data" / "starter" / "data.py"
    assert (tmp_path / "sample" / "data.py").read_bytes() == sample.read_bytes()
    result = run("starter", "day49-data", str(tmp_path / "x"), "--sample", "--server", stub.url)
    assert result.exit_code == 2 and "--server" in result.stderr


def test_starter_without_a_login_says_it_is_the_public_sample(env, tmp_path):
    result = run("starter", "day49-data", str(tmp_path / "s"))
    assert result.exit_code == 0, result.output
    assert "not logged in to a course's server: this is the public sample's starter" in result.stderr


def test_unpack_starter_caps_what_a_member_inflates_to():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data.py", b"\0" * 100_000)
    with pytest.raises(ClientError, match="larger than"):
        unpack_starter(buf.getvalue(), ["data.py"], 10_000)
    with pytest.raises(ServerFailure, match="not a readable zip"):
        unpack_starter(b"not a zip", ["data.py"], 10_000)


# -- errors, waiting -----------------------------------------------------------------------------


def test_error_answers_map_to_exit_codes():
    now = datetime(2026, 11, 8, 12, 0, tzinfo=UTC)

    def err(status, code=None, headers=None, body=None):
        body = (
            body
            if body is not None
            else json.dumps({"error": {"code": code, "message": "m", "field": "body"}})
        )
        return from_answer(status, body.encode(), headers or {}, now)

    assert isinstance(err(429, "rate-limited"), Refused) and err(429, "rate-limited").exit_code == 3
    assert isinstance(err(409, "closed"), Refused)
    assert isinstance(err(429, "queue-full"), ServerFailure)
    assert isinstance(err(503, body="<html>bad gateway</html>"), ServerFailure)
    assert str(err(502, body="<html>")) == "the server answered HTTP 502"
    assert isinstance(err(401, "unauthorized"), ClientError) and err(401, "unauthorized").exit_code == 2
    assert err(422, "bad-upload").field == "body"
    assert err(429, "rate-limited", {"retry-after": "60"}).retry_at == now + timedelta(seconds=60)
    assert retry_after("Sun, 08 Nov 2026 12:05:00 GMT", now) == now + timedelta(minutes=5)
    assert retry_after("99999999999", now) is None and retry_after("soon", now) is None
    body = json.dumps({"error": {"code": "closed", "message": "m", "retry_at": "2026-11-09T00:00:00+00:00"}})
    assert err(409, body=body).retry_at == datetime(2026, 11, 9, tzinfo=UTC)


class FakeTime:
    def __init__(self):
        self.now, self.slept = 0.0, []

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_a_server_that_holds_each_poll_is_asked_again_at_once_until_finished():
    t = FakeTime()
    asked = []

    def poll(seconds):  # the server holds the request: graded in the third
        asked.append(seconds)
        t.now += seconds if len(asked) < 3 else 1.5
        return Submission(id=1, status="graded" if len(asked) == 3 else "grading")

    out = wait_until_finished(poll, Submission(id=1, status="queued"), seconds=900,
                              spinner=Spinner(io.StringIO()), clock=lambda: t.now, sleep=t.sleep)
    assert out.status == "graded" and asked == [LONG_POLL_SECONDS] * 3
    assert t.slept == [], "no pause between polls a server held"
    asked.clear()

    def held_never_graded(seconds):
        asked.append(seconds)
        t.now += seconds
        return Submission(id=1, status="grading")

    out = wait_until_finished(held_never_graded, Submission(id=1, status="queued"), seconds=30,
                              spinner=Spinner(io.StringIO()), clock=lambda: t.now, sleep=t.sleep)
    assert out.status == "grading"
    assert asked == [LONG_POLL_SECONDS, 30 - LONG_POLL_SECONDS], "never asks past the wait's own end"


def test_a_server_that_answers_polls_at_once_is_polled_with_growing_pauses_within_its_time():
    t = FakeTime()
    polls = []

    def poll(seconds):
        polls.append(t.now)
        return Submission(id=1, status="graded" if len(polls) == 4 else "grading")

    first = Submission(id=1, status="queued")
    out = wait_until_finished(poll, first, seconds=900, spinner=Spinner(io.StringIO()),
                              clock=lambda: t.now, sleep=t.sleep)
    assert out.status == "graded" and len(polls) == 4
    gaps = [b - a for a, b in zip(polls, polls[1:], strict=False)]
    assert gaps == sorted(gaps) and gaps[0] > 0, "paced, not hammered"
    out = wait_until_finished(lambda s: Submission(id=1, status="grading"), first, seconds=20,
                              spinner=Spinner(io.StringIO()), clock=lambda: t.now, sleep=t.sleep)
    assert out.status == "grading"


def test_a_live_spinner_turns_while_the_poll_runs_in_a_thread_and_its_error_comes_back():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    release = threading.Event()

    def slow_poll(seconds):
        release.wait(10)
        return Submission(id=1, status="graded")

    stream = Tty()
    threading.Timer(0.5, release.set).start()
    out = wait_until_finished(slow_poll, Submission(id=1, status="queued"), seconds=60, spinner=Spinner(stream))
    assert out.status == "graded"
    assert stream.getvalue().count("\r") >= 2, "frames drawn while the poll ran"

    def broken_poll(seconds):
        raise ServerFailure("the server went away")

    with pytest.raises(ServerFailure, match="went away"):
        wait_until_finished(broken_poll, Submission(id=1, status="queued"), seconds=60, spinner=Spinner(Tty()))


def test_the_spinner_draws_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    quiet, tty = io.StringIO(), Tty()
    for stream in (quiet, tty):
        spinner = Spinner(stream)
        spinner.show("queued 1 s")
        spinner.clear()
    assert quiet.getvalue() == ""
    assert tty.getvalue().startswith("\r| queued 1 s") and tty.getvalue().endswith("\r")


# -- nothing heavy, and the student install ------------------------------------------------------

PROBE = """
import json, sys
from grader.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted({m.split('.')[0] for m in sys.modules} & set(%r))
print(json.dumps({"code": code, "heavy": heavy}))
"""


def probe(args, env=None):
    out = subprocess.run(
        [sys.executable, "-c", PROBE % (HEAVY,), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1]), out


def test_submit_imports_nothing_heavy(stub, tmp_path):
    env = {
        "GRADER_SERVER": stub.url,
        "GRADER_TOKEN": TOKEN,
        "XDG_CONFIG_HOME": str(tmp_path),
        "LANG": "C.UTF-8",
    }
    for args in (
        ["submit", "--help"],
        ["submit", "day49-data", str(work(tmp_path)), "--wait"],
        ["status"],
        ["history", "day49-data"],
        ["login", "--help"],
    ):
        got, out = probe(args, env)
        assert got == {"code": 0, "heavy": []}, (args, got, out.stderr)
    assert len(stub.uploads) == 1


def test_help_lists_every_command_without_importing_what_grades():
    """`grader --help` imports each command's module for its one-line help, and those modules
    keep their heavy imports inside the commands (reports.render, light, is the one they load)."""
    got, out = probe(["--help"])
    assert got["code"] == 0 and got["heavy"] in ([], ["reports"]), got
    help_text = out.stdout.split("Commands:")[1].splitlines()[:-1]  # the probe prints its JSON last
    listed = {line.split()[0] for line in help_text if line.strip()}
    assert listed == set(COMMANDS)


BLOCKER = """
import sys
class NoGrading:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in %r:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoGrading())
"""


@pytest.mark.parametrize(
    "args", [["grade", "day49-data", "."], ["batch", "day49-data", "."], ["gradebook", "export"]]
)
def test_a_grading_command_on_the_student_install_says_which_install_it_needs(args):
    code = BLOCKER % (sorted(GRADING_MODULES),) + PROBE % (HEAVY,)
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert json.loads(out.stdout.strip().splitlines()[-1])["code"] == 2, out.stderr
    assert "this command needs the grading install: pip install gpt-bughunt-grader-server" in out.stderr
    assert "Traceback" not in out.stderr
    out = subprocess.run(
        [sys.executable, "-c", code, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert "submit" in out.stdout and "grade" in out.stdout, out.stderr


def test_a_quiz_starter_is_made_without_anything_that_grades(tmp_path):
    """A quiz's variant draws its parameters without torch (only its key needs it), so `starter`
    writes a quiz's sheet, like a code exercise's starter, with every grading module blocked: the
    web process that serves starters never loads torch either (tests/test_server_edge.py)."""
    code = BLOCKER % (sorted(GRADING_MODULES),) + PROBE % (HEAVY,)
    for exercise, written in (("day45-quiz", "answers.toml"), ("day49-data", "data.py")):
        out = subprocess.run(
            [sys.executable, "-c", code, "starter", exercise, str(tmp_path / exercise)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert json.loads(out.stdout.strip().splitlines()[-1])["code"] == 0, out.stderr
        assert (tmp_path / exercise / written).is_file(), sorted((tmp_path / exercise).iterdir())


def test_grading_modules_cover_the_grading_extra():
    """Each requirement of the grading distribution (pyproject.toml) but the client imports as one
    name of GRADING_IMPORTS, and each of those is one of its requirements; the student's
    distribution (client/pyproject.toml) requires click, httpx, nbformat (a notebook's cells, for
    `grader submit EX nb.ipynb`; the grading side has it through the client) and pydantic only."""
    import importlib.metadata as md
    import re

    from grader import __version__

    grading = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]
    pin = f"{client['name']}=={__version__}"
    assert pin in grading["dependencies"]  # the client of this very version
    extra = [r for r in grading["dependencies"] if r != pin]
    by_dist: dict[str, set[str]] = {}
    covered = set()
    for module, dists in md.packages_distributions().items():
        for d in dists:
            by_dist.setdefault(re.sub(r"[-_.]+", "-", d).lower(), set()).add(module)
    for requirement in extra:
        name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", requirement)[0]).lower()
        [module] = by_dist.get(name, set()) & set(GRADING_IMPORTS) or [None]
        assert module is not None, (requirement, by_dist.get(name))
        covered.add(module)
    assert covered == set(GRADING_IMPORTS)
    required = sorted(re.match(r"[a-z]+", r)[0] for r in client["dependencies"])
    assert required == ["click", "httpx", "nbformat", "pydantic"]
