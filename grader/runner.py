"""Runs an exercise's hidden tests (ordinary pytest files) against a submission, in-process.

The hidden tests live with the grader and run here, in the trusted process; only the `submission`
fixture reaches into the jail. Each test marked with `check(...)` becomes one CheckResult.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.jail.client import JailError, JailTimeout, LearnerError
from grader.locale import message_of, msg
from grader.models import CheckResult, Diagnosis
from grader.testkit import CheckFailure, take_attachments

INI = Path(__file__).with_name("hidden-pytest.ini")


class _CheckCollector:
    """A pytest plugin: provides the `submission` fixture and turns reports into CheckResults."""

    def __init__(self, submission, before_checks=None):
        self._submission = submission
        self._before_checks = before_checks
        self.problem: tuple[str, str] | None = None
        self.results: list[CheckResult] = []
        self.diagnoses: list[Diagnosis] = []
        self.unmarked: list[str] = []
        self.collect_errors: list[str] = []

    @pytest.fixture
    def submission(self):
        return self._submission

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """After collection, before the first check: a submission that cannot be loaded runs none."""
        if self._before_checks is not None:
            self.problem = self._before_checks()
            if self.problem is not None:
                return True  # ends the run loop: no check runs

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        take_attachments()  # nothing carries over from the previous check
        self._submission_call("discard_pending")
        self._submission_call("drop_broken_jail")  # what a jail did after its last reply is its own

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        """What the check left pending in the jail (weights to load) is sent before it ends, so
        that a failure there fails this check and no other (after a failure, setup discards it)."""
        result = yield
        self._submission_call("flush")
        return result

    def _submission_call(self, name: str) -> None:
        method = getattr(self._submission, name, None)
        if method is not None:
            method()

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
        check_id = item.name.removeprefix("test_").replace("_", "-")
        base = dict(
            id=check_id,
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
                self.diagnoses.append(Diagnosis(check=check_id, **d))
        return CheckResult(
            passed=False,
            points=0.0,
            symptoms=symptoms,
            evidence=evidence,
            curve=curve,
            message=message,
            **base,
        )


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


def run_hidden_tests(hidden_dir: Path, submission, before_checks=None) -> _CheckCollector:
    """before_checks() -> (error kind, message) or None: called once tests are collected; when it
    returns a problem no check runs and `collector.problem` holds it."""
    collector = _CheckCollector(submission, before_checks)
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
    ]
    code = pytest.main(args, plugins=[collector])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise RuntimeError(
            f"hidden tests in {hidden_dir} could not run (pytest exit {code}): "
            f"{' '.join(collector.collect_errors)}"
        )
    if collector.unmarked:
        raise RuntimeError(f"hidden tests without a check marker: {collector.unmarked}")
    return collector
