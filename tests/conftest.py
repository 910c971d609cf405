import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ROOT / "exercises"


def run_grader(*args, timeout=600):
    """The real command line, as a learner or CI runs it."""
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def grade_json(exercise, path):
    proc = run_grader("grade", exercise, path, "--format", "json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def grader_cli():
    return run_grader
