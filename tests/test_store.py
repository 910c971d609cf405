"""The gradebook store, against SQLite and a real throwaway PostgreSQL cluster: the same tests.

No mocks: PostgreSQL runs from Debian's `postgresql` package (scripts/setup.sh installs it), made
with initdb and started with pg_ctl in a temporary folder, on a unix socket of its own. Where the
binaries are missing the PostgreSQL half is skipped with a loud reason, except under CI, where
that is a failure.
"""
from __future__ import annotations

import math
import sqlite3
from datetime import datetime, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, select, text
from sqlalchemy.exc import IntegrityError

from grader.models import CheckResult, Diagnosis, Grade, GradeError
from grader.store import Gradebook, Incoming, Outcome, StoreError
from grader.store import migrate
from grader.store.gradebook import make_engine, normalize_url
from grader.store.schema import Base, GradeRun


def sample_grade(score=7.0, passed=False, student="s1") -> Grade:
    return Grade(
        exercise="day45-attention", passed=passed, score=score, max_score=10.0,
        checks=[CheckResult(id="softmax-is-stable", passed=True, points=3, max_points=3,
                            rule="numerical-stability", day=45, title="stable softmax"),
                CheckResult(id="causal-mask-blocks-future", passed=False, points=0, max_points=7,
                            rule="causal-mask", day=44, message="row 0 is NaN:\x00 — 第 0 列是 NaN",
                            symptoms=["nan-forward"],
                            evidence={"max_error": float("nan"), "loss": float("inf"), "rows": [0, 1],
                                      "first": -float("inf"), "note": "x"})],
        symptoms=["nan-forward"],
        diagnosis=[Diagnosis(rule="causal-mask", day=44, mutant="mask-diagonal-0",
                             message="triu(diagonal=0) blocks the diagonal", check="causal-mask-blocks-future")],
        error=None, isolation="bubblewrap", warnings=["printed a lot"], output="hello\x00world",
        duration_s=1.25, grader_version="0.1.0", student=student)


def incoming(learner="s1", data=b"print('hi')\n", **kw) -> Incoming:
    return Incoming(learner=learner, files={"attention.py": data}, **kw)


def same_nan(a, b) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


# -- schema and migrations -----------------------------------------------------------------------

def test_opening_runs_the_migrations_and_they_match_the_models(book):
    with book.engine.connect() as conn:
        assert migrate.current(conn) == migrate.head()
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == [], f"schema.py and the Alembic migrations disagree; add a migration: {diff}"


def test_a_gradebook_upgrades_in_place_and_keeps_its_data(db):
    engine = make_engine(db)
    migrate.upgrade(engine, "0001")                 # the first release's schema, written by hand
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO learners (key, name, created_at) VALUES ('old', 'Old Timer', :t)"),
                     {"t": datetime(2025, 1, 1)})
    engine.dispose()
    with Gradebook(db) as gb:                       # opening upgrades to head, data intact
        with gb.engine.connect() as conn:
            assert migrate.current(conn) == migrate.head()
        assert gb.learner("old")["name"] == "Old Timer"
        assert Gradebook(db).backend == gb.backend  # a second open finds it at head: no-op


def test_a_grade_stored_before_whole_grades_reads_back_with_what_it_had(db):
    engine = make_engine(db)
    migrate.upgrade(engine, "0001")
    now = datetime(2025, 1, 1)
    with engine.begin() as conn:
        def insert_row(sql, **values):
            return conn.execute(text(sql + " RETURNING id"), values).scalar()
        lid = insert_row("INSERT INTO learners (key, created_at) VALUES ('old', :t)", t=now)
        vid = insert_row("INSERT INTO exercises (name, version, title, points, created_at) "
                         "VALUES ('day49-data', :v, '', 9, :t)", v="e" * 64, t=now)
        sid = insert_row("INSERT INTO submissions (learner_id, exercise, digest, layout, origin, late, "
                         "first_seen_at, last_seen_at) VALUES (:l, 'day49-data', :d, 'folder', 'old/', "
                         ":f, :t, :t)", l=lid, d="d" * 64, f=False, t=now)
        rid = insert_row(
            "INSERT INTO grade_runs (submission_id, exercise_id, attempt, status, passed, score, max_score, "
            "error_kind, error_message, symptoms, warnings, output, isolation, grader_version, worker, "
            "duration_s, recorded_at) VALUES (:s, :e, 1, 'graded', :p, 2, 9, 'timeout', 'too slow', "
            "'[\"timeout\"]', '[\"a warning\"]', 'printed', 'bubblewrap', '0.1.0', 'w', 1.5, :t)",
            s=sid, e=vid, p=False, t=now)
        conn.execute(text(
            "INSERT INTO check_results (run_id, position, check_id, passed, points, max_points, rule, day, "
            "title, message, symptoms, evidence) VALUES (:r, 0, 'make-xy', :p, 0, 2, 'target-shift', 49, "
            "'make_xy', 'y is x', '[\"loss-collapse\"]', '{\"loss\": {\"$float\": \"nan\"}}')"),
            {"r": rid, "p": False})
        conn.execute(text("INSERT INTO diagnoses (run_id, position, rule, day, mutant, check_id, message) "
                          "VALUES (:r, 0, 'target-shift', 49, 'unshifted-targets', 'make-xy', 'unshifted')"),
                     {"r": rid})
    engine.dispose()
    with Gradebook(db) as gb:
        [current] = gb.current_grades("day49-data")
    g = current.grade
    assert (g.score, g.max_score, g.passed, g.student, g.isolation) == (2, 9, False, "old", "bubblewrap")
    assert g.error.kind == "timeout" and g.error.message == "too slow" and g.symptoms == ["timeout"]
    assert [w.message for w in g.warnings] == ["a warning"] and g.output.start == "printed"
    [check] = g.checks
    assert (check.id, check.title, check.message, check.symptoms) == ("make-xy", "make_xy", "y is x",
                                                                      ["loss-collapse"])
    assert math.isnan(check.evidence["loss"])
    assert [(d.mutant, d.message, d.check) for d in g.diagnosis] == [("unshifted-targets", "unshifted",
                                                                      "make-xy")]
    engine = make_engine(db)                        # and back: the old columns are filled again
    migrate.downgrade(engine, "0001")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT error_message, output FROM grade_runs")).one() == ("too slow", "printed")
        assert conn.execute(text("SELECT message FROM check_results")).scalar() == "y is x"
    engine.dispose()


def test_a_gradebook_from_a_newer_grader_is_refused(db):
    Gradebook(db).close()
    engine = make_engine(db)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff_from_the_future'"))
    engine.dispose()
    with pytest.raises(StoreError, match="newer grader"):
        Gradebook(db)


def test_sqlite_is_opened_in_wal_mode_with_a_busy_timeout(tmp_path):
    path = tmp_path / "g.db"
    with Gradebook(str(path)) as gb:
        with gb.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_urls_and_paths():
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("grades.db").startswith("sqlite:////")
    with pytest.raises(StoreError, match="does not exist"):
        Gradebook("/no/such/folder/g.db")


# -- grades in, grades out -----------------------------------------------------------------------

def test_a_grade_round_trips_exactly_even_with_nan_nul_and_chinese(book):
    vid = book.exercise_version("day45-attention", "v1" * 32, 10, "Attention")
    [sid] = book.add_submissions("day45-attention", [incoming()])
    g = sample_grade()
    run = book.record(sid, vid, Outcome(status="graded", grade=g, worker="host:1",
                                        started_at=datetime(2026, 1, 1, tzinfo=timezone.utc)))
    assert run is not None
    [current] = book.current_grades("day45-attention")
    back = current.grade
    assert back.model_dump(exclude={"checks"}) == g.model_dump(exclude={"checks"})
    assert back.output.start == "hello\ufffdworld"     # NUL cannot be stored in PostgreSQL text
    assert back.checks[1].message == "row 0 is NaN:\ufffd — 第 0 列是 NaN"
    ev, ev0 = back.checks[1].evidence, g.checks[1].evidence
    assert ev.keys() == ev0.keys() and all(same_nan(ev[k], ev0[k]) for k in ev)
    assert [c.id for c in back.checks] == [c.id for c in g.checks]
    assert current.worker == "host:1" and current.graded_at.tzinfo is not None


def test_submissions_are_identified_by_content_and_keep_their_source(book):
    ids = book.add_submissions("day45-attention", [incoming("s1", name="Ann"), incoming("s2", b"x = 2\n")])
    again = book.add_submissions("day45-attention", [incoming("s1"), incoming("s2", b"x = 2\n")])
    assert ids == again                                 # same files, same submissions
    [changed] = book.add_submissions("day45-attention", [incoming("s2", b"x = 3\n")])
    assert changed not in ids
    stored = {s.id: s for s in book.submissions("day45-attention")}
    assert stored[changed].files == {"attention.py": b"x = 3\n"}
    assert stored[changed].current and not stored[ids[1]].current     # s2's latest is the changed one
    assert stored[ids[0]].name == "Ann"
    assert book.counts()["learners"] == 2 and book.counts()["submissions"] == 3


def test_a_final_grade_is_recorded_once_unless_forced_and_errors_are_retried(book):
    vid = book.exercise_version("day45-attention", "a" * 64, 10)
    [sid] = book.add_submissions("day45-attention", [incoming()])
    err = Outcome(status="error", grade=sample_grade(0).model_copy(
        update={"error": GradeError(kind="crash", message="internal grader error: boom")}))
    assert book.record(sid, vid, err) is not None
    assert book.graded(vid, [sid]) == set()             # an error is not a grade: retried
    assert book.record(sid, vid, Outcome(status="graded", grade=sample_grade(7))) is not None
    assert book.graded(vid, [sid]) == {sid}
    assert book.record(sid, vid, Outcome(status="graded", grade=sample_grade(8))) is None
    assert book.current_grades()[0].grade.score == 7
    assert book.record(sid, vid, Outcome(status="graded", grade=sample_grade(9)), force=True) is not None
    assert book.current_grades()[0].grade.score == 9
    counts = book.counts()
    assert counts["final_runs"] == 2 and counts["graded_pairs"] == 1 and counts["error_runs"] == 1
    with book.sessions() as s:
        assert [r.attempt for r in s.scalars(select(GradeRun).order_by(GradeRun.id))] == [1, 2, 3]


def test_the_unique_constraint_stops_a_second_writer_of_the_same_attempt(book):
    vid = book.exercise_version("day45-attention", "b" * 64, 10)
    [sid] = book.add_submissions("day45-attention", [incoming()])
    book.record(sid, vid, Outcome(status="graded", grade=sample_grade()))
    row = dict(submission_id=sid, exercise_id=vid, attempt=1, status="graded", passed=False, score=1.0,
               max_score=10.0, grade={}, isolation="", grader_version="",
               worker="", duration_s=0.0, recorded_at=datetime.now(timezone.utc))
    with book.engine.connect() as conn, pytest.raises(IntegrityError):
        conn.execute(insert(GradeRun).values(**row))
    assert book.counts()["final_runs"] == 1


def test_a_new_exercise_version_needs_a_new_grade(book):
    v1 = book.exercise_version("day45-attention", "1" * 64, 10)
    v2 = book.exercise_version("day45-attention", "2" * 64, 12)
    assert v1 != v2 and book.exercise_version("day45-attention", "1" * 64, 10) == v1
    [sid] = book.add_submissions("day45-attention", [incoming()])
    book.record(sid, v1, Outcome(status="graded", grade=sample_grade(7)))
    assert book.graded(v2, [sid]) == set()
    book.record(sid, v2, Outcome(status="graded", grade=sample_grade(9)))
    [current] = book.current_grades()
    assert current.version == "2" * 64 and current.grade.score == 9
    assert [v for v, _ in book.latest_runs([sid])[sid]] == ["1" * 64, "2" * 64]


def test_learner_view_lists_submissions_and_runs(book):
    vid = book.exercise_version("day45-attention", "c" * 64, 10)
    ids = book.add_submissions("day45-attention", [incoming("s9", name="Bo", email="bo@example.org",
                                                            layout="canvas", late=True)])
    book.record(ids[0], vid, Outcome(status="unreadable", grade=sample_grade(0)))
    info = book.learner("s9")
    assert info["name"] == "Bo" and info["email"] == "bo@example.org"
    [sub] = info["submissions"]
    assert sub["late"] and sub["layout"] == "canvas" and sub["files"] == {"attention.py": 12}
    assert [r["status"] for r in sub["runs"]] == ["unreadable"]
    assert book.learner("nobody") is None
