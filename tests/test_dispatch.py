"""The grading server's dispatcher (grader/service/dispatch.py), one step at a time.

A queue and an executor that stand in for the gradebook's Queue and the worker pool let each
test decide what comes back and when: a grade, a grader failure, a refusing jail, a dead worker
(BrokenProcessPool), a lease lost to another server. No thread, no clock: `step()` is called by
hand, so nothing here depends on timing. The real pool, queue and kill -9 are tests/test_service.py.
"""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import pytest

from grader.batch import failed
from grader.exercises import load_exercise
from grader.service.dispatch import Dispatcher

QUIZ = "day45-quiz"


@dataclass
class FakeLease:
    job_id: int
    upload_id: int
    submission_id: int
    version_id: int = 1
    attempt: int = 1
    token: str = "t"
    learner: str = "alice"
    exercise: str = QUIZ
    version: str = "v1"
    files: dict = field(default_factory=lambda: {"answers.toml": b"[answers]\n"})


class FakeQueue:
    """The Queue's side the dispatcher uses, in memory: which calls it made, with what."""

    def __init__(self, n: int, exercise: str = QUIZ):
        self.queued = [FakeLease(job_id=i, upload_id=100 + i, submission_id=200 + i, exercise=exercise)
                       for i in range(1, n + 1)]
        self.completed: list[tuple[int, str]] = []
        self.complete_calls: list[int] = []
        self.failed: list[tuple[int, str]] = []
        self.lost: set[int] = set()
        self.heartbeats: list[list[int]] = []
        self.expired = 0

    def expire(self):
        self.expired += 1
        return 0

    def lease(self, limit=1):
        taken, self.queued = self.queued[:limit], self.queued[limit:]
        return taken

    def heartbeat(self, leases):
        self.heartbeats.append([lease.job_id for lease in leases])
        return [lease.job_id for lease in leases if lease.job_id in self.lost]

    def complete(self, lease, outcome):
        assert outcome.status in ("graded", "unreadable"), "complete() refuses an error"
        self.complete_calls.append(lease.job_id)
        if lease.job_id in self.lost:
            return None
        self.completed.append((lease.job_id, outcome.status))
        return 1000 + lease.job_id

    def fail(self, lease, message):
        self.failed.append((lease.job_id, str(message)))
        return "queued"


class FakeExecutor:
    """Futures the test completes by hand; `generation` as a real pool's, bumped by renew()."""

    def __init__(self, slots: int = 2):
        self.slots = slots
        self.generation = 0
        self.renewed = 0
        self.submitted: dict[int, Future] = {}  # job id -> its future
        self.closed = False

    def describe(self):
        return "fake executor"

    def submit(self, task):
        f: Future = Future()
        f.set_running_or_notify_cancel()
        self.submitted[task["job_id"]] = f
        return f

    def renew(self):
        self.generation += 1
        self.renewed += 1

    def close(self):
        self.closed = True


def graded_result(passed: bool = True) -> dict:
    exercise = load_exercise(QUIZ)
    grade = failed(exercise, "crash", "x", "alice").model_copy(
        update={"error": None, "passed": passed, "score": exercise.points if passed else 0.0})
    return {"submission_id": 1, "worker": "w:1", "started_at": "2026-01-01T00:00:00+00:00",
            "finished_at": "2026-01-01T00:00:01+00:00", "status": "graded", "grade": grade.model_dump()}


def error_result(status: str = "error") -> dict:
    return {"submission_id": 1, "worker": "w:1", "status": status, "message": "the grader broke"}


@pytest.fixture
def setup():
    def make(n=3, slots=2, exercise=QUIZ):
        queue, executor = FakeQueue(n, exercise), FakeExecutor(slots)
        exercises = {QUIZ: load_exercise(QUIZ)}
        return queue, executor, Dispatcher(queue, exercises, executor, heartbeat_seconds=0.0)
    return make


def test_leases_the_free_slots_and_one_ahead_per_slot_and_completes_grades(setup):
    queue, executor, d = setup(n=5, slots=2)
    d.step()
    assert sorted(executor.submitted) == [1, 2], "as many in the executor as it has slots"
    assert [lease.job_id for lease in d.ready] == [3, 4], "one more per slot, held here"
    assert [j.job_id for j in queue.queued] == [5]
    assert queue.expired == 1  # expire() comes before lease() in every step
    executor.submitted[1].set_result(graded_result())
    assert sorted(executor.submitted) == [1, 2, 3], "the freed worker takes the held job at once"
    assert queue.completed == [], "... before the dispatcher has even recorded the grade"
    d.step()
    assert queue.completed == [(1, "graded")]
    assert [lease.job_id for lease in d.ready] == [4, 5] and queue.queued == []
    for job in (2, 3, 4, 5):
        executor.submitted[job].set_result(graded_result(passed=False))
    d.step()
    assert sorted(queue.completed) == [(j, "graded") for j in (1, 2, 3, 4, 5)] and queue.failed == []
    assert d.running == {} and not d.ready


def test_without_prefetch_only_the_free_slots_are_leased(setup):
    queue, executor, _ = setup(n=3, slots=2)
    d = Dispatcher(queue, {QUIZ: load_exercise(QUIZ)}, executor, heartbeat_seconds=0.0, prefetch=0)
    d.step()
    assert sorted(executor.submitted) == [1, 2] and not d.ready
    assert [j.job_id for j in queue.queued] == [3]


def test_a_job_held_ahead_is_never_failed_with_a_pool_that_breaks(setup):
    """A job waiting in the pool's own queue would fail with the pool and spend an attempt it never
    ran; held in the dispatcher, it goes to the fresh pool with its attempt untouched."""
    queue, executor, d = setup(n=4, slots=2)
    d.step()
    for job in (1, 2):
        executor.submitted[job].set_exception(BrokenProcessPool("a worker died"))
    assert sorted(executor.submitted) == [1, 2], "a broken pool's callback hands it nothing"
    d.step()
    assert sorted(j for j, _ in queue.failed) == [1, 2]
    assert sorted(executor.submitted) == [1, 2, 3, 4]
    assert {d.running[j].generation for j in (3, 4)} == {executor.generation} == {1}


def test_jobs_held_ahead_are_heartbeated_and_dropped_when_their_lease_is_lost(setup):
    queue, executor, d = setup(n=4, slots=2)
    d.step()
    queue.lost.add(3)  # another server's expire() took job 3 while it waited here
    d.step()
    assert sorted(queue.heartbeats[-1]) == [1, 2, 3, 4], "held leases are renewed like running ones"
    assert [lease.job_id for lease in d.ready] == [4]
    for job in (1, 2):
        executor.submitted[job].set_result(graded_result())
    d.step()
    assert 3 not in executor.submitted and 3 not in queue.complete_calls


def test_a_grader_error_is_a_failed_attempt_never_a_grade(setup):
    queue, executor, d = setup(n=1)
    d.step()
    executor.submitted[1].set_result(error_result())
    d.step()
    assert queue.completed == []
    assert queue.failed and queue.failed[0][0] == 1 and "the grader broke" in queue.failed[0][1]


def test_a_dead_worker_fails_only_the_leases_its_pool_held_and_a_fresh_pool_is_made(setup):
    queue, executor, d = setup(n=4, slots=2)
    d.step()
    assert sorted(executor.submitted) == [1, 2]
    for job in (1, 2):  # a worker killed: the pool fails every future it held
        executor.submitted[job].set_exception(BrokenProcessPool("a worker died"))
    d.step()
    assert sorted(j for j, _ in queue.failed) == [1, 2]
    assert "BrokenProcessPool" in queue.failed[0][1]
    assert executor.renewed == 1, "one broken pool, one fresh pool"
    assert sorted(executor.submitted) == [1, 2, 3, 4], "the next jobs go to the fresh pool"
    for job in (3, 4):
        executor.submitted[job].set_result(graded_result())
    d.step()
    assert sorted(queue.completed) == [(3, "graded"), (4, "graded")]
    assert sorted(j for j, _ in queue.failed) == [1, 2], "jobs of the fresh pool are not failed"


def test_a_late_broken_future_of_an_old_pool_does_not_renew_the_new_one(setup):
    queue, executor, d = setup(n=3, slots=2)
    d.step()
    executor.submitted[1].set_exception(BrokenProcessPool("a worker died"))
    d.step()
    assert executor.renewed == 1
    executor.submitted[2].set_exception(BrokenProcessPool("the same dead pool"))
    d.step()
    assert executor.renewed == 1 and sorted(j for j, _ in queue.failed) == [1, 2]


def test_a_lost_lease_is_cancelled_and_its_late_result_dropped(setup):
    queue, executor, d = setup(n=2, slots=2)
    d.step()
    queue.lost.add(1)  # another server's expire() took job 1 while this one stalled
    d.step()
    assert queue.heartbeats and 1 in queue.heartbeats[-1]
    assert d.running[1].lost
    executor.submitted[1].set_result(graded_result())  # it was running: cancel() could not stop it
    executor.submitted[2].set_result(graded_result())
    d.step()
    assert queue.completed == [(2, "graded")], "the lost lease's grade is not written"
    assert queue.complete_calls == [2], "a known-lost lease's result is not even offered"
    assert queue.failed == []
    assert 1 not in d.running


def test_a_refusing_jail_fails_the_job_loudly_and_pauses_leasing(setup, caplog):
    queue, executor, d = setup(n=3, slots=1)
    d.step()
    executor.submitted[1].set_result(error_result("refused"))
    with caplog.at_level("ERROR", logger="grader.service"):
        d.step()
    assert queue.failed and queue.failed[0][0] == 1
    assert any("JAIL REFUSED" in r.getMessage() for r in caplog.records)
    assert sorted(executor.submitted) == [1], "no more leasing while paused"
    d.paused_until = 0.0
    d.step()
    assert sorted(executor.submitted) == [1, 2]


def test_a_job_of_an_exercise_this_server_does_not_serve_fails(setup):
    queue, executor, d = setup(n=1, exercise="day99-unknown")
    d.step()
    assert executor.submitted == {}
    assert queue.failed and "day99-unknown" in queue.failed[0][1]


def test_a_record_that_fails_leaves_the_lease_to_expire_and_goes_on(setup):
    queue, executor, d = setup(n=2, slots=2)

    def broken_complete(lease, outcome):
        raise RuntimeError("database is locked")
    queue.complete = broken_complete
    d.step()
    executor.submitted[1].set_result(graded_result())
    executor.submitted[2].set_result(error_result())
    d.step()  # does not raise; the other outcome is still recorded
    assert [j for j, _ in queue.failed] == [2]
    assert d.running == {}


def test_a_stuck_grading_is_failed_and_its_pool_replaced_so_the_queue_goes_on(setup):
    queue, executor, d = setup(n=3, slots=2)
    d.step()
    assert sorted(executor.submitted) == [1, 2]
    d.stuck = lambda exercise: 0.0  # every grading running now is past its bound
    d.running[2].started += 10**6  # ... but job 2's, which has only just started
    d.watch()
    assert [j for j, _ in queue.failed] == [1] and "did not finish" in queue.failed[0][1]
    assert executor.renewed == 1 and d.running[1].lost
    executor.submitted[1].set_exception(BrokenProcessPool("its pool was stopped"))
    executor.submitted[2].set_exception(BrokenProcessPool("its pool was stopped"))
    d.stuck = lambda exercise: 10**9
    d.step()
    assert [j for j, _ in queue.failed] == [1, 2], "the stuck one once; the other one of its pool"
    assert executor.renewed == 1, "the old pool's futures do not renew the new one"
    assert 3 in executor.submitted, "the queue goes on on the fresh pool"


def test_stop_closes_the_executor(setup):
    _queue, executor, d = setup(n=0)
    d.start()
    d.wake()
    d.stop(timeout=10)
    assert executor.closed


def test_every_recorded_outcome_wakes_the_requests_waiting_for_its_upload(setup):
    queue, executor, _ = setup(n=3, slots=3)
    recorded = []
    d = Dispatcher(queue, {QUIZ: load_exercise(QUIZ)}, executor, heartbeat_seconds=0.0,
                   on_record=recorded.append)
    d.step()
    executor.submitted[1].set_result(graded_result())
    executor.submitted[2].set_result(error_result())
    d.step()
    assert sorted(recorded) == [101, 102], "a grade and a failed attempt: both are news to a waiting client"
    queue.lost.add(3)
    d.step()
    executor.submitted[3].set_result(graded_result())
    d.step()
    assert sorted(recorded) == [101, 102], "a lost lease's dropped result is not news"

