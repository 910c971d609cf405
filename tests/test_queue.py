"""The grading server's queue in the gradebook (grader/store/queue.py), on SQLite and PostgreSQL.

Leases are taken by real concurrent threads and processes on one gradebook; a dead owner is a
real process that exited; an expired lease is one made with a lease of -1 seconds (no sleeps:
nothing here depends on timing).
"""
from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select, text, update

from grader.limits import IDEMPOTENCY_KEY_CHARS, JOB_ATTEMPTS, MESSAGE_BYTES
from grader.models import CheckResult, Grade
from grader.store import Gradebook, Incoming, Outcome, migrate
from grader.store.gradebook import make_engine
from grader.store.queue import Queue, QueueFull, fair_share
from grader.store.schema import GradeRun, Job, Submission, UploadRow

EXERCISE = "day45-attention"


@pytest.fixture
def version(book):
    return book.exercise_version(EXERCISE, "v1", 10.0, "attention")


def files(n=0) -> Incoming:
    return Incoming(learner="?", files={"attention.py": f"x = {n}\n".encode()})


def grade(score=10.0) -> Grade:
    return Grade(exercise=EXERCISE, passed=score == 10.0, score=score, max_score=10.0,
                 checks=[CheckResult(id="softmax-is-stable", passed=True, points=score, max_points=10,
                                     rule="numerical-stability", day=45, title="stable softmax")])


def graded(score=10.0) -> Outcome:
    return Outcome(status="graded", grade=grade(score), worker="test")


def count(book, table) -> int:
    with book.sessions() as s:
        return s.scalar(select(func.count()).select_from(table))


# -- submitting -------------------------------------------------------------------------------------

def test_submit_stores_submission_upload_and_job_and_a_lease_carries_the_files(book, version):
    q = Queue(book, "test:1:a")
    up = q.submit("alice", EXERCISE, version, files(1), received_at=datetime(2026, 11, 5, tzinfo=UTC))
    assert (up.learner, up.exercise, up.status, up.created, up.grade) == \
        ("alice", EXERCISE, "queued", True, None)
    assert up.files == {"attention.py": 6} and up.received_at == datetime(2026, 11, 5, tzinfo=UTC)
    assert q.upload(up.id) == up                         # what submit answers is what is stored
    stats = q.stats()
    assert stats["queued"] == 1 and datetime.fromisoformat(stats["oldest_queued_at"]).tzinfo is not None
    (lease,) = q.lease(5)
    assert (lease.upload_id, lease.learner, lease.exercise, lease.version, lease.attempt) == \
        (up.id, "alice", EXERCISE, "v1", 1)
    assert lease.files == {"attention.py": b"x = 1\n"}
    assert q.upload(up.id).status == "grading" and q.lease() == []
    run_id = q.complete(lease, graded(7.0))
    shown = q.upload(up.id)
    assert shown.status == "graded" and shown.run_id == run_id and shown.grade.score == 7.0
    assert q.stats() == {"queued": 0, "running": 0, "dead": 0, "oldest_queued_at": None}


def test_an_idempotent_replay_is_the_same_upload_and_stores_nothing(book, version):
    q = Queue(book, "test:1:a")
    first = q.submit("alice", EXERCISE, version, files(1), idempotency_key="k-1")
    again = q.submit("alice", EXERCISE, version, files(2), idempotency_key="k-1")
    assert again.id == first.id and again.created is False and again.digest == first.digest
    assert count(book, UploadRow) == 1 and count(book, Job) == 1 and count(book, Submission) == 1
    other = q.submit("bob", EXERCISE, version, files(1), idempotency_key="k-1")   # keys are per learner
    assert other.id != first.id and other.created
    longest = "k" * IDEMPOTENCY_KEY_CHARS
    assert q.submit("bob", EXERCISE, version, files(2), idempotency_key=longest).created
    for bad in ("", "k" * (IDEMPOTENCY_KEY_CHARS + 1), "k\x00", "k 1", "ключ"):
        with pytest.raises(ValueError, match="idempotency key"):
            q.submit("bob", EXERCISE, version, files(1), idempotency_key=bad)
    assert count(book, UploadRow) == 3


def test_concurrent_replays_of_one_idempotency_key_are_one_upload(book, version, db):
    """A client retrying after a network error, its retries racing each other: one upload."""
    barrier = threading.Barrier(6)
    ids: list[int] = []
    errors: list[BaseException] = []

    def send():
        gb = Gradebook(db)
        try:
            barrier.wait(timeout=60)
            ids.append(Queue(gb).submit("alice", EXERCISE, version, files(1), idempotency_key="retry").id)
        except BaseException as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)
        finally:
            gb.close()

    threads = [threading.Thread(target=send) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and len(ids) == 6 and len(set(ids)) == 1
    assert count(book, UploadRow) == count(book, Job) == count(book, Submission) == 1


def test_the_same_files_again_after_others_are_one_submission_two_uploads_the_second_done_at_once(
    book, version
):
    """(The same files as the latest upload are no upload at all: a repeat, tests/test_server_history.py.)"""
    q = Queue(book, "test:1:a")
    first = q.submit("alice", EXERCISE, version, files(1))
    (lease,) = q.lease()
    run_id = q.complete(lease, graded())
    q.submit("alice", EXERCISE, version, files(2))
    (other,) = q.lease()
    q.complete(other, graded(3.0))
    second = q.submit("alice", EXERCISE, version, files(1))
    assert second.id != first.id and second.submission_id == first.submission_id and not second.repeat
    assert second.status == "graded" and second.run_id == run_id and second.grade is not None
    assert q.upload(second.id) == second
    assert q.lease() == [] and count(book, GradeRun) == 2 and count(book, Submission) == 2


def test_two_queued_uploads_of_the_same_files_are_graded_once(book, version):
    q = Queue(book, "test:1:a")
    a = q.submit("alice", EXERCISE, version, files(1))
    q.submit("alice", EXERCISE, version, files(2))
    b = q.submit("alice", EXERCISE, version, files(1))
    first, between, second = q.lease(3)
    run_id = q.complete(first, graded())
    q.complete(between, graded(5.0))
    assert q.complete(second, graded(3.0)) == run_id      # already graded: that run, no second one
    assert count(book, GradeRun) == 2
    assert q.upload(a.id).grade.score == q.upload(b.id).grade.score == 10.0


def test_a_full_queue_refuses_and_stores_nothing(book, version):
    q = Queue(book, "test:1:a")
    q.submit("alice", EXERCISE, version, files(1), max_depth=2)
    q.submit("alice", EXERCISE, version, files(2), max_depth=2)
    before = (count(book, UploadRow), count(book, Job), count(book, Submission))
    with pytest.raises(QueueFull) as full:
        q.submit("bob", EXERCISE, version, files(3), max_depth=2)
    assert full.value.depth == 2 and full.value.retry_after > 0
    assert (count(book, UploadRow), count(book, Job), count(book, Submission)) == before
    assert book.learner("bob") is None


# -- leases -----------------------------------------------------------------------------------------

def test_an_expired_lease_is_requeued_and_its_late_result_dropped(book, version):
    slow = Queue(book, "test:1:slow", lease_seconds=-1)     # its lease has run out when taken
    up = slow.submit("alice", EXERCISE, version, files(1))
    (stale,) = slow.lease()
    assert Queue(book, "test:2:other").expire() == 1
    assert slow.heartbeat([stale]) == [stale.job_id]     # the worker learns it lost the lease
    fresh_q = Queue(book, "test:3:fresh")
    (fresh,) = fresh_q.lease()
    assert fresh.job_id == stale.job_id and fresh.attempt == 2 and fresh.token != stale.token
    assert slow.complete(stale, graded(1.0)) is None     # dropped: no grade run
    assert slow.fail(stale, "late") == "lost"
    assert count(book, GradeRun) == 0 and q_status(book, fresh.job_id) == "running"
    assert fresh_q.complete(fresh, graded()) is not None
    assert q_status(book, fresh.job_id) == "done" and Queue(book).upload(up.id).grade.score == 10.0


def q_status(book, job_id) -> str:
    with book.sessions() as s:
        return s.scalar(select(Job.status).where(Job.id == job_id))


def test_a_heartbeat_keeps_a_lease_from_expiring(book, version):
    q = Queue(book, "test:1:a", lease_seconds=-1)
    q.submit("alice", EXERCISE, version, files(1))
    (lease,) = q.lease()
    renewing = Queue(book, "test:1:a")                   # the same owner, renewing for LEASE_SECONDS
    assert renewing.heartbeat([lease]) == []
    assert q.expire() == 0 and q_status(book, lease.job_id) == "running"
    assert renewing.complete(lease, graded()) is not None


def test_job_attempts_failures_make_a_dead_letter_refunded_and_retry_brings_it_back(book, version):
    q = Queue(book, "test:1:a")
    up = q.submit("alice", EXERCISE, version, files(1), use_late_day=True, late_days_spent=1)
    assert q.late_days_spent("alice") == 1
    statuses = []
    for i in range(JOB_ATTEMPTS):
        (lease,) = q.lease()
        statuses.append(q.fail(lease, "x" * 10 * MESSAGE_BYTES if i == 0 else "worker died"))
    with book.sessions() as s:                           # a traceback's length is capped
        assert len(s.scalar(select(Job.last_error))) <= MESSAGE_BYTES
    assert statuses == ["queued"] * (JOB_ATTEMPTS - 1) + ["dead"]
    shown = q.upload(up.id)
    assert shown.status == "failed" and shown.refunded and shown.grade is None and shown.run_id is None
    assert q.late_days_spent("alice") == 0               # the ledger gave the day back
    assert q.lease() == [] and q.stats()["dead"] == 1
    (letter,) = q.dead_letters()
    assert (letter["upload"], letter["attempts"], letter["last_error"]) == \
        (up.id, JOB_ATTEMPTS, "worker died")
    assert q.retry(letter["job"]) and not q.retry(letter["job"])
    (lease,) = q.lease()
    assert lease.attempt == 1 and q.complete(lease, graded()) is not None
    assert q.upload(up.id).status == "graded" and q.late_days_spent("alice") == 1


def test_expiry_counts_the_attempt_up_to_dead(book, version):
    q = Queue(book, "test:1:a", lease_seconds=-1)
    up = q.submit("alice", EXERCISE, version, files(1))
    for _ in range(JOB_ATTEMPTS):
        assert len(q.lease()) == 1 and q.expire() == 1
    assert q.upload(up.id).status == "failed" and q.upload(up.id).refunded


def test_complete_refuses_an_error_outcome(book, version):
    q = Queue(book, "test:1:a")
    q.submit("alice", EXERCISE, version, files(1))
    (lease,) = q.lease()
    with pytest.raises(ValueError, match="fail"):
        q.complete(lease, Outcome(status="error", grade=grade(0.0)))
    assert q_status(book, lease.job_id) == "running"


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_resume_requeues_jobs_of_a_dead_owner_without_counting_an_attempt(book, version):
    host = socket.gethostname()
    gone = Queue(book, f"{host}:{dead_pid()}:dead")
    alive = Queue(book, f"{host}:{os.getpid()}:alive")
    elsewhere = Queue(book, f"another-host:{dead_pid()}:x")
    for n in range(3):
        gone.submit("alice", EXERCISE, version, files(n))
    (a,) = gone.lease()
    (b,) = alive.lease()
    (c,) = elsewhere.lease()
    assert Queue(book, f"{host}:{os.getpid()}:new").resume() == 1
    with book.sessions() as s:
        jobs = {j.id: j for j in s.scalars(select(Job))}
    assert (jobs[a.job_id].status, jobs[a.job_id].attempts, jobs[a.job_id].lease_token) == ("queued", 0, None)
    assert jobs[b.job_id].status == jobs[c.job_id].status == "running"   # alive, or not this host's
    assert gone.complete(a, graded()) is None                            # the old lease is gone
    (again,) = alive.lease()
    assert again.job_id == a.job_id and again.attempt == 1


def lease_all(db: str, n: int) -> list[int]:
    """Lease one job at a time until the queue is empty; the job ids taken."""
    gb = Gradebook(db)
    q = Queue(gb)
    taken = []
    try:
        for _ in range(n + 1):                      # bounded: never more rounds than jobs
            leases = q.lease()
            if not leases:
                break
            taken.append(leases[0].job_id)
            assert q.complete(leases[0], graded()) is not None
    finally:
        gb.close()
    return taken


def test_concurrent_threads_never_share_a_job(book, version, db):
    q = Queue(book)
    n = 40
    for i in range(n):
        q.submit(f"s{i % 7}", EXERCISE, version, files(i))
    results: list[list[int]] = [[] for _ in range(4)]

    def work(k):
        results[k] = lease_all(db, n)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    taken = [j for r in results for j in r]
    assert sorted(taken) == sorted(set(taken)) and len(taken) == n
    assert count(book, GradeRun) == n


def test_concurrent_processes_never_share_a_job(book, version, db):
    q = Queue(book)
    n = 30
    for i in range(n):
        q.submit(f"s{i % 5}", EXERCISE, version, files(i))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        results = pool.starmap(lease_all, [(db, n)] * 3, chunksize=1)
    taken = [j for r in results for j in r]
    assert sorted(taken) == sorted(set(taken)) and len(taken) == n
    assert count(book, GradeRun) == n and q.stats()["queued"] == 0


# -- the fair share: round-robin by learner ----------------------------------------------------------

def test_fair_share_gives_everyone_with_nothing_running_a_job_before_anyone_a_second():
    queued = [(10, 1), (11, 1), (12, 1), (13, 2), (14, 2), (15, 3)]  # (job, learner), oldest first
    assert fair_share({}, queued, limit=6, start=6) == [10, 13, 15, 11, 14, 12]
    assert fair_share({}, queued, limit=2, start=2) == [10, 13], "the longest waiting first"
    assert fair_share({1: 1}, queued, limit=3, start=3) == [13, 15, 10], "1 has one running: last"
    assert fair_share({1: 2, 2: 1}, queued, limit=2, start=2) == [15, 13], "the fewest running first"
    # past `start` the jobs are held ahead of a worker: only a learner's first job may be
    assert fair_share({1: 1}, queued, limit=4, start=0) == [13, 15]
    assert fair_share({1: 1, 2: 1, 3: 1}, queued, limit=4, start=0) == []
    assert fair_share({}, [(10, 1), (11, 1)], limit=4, start=1) == [10]
    assert fair_share({}, [(10, 1), (11, 1)], limit=4, start=4) == [10, 11], "no one else waits"
    assert fair_share({}, [], limit=4, start=4) == []


def test_leases_go_round_robin_by_learner_over_every_servers_leases(book, version):
    """Issue 28: one learner's four uploads that hang until the wall limit held both workers and
    the jobs leased ahead of them, while another learner's quick upload waited behind all four."""
    here, there = Queue(book, "test:1:here"), Queue(book, "test:2:there")
    for who, n in (("alice", 3), ("bob", 2), ("carol", 1)):  # alice's three came first
        for i in range(n):
            here.submit(who, EXERCISE, version, files(f"'{who}-{i}'"))

    def learners(leases):
        return [lease.learner for lease in leases]

    first = here.lease(2)
    assert learners(first) == ["alice", "bob"] and [lease.attempt for lease in first] == [1, 1]
    assert learners(there.lease(1)) == ["carol"], "another server's leases count: carol's turn"
    assert there.lease(4, start=0) == [], "everyone has one running: no second job is held ahead"
    assert learners(there.lease(3, start=1)) == ["alice"], "a free worker: the oldest second job"
    assert learners(here.lease(1)) == ["bob"], "bob has fewer running than alice"
    dave = here.submit("dave", EXERCISE, version, files("'dave'"))
    (late,) = there.lease(3, start=0)
    assert (late.learner, late.upload_id) == ("dave", dave.id), "a newcomer is held ahead at once"
    for lease in first:
        assert here.complete(lease, graded()) is not None
    assert learners(here.lease(3)) == ["alice"] and here.lease(3) == []


def test_a_learner_alone_in_the_queue_gets_every_free_worker(book, version):
    q = Queue(book, "test:1:a")
    for i in range(4):
        q.submit("alice", EXERCISE, version, files(i))
    assert [lease.learner for lease in q.lease(4, start=2)] == ["alice", "alice"]
    assert q.lease(2, start=0) == [] and q.stats()["queued"] == 2


# -- choosing, extensions, releases -----------------------------------------------------------------

def test_choose_marks_one_upload_of_a_learner_and_exercise(book, version):
    q = Queue(book)
    a = q.submit("alice", EXERCISE, version, files(1))
    b = q.submit("alice", EXERCISE, version, files(2))
    c = q.submit("bob", EXERCISE, version, files(3))
    q.choose(a.id)
    q.choose(b.id)
    q.choose(c.id)
    assert [(u.id, u.chosen) for u in q.uploads("alice")] == [(a.id, False), (b.id, True)]
    assert q.upload(c.id).chosen
    q.refund(a.id)
    assert q.upload(a.id).refunded and not q.upload(b.id).refunded
    assert [u.id for u in q.uploads(exercise=EXERCISE)] == [a.id, b.id, c.id]


def test_the_newest_extension_applies_and_the_first_release(book):
    q = Queue(book)
    d1, d2 = datetime(2026, 11, 9, tzinfo=UTC), datetime(2026, 11, 10, tzinfo=UTC)
    q.add_extension("alice", EXERCISE, d1, reason="ill")
    q.add_extension("alice", EXERCISE, d2, d2, author="prof")
    assert q.extensions() == {("alice", EXERCISE): (d2, d2)}
    first = q.release(EXERCISE, "prof")
    q.release(EXERCISE, "prof")
    assert q.releases() == {EXERCISE: first}


# -- the migration ----------------------------------------------------------------------------------

def test_the_migration_upgrades_a_0002_gradebook_in_place(db):
    engine = make_engine(db)
    migrate.upgrade(engine, "0002")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO learners (key, name, created_at) VALUES ('old', 'Old', :t)"),
                     {"t": datetime(2025, 1, 1)})
    engine.dispose()
    with Gradebook(db) as gb:
        with gb.engine.connect() as conn:
            assert migrate.current(conn) == migrate.head()
        assert gb.learner("old")["name"] == "Old"
        version = gb.exercise_version(EXERCISE, "v1", 10.0)
        up = Queue(gb).submit("old", EXERCISE, version, files(1))
        assert up.learner == "old" and gb.learner("old")["name"] == "Old"
    migrate.downgrade(make_engine(db), "0002")           # and back, for a grader that must roll back
    with make_engine(db).connect() as conn:
        assert migrate.current(conn) == "0002"


def test_submit_is_one_transaction(book, version, monkeypatch):
    """A failure after the submission is stored leaves nothing: no submission, upload or job."""
    import grader.store.queue as queue_module

    def broken(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(queue_module.Queue, "_final_run_id", staticmethod(broken))
    with pytest.raises(RuntimeError):
        Queue(book).submit("alice", EXERCISE, version, files(1))
    assert (count(book, Submission), count(book, UploadRow), count(book, Job)) == (0, 0, 0)


def test_complete_is_conditional_on_the_lease_token(book, version):
    q = Queue(book)
    q.submit("alice", EXERCISE, version, files(1))
    (lease,) = q.lease()
    with book.sessions() as s:            # another process took it over
        s.execute(update(Job).where(Job.id == lease.job_id).values(lease_token="someone-else"))
        s.commit()
    assert q.complete(lease, graded()) is None and count(book, GradeRun) == 0
