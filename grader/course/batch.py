"""Grade a whole class into the gradebook: `grader batch` and `grader regrade`.

One process, this one, owns the gradebook: it reads SOURCE (grader/intake/sources.py), records every
learner and submission (source kept), works out what is new or changed (submission hash x
exercise version), hands those out, and commits each grade the moment it comes back. The grading
happens elsewhere: in a local pool of spawned worker processes (the default; pytest is not
thread-safe, so never threads), or on an existing Dask distributed cluster (`--scheduler`). A
worker receives plain data (the learner's files) and returns plain data (the Grade as a dict).

Because each grade is committed as it arrives and (submission, exercise version) is graded at most
once unless forced, a batch killed at any point (kill -9 included) is completed by running the same
command again: nothing is lost and nothing is graded twice.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from grader import __version__
from grader.catalog.exercises import exercise_dir, load_exercise
from grader.course.learners import failed, output_names
from grader.errors import BatchError, ExerciseFileError, UsageError
from grader.limits import GRADER_ATTEMPTS
from grader.locale import Message, message_of, msg
from grader.models import Exercise, Grade
from grader.policy import clock

if TYPE_CHECKING:
    from grader.policy.course import CoursePolicy

# -- exercise versions ------------------------------------------------------------------------

VERSIONED = ("exercise.toml", "key.toml", "hidden", "solution")


def exercise_version(exercise_id: str) -> str:
    """A content hash of what decides a grade: exercise.toml (points, limits), the answer key,
    the hidden tests and the solution. Any change there is a new version, and a regrade."""
    root = exercise_dir(exercise_id)
    h = hashlib.sha256()
    for top in VERSIONED:
        base = root / top
        paths = (
            [base]
            if base.is_file()
            else sorted(p for p in base.rglob("*") if p.is_file())
            if base.is_dir()
            else []
        )
        for p in paths:
            rel = p.relative_to(root).as_posix()
            if "__pycache__" in p.parts or p.suffix in (".pyc", ".pyo"):
                continue
            h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# -- the worker side: plain data in, plain data out ----------------------------------------------

_grading = threading.Lock()  # a Dask worker may run tasks in threads; grading must not


def _now() -> datetime:
    return datetime.now(UTC)


def grade_task(task: dict) -> dict:
    """Grade one submission (a worker process: local pool or Dask). Never raises for a learner's
    sake: a quiz whose sheet is not TOML is `unreadable` (a 0 naming file, line and column); a
    code exercise's malformed TOML fails only the checks that read it; only the grader's own
    failures are `error`."""
    with _grading:
        started = _now()
        exercise_id, learner = task["exercise"], task["learner"]
        out = {
            "submission_id": task["submission_id"],
            "worker": f"{socket.gethostname()}:{os.getpid()}",
            "started_at": started.isoformat(),
        }
        try:
            from grader.grading.grade import grade
            from grader.intake.sources import helper_name
            from grader.jail.client import CpuShare
            from grader.jail.doctor import JailUnsound

            if threading.current_thread() is not threading.main_thread():
                CpuShare.enabled = False  # a Dask worker's thread: other workers share the CPUs
            from grader.intake.submission import UsageError

            exercise = load_exercise(exercise_id)
            here = exercise_version(exercise_id)
            if here != task["version"]:
                raise RuntimeError(
                    f"this worker has exercise {exercise_id} version {here[:12]}, the batch "
                    f"grades version {task['version'][:12]}: install the same grader and "
                    "exercises on every worker"
                )
            with tempfile.TemporaryDirectory(prefix="grader-batch-") as tmp:
                folder = Path(tmp) / "submission"
                folder.mkdir()
                for name, data in task["files"].items():
                    # only the exercise's own file names and helper modules (a plain name each)
                    if (
                        "/" in name
                        or name.startswith(".")
                        or not (name in exercise.files or helper_name(name, exercise))
                    ):
                        continue
                    (folder / name).write_bytes(data)
                try:
                    result, status = grade(exercise, folder, student=learner), "graded"
                except JailUnsound as exc:
                    out.update(status="refused", message=str(exc))
                    return out
                except ExerciseFileError:  # the course's file, not the learner's: an error
                    raise
                except UsageError as exc:  # e.g. malformed TOML: the learner's, recorded
                    result, status = (
                        failed(exercise, "invalid-submission", message_of(exc), learner),
                        "unreadable",
                    )
            out.update(status=status, grade=result.model_dump())
        except Exception as exc:  # noqa: BLE001 - the grader's own failure: kept, retried next run
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            out.update(status="error", message=msg("internal grader error: {detail}", detail=tb))
        out["finished_at"] = _now().isoformat()
        return out


def _init_local_worker(threads: int, warm: str = "full", share_cpu: bool = False) -> None:
    """A local pool worker: die with the batch (kill -9 included), start the jail's zygote early.
    share_cpu: a lone worker runs each jail on its own CPU (CpuShare); several would stack up."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(1)
    except Exception:  # noqa: BLE001 - no prctl (not Linux): the worker just lives on
        pass
    try:
        from grader.jail.client import CpuShare
        from grader.jail.launcher import prestart

        CpuShare.enabled = share_cpu
        prestart(warm=warm)  # the zygote imports torch while this process does
    except Exception:  # noqa: BLE001 - a warm-up only: the first grade starts the jail itself
        pass
    try:
        import torch

        torch.set_num_threads(max(1, threads))
    except Exception:  # noqa: BLE001 - a speed setting only
        pass


# -- executors ---------------------------------------------------------------------------------


def local_pool(
    workers: int, warm: str = "full", sharing: int | None = None
) -> concurrent.futures.ProcessPoolExecutor:
    """`workers` spawned grading processes (grade_task), sharing this machine's CPUs with
    `sharing` grading processes in all (default: these): the pool of `grader batch`, and each
    of the one-process pools a grading server keeps warm for its whole life."""
    from multiprocessing import get_context

    processes = max(workers, sharing or workers)
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=get_context("spawn"),
        initializer=_init_local_worker,
        initargs=(max(1, (os.cpu_count() or 1) // processes), warm, processes == 1),
    )


class LocalPool:
    """Spawned worker processes on this machine (pytest is not thread-safe: never threads)."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self.pool: concurrent.futures.ProcessPoolExecutor | None = None

    def describe(self) -> str:
        return f"local pool of {self.workers} worker process{'es' if self.workers > 1 else ''}"

    def run(self, tasks: list[dict]) -> Iterator[tuple[dict, dict | BaseException]]:
        from concurrent.futures import as_completed

        n = min(self.workers, len(tasks))
        # a zygote that serves many submissions is worth its fuller warm-up (see launcher.Zygote)
        self.pool = pool = local_pool(n, warm="full" if len(tasks) >= 16 * n else "basic")
        futures = {pool.submit(grade_task, t): t for t in tasks}
        for fut in as_completed(futures):
            try:
                yield futures[fut], fut.result()
            except BaseException as exc:  # noqa: BLE001 - BrokenProcessPool: a worker died
                yield futures[fut], exc

    def close(self, cancel: bool = False) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=not cancel, cancel_futures=cancel)
            self.pool = None


class DaskCluster:
    """An existing Dask distributed cluster; results flow back here, the only gradebook writer."""

    def __init__(self, address: str, timeout: float = 30):
        try:
            from distributed import Client
        except ImportError:
            raise BatchError("--scheduler needs Dask distributed: pip install 'distributed'") from None
        try:
            self.client = Client(address, timeout=timeout, set_as_default=False)
        except Exception as exc:  # noqa: BLE001 - whatever Dask raises, the address is the cause
            raise BatchError(f"--scheduler: cannot reach the Dask scheduler at {address}: {exc}") from None
        self.address = address

    def describe(self) -> str:
        try:
            workers = self.client.scheduler_info().get("workers", {})
            threads = sum(w.get("nthreads", 1) for w in workers.values())
            return f"Dask cluster at {self.address} ({len(workers)} workers, {threads} threads)"
        except Exception:  # noqa: BLE001 - a description only
            return f"Dask cluster at {self.address}"

    def run(self, tasks: list[dict]) -> Iterator[tuple[dict, dict | BaseException]]:
        from distributed import as_completed

        stamp = f"{os.getpid()}-{int(time.time() * 1000)}"
        futures = {}
        for t in tasks:
            fut = self.client.submit(grade_task, t, pure=False, key=f"grade-{t['submission_id']}-{stamp}")
            futures[fut] = t
        self._futures = list(futures)
        for fut in as_completed(list(futures), loop=self.client.loop):
            try:
                yield futures[fut], fut.result()
            except BaseException as exc:  # noqa: BLE001 - KilledWorker, CancelledError, a lost connection
                yield futures[fut], exc

    def close(self, cancel: bool = False) -> None:
        try:
            if cancel and getattr(self, "_futures", None):
                self.client.cancel(self._futures)
            self.client.close()
        except Exception:  # noqa: BLE001 - closing a cluster connection that may be gone
            pass


# -- the one writer ------------------------------------------------------------------------------


@dataclass
class Tally:
    learners: int = 0
    submissions: int = 0
    skipped: int = 0  # already graded for this exercise version
    graded: int = 0  # final grades recorded now
    passed: int = 0
    unreadable: int = 0
    errors: int = 0  # the grader failed: recorded as such, retried next run
    given_up: int = 0  # of those graded: the grader failed GRADER_ATTEMPTS times, now a crash
    duplicates: int = 0  # another writer recorded it first
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0  # from the first task handed out to the last grade recorded
    first_s: float | None = None  # until the first grade came back (worker start-up included)
    executor: str = ""
    aborted: str | None = None
    error_messages: list[str] = field(default_factory=list)
    given_up_messages: list[str] = field(default_factory=list)
    # SOURCE as read: every entry skipped (sources.Skipped.as_dict), and each learner whose
    # files could not be read as found ({"learner", "reason"}: an invalid-submission grade)
    skipped_entries: list[dict] = field(default_factory=list)
    unreadable_found: list[dict] = field(default_factory=list)
    no_submission: list[str] = field(default_factory=list)  # learners who handed in no file at all
    warnings: list[str] = field(default_factory=list)  # about SOURCE as a whole (wrong exercise?)

    @property
    def skipped_learners(self) -> int:
        """Skipped entries that look like a learner's (a folder, archive or exercise file)."""
        return sum(e["learner_like"] for e in self.skipped_entries)

    @property
    def throughput(self) -> float:
        return self.graded / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["throughput_per_s"] = round(self.throughput, 4)
        d["skipped_learners"] = self.skipped_learners
        return d


def _outcome(exercise: Exercise, learner: str, result: dict | BaseException):
    from grader.store import Outcome

    if isinstance(result, BaseException):
        message = msg(
            "internal grader error: {detail}",
            detail=msg("the worker failed: {error}", error=f"{type(result).__name__}: {result}"),
        )
        return Outcome(status="error", grade=failed(exercise, "crash", message, learner), worker="")
    started = datetime.fromisoformat(result["started_at"]) if result.get("started_at") else None
    finished = datetime.fromisoformat(result["finished_at"]) if result.get("finished_at") else None
    if result["status"] in ("error", "refused"):
        return Outcome(
            status=result["status"],
            grade=failed(exercise, "crash", result.get("message", ""), learner),
            worker=result.get("worker", ""),
            started_at=started,
            finished_at=finished,
        )
    grade = Grade.model_validate(result["grade"])
    return Outcome(
        status=result["status"],
        grade=grade,
        worker=result.get("worker", ""),
        started_at=started,
        finished_at=finished,
    )


def given_up(exercise: Exercise, outcome, failures: int):
    """The outcome of the last grading the grader may fail (limits.GRADER_ATTEMPTS): a final
    `crash` grade naming the cause, so the next run counts it as graded and the batch ends."""
    from grader.store import Outcome

    error = outcome.grade.error
    cause = (
        Message.from_data({"id": error.message_id, "params": error.message_params})
        if error is not None and error.message_id
        else (error.message if error is not None else "")
    )
    message = msg(
        "the grader itself failed on this submission {count} times, so it is recorded as a crash "
        "and not retried (an instructor can grade it again with --force); the last failure: {cause}",
        count=failures,
        cause=cause,
    )
    return Outcome(
        status="given-up",
        grade=failed(exercise, "crash", message, outcome.grade.student),
        worker=outcome.worker,
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
    )


def grade_into(
    gradebook,
    exercise: Exercise,
    version: str,
    version_id: int,
    submissions,
    executor,
    tally: Tally,
    *,
    batch_id: int,
    force: bool,
    progress: bool | None,
    problems: dict | None = None,
) -> None:
    """Grade these stored submissions and record each grade as it arrives. problems: submission
    id -> the Message of its problem (the gradebook keeps the problem as English text)."""
    problems = problems or {}
    from tqdm import tqdm

    from grader.store import Outcome

    todo = [s for s in submissions if s.problem is None]
    bar = tqdm(
        total=len(submissions),
        unit="grade",
        desc=exercise.id,
        file=sys.stderr,
        disable=(not sys.stderr.isatty()) if progress is None else not progress,
        dynamic_ncols=True,
        smoothing=0.1,
    )

    def count(outcome: Outcome) -> None:
        if outcome.status == "error":
            tally.errors += 1
            if len(tally.error_messages) < 5:
                tally.error_messages.append(outcome.grade.error.message if outcome.grade.error else "")
        else:
            tally.graded += 1
            tally.unreadable += outcome.status == "unreadable"
            if outcome.status == "given-up":
                tally.given_up += 1
                if len(tally.given_up_messages) < 5:
                    tally.given_up_messages.append(outcome.grade.error.message if outcome.grade.error else "")
            tally.passed += outcome.grade.passed
            tally.score += outcome.grade.score
            tally.max_score += outcome.grade.max_score
        if tally.first_s is None and outcome.worker != "batch":
            tally.first_s = time.monotonic() - started
            bar.set_description_str(exercise.id, refresh=False)  # the workers are up
        bar.set_postfix(
            passed=tally.passed, failed=tally.graded - tally.passed, errors=tally.errors, refresh=False
        )
        bar.update(1)

    def record(submission_id: int, outcome: Outcome) -> None:
        if outcome.status == "error":
            failures = gradebook.grader_failures(submission_id, version_id) + 1
            if failures >= GRADER_ATTEMPTS:
                outcome = given_up(exercise, outcome, failures)
        run = gradebook.record(submission_id, version_id, outcome, batch_id=batch_id, force=force)
        if run is None and outcome.status != "error":
            tally.duplicates += 1
        count(outcome)

    started = time.monotonic()
    try:
        for s in submissions:  # unreadable as found: no worker needed
            if s.problem is not None:
                record(
                    s.id,
                    Outcome(
                        status="graded",
                        worker="batch",
                        grade=failed(
                            exercise, "invalid-submission", problems.get(s.id) or s.problem, s.learner
                        ),
                    ),
                )
        if todo:
            tasks = [
                {
                    "submission_id": s.id,
                    "exercise": exercise.id,
                    "version": version,
                    "learner": s.learner,
                    "files": s.files,
                }
                for s in todo
            ]
            by_id = {s.id: s for s in todo}
            # the first grade comes back only once the workers are up (seconds, for a local pool
            # warming torch): the bar says so meanwhile, not a silent 0/N
            bar.set_description_str(f"{exercise.id}: starting workers ({executor.describe()})", refresh=True)
            try:
                for task, result in executor.run(tasks):
                    sub = by_id[task["submission_id"]]
                    outcome = _outcome(exercise, sub.learner, result)
                    if outcome.status == "refused":
                        tally.aborted = outcome.grade.error.message if outcome.grade.error else "jail refused"
                        executor.close(cancel=True)
                        break
                    record(sub.id, outcome)
            except KeyboardInterrupt:
                tally.aborted = "interrupted"
                executor.close(cancel=True)
                raise
    finally:
        tally.seconds = time.monotonic() - started
        bar.close()
        executor.close()


def _open(db: str, *, create: bool = True):
    from grader.store import Gradebook, StoreError

    try:
        return Gradebook(db, create=create)
    except StoreError as exc:
        raise BatchError(str(exc)) from None


def _executor(workers: int, scheduler: str | None):
    return DaskCluster(scheduler) if scheduler else LocalPool(workers)


def grade_recorded(
    gradebook,
    exercise: Exercise,
    version: str,
    version_id: int,
    ids: list,
    pending: list,
    tally: Tally,
    *,
    kind: str,
    workers: int,
    scheduler: str | None,
    force: bool,
    progress: bool | None,
    source: str = "",
    problems: dict | None = None,
) -> None:
    """Grade `pending` as one recorded batch run: started, then finished or aborted, whatever happens."""
    executor = _executor(workers, scheduler) if pending else None
    tally.executor = executor.describe() if executor else "none needed"
    batch_id = gradebook.start_batch(
        version_id,
        kind=kind,
        source=source,
        executor=tally.executor,
        forced=force,
        grader_version=__version__,
        submissions=len(ids),
    )
    status = "aborted"
    try:
        if pending:
            grade_into(
                gradebook,
                exercise,
                version,
                version_id,
                gradebook.submissions(exercise.id, pending),
                executor,
                tally,
                batch_id=batch_id,
                force=force,
                progress=progress,
                problems=problems,
            )
        status = "aborted" if tally.aborted else "finished"
    finally:
        gradebook.finish_batch(
            batch_id, status=status, graded=tally.graded, skipped=tally.skipped, errors=tally.errors
        )
        from grader.store.gradebook import os_user

        gradebook.audit(
            os_user(),
            kind,
            None,
            exercise.id,
            {
                "batch": batch_id,
                "status": status,
                "version": version[:12],
                "source": source,
                "forced": force,
                "submissions": len(ids),
                "graded": tally.graded,
                "skipped": tally.skipped,
                "errors": tally.errors,
            },
        )


def run_batch(
    exercise_id: str,
    source: Path,
    db: str,
    *,
    workers: int = 2,
    scheduler: str | None = None,
    out: Path | None = None,
    force: bool = False,
    lang: str = "en",
    progress: bool | None = None,
    echo: Callable[[str], None] = print,
    policy: CoursePolicy | None = None,
    roster=None,
    missing: str = "blank",
) -> Tally:
    """`grader batch`: read SOURCE, record it, grade what is new or changed, write the outputs
    (the grades that count by `policy`, adjusted: Gradebook.current_grades; with `roster`, its
    learners without a submission too, scored by `missing`: grader.course.publish)."""
    from grader.store import redact

    exercise = load_exercise(exercise_id)
    version = exercise_version(exercise.id)
    found, tally = read_class(exercise, source, force=force)
    gradebook = _open(db)
    try:
        version_id = gradebook.exercise_version(exercise.id, version, exercise.points, exercise.title.en)
        ids = gradebook.add_submissions(exercise.id, found.incoming)
        done = set() if force else gradebook.graded(version_id, ids)
        pending = [i for i in dict.fromkeys(ids) if i not in done]
        tally.skipped = len(set(ids)) - len(pending)
        echo(
            f"{exercise.id} (version {version[:12]}): {len(found.incoming)} submissions in {source} "
            f"({found.layout} layout); {len(pending)} to grade, {tally.skipped} unchanged since "
            f"graded{' (--force: regrading all)' if force else ''}; gradebook {redact(gradebook.url)}"
        )
        _echo_notes(found, tally, echo, forced=force)
        problems = {
            i: inc.problem
            for i, inc in zip(ids, found.incoming, strict=True)
            if isinstance(inc.problem, Message)
        }
        grade_recorded(
            gradebook,
            exercise,
            version,
            version_id,
            ids,
            pending,
            tally,
            kind="batch",
            source=str(source),
            workers=workers,
            scheduler=scheduler,
            force=force,
            progress=progress,
            problems=problems,
        )
        echo(summary(exercise, tally, final_numbers(gradebook, exercise, policy, roster, missing)))
        if tally.aborted:
            raise BatchError(f"the batch stopped: {tally.aborted}")
        if out is not None:
            for line in write_outputs(
                Path(out), gradebook, exercise, tally, lang, policy=policy, roster=roster, missing=missing
            ):
                echo(line)
        return tally
    finally:
        gradebook.close()


def read_class(exercise: Exercise, source: Path, *, force: bool = False, refuse: bool = True):
    """SOURCE read (grader.intake.sources.read_source) and its Tally before grading: the learners, the
    skipped entries, the learners unreadable as found or with no file at all, and the verdict
    that SOURCE is no class (sources.not_a_class) or another exercise's (sources.wrong_exercise).
    That verdict is a BatchError (before the gradebook is opened or anything written) unless
    `force` (then a warning) or not `refuse` (dry_run, which shows the class first: refusal).
    BatchError when SOURCE is unusable."""
    from grader.intake.incoming import NO_FILES_SUBMITTED
    from grader.intake.sources import SourceError, read_source

    try:
        found = read_source(source, exercise)
    except SourceError as exc:
        raise BatchError(str(exc)) from None
    warning = class_verdict(found, exercise)
    if warning is not None and refuse and not force:
        raise BatchError(refusal(warning))
    empty = {id(i) for i in found.incoming if getattr(i.problem, "msgid", None) == NO_FILES_SUBMITTED}
    tally = Tally(
        learners=len({i.learner for i in found.incoming}),
        submissions=len(found.incoming),
        skipped_entries=[n.as_dict() for n in found.notes],
        unreadable_found=[
            {"learner": i.learner, "reason": str.__str__(i.problem)}
            for i in found.incoming
            if i.problem and id(i) not in empty
        ],
        no_submission=[i.learner for i in found.incoming if id(i) in empty],
        warnings=[str.__str__(warning)] if warning else [],
    )
    return found, tally


def class_verdict(found, exercise: Exercise):
    """sources.class_verdict, against every exercise known (the one the files belong to is named)."""
    from grader.catalog.exercises import all_exercises
    from grader.intake import sources

    try:
        others = all_exercises()
    except ExerciseFileError:  # another exercise's broken file: no better match is named
        others = []
    return sources.class_verdict(found, exercise, others)


def refusal(warning) -> str:
    """The error a batch stops with on class_verdict's warning: nothing graded or written."""
    return f"{warning}; nothing was graded or written (pass --force to grade it all the same)"


def _echo_notes(found, tally: Tally, echo: Callable[[str], None], forced: bool = False) -> None:
    """The skipped entries (a missing learner first, 20 at most) and the warnings about SOURCE."""
    notes = sorted(found.notes, key=lambda n: not n.learner_like)
    for note in notes[:20]:
        echo(f"  note: skipped {note.entry}: {note.reason}")
    if len(notes) > 20:
        echo(f"  note: ... and {len(notes) - 20} more skipped entries (all in batch.json under --out)")
    for warning in tally.warnings:
        echo(f"WARNING: {warning}" + ("; graded all the same (--force)" if forced else ""))


def dry_run(
    exercise_id: str,
    source: Path,
    *,
    echo: Callable[[str], None] = print,
    zone: tzinfo | None = None,
    force: bool = False,
) -> Tally:
    """`grader batch --dry-run`: what a batch would grade, printed, and nothing graded: the
    layout, each learner with their files (name, size; where found when elsewhere) and
    problems, the skipped entries and the warnings. The gradebook is neither opened nor
    created. The Tally (as read_class makes it) lets the command exit as a batch would. Times
    are shown in `zone` (the course's)."""
    exercise = load_exercise(exercise_id)
    found, tally = read_class(exercise, source, force=force, refuse=False)
    echo(
        f"{exercise.id}: {tally.learners} learners in {source} ({found.layout} layout); "
        "dry run: nothing graded, no gradebook opened"
    )
    for inc in found.incoming:
        when = f"submitted {clock.shown(inc.submitted_at, zone)}" if inc.submitted_at else ""
        about = [inc.name or "", "late" if inc.late else "", when]
        echo(f"  {inc.learner}" + "".join(f"  {a}" for a in about if a))
        for name, data in sorted(inc.files.items()):
            where = inc.found.get(name)
            shown_where = f"  (from {where})" if where and where != name else ""
            echo(f"    {name}  {len(data):,} bytes{shown_where}")
        if inc.problem:
            echo(f"    problem: {inc.problem}")
        for warning in inc.warnings:
            echo(f"    warning: {warning}")
    _echo_notes(found, tally, echo)
    echo(
        f"dry run: {tally.learners} learners, {len(tally.unreadable_found)} unreadable as found, "
        f"{len(tally.no_submission)} with no file, {len(tally.skipped_entries)} entries skipped "
        f"({tally.skipped_learners} of them a folder, archive or exercise file)"
    )
    warning = class_verdict(found, exercise)
    if warning is not None and not force:  # the verdict a batch would stop with
        raise BatchError(refusal(warning))
    return tally


@dataclass(frozen=True)
class Final:
    """The class's final scores, as class.html, grades.csv and the LMS imports have them."""

    scores: list[float]  # per learner counted: after late penalties and overrides
    adjusted: int  # of them, how many a late penalty or an override changed
    blank: int  # roster learners without a submission, in no number (--missing blank)
    zero: int  # of `scores`, roster learners without a submission counted as 0 (--missing zero)


def final_numbers(gradebook, exercise: Exercise, policy, roster=None, missing: str = "blank") -> Final:
    """The final scores of `exercise` (grader.course.publish's: the same grades and roster)."""
    from grader.course.publish import absent_learners

    current = gradebook.current_grades(exercise.id, policy=policy)
    absent = absent_learners(gradebook, roster or [], current)
    zero = len(absent) if missing == "zero" else 0
    return Final(
        scores=[c.grade.score for c in current] + [0.0] * zero,
        adjusted=sum(bool(c.grade.adjustments) for c in current),
        blank=len(absent) - zero,
        zero=zero,
    )


def summary(exercise: Exercise, tally: Tally, final: Final | None = None) -> str:
    failed_n = tally.graded - tally.passed
    lines = [
        f"summary: {tally.graded} graded now ({tally.passed} passed, {failed_n} not passed"
        f"{f', of which {tally.unreadable} unreadable' if tally.unreadable else ''}), "
        f"{tally.skipped} unchanged, {tally.errors} grader errors"
        f"{f', {tally.given_up} given up after {GRADER_ATTEMPTS} grader errors' if tally.given_up else ''}"
    ]
    if final is not None and final.scores:
        lines.append(
            f"  mean score: {sum(final.scores) / len(final.scores):.2f} / {exercise.points:g} over "
            f"{len(final.scores)} learners, after late penalties and overrides ({final.adjusted} "
            "adjusted), as class.html, grades.csv and the LMS imports show it"
            + (f"; {final.zero} on the roster without a submission count 0" if final.zero else "")
            + (
                f"; {final.blank} on the roster without a submission not counted (--missing blank)"
                if final.blank
                else ""
            )
        )
    if tally.graded:
        lines.append(
            f"  throughput: {tally.graded} grades in {tally.seconds:.1f} s = {tally.throughput:.2f} "
            f"grades/s ({tally.seconds / tally.graded:.2f} s each) on {tally.executor}"
            + (f"; the first came back after {tally.first_s:.1f} s" if tally.first_s is not None else "")
        )
    if tally.duplicates:
        lines.append(f"  {tally.duplicates} were already recorded by another writer (kept once)")
    if tally.errors:
        lines.append(
            f"  {tally.errors} could not be graded because the grader failed; they are kept as "
            f"errors and retried by the next run of this command ({GRADER_ATTEMPTS} gradings in all, "
            "then recorded as a crash):"
        )
        lines += [f"    {m[:300]}" for m in tally.error_messages]
    if tally.given_up:
        lines.append(
            f"  {tally.given_up} given up on: the grader failed on each {GRADER_ATTEMPTS} times; "
            "recorded as crash grades that name the cause, not retried (--force grades them again):"
        )
        lines += [f"    {m[:300]}" for m in tally.given_up_messages]
    if tally.unreadable_found:
        lines.append(
            f"  {len(tally.unreadable_found)} could not be read as found (graded 0, invalid-submission):"
        )
        lines += [f"    {u['learner']}: {u['reason'][:300]}" for u in tally.unreadable_found[:20]]
        if len(tally.unreadable_found) > 20:
            lines.append(f"    ... and {len(tally.unreadable_found) - 20} more")
    if tally.no_submission:
        lines.append(
            f"  {len(tally.no_submission)} submitted no file (graded 0, no submission): "
            + ", ".join(tally.no_submission[:20])
            + (f" and {len(tally.no_submission) - 20} more" if len(tally.no_submission) > 20 else "")
        )
    lines += [f"  WARNING: {w}" for w in tally.warnings]
    if tally.skipped_entries:
        lines.append(
            f"  {len(tally.skipped_entries)} entries of SOURCE skipped, {tally.skipped_learners} of them "
            "a folder, archive or exercise file (listed above, and in batch.json under --out)"
        )
    return "\n".join(lines)


# -- outputs under --out -----------------------------------------------------------------------


def write_outputs(
    out: Path,
    gradebook,
    exercise: Exercise,
    tally: Tally | None,
    lang: str,
    *,
    policy=None,
    roster=None,
    missing: str = "blank",
) -> list[str]:
    """One JSON grade per learner and a summary (batch.json), then the class report and CSV, the
    published feedback and the LMS import files (grader.course.publish: with `roster`, its learners
    without a submission too, scored by `missing`): the grades that count by `policy`, adjusted,
    removed learners and submissions left out."""
    from grader.course.publish import publish
    from reports import render

    out.mkdir(parents=True, exist_ok=True)
    current = gradebook.current_grades(exercise.id, policy=policy)
    folder = out / "grades"
    folder.mkdir(exist_ok=True)
    names = output_names(c.learner for c in current)
    for c in current:  # what `grader grade --format json` prints, from the stored grade
        (folder / f"{names[c.learner]}.json").write_text(render(c.grade, "json"), encoding="utf-8")
    lines = [f"wrote {len(current)} learner grades to {folder}/"]
    if tally is not None:
        (out / "batch.json").write_text(
            json.dumps({"exercise": exercise.id, **tally.as_dict()}, indent=2), encoding="utf-8"
        )
    try:
        lines += publish(out, gradebook, exercise, lang, policy, roster=roster, missing=missing)
    except UsageError as exc:  # --out cannot be written: the grades are recorded all the same
        raise BatchError(str(exc)) from None
    return lines


# -- regrade -------------------------------------------------------------------------------------


@dataclass
class Change:
    learner: str
    name: str | None
    submission_id: int
    current: bool
    old_score: float
    new_score: float
    old_passed: bool
    new_passed: bool
    max_score: float


def recorded_problems(stored, runs: dict) -> dict:
    """submission id -> the Message its problem was recorded with (in its last grade), for a
    regrade, which has only the gradebook's English text of the problem."""
    found = {}
    for s in stored:
        grade = runs[s.id][-1][1].grade if s.problem and runs.get(s.id) else None
        error = (grade or {}).get("error") or {}
        if error.get("message_id") and error.get("message") == s.problem:
            found[s.id] = Message.from_data(
                {"id": error["message_id"], "params": error.get("message_params") or {}}
            )
    return found


def regrade(
    exercise_id: str,
    db: str,
    *,
    workers: int = 2,
    scheduler: str | None = None,
    force: bool = False,
    progress: bool | None = None,
    echo: Callable[[str], None] = print,
    policy: CoursePolicy | None = None,
    every: bool = False,
) -> tuple[Tally, list[Change]]:
    """`grader regrade`: the submissions that count (by `policy`, see Gradebook.current_grades) of
    learners not removed, or with `every` every stored submission, against the current exercise
    version; what changed. A gradebook that does not exist is a BatchError: there is nothing to
    regrade, and none is made."""
    exercise = load_exercise(exercise_id)
    version = exercise_version(exercise.id)
    gradebook = _open(db, create=False)
    try:
        version_id = gradebook.exercise_version(exercise.id, version, exercise.points, exercise.title.en)
        stored = gradebook.submissions(exercise.id, with_files=False, policy=policy)
        if not stored:
            raise BatchError(f"the gradebook holds no submissions of {exercise.id}")
        if not every:
            left = len(stored)
            stored = [s for s in stored if s.current and not s.removed]
            left -= len(stored)
            if left:
                echo(
                    f"{exercise.id}: {left} older or removed submission{'s' if left != 1 else ''} left as "
                    "graded (--all regrades them too)"
                )
        ids = [s.id for s in stored]
        if not ids:
            raise BatchError(f"no current submission of {exercise.id} to regrade (--all regrades every one)")
        before = gradebook.latest_runs(ids)
        done = set() if force else gradebook.graded(version_id, ids)
        pending = [i for i in ids if i not in done]
        tally = Tally(
            learners=len({s.learner for s in stored}), submissions=len(ids), skipped=len(ids) - len(pending)
        )
        old_versions = sorted({v for runs in before.values() for v, _ in runs} - {version})
        echo(
            f"{exercise.id}: regrading {len(pending)} of {len(ids)} {'stored' if every else 'current'} "
            "submissions against version "
            f"{version[:12]}" + (f" (was {', '.join(v[:12] for v in old_versions)})" if old_versions else "")
        )
        grade_recorded(
            gradebook,
            exercise,
            version,
            version_id,
            ids,
            pending,
            tally,
            kind="regrade",
            workers=workers,
            scheduler=scheduler,
            force=force,
            progress=progress,
            problems=recorded_problems(stored, before),
        )
        if tally.aborted:
            raise BatchError(f"the regrade stopped: {tally.aborted}")
        after = gradebook.latest_runs(ids)
        changes = []
        for s in stored:
            old = before[s.id][-1][1] if before[s.id] else None
            new = after[s.id][-1][1] if after[s.id] else None
            if old is None or new is None or new.id == old.id:
                continue
            if old.score != new.score or old.passed != new.passed:
                changes.append(
                    Change(
                        learner=s.learner,
                        name=s.name,
                        submission_id=s.id,
                        current=s.current,
                        old_score=old.score,
                        new_score=new.score,
                        old_passed=old.passed,
                        new_passed=new.passed,
                        max_score=new.max_score,
                    )
                )
        echo(summary(exercise, tally, final_numbers(gradebook, exercise, policy)))
        return tally, changes
    finally:
        gradebook.close()
