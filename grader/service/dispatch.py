"""The dispatcher of a grading server: jobs out of the gradebook's queue, grades back into it.

One thread of the `grader serve` process runs `Dispatcher.step` in a loop: collect the gradings
that finished, renew the leases still running and expire() the leases that ran out (another
server died) every LEASE_SECONDS / 4, then lease queued jobs for the free worker slots and
PREFETCH more per slot, and hand them to the executor. It wakes at once when this process stores
an upload (`wake`) and polls every POLL_SECONDS for the uploads of other `grader serve` processes
on the same gradebook.

Leasing is a fair share (grader.store.queue.Queue.lease, over every server's leases in the
gradebook): round-robin by learner, so a learner with nothing running goes before any learner's
second job. A second job is leased only for a worker that is free now (`start`), never to be held
ahead: the jobs held here are each the first of a learner with nothing running, so that a learner
who queued fifty uploads that hang until the wall limit delays another learner's grade by at most
the one grading a worker is busy with.

The jobs leased ahead wait here (`ready`), not in the executor: a grading that comes back hands
the next one to its worker at once, from the future's own callback (`_refill`), instead of the
worker idling while this thread, which shares the web process's CPU and GIL, records the grade and
leases again (a deadline surge drained at 62-71 % of a batch's throughput so). Held here, a job
that has not started is never failed with a worker that dies: a job waiting in the pool's own
queue would be, and would spend an attempt it never ran.

The grading itself happens in worker processes, never here: spawned processes kept warm for the
server's life (`WarmPool`, each a one-process grader.course.batch.local_pool, the batch's own kind of
worker) or a Dask cluster (`DaskExecutor`, grader.course.batch.DaskCluster). A worker receives plain
data (the learner's files) and returns plain data (grader.course.batch.grade_task), which
grader.course.batch._outcome turns into an Outcome exactly as a batch does.

What comes back decides the job (grader.store.queue.Queue):
- `graded` or `unreadable`: complete(), which writes the grade only while the lease is still ours;
  a lost lease (this process stalled, another server took the job) drops the late result.
- `error` (the grader failed, a worker died) and `refused` (the jail failed its self-check):
  fail(), an infrastructure failure: queued again, a dead letter after JOB_ATTEMPTS, never the
  learner's grade (a batch records a given-up crash grade; a server must not charge the learner).
  `refused` is logged loudly and pauses leasing for a lease's length, so that a broken jail does
  not burn every queued job's attempts in a few seconds; the jobs leased ahead wait out the pause.
- A worker that dies (BrokenProcessPool: killed, out of memory, the grader crashed) fails the one
  job it was grading, one attempt, and a fresh process takes its place; the other workers'
  gradings go on untouched. Each worker process is a pool of its own (`WarmPool`), so the future
  that breaks names the job: nothing a process reports is trusted for it. A grading stuck far past
  its exercise's limits (stuck_after: a grader bug) is failed and its worker replaced, so no job
  waits behind a hung worker forever.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Protocol

from grader.limits import JAIL_READY_SECONDS, LEASE_SECONDS
from grader.models import Exercise

log = logging.getLogger("grader.service")

POLL_SECONDS = 0.5  # how often the queue is looked at for other processes' uploads
# Jobs leased ahead per worker slot. One hides the dispatcher's turnaround; more would hold leases
# another server's idle workers could take.
PREFETCH = 1


def stuck_after(exercise: Exercise) -> float:
    """Seconds after which a grading of `exercise` is stuck: twice its whole wall limit, a jail's
    start-up and a minute. The jail bounds learner code well within this; a grading past it is a
    grader bug (a worker that hangs), which would otherwise hold its slot and heartbeat forever."""
    return 2 * exercise.limits.wall_seconds + JAIL_READY_SECONDS + 60


class Executor(Protocol):
    """Where gradings run: `slots` at a time; `submit` returns a future of grade_task's dict.
    renew(future): the worker that ran that future died or hangs; replace it (once, however
    often asked) and stop it, leaving every other grading alone."""

    slots: int

    def submit(self, task: dict) -> Any: ...
    def renew(self, future: Any) -> None: ...
    def close(self) -> None: ...
    def describe(self) -> str: ...


class WarmPool:
    """Spawned grading processes on this machine, kept warm: their zygotes have imported torch
    before the first upload arrives.

    Each process is a pool of its own (grader.course.batch.local_pool of one), a slot that grades one job
    at a time. A process pool that loses a process fails every future it holds and stops its other
    processes; one process per pool, a worker that dies breaks only its own slot, so only the job
    it was grading fails, and the dispatcher knows which job that was from the future alone."""

    def __init__(self, workers: int):
        self.slots = max(1, workers)
        self._lock = threading.Lock()  # submit() runs in the dispatcher's thread and in the pools'
        self._pools = [self._make() for _ in range(self.slots)]
        self._grading: list[Any] = [None] * self.slots  # each slot's latest grading (a future)

    def _make(self):
        """A one-process pool whose process starts now: a spawned pool starts its worker only when
        a task comes, so it is handed one that does nothing, and its initializer (the jail's
        zygote, torch) runs before the first upload instead of in that learner's wait."""
        from grader.course.batch import local_pool

        pool = local_pool(1, warm="full", sharing=self.slots)
        pool.submit(os.getpid)
        return pool

    def describe(self) -> str:
        return f"local pool of {self.slots} worker process{'es' if self.slots > 1 else ''}"

    def submit(self, task: dict):
        """Grade on a slot that grades nothing now (the dispatcher never hands out more gradings
        than slots, so a grading never waits behind another, to fail with its worker)."""
        from grader.course.batch import grade_task

        with self._lock:
            free = [i for i, f in enumerate(self._grading) if f is None or f.done()]
            if not free:
                raise RuntimeError(f"all {self.slots} worker processes are grading")
            slot = free[0]
            try:
                future = self._pools[slot].submit(grade_task, task)
            except (BrokenProcessPool, RuntimeError):  # its worker died since: not yet renewed
                self._replace(slot)
                future = self._pools[slot].submit(grade_task, task)
            self._grading[slot] = future
            return future

    def renew(self, future) -> None:
        """A fresh process in the slot that ran `future` (it died, or hangs: it is stopped). A slot
        that has moved on to another grading was renewed already: left alone."""
        with self._lock:
            for slot, grading in enumerate(self._grading):
                if grading is future:
                    self._replace(slot)

    def _replace(self, slot: int) -> None:
        old, self._pools[slot] = self._pools[slot], self._make()
        self._grading[slot] = None
        _terminate(old)

    def close(self) -> None:
        for pool in self._pools:
            _terminate(pool)


def _terminate(pool) -> None:
    """Stop a pool now: its gradings are leases that expire() or resume() hands out again, so
    nothing is lost by not waiting for them (a grading may take minutes)."""
    pool.shutdown(wait=False, cancel_futures=True)
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            process.kill()
        except Exception:  # noqa: BLE001 - already gone
            pass


class DaskExecutor:
    """An existing Dask distributed cluster (grader.course.batch.DaskCluster), as many slots as threads."""

    def __init__(self, address: str):
        from grader.course.batch import DaskCluster

        self.cluster = DaskCluster(address)
        try:
            workers = self.cluster.client.scheduler_info().get("workers", {})
            self.slots = max(1, sum(w.get("nthreads", 1) for w in workers.values()))
        except Exception:  # noqa: BLE001 - a cluster that does not say: one at a time
            self.slots = 1
        self._stamp = f"{os.getpid()}-{int(time.time() * 1000)}"

    def describe(self) -> str:
        return self.cluster.describe()

    def submit(self, task: dict):
        from grader.course.batch import grade_task

        key = f"grade-job-{task['job_id']}-{task['attempt']}-{self._stamp}"
        return self.cluster.client.submit(grade_task, task, pure=False, key=key)

    def renew(self, future) -> None:
        """Nothing: Dask replaces its own dead workers, and a task fails with its worker alone."""

    def close(self) -> None:
        self.cluster.close(cancel=True)


@dataclass
class Running:
    lease: Any  # grader.store.queue.Lease
    future: Any
    started: float
    lost: bool = False  # the heartbeat found the lease gone: the result will be dropped


class Dispatcher:
    """Leases jobs of `queue` and grades them on `executor`; see the module's docstring."""

    def __init__(
        self,
        queue,
        exercises: dict[str, Exercise],
        executor: Executor,
        *,
        poll_seconds: float = POLL_SECONDS,
        heartbeat_seconds: float = LEASE_SECONDS / 4,
        pause_seconds: float = LEASE_SECONDS,
        stuck: Callable[[Exercise], float] = stuck_after,
        prefetch: int = PREFETCH,
        on_record: Callable[[int], None] = lambda upload_id: None,
    ):
        self.queue = queue
        self.exercises = exercises
        self.executor = executor
        self.poll_seconds = poll_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.pause_seconds = pause_seconds
        self.stuck = stuck
        self.prefetch = max(0, prefetch)
        self.on_record = on_record  # an upload's outcome is recorded: wake the requests waiting for it
        self.running: dict[int, Running] = {}  # job id ->
        self.ready: deque = deque()  # leases held for the next free slot, not yet in the executor
        # running and ready are changed by this thread and by a finished future's callback (the
        # pool's own thread); re-entrant: a future done before its callback is added calls it here
        self._lock = threading.RLock()
        self.paused_until = 0.0  # monotonic: no leasing before this (a refusing jail)
        self._next_heartbeat = 0.0
        self._next_expire = 0.0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="grader-dispatcher", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """A new upload in this process: look at the queue now, not at the next poll."""
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.executor.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # before the step: a wake during it is not lost
            try:
                self.step()
            except Exception:  # e.g. the database briefly unreachable: try again
                log.exception("dispatcher: a step failed; trying again")
            self._wake.wait(self.poll_seconds)

    # -- one step

    def step(self) -> None:
        """Collect, heartbeat, expire, lease and submit: what the thread does every wake-up."""
        self.collect()
        self.watch()
        now = time.monotonic()
        if (self.running or self.ready) and now >= self._next_heartbeat:
            self.heartbeat()
        if now >= self._next_expire:  # a lease runs LEASE_SECONDS: looking 4 times as often is enough
            self.queue.expire()
            self._next_expire = now + self.heartbeat_seconds
        if now < self.paused_until:
            return
        with self._lock:  # a future's callback may be starting a held lease meanwhile
            wanted = self.executor.slots * (1 + self.prefetch) - len(self.running) - len(self.ready)
            free = self.executor.slots - self._busy() - len(self.ready)  # workers a lease starts on now
        for lease in self.queue.lease(wanted, start=max(0, free)) if wanted > 0 else []:
            if lease.exercise not in self.exercises:
                self.queue.fail(lease, f"this server does not serve the exercise {lease.exercise}")
                log.error("job %s: exercise %s is not served here; failed", lease.job_id, lease.exercise)
                continue
            with self._lock:
                if not self.running and not self.ready:  # a busy spell begins: renew a quarter lease from now
                    self._next_heartbeat = time.monotonic() + self.heartbeat_seconds
                self.ready.append(lease)
        self._fill()

    def _busy(self) -> int:
        return sum(not r.future.done() for r in self.running.values())

    def _start_next(self) -> bool:
        """Hand the oldest lease held here to the executor, if it has a free slot; whether one went.
        A lease the executor does not take is held still, and the error raised."""
        with self._lock:
            if not self.ready or self._busy() >= self.executor.slots:
                return False
            lease = self.ready.popleft()
            try:
                self.submit(lease)
            except BaseException:
                self.ready.appendleft(lease)
                raise
            return True

    def _fill(self) -> None:
        """Hand the leases held here to the executor while it has a free slot (an executor that
        fails to take one: the step fails, logged, and the lease is held for the next)."""
        with self._lock:
            while self._start_next():
                pass

    def _refill(self, future) -> None:
        """A future's callback (the pool's thread): a grading that came back frees its worker, which
        takes the next lease held here now; this thread records the grade when it wakes. A future
        that failed or was cancelled leaves its worker to collect(), which replaces a dead one."""
        self._wake.set()
        if future.cancelled() or future.exception() is not None:
            return
        result = future.result()
        if isinstance(result, dict) and result.get("status") == "refused":
            return  # the jail is broken: finish() pauses leasing, and the next job waits it out
        try:
            self._start_next()
        except Exception:  # noqa: BLE001 - the pool is going away: this thread's next step submits it
            pass

    def submit(self, lease) -> None:
        task = {
            "submission_id": lease.submission_id,
            "exercise": lease.exercise,
            "version": lease.version,
            "learner": lease.learner,
            "files": lease.files,
            "job_id": lease.job_id,
            "attempt": lease.attempt,
        }
        future = self.executor.submit(task)
        with self._lock:
            self.running[lease.job_id] = Running(lease, future, time.monotonic())
        future.add_done_callback(self._refill)

    def heartbeat(self) -> None:
        """Renew the leases still running; a lost one's result will be dropped when it comes."""
        with self._lock:
            held = [r.lease for r in self.running.values() if not r.lost] + list(self.ready)
        lost = set(self.queue.heartbeat(held)) if held else set()
        with self._lock:
            for lease in [lease for lease in self.ready if lease.job_id in lost]:
                self.ready.remove(lease)
                log.warning("job %s: lease lost before it started (another server has it now)", lease.job_id)
            for job_id in lost:
                r = self.running.get(job_id)
                if r is not None and not r.lost:
                    r.lost = True
                    r.future.cancel()
                    log.warning(
                        "job %s: lease lost (another server has it now); its result will be dropped", job_id
                    )
        self._next_heartbeat = time.monotonic() + self.heartbeat_seconds

    def watch(self) -> None:
        """Fail the gradings that are stuck (see stuck_after) and stop their workers, each replaced
        by a fresh one; the other workers' gradings go on."""
        now = time.monotonic()
        with self._lock:
            stuck = [
                r
                for r in self.running.values()
                if not r.lost and now - r.started > self.stuck(self.exercises[r.lease.exercise])
            ]
            for r in stuck:
                r.lost = True  # should a result come after all, it is dropped
        for r in stuck:
            r.future.cancel()  # Dask: done now; a local pool's running future ends with its pool
            took = now - r.started
            state = self.queue.fail(
                r.lease, f"the grading did not finish in {took:.0f} s; its worker was stopped"
            )
            log.error(
                "job %s (upload %s): stuck for %.0f s, its worker stopped; job %s",
                r.lease.job_id,
                r.lease.upload_id,
                took,
                state,
            )
            self.on_record(r.lease.upload_id)
            self.executor.renew(r.future)

    def collect(self) -> None:
        """Record every grading that finished; a worker that died is replaced, and only the job it
        was grading fails (its future is the only one its one-process pool held)."""
        with self._lock:
            done = [r for r in self.running.values() if r.future.done()]
            for r in done:
                del self.running[r.lease.job_id]
        for r in done:
            job_id = r.lease.job_id
            result: dict | BaseException
            try:
                result = r.future.result()
            except BrokenProcessPool as exc:
                result = exc
                self.executor.renew(r.future)  # before the record: the new worker warms meanwhile
                if not r.lost:
                    log.warning(
                        "job %s (upload %s): a worker process died grading it; a fresh one takes its "
                        "place, the job alone is charged the attempt",
                        job_id,
                        r.lease.upload_id,
                    )
            except (CancelledError, Exception) as exc:  # noqa: BLE001 - Dask: KilledWorker, a lost connection
                result = exc
            if r.lost:
                log.info("job %s: result of a lost lease dropped", job_id)
                continue
            try:
                self.finish(r, result)
            except Exception:  # not recorded: the lease runs out and the job is retried
                log.exception(
                    "job %s: could not record its outcome; it is retried when its lease expires", job_id
                )
            self.on_record(r.lease.upload_id)

    def finish(self, r: Running, result: dict | BaseException) -> None:
        from grader.course.batch import _outcome

        lease = r.lease
        exercise = self.exercises[lease.exercise]
        outcome = _outcome(exercise, lease.learner, result)
        took = time.monotonic() - r.started
        where = f"job {lease.job_id} (upload {lease.upload_id}, {lease.learner}, {lease.exercise})"
        if outcome.status in ("graded", "unreadable"):
            run = self.queue.complete(lease, outcome)
            if run is None:
                log.warning("%s: lease lost before its grade came back; the late grade is dropped", where)
                return
            if outcome.status == "unreadable":  # the learner's file did not parse: no token spent
                self.queue.refund(lease.upload_id)
            g = outcome.grade
            log.info(
                "%s: %s %g/%g%s in %.1f s on %s",
                where,
                outcome.status,
                g.score,
                g.max_score,
                " passed" if g.passed else "",
                took,
                outcome.worker or self.executor.describe(),
            )
            return
        error = outcome.grade.error
        message = str(error.message) if error is not None else outcome.status
        state = self.queue.fail(lease, message)
        if outcome.status == "refused":
            self.paused_until = time.monotonic() + self.pause_seconds
            log.error(
                "%s: THE JAIL REFUSED TO GRADE (it failed its self-check): %s; job %s, "
                "no leasing for %.0f s. Run `grader doctor` on this machine.",
                where,
                message[:500],
                state,
                self.pause_seconds,
            )
        else:
            log.warning(
                "%s: the grader failed (attempt %s): %s; job %s", where, lease.attempt, message[:500], state
            )
