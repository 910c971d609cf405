"""Runs an exercise's hidden tests (ordinary pytest files) against a submission, in-process.

The hidden tests live with the grader and run here, in the trusted process; only the `submission`
fixture reaches into the jail. Each test marked with `check(...)` becomes one CheckResult.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.jail.client import JailError, LearnerError
from grader.models import CheckResult, Diagnosis
from grader.testkit import CheckFailure

INI = Path(__file__).with_name("hidden-pytest.ini")
MAX_MESSAGE = 64 * 1024


class _CheckCollector:
    """A pytest plugin: provides the `submission` fixture and turns reports into CheckResults."""

    def __init__(self, submission):
        self._submission = submission
        self.results: list[CheckResult] = []
        self.diagnoses: list[Diagnosis] = []
        self.unmarked: list[str] = []
        self.collect_errors: list[str] = []

    @pytest.fixture
    def submission(self):
        return self._submission

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
        base = dict(id=check_id, max_points=float(meta["points"]), rule=meta["rule"],
                    day=int(meta["day"]), title=meta.get("title", ""))
        if call.excinfo is None:
            return CheckResult(passed=True, points=float(meta["points"]), **base)
        exc = call.excinfo.value
        message, symptoms, evidence = explain(exc)
        if isinstance(exc, CheckFailure):
            for d in exc.diagnosis:
                self.diagnoses.append(Diagnosis(check=check_id, **d))
        return CheckResult(passed=False, points=0.0, message=message[:MAX_MESSAGE],
                           symptoms=symptoms, evidence=evidence, **base)


def explain(exc: BaseException) -> tuple[str, list[str], dict]:
    """A learner-facing message for whatever ended a check."""
    if isinstance(exc, CheckFailure):
        return exc.message, exc.symptoms, exc.evidence
    if isinstance(exc, LearnerError):
        where = f" at {exc.where}" if exc.where else ""
        if exc.is_a("NotImplementedError"):
            return f"not implemented yet: your code raised NotImplementedError{where}", ["exception"], {}
        return (f"your code raised {exc.type_name}{where}: {exc.learner_message}",
                ["exception"], {})
    if isinstance(exc, JailError):
        return f"{exc.kind}: {exc}", [exc.symptom], {}
    if isinstance(exc, AssertionError):
        return str(exc) or "assertion failed", [], {}
    # An error in the grader's own test code is the grader's bug, never the learner's: say so.
    return f"internal grader error in this check ({type(exc).__name__}: {exc})", [], {}


def run_hidden_tests(hidden_dir: Path, submission) -> _CheckCollector:
    collector = _CheckCollector(submission)
    args = [str(hidden_dir), "-c", str(INI), "--rootdir", str(hidden_dir), "-s",
            "--assert=plain", "--import-mode=importlib", "-p", "no:cacheprovider",
            "--noconftest", "-p", "no:terminal", "-W", "ignore"]
    code = pytest.main(args, plugins=[collector])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise RuntimeError(f"hidden tests in {hidden_dir} could not run (pytest exit {code}): "
                           f"{' '.join(collector.collect_errors)}")
    if collector.unmarked:
        raise RuntimeError(f"hidden tests without a check marker: {collector.unmarked}")
    return collector
