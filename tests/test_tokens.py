"""Access tokens (grader/store/accounts.py), `grader tokens issue|revoke` and LMS rosters
(grader/policy/roster.py): issued once, stored only as a hash, revoked for good."""
from __future__ import annotations

import csv
import hashlib
import io
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from grader.limits import TOKEN_BYTES
from grader.policy.roster import RosterError, RosterRow, read_roster
from reports.gradebook import render_tokens
from grader.store import Gradebook, accounts
from grader.store.accounts import Account, authenticate, issue_token, revoke_tokens, secret
from grader.store.schema import AccountRow

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


# -- the API ---------------------------------------------------------------------------------------

def test_issue_authenticate_revoke(book):
    token = issue_token(book, "alice", name="Alice Liddell")
    prof = issue_token(book, "prof", role="instructor")
    assert len(token) >= TOKEN_BYTES and not token.startswith("-")
    who = authenticate(book, token)
    assert who == Account(id=who.id, learner="alice", name="Alice Liddell", role="student")
    assert authenticate(book, prof).role == "instructor"
    second = issue_token(book, "alice")                    # a second device: a second token
    assert authenticate(book, second).learner == "alice"
    for wrong in ("", token[:-1], token + "x", token.upper(), "x" * 10_000, "é" * 43, prof + token):
        assert authenticate(book, wrong) is None
    assert revoke_tokens(book, "alice") == 2 and revoke_tokens(book, "alice") == 0
    assert authenticate(book, token) is None and authenticate(book, second) is None
    assert authenticate(book, prof) is not None            # only alice's
    third = issue_token(book, "alice")                     # a revoked learner may get a new one
    assert authenticate(book, third).learner == "alice" and authenticate(book, token) is None
    assert revoke_tokens(book, "nobody") == 0


def test_only_the_hash_is_stored(book):
    token = issue_token(book, "alice")
    with book.sessions() as s:
        (stored,) = s.scalars(select(AccountRow.token_hash))
    assert stored == hashlib.sha256(token.encode()).hexdigest() and token not in stored


def test_the_token_appears_nowhere_in_the_database_file(tmp_path):
    path = tmp_path / "gradebook.db"
    with Gradebook(str(path)) as gb:
        tokens = [issue_token(gb, f"s{i}") for i in range(20)]
        assert authenticate(gb, tokens[3]).learner == "s3"
    data = b"".join(p.read_bytes() for p in tmp_path.glob("gradebook.db*"))   # -wal and -shm too
    assert hashlib.sha256(tokens[0].encode()).hexdigest().encode() in data    # the file is the one
    for token in tokens:
        assert token.encode() not in data


def test_a_token_never_starts_with_a_dash(monkeypatch):
    """It is pasted after --token and into spreadsheets, where '-' starts an option or a formula."""
    drawn = iter(["-looks-like-an-option", "_fine"])
    monkeypatch.setattr(accounts.secrets, "token_urlsafe", lambda n: next(drawn))
    assert accounts.new_token() == "_fine"


def test_the_session_secret_is_made_once(book, db):
    first = secret(book)
    assert len(first) == 32 and secret(book) == first
    with Gradebook(db) as again:                           # another server process: the same
        assert secret(again) == first
    assert secret(book, "other") != first


# -- the command line ------------------------------------------------------------------------------

def test_the_cli_prints_only_the_token_and_revokes(tmp_path):
    db = tmp_path / "g.db"
    issued = run("tokens", "issue", "alice", "--role", "instructor", "--name", "Prof A", "--db", db)
    assert issued.returncode == 0, issued.stderr
    token = issued.stdout.strip()
    assert issued.stdout == token + "\n" and " " not in token     # `$(grader tokens issue alice)`
    with Gradebook(str(db)) as gb:
        assert authenticate(gb, token) == Account(id=1, learner="alice", name="Prof A", role="instructor")
    revoked = run("tokens", "revoke", "alice", "--db", db)
    assert revoked.returncode == 0 and "revoked 1 token" in revoked.stdout
    with Gradebook(str(db)) as gb:
        assert authenticate(gb, token) is None
    assert run("tokens", "issue", "--db", db).returncode == 2
    assert run("tokens", "issue", "bob", "--role", "admin", "--db", db).returncode == 2
    assert run("tokens", "revoke", "bob", "--db", tmp_path / "missing.db").returncode == 2
    assert not (tmp_path / "missing.db").exists()


CANVAS = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Attention (123)\n"
    "    Points Possible,,,,,10\n"
    '"Doe, Jane",1234,S1234,jane@uni.example,Section A,8\n'
    '"=HYPERLINK(""http://evil.example"")",1235,S1235,evil,Section A,\n'
    '"Student, Test",99,,,Section A,\n'
)
MOODLE = (
    "Identifier,Full name,Email address,Status,Grade,Maximum grade,Grade can be changed,"
    "Last modified (submission),Last modified (grade),Feedback comments\n"
    "Participant 1234,Jane Doe,jane@uni.example,No submission,,100.00,Yes,-,-,\n"
    "Participant 5678,王小明,ming@uni.example.tw,Submitted for grading,,100.00,Yes,-,-,\n"
    "參與者 42,陳大文,,Submitted for grading,,100.00,Yes,-,-,\n"
)


def test_rosters_of_canvas_and_moodle(tmp_path):
    (tmp_path / "c.csv").write_text(CANVAS, encoding="utf-8")
    (tmp_path / "m.csv").write_text(MOODLE, encoding="utf-8")
    def who(rows: list[RosterRow]) -> list[tuple]:  # the LMS's own columns: tests/test_publish.py
        return [(r.learner, r.name, r.email) for r in rows]

    assert who(read_roster(tmp_path / "c.csv")) == [
        ("1234", "Doe, Jane", "jane@uni.example"),
        ("1235", '=HYPERLINK("http://evil.example")', None),
        ("99", "Student, Test", None),
    ]
    assert who(read_roster(tmp_path / "m.csv")) == [
        ("1234", "Jane Doe", "jane@uni.example"),
        ("5678", "王小明", "ming@uni.example.tw"),
        ("42", "陳大文", None),
    ]


@pytest.mark.parametrize("lms", ["canvas", "moodle"])
def test_the_cli_issues_a_roster_and_writes_a_private_csv(tmp_path, lms):
    roster, out, db = tmp_path / "roster.csv", tmp_path / "tokens.csv", tmp_path / "g.db"
    roster.write_text(CANVAS if lms == "canvas" else MOODLE, encoding="utf-8")
    proc = run("tokens", "issue", "--roster", roster, "--out", out, "--db", db)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "issued 3 student tokens" in proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    learners = ["1234", "1235", "99"] if lms == "canvas" else ["1234", "5678", "42"]
    assert [r["learner"] for r in rows] == learners
    with Gradebook(str(db)) as gb:
        for r in rows:
            assert authenticate(gb, r["token"]).learner == r["learner"]
        assert gb.learner("1234")["name"] == ("Doe, Jane" if lms == "canvas" else "Jane Doe")
    if lms == "canvas":
        assert rows[1]["name"].startswith("'=HYPERLINK")       # formula-guarded, as every CSV
    again = run("tokens", "issue", "--roster", roster, "--out", out, "--db", db)
    assert again.returncode == 2 and "exists" in again.stderr
    with Gradebook(str(db)) as gb, gb.sessions() as s:
        assert s.scalar(select(func.count()).select_from(AccountRow)) == 3   # nothing more issued


BAD_ROSTERS = [
    ("no-id", "Student,ID,SIS User ID\nJane,,S1\n", "row 2, column 'ID': empty"),
    ("not-digits", "Student,ID\nJane,12a4\n", "row 2, column 'ID': '12a4' is not a user id"),
    ("duplicate", "Student,ID\nJane,1\nJoe,2\nJane again,1\n", "row 4, column 'ID': learner '1' is on row 2"),
    ("moodle-id", "Identifier,Full name,Email address\nParticipant 1,A,\nSomeone,B,\n",
     "row 3, column 'Identifier': 'Someone' is not like 'Participant 1234'"),
    ("too-many-cells", "Student,ID\nJane,1\nJoe,2,extra\n", "row 3: 3 cells, the header has 2"),
    ("unknown", "name,email\nJane,j@x\n", "row 1: not a Canvas gradebook export"),
    ("empty", "", "row 1: empty file"),
    ("no-learners", "Student,ID\n    Points Possible,\n", "no learners"),
    ("quote", 'Student,ID\n"Jane,1\n', "not CSV"),
]


@pytest.mark.parametrize("name,text,problem", BAD_ROSTERS, ids=[b[0] for b in BAD_ROSTERS])
def test_a_bad_roster_names_file_row_and_column_and_stores_nothing(tmp_path, name, text, problem):
    roster, out, db = tmp_path / f"{name}.csv", tmp_path / "tokens.csv", tmp_path / "g.db"
    roster.write_text(text, encoding="utf-8")
    with pytest.raises(RosterError, match=f"{name}.csv") as err:
        read_roster(roster)
    assert problem in str(err.value)
    proc = run("tokens", "issue", "--roster", roster, "--out", out, "--db", db)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and problem in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not db.exists() and not out.exists()            # nothing stored, nothing written


def test_a_roster_that_is_not_utf8_names_the_row(tmp_path):
    roster = tmp_path / "big5.csv"
    roster.write_bytes(b"Student,ID\nJane,1\n" + "王小明,2\n".encode("big5"))
    with pytest.raises(RosterError, match=r"big5.csv: row 3: not UTF-8"):
        read_roster(roster)


def test_the_tokens_csv_guards_formulas_but_never_a_token():
    text = render_tokens([(RosterRow("1", "@SUM(A1)", "-x@y"), "_tok")])
    assert text.splitlines() == ["learner,name,email,token", "1,'@SUM(A1),'-x@y,_tok"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.text(alphabet=st.sampled_from('ab1 ",\n\r\x00é=-'), max_size=6), max_size=5),
                max_size=6),
       st.sampled_from(["Student,ID,SIS User ID", "Identifier,Full name,Email address", "x,y"]))
def test_any_roster_is_read_or_refused_with_a_roster_error(tmp_path, rows, header):
    roster = tmp_path / "fuzz.csv"
    roster.write_text(header + "\n" + "\n".join(",".join(r) for r in rows), encoding="utf-8")
    try:
        learners = read_roster(roster)
    except RosterError as exc:
        assert str(exc).startswith(str(roster))
    else:
        assert learners and all(r.learner.isdigit() for r in learners)
        assert len({r.learner for r in learners}) == len(learners)
