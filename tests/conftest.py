import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ROOT / "exercises"

# Hypothesis in the suite (tests/README.md): "ci", the default, draws the same examples on every
# run (derandomize: seeded from each test's own code) and keeps no example database, so two
# runs test the same things (tests/test_suite_profile.py); HYPOTHESIS_PROFILE=explore draws
# fresh examples each run and remembers the failing ones, for a developer hunting bugs. Example
# counts stay each test's own.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# xdist (`make test` runs `-n 2 --dist loadgroup`): tests that time something or load the machine
# run on one worker, one after another, so that they never measure each other; a file whose
# module fixtures cost seconds (a server, a fresh venv, a graded class) stays on one worker, so
# they are set up once. Every other test goes to whichever worker is free. The groups are made by
# the scheduler below, from these tables: xdist 3.8's own `xdist_group` mark does nothing under
# pytest 9 (its worker writes the group into `item._nodeid`, which pytest 9 no longer reads).
TIMING_FILES = {"test_server_load.py", "test_service.py", "test_server_e2e.py", "test_waiting.py",
                "test_server_edge.py",
                "test_jail.py", "test_answers.py", "test_i18n.py", "test_budgets.py",
                "test_server_history.py", "test_server_fairness.py", "test_client_distrust.py"}
WHOLE_FILES = {"test_gradescope_build.py", "test_instructor_week.py", "test_stored_reports.py",
               "test_batch.py", "test_cli.py", "test_pages.py", "test_store_grades.py",
               "test_learner_corpus.py", "test_course_cli.py", "test_client_install.py",
               "test_client_precheck.py", "test_notebook_kernel.py", "test_guides.py"}


def xdist_group_of(nodeid: str) -> str | None:
    file = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    if file in TIMING_FILES:
        return "timing"
    return file.removesuffix(".py") if file in WHOLE_FILES else None


@pytest.hookimpl(optionalhook=True)  # xdist's hook: `-p no:xdist` runs without it
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Grouped(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid) or super()._split_scope(nodeid)

    return Grouped(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Under GRADER_GRADE_LOG (the suite's map, scripts/suite_map.py) each grade names its test,
    in this process and in the CLI, server and pool processes a test starts."""
    if os.environ.get("GRADER_GRADE_LOG"):
        os.environ["GRADER_TEST_ID"] = item.nodeid


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """Under GRADER_GRADE_LOG, what each fixture of a wider scope than a test costs to set up."""
    log = os.environ.get("GRADER_GRADE_LOG")
    if not log or fixturedef.scope == "function":
        return (yield)
    started = time.monotonic()
    try:
        return (yield)
    finally:
        line = {"fixture": fixturedef.argname, "scope": fixturedef.scope, "where": request.node.nodeid,
                "seconds": round(time.monotonic() - started, 3)}
        with open(f"{log}.fixtures", "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def run_grader(*args, timeout=600):
    """The real command line, as a learner or CI runs it."""
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def grade_json(exercise, path):
    proc = run_grader("grade", exercise, path, "--format", "json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory, request):
    """A folder every xdist worker of this run shares (this run's own, under pytest's basetemp:
    a worker's basetemp is a folder of the controller's)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(request.config, "workerinput") else base


@pytest.fixture(scope="session")
def corpus_grades(shared_dir):
    """corpus_grades.grade(exercise, path, **options): the corpus graded once per run (tests/grade_store.py)."""
    from grade_store import GradeStore, set_shared

    store = GradeStore(shared_dir / "grades")
    set_shared(store)
    yield store
    store.close()


@pytest.fixture(autouse=True, scope="session")
def _shared_grades(corpus_grades):
    """grade_store.shared() works in every test."""


@pytest.fixture
def grader_cli():
    return run_grader


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL cluster; under CI a missing PostgreSQL fails instead of skipping."""
    from grader.store.pgtemp import PostgresUnavailable, TempPostgres
    try:
        pg = TempPostgres().start()
    except PostgresUnavailable as exc:
        message = f"POSTGRESQL NOT TESTED: {exc}"
        if os.environ.get("CI"):
            pytest.fail(message)
        warnings.warn(message)          # in the warnings summary of every run, not only with -rs
        pytest.skip(message)
    yield pg
    pg.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    """A gradebook URL on each backend: a SQLite file, and a database in the throwaway cluster."""
    if request.param == "sqlite":
        return str(tmp_path / "gradebook.db")
    return request.getfixturevalue("postgres").create_database()


@pytest.fixture
def book(db):
    from grader.store import Gradebook

    gb = Gradebook(db)
    yield gb
    gb.close()


@pytest.fixture(scope="session")
def distribution_wheels(shared_dir):
    """Both wheels of this checkout, the student's and the grading side's (`pip wheel`), built once
    per run for tests/test_distributions.py and the student install, whichever xdist worker needs
    them first: {"client": path, "grading": path}."""
    from filelock import FileLock
    from test_distributions import build_wheels

    target = shared_dir / "wheels-built"
    with FileLock(f"{target}.lock"):
        if not (target / "built").exists():
            shutil.rmtree(target, ignore_errors=True)   # a build that failed half-way
            build_wheels(target)
            (target / "built").write_text("")
    return {name: next((target / name).glob("*.whl")) for name in ("client", "grading")}


@pytest.fixture(scope="session")
def student_install(shared_dir, distribution_wheels):
    """The student install (`pip install gpt-bughunt-grader`: the student's wheel in a fresh venv),
    built once per run for tests/test_client_install.py and tests/test_server_load.py, whichever
    xdist worker needs it first: its bin folder."""
    from filelock import FileLock
    from test_client_install import student_venv

    target = shared_dir / "student-install"
    with FileLock(f"{target}.lock"):
        if not (target / "built").exists():
            shutil.rmtree(target, ignore_errors=True)   # a build that failed half-way
            student_venv(target, distribution_wheels["client"])
            (target / "built").write_text("")
    return target / "venv" / "bin"


@pytest.fixture(scope="session")
def torch_wheels(shared_dir):
    """A folder holding the torch wheel this suite's venv runs (torch==2.13.0, the CPU build), for
    the fresh venvs a test builds: pip takes it from there instead of fetching it again. Where
    pip's own configuration already points at one (this machine: /opt/wheels), that folder;
    otherwise one `pip download` per run, shared by the xdist workers."""
    from filelock import FileLock

    configured = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                                text=True).stdout
    for line in configured.splitlines():
        if "find-links" in line:
            for folder in line.split("=", 1)[1].strip("'\" ").split():
                if list(Path(folder).glob("torch-2.13.0*.whl")):
                    return Path(folder)
    target = shared_dir / "wheels"
    with FileLock(f"{target}.lock"):
        if not list(target.glob("torch-2.13.0*.whl")):
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(target),
                            "torch==2.13.0"], check=True, timeout=900)
    return target
