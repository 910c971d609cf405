"""The suite's own rules (tests/README.md): under the "ci" hypothesis profile, which conftest.py
loads unless HYPOTHESIS_PROFILE says otherwise, every run draws the same examples and keeps no
example database; the "explore" profile draws fresh ones."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT

DRAW = """
import json, sys
sys.path.insert(0, "tests")
import conftest  # noqa: F401 - loads the profile, as pytest does
from hypothesis import given, strategies as st

drawn = []

@given(st.text(max_size=20), st.lists(st.floats(allow_nan=False), max_size=4))
def prop(text, floats):
    drawn.append([text, floats])

prop()
print(json.dumps(drawn))
"""


def draws(profile: str | None, hash_seed: int, cwd) -> list:
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    if profile:
        env["HYPOTHESIS_PROFILE"] = profile
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONHASHSEED"] = str(hash_seed)  # two interpreters as unlike as two CI runs
    proc = subprocess.run([sys.executable, "-c", DRAW.replace('"tests"', repr(str(ROOT / "tests")))],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_two_runs_draw_the_same_examples_and_keep_no_database(tmp_path):
    first, second = draws(None, 1, tmp_path), draws("ci", 2, tmp_path)
    assert len(first) >= 50 and first == second
    assert not (tmp_path / ".hypothesis" / "examples").exists()   # no example database


def test_the_explore_profile_draws_fresh_examples(tmp_path):
    assert draws("explore", 1, tmp_path) != draws("explore", 2, tmp_path)
