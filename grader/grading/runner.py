"""Runs an exercise's hidden tests (ordinary pytest files) against a submission, in-process.

The hidden tests live with the grader and run here, in the trusted process; only the `submission`
fixture reaches into the jail. Each test marked with `check(...)` becomes one CheckResult; a
failed one whose `needs` failed too names them as its root causes (`root_causes`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from grader.errors import ExerciseFileError
from grader.grading.failures import CheckFailure, take_attachments
from grader.jail.client import JailError, JailTimeout, LearnerError
from grader.limits import PYTEST_SESSIONS
from grader.locale import message_of, msg
from grader.models import CheckResult, Diagnosis

INI = Path(__file__).with_name("hidden-pytest.ini")
UNUSED_PLUGINS = (
    "doctest",
    "junitxml",
    "pastebin",
    "stepwise",
    "setuponly",
    "setupplan",
    "unraisableexception",
    "threadexception",
    "faulthandler",
    "debugging",
)


class _CheckCollector:
    """A pytest plugin: provides the `submission` fixture and turns reports into CheckResults."""

    def __init__(self, submission, before_checks=None, exercise=None):
        self._submission = submission
        self._exercise = exercise  # models.Exercise: its markers are checked against it
        self.exercise_errors: list[str] = []
        self._collect_only = False
        self._before_checks = before_checks
        self.problem: tuple[str, str] | None = None
        self.results: list[CheckResult] = []
        self.diagnoses: list[Diagnosis] = []
        self.unmarked: list[str] = []
        self.collect_errors: list[str] = []
        self.needs: dict[str, tuple[str, ...]] = {}  # check id -> the check ids it builds on
        self.needs_errors: list[str] = []

    @pytest.fixture
    def submission(self):
        return self._submission

    def pytest_collection_finish(self, session):
        for item in session.items:
            # a CheckResult is made from the exception itself (`_result`); pytest's own report
            # text, never read here, parses the hidden test file for each frame of a failure's
            # traceback (0.15 s a failed check)
            item.repr_failure = item._repr_failure_py = _exception_line
        marked = [(item, m) for item in session.items if (m := item.get_closest_marker("check"))]
        self.needs = {check_id(item): tuple(m.kwargs.get("needs", ())) for item, m in marked}
        where = {check_id(item): item.nodeid for item, _ in marked}
        self.needs_errors = needs_errors(self.needs, where)
        if self._exercise is not None:
            hidden = Path(session.config.rootpath)
            found = [(str(hidden / item.nodeid), check_id(item), m.kwargs) for item, m in marked]
            self.exercise_errors = marker_problems(self._exercise, found)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """After collection, before the first check: hidden tests whose needs are broken run no
        check (the grader's bug), nor does a submission that cannot be loaded."""
        if self.needs_errors or self.exercise_errors or self._collect_only:
            return True
        if self._before_checks is not None:
            self.problem = self._before_checks()
            if self.problem is not None:
                return True  # ends the run loop: no check runs

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        take_attachments()  # nothing carries over from the previous check
        self._submission_call("discard_pending")
        self._submission_call("begin_check", check_id(item))  # its requests are recorded as its own
        self._submission_call("drop_broken_jail")  # what a jail did after its last reply is its own

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        """What the check left pending in the jail (weights to load) is sent before it ends, so
        that a failure there fails this check and no other (after a failure, setup discards it)."""
        result = yield
        self._submission_call("flush")
        return result

    def _submission_call(self, name: str, *args) -> None:
        method = getattr(self._submission, name, None)
        if method is not None:
            method(*args)

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors.append(f"{report.nodeid}: {report.longreprtext[-2000:]}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        marker = item.get_closest_marker("check")
        if marker is None:
            if call.when == "call":
                self.unmarked.append(item.nodeid)
            return
        if call.when == "call" or (call.when == "setup" and report.failed):
            self.results.append(self._result(item, marker, call))

    def _result(self, item, marker, call) -> CheckResult:
        meta = marker.kwargs
        base = dict(
            id=check_id(item),
            max_points=float(meta["points"]),
            rule=meta["rule"],
            day=int(meta["day"]),
            title=meta.get("title", ""),
        )
        curve = take_attachments().get("curve")
        if call.excinfo is None:
            return CheckResult(passed=True, points=float(meta["points"]), curve=curve, **base)
        exc = call.excinfo.value
        message, symptoms, evidence = explain(exc)
        if isinstance(exc, CheckFailure):
            for d in exc.diagnosis:
                self.diagnoses.append(Diagnosis(check=base["id"], **d))
        return CheckResult(
            passed=False,
            points=0.0,
            symptoms=symptoms,
            evidence=evidence,
            curve=curve,
            message=message,
            **base,
        )


def _exception_line(excinfo, style=None) -> str:
    """A failed test's report text: its exception's last line (the grade does not read it)."""
    return excinfo.exconly(tryshort=True)


def check_id(item) -> str:
    """A check's id: its test's name without `test_`, `_` written `-` (what `needs` names)."""
    return item.name.removeprefix("test_").replace("_", "-")


def marker_problems(exercise, marked: Sequence[tuple[str, str, Mapping]]) -> list[str]:
    """What is wrong with the hidden tests' check markers for `exercise` (models.Exercise), one
    line each naming the test (`marked`: (hidden file::test, check id, marker kwargs)): a rule
    that is neither shipped nor declared in exercise.toml, a check id used twice, and points
    that do not add up to exercise.toml's `points`."""
    from grader.catalog.exercises import exercise_dir
    from grader.catalog.rules import exercise_rules
    from grader.errors import shown_path

    known = exercise_rules(exercise)
    problems = []
    seen: dict[str, str] = {}
    for where, cid, meta in marked:
        where = shown_path(where.split("::")[0]) + "::" + where.split("::", 1)[-1]
        rule = meta.get("rule")
        if rule not in known:
            problems.append(
                f"{where}: unknown rule {rule!r}; declare it in exercise.toml [[rules]] "
                f"(known rules: {', '.join(known)})"
            )
        if cid in seen:
            problems.append(f"{where}: check id {cid!r} is used twice (also by {seen[cid]})")
        seen.setdefault(cid, where)
    total = round(sum(float(meta.get("points", 0)) for _, _, meta in marked), 6)
    if marked and total != float(exercise.points):
        toml = shown_path(exercise_dir(exercise.id) / "exercise.toml")
        problems.append(
            f"{toml}: points = {exercise.points:g}, but the checks of hidden/ add up to {total:g}"
        )
    return problems


def needs_errors(needs: Mapping[str, Sequence[str]], where: Mapping[str, str]) -> list[str]:
    """What is wrong with the hidden tests' `needs` (check id -> ids it builds on; `where`: check
    id -> its test's node id): a need that names no check, and every cycle, which would leave no
    check to fix first."""
    errors = [
        f"{where.get(c, c)}: needs {n!r}, which is no check of these hidden tests "
        f"(checks: {', '.join(sorted(needs))})"
        for c, ns in needs.items()
        for n in ns
        if n not in needs
    ]
    state: dict[str, str] = {}  # id -> "open" while its needs are followed, then "done"

    def follow(c: str, path: list[str]) -> None:
        state[c] = "open"
        for n in needs.get(c, ()):
            if state.get(n) == "open":
                cycle = [*path[path.index(n) :], n]  # an open check is on the path
                errors.append(f"{where.get(n, n)}: needs form a cycle: {' -> '.join(cycle)}")
            elif n in needs and n not in state:
                follow(n, [*path, n])
        state[c] = "done"

    for c in needs:
        if c not in state:
            follow(c, [c])
    return errors


def root_causes(results: Sequence[CheckResult], needs: Mapping[str, Sequence[str]]) -> list[CheckResult]:
    """The results again, each failed one with `caused_by`: the failed checks among its needs,
    each followed down to its own roots. If A needs B needs C and all three fail, A and B are
    caused by C: C is the first broken thing. A need that passed ends the chain (what it tests
    works, so it is no cause, whatever it needs). A failed check with no failed need is a root.
    Points are untouched: this only tells the reports what to show first. Needs have no cycle
    (`needs_errors`, at collection)."""
    failed = {r.id for r in results if not r.passed}
    found: dict[str, list[str]] = {}

    def roots(c: str) -> list[str]:
        if c not in found:
            below = [root for n in needs.get(c, ()) if n in failed for root in (roots(n) or [n])]
            found[c] = list(dict.fromkeys(below))
        return found[c]

    return [r if r.passed else r.model_copy(update={"caused_by": roots(r.id)}) for r in results]


def explain(exc: BaseException) -> tuple[str, list[str], dict]:
    """A learner-facing message for whatever ended a check (a Message where it can be one)."""
    if isinstance(exc, CheckFailure):
        return exc.message, exc.symptoms, exc.evidence
    if isinstance(exc, LearnerError):
        if exc.is_a("NotImplementedError"):
            if exc.where:
                return (
                    msg(
                        "not implemented yet: your code raised NotImplementedError at {where}",
                        where=str(exc.where),
                    ),
                    ["exception"],
                    {},
                )
            return msg("not implemented yet: your code raised NotImplementedError"), ["exception"], {}
        if exc.where:
            return (
                msg(
                    "your code raised {type} at {where}: {message}",
                    type=exc.type_name,
                    where=str(exc.where),
                    message=exc.learner_message,
                ),
                ["exception"],
                {},
            )
        return (
            msg("your code raised {type}: {message}", type=exc.type_name, message=exc.learner_message),
            ["exception"],
            {},
        )
    if isinstance(exc, JailError):
        detail = exc.message
        if isinstance(exc, JailTimeout) and exc.where:
            detail = stopped_at(exc.message, exc.where)
        kinds = {
            "timeout": msg("timeout: {detail}", detail=detail),
            "memory": msg("memory: {detail}", detail=detail),
            "sandbox": msg("sandbox: {detail}", detail=detail),
            "crash": msg("crash: {detail}", detail=detail),
        }
        return kinds.get(exc.kind, f"{exc.kind}: {exc}"), [exc.symptom], {}
    if isinstance(exc, AssertionError):
        return message_of(exc) or msg("assertion failed"), [], {}
    # An error in the grader's own test code is the grader's bug, never the learner's: say so.
    return (
        msg("internal grader error in this check ({type}: {error})", type=type(exc).__name__, error=str(exc)),
        [],
        {},
    )


def stopped_at(what, where: list[tuple[str, str, int]]):
    """A timeout's message with where the learner's code was: the innermost learner frame, and
    the one that called it when there is one."""
    function, file, line = where[0]
    if len(where) > 1:
        outer, outer_file, outer_line = where[1]
        return msg(
            "{what}; your code was in {function} at {file} line {line} (called from {outer} at "
            "{outer_file} line {outer_line}) when it was stopped",
            what=what,
            function=function,
            file=file,
            line=line,
            outer=outer,
            outer_file=outer_file,
            outer_line=outer_line,
        )
    return msg(
        "{what}; your code was in {function} at {file} line {line} when it was stopped",
        what=what,
        function=function,
        file=file,
        line=line,
    )


def pytest_args(hidden_dir: Path, max_failures: int | None = None) -> list[str]:
    """The command line the hidden tests of `hidden_dir` run with."""
    hidden_dir = Path(hidden_dir).resolve()
    args = [
        str(hidden_dir),
        "-c",
        str(INI),
        "--rootdir",
        str(hidden_dir),
        "-s",
        "--assert=plain",
        "--import-mode=importlib",
        "-p",
        "no:cacheprovider",
        "--noconftest",
        "-p",
        "no:terminal",
        "-p",
        "no:logging",
        "-W",
        "ignore",
        # plugins no hidden test uses, each set up for every run: reports and options of the
        # command line, pdb, and the unraisable-exception hooks (two gc passes a run)
        *(arg for plugin in UNUSED_PLUGINS for arg in ("-p", f"no:{plugin}")),
    ]
    if pytest.version_tuple >= (8, 4):
        args.append("--disable-plugin-autoload")  # the machine's pytest plugins have no say in a grade
    if max_failures is not None:
        args.append(f"--maxfail={max_failures}")
    return args


# -- a pytest session kept for the next grade ----------------------------------------------------
# Configuring pytest and collecting the hidden tests costs as much as a small exercise's checks
# (0.02 s): a grading process does it once per exercise and runs the same items again for each
# submission, as pytest-rerunfailures and xdist's workers run an item again. Each run sees what a
# fresh pytest.main would show it: the run's own collector (through `_Forward`), fresh fixtures,
# the working directory and pytest.mark's configuration as they were. A session whose collection
# had any problem is not kept (later runs go to pytest.main, as before), nor one a run stopped
# early (maxfail, an interruption: pytest cannot resume it).


class _Forward:
    """The plugin a kept session is configured with: each hook goes to the run's collector."""

    def __init__(self):
        self.current: _CheckCollector | None = None

    def _collector(self) -> _CheckCollector:
        assert self.current is not None, "a kept pytest session runs only for a collector"
        return self.current

    @pytest.fixture
    def submission(self):
        return self._collector()._submission

    def pytest_collection_finish(self, session):
        self._collector().pytest_collection_finish(session)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        return self._collector().pytest_runtestloop(session)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self._collector().pytest_runtest_setup(item)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        return (yield from self._collector().pytest_runtest_call(item))

    def pytest_collectreport(self, report):
        self._collector().pytest_collectreport(report)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        yield from self._collector().pytest_runtest_makereport(item, call)


class _KeptSession:
    """A configured pytest session that collects the hidden tests on its first run (as pytest.main
    would, for that run's collector) and runs the same items again for each later one."""

    def __init__(self, args: list[str]):
        from _pytest.config import _prepareconfig

        self.lock = threading.Lock()
        self.forward = _Forward()
        self.collected = False
        self.started = False
        with _marks_of(None):  # pytest.mark's configuration is this session's only while it runs
            self.config = _prepareconfig(list(args), plugins=[self.forward])
            self.session = pytest.Session.from_config(self.config)
            self.session.exitstatus = pytest.ExitCode.OK
            try:
                self.config._do_configure()
                self.config.hook.pytest_sessionstart(session=self.session)
                self.started = True
            except BaseException:
                self.close()
                raise

    def run(self, collector: _CheckCollector) -> int | pytest.ExitCode:
        """What pytest.main(args, plugins=[collector]) returns; the collection is done once."""
        session = self.session
        self.forward.current = collector
        cwd = os.getcwd()
        code: int | pytest.ExitCode = pytest.ExitCode.INTERNAL_ERROR
        keep = True
        try:
            with _marks_of(self.config):
                if self.collected:
                    session.testsfailed = 0
                    collector.pytest_collection_finish(session)  # this run's exercise and needs
                else:
                    self.collected = True
                    self.config.hook.pytest_collection(session=session)
                    # a collection with a problem is reported by this run, then never kept: pytest
                    # keeps a hidden module that failed to import half made in sys.modules, and
                    # the next pytest.main runs what it holds, as this process did before
                    keep = bool(session.items) and not session.testsfailed and not collector.collect_errors
                self.config.hook.pytest_runtestloop(session=session)
            if session.testsfailed:
                code = pytest.ExitCode.TESTS_FAILED
            elif session.testscollected == 0:
                code = pytest.ExitCode.NO_TESTS_COLLECTED
            else:
                code = pytest.ExitCode.OK
        except session.Failed:
            code = pytest.ExitCode.TESTS_FAILED
        except (KeyboardInterrupt, pytest.exit.Exception):
            code = pytest.ExitCode.INTERRUPTED
        except BaseException:  # noqa: BLE001 - pytest.main reports its own error this way, and goes on
            traceback.print_exc()
        finally:
            self.forward.current = None
            os.chdir(cwd)
            if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
                keep = False
            if not keep or session.shouldfail or session.shouldstop:  # pytest cannot resume these
                _forget(self, for_good=not keep)
        return code

    def close(self) -> None:
        with _marks_of(None):
            if self.started:
                self.started = False
                with contextlib.suppress(Exception):
                    self.config.hook.pytest_sessionfinish(session=self.session, exitstatus=pytest.ExitCode.OK)
            self.config._ensure_unconfigure()


_kept: OrderedDict[tuple[str, ...], _KeptSession | None] = OrderedDict()


def _run_kept(args: list[str], collector: _CheckCollector) -> int | pytest.ExitCode | None:
    """pytest.main(args, plugins=[collector]) in the session kept for `args` (made now if there
    is none); None where no session is kept (pytest.main runs). A hidden folder whose files
    changed since gets a session of its own."""
    key = (*args, *_files_of(Path(args[0])))
    if key in _kept:
        _kept.move_to_end(key)
        kept = _kept[key]
    else:
        try:
            kept = _KeptSession(args)
        except Exception:  # noqa: BLE001 - pytest.main then runs, and reports what went wrong
            kept = None
        _kept[key] = kept
        while len(_kept) > PYTEST_SESSIONS:
            _, dropped = _kept.popitem(last=False)
            if dropped is not None:
                dropped.close()
    if kept is None or not kept.lock.acquire(blocking=False):
        return None
    try:
        return kept.run(collector)
    finally:
        kept.lock.release()


def _files_of(folder: Path) -> list[str]:
    """Each file of `folder` (not below), with its size and time of change."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
        return [f"{e.name}:{e.stat().st_size}:{e.stat().st_mtime_ns}" for e in entries if e.is_file()]
    except OSError:
        return []


def _forget(kept: _KeptSession, for_good: bool) -> None:
    """Close a kept session; for_good: its arguments run with pytest.main from now on."""
    for key, value in list(_kept.items()):
        if value is kept:
            if for_good:
                _kept[key] = None
            else:
                del _kept[key]
    kept.close()


@contextlib.contextmanager
def _marks_of(config):
    """pytest.mark checks marker names against `config` while the block runs, as during a run of
    pytest.main; then against what it did before."""
    saved = pytest.mark._config
    pytest.mark._config = config if config is not None else saved
    try:
        yield
    finally:
        pytest.mark._config = saved


def run_hidden_tests(
    hidden_dir: Path,
    submission,
    before_checks=None,
    max_failures: int | None = None,
    exercise=None,
    collect_only: bool = False,
) -> _CheckCollector:
    """before_checks() -> (error kind, message) or None: called once tests are collected; when it
    returns a problem no check runs and `collector.problem` holds it. max_failures: stop after this many
    failed checks (the later ones are not run, nor reported): for a verdict, not a learner's grade.
    exercise: the markers are checked against it (marker_problems), an ExerciseFileError (exit 2)
    naming each problem. collect_only: run no check (the markers' validation alone)."""
    collector = _CheckCollector(submission, before_checks, exercise)
    collector._collect_only = collect_only
    args = pytest_args(hidden_dir, max_failures)
    code = _run_kept(args, collector)
    if code is None:
        code = pytest.main(args, plugins=[collector])
    if collector.exercise_errors:
        raise ExerciseFileError("\n".join(collector.exercise_errors))
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise RuntimeError(
            f"hidden tests in {hidden_dir} could not run (pytest exit {code}): "
            f"{' '.join(collector.collect_errors)}"
        )
    if collector.needs_errors:
        raise RuntimeError(f"hidden tests with broken needs: {'; '.join(collector.needs_errors)}")
    if collector.unmarked:
        raise RuntimeError(f"hidden tests without a check marker: {collector.unmarked}")
    collector.results = root_causes(collector.results, collector.needs)
    return collector
