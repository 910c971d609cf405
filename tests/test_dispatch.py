"""The grading server's dispatcher (grader/service/dispatch.py), one step at a time.

A queue and an executor that stand in for the gradebook's Queue and the worker pool let each
test decide what comes back and when: a grade, a grader failure, a refusing jail, a dead worker
(BrokenProcessPool), a lease lost to another server. No thread, no clock: `step()` is called by
hand, so nothing here depends on timing. The real pool, queue and kill -9 are tests/test_service.py
and tests/test_server_fairness.py; the fair share itself is the queue's (tests/test_queue.py).
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import pytest

from grader.course.learners import failed
from grader.catalog.exercises import load_exercise
from grader.service.dispatch import Dispatcher, WarmPool

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
        self.leases: list[tuple[int, int | None]] = []  # (limit, start) of every lease()

    def expire(self):
        self.expired += 1
        return 0

    def lease(self, limit=1, start=None):
        self.leases.append((limit, start))
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
    """Futures the test completes by hand, at most `slots` running; renew(future) records whose
    worker was replaced (WarmPool's own slots: test_warm_pool_*)."""

    def __init__(self, slots: int = 2):
        self.slots = slots
        self.renewed: list[int] = []  # the jobs whose worker was replaced, in order
        self.submitted: dict[int, Future] = {}  # job id -> its latest future
        self.gradings: list[tuple[int, Future]] = []  # every (job id, future), in order
        self.closed = False

    def describe(self):
        return "fake executor"

    def submit(self, task):
        assert sum(not f.done() for f in self.submitted.values()) < self.slots, "a grading waits for a slot"
        f: Future = Future()
        f.set_running_or_notify_cancel()
        self.submitted[task["job_id"]] = f
        self.gradings.append((task["job_id"], f))
        return f

    def renew(self, future):
        (job,) = [j for j, f in self.gradings if f is future]
        self.renewed.append(job)

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


def test_a_job_held_ahead_is_never_failed_with_a_worker_that_dies(setup):
    """A job waiting in the pool's own queue would fail with the pool and spend an attempt it never
    ran; held in the dispatcher, it goes to the fresh worker with its attempt untouched."""
    queue, executor, d = setup(n=4, slots=2)
    d.step()
    for job in (1, 2):
        executor.submitted[job].set_exception(BrokenProcessPool("a worker died"))
    assert sorted(executor.submitted) == [1, 2], "a dead worker's callback hands it nothing"
    d.step()
    assert sorted(j for j, _ in queue.failed) == [1, 2] and sorted(executor.renewed) == [1, 2]
    assert sorted(executor.submitted) == [1, 2, 3, 4]
    assert [d.running[j].lease.attempt for j in (3, 4)] == [1, 1]


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


def test_a_dead_worker_fails_only_the_job_it_was_grading_and_is_replaced(setup, caplog):
    """Issue 28: a worker killed under one learner's upload failed the other learner's upload
    grading beside it, every time, until it was a dead letter. Now the other grading goes on."""
    queue, executor, d = setup(n=4, slots=2)
    d.step()
    assert sorted(executor.submitted) == [1, 2]
    executor.submitted[1].set_exception(BrokenProcessPool("a worker died"))  # job 2's worker lives
    with caplog.at_level("WARNING", logger="grader.service"):
        d.step()
    assert [j for j, _ in queue.failed] == [1] and "BrokenProcessPool" in queue.failed[0][1]
    assert any("a worker process died" in r.getMessage() for r in caplog.records)
    assert executor.renewed == [1], "the dead worker's slot alone is replaced"
    assert not d.running[2].future.done() and not d.running[2].lost, "job 2 grades on, untouched"
    assert sorted(executor.submitted) == [1, 2, 3], "the next job goes to the fresh worker"
    for job in (2, 3):
        executor.submitted[job].set_result(graded_result())
    d.step()
    assert sorted(queue.completed) == [(2, "graded"), (3, "graded")]
    assert [j for j, _ in queue.failed] == [1], "job 2 was charged nothing"


def test_a_worker_killed_three_times_under_one_job_charges_that_job_alone(setup):
    queue, executor, d = setup(n=2, slots=2)
    charged = []

    def fail(lease, message):  # the queue's: queued again with one more attempt, dead at the third
        charged.append((lease.job_id, lease.attempt))
        if lease.attempt == 3:
            return "dead"
        queue.queued.insert(0, dataclasses.replace(lease, attempt=lease.attempt + 1))
        return "queued"

    queue.fail = fail
    d.step()
    for _ in range(3):
        executor.submitted[1].set_exception(BrokenProcessPool("kill -9"))
        d.step()
    assert charged == [(1, 1), (1, 2), (1, 3)] and executor.renewed == [1, 1, 1]
    assert 1 not in d.running and not d.running[2].future.done(), "job 2 graded on through all three"
    executor.submitted[2].set_result(graded_result())
    d.step()
    assert queue.completed == [(2, "graded")] and d.running == {}


def test_a_lease_may_take_a_second_job_of_a_learner_only_for_a_worker_free_now(setup):
    """The queue's fair share (tests/test_queue.py) holds ahead only learners' first jobs: the
    dispatcher tells it how many of its leases start at once."""
    queue, executor, d = setup(n=6, slots=2)
    d.step()
    assert queue.leases == [(4, 2)], "two workers free, one job ahead for each"
    executor.submitted[1].set_result(graded_result())  # job 3, held ahead, starts in the callback
    d.step()
    assert queue.leases[-1] == (1, 0), "both workers busy, job 4 held: one more ahead, a first job"
    d.prefetch = 0
    for job in (2, 3, 4):  # jobs 4 and 5, held, start meanwhile
        executor.submitted[job].set_result(graded_result())
    d.step()
    assert queue.leases[-1] == (1, 1), "one worker free, nothing held: its lease may be anyone's"


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


def test_a_stuck_grading_is_failed_and_its_worker_replaced_so_the_queue_goes_on(setup):
    queue, executor, d = setup(n=3, slots=2)
    d.step()
    assert sorted(executor.submitted) == [1, 2]
    d.stuck = lambda exercise: 0.0  # every grading running now is past its bound
    d.running[2].started += 10**6  # ... but job 2's, which has only just started
    d.watch()
    assert [j for j, _ in queue.failed] == [1] and "did not finish" in queue.failed[0][1]
    assert executor.renewed == [1] and d.running[1].lost
    executor.submitted[1].set_exception(BrokenProcessPool("its worker was stopped"))
    d.stuck = lambda exercise: 10**9
    d.step()
    assert [j for j, _ in queue.failed] == [1], "the stuck one, once"
    assert 3 in executor.submitted, "the queue goes on on the fresh worker"
    executor.submitted[2].set_result(graded_result())
    d.step()
    assert queue.completed == [(2, "graded")], "the other worker's grading went on"


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



# -- WarmPool's slots: one process pool per worker ---------------------------------------------------


class FakeProcessPool:
    """A one-process pool that never starts a process: submit() records, `broken` refuses."""

    made = 0

    def __init__(self):
        FakeProcessPool.made += 1
        self.tasks: list = []
        self.broken = False
        self.shut = False

    def submit(self, fn, *args):
        if self.broken:
            raise BrokenProcessPool("its process died")
        f: Future = Future()
        if fn is os.getpid:  # the warm-up task
            f.set_result(0)
        else:
            self.tasks.append(args)
        return f

    def shutdown(self, wait=True, cancel_futures=False):
        self.shut = True


@pytest.fixture
def warm_pool(monkeypatch):
    FakeProcessPool.made = 0
    monkeypatch.setattr(WarmPool, "_make", lambda self: FakeProcessPool())
    return WarmPool(2)


def test_warm_pool_grades_each_job_on_a_slot_of_its_own(warm_pool):
    first, second = warm_pool.submit({"job_id": 1}), warm_pool.submit({"job_id": 2})
    pools = warm_pool._pools
    assert [len(p.tasks) for p in pools] == [1, 1], "two gradings, two processes"
    with pytest.raises(RuntimeError, match="grading"):
        warm_pool.submit({"job_id": 3})  # never queued behind a grading, to die with its worker
    first.set_result({})
    warm_pool.submit({"job_id": 3})
    assert [len(p.tasks) for p in pools] == [2, 1], "the slot that finished takes the next"
    assert not second.done()


def test_warm_pool_replaces_only_the_dead_workers_slot_and_only_once(warm_pool):
    first, second = warm_pool.submit({"job_id": 1}), warm_pool.submit({"job_id": 2})
    old = list(warm_pool._pools)
    first.set_exception(BrokenProcessPool("killed"))
    warm_pool.renew(first)
    assert warm_pool._pools[0] is not old[0] and old[0].shut
    assert warm_pool._pools[1] is old[1] and not old[1].shut, "the other worker grades on"
    warm_pool.renew(first)  # asked again (a late report): the slot has moved on
    assert FakeProcessPool.made == 3
    third = warm_pool.submit({"job_id": 3})
    assert len(warm_pool._pools[0].tasks) == 1 and not third.done() and not second.done()


def test_warm_pool_heals_a_slot_whose_worker_died_before_it_was_renewed(warm_pool):
    first = warm_pool.submit({"job_id": 1})
    first.set_exception(BrokenProcessPool("killed"))
    warm_pool._pools[0].broken = True  # the callback of another grading submits before collect()
    warm_pool.submit({"job_id": 2})
    assert FakeProcessPool.made == 3 and len(warm_pool._pools[0].tasks) == 1
    warm_pool.renew(first)
    assert FakeProcessPool.made == 3, "renewed once"
