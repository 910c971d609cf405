"""The student install, for real: a fresh venv (no system site-packages) and `pip install` of the
student's wheel (client/pyproject.toml, `gpt-bughunt-grader`, as built by conftest.py's
`distribution_wheels`), its requirements from PyPI. It must give the student commands and nothing
that grades: no torch, no numpy, no exercise folder (a local `starter` says which install it needs).

Slow (a minute or so: pip downloads click, httpx and pydantic), so it can be skipped on a
developer's machine with GRADER_SKIP_INSTALL_TEST=1; in CI (CI=true) it always runs.
`student_venv(target, wheel)` is also what an end-to-end test uses to run this install against a
server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from client_stub import TOKEN, Stub

ROOT = Path(__file__).resolve().parents[1]
GRADING_HINT = "this command needs the grading install: pip install gpt-bughunt-grader-server"

pytestmark = pytest.mark.skipif(
    os.environ.get("GRADER_SKIP_INSTALL_TEST") == "1" and os.environ.get("CI") != "true",
    reason="GRADER_SKIP_INSTALL_TEST=1: the fresh-venv install test is skipped (it always runs in CI)",
)


def student_venv(target: Path, wheel: Path) -> Path:
    """A fresh venv at `target` with `pip install WHEEL` (the student's); its bin folder."""
    venv = target / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return venv / "bin"


@pytest.fixture(scope="module")
def venv_bin(student_install):
    return student_install  # conftest.py: one venv for this file and test_server_load.py


def run(bin: Path, *args, env=None, cwd=None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run(
        [str(bin / "grader"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "PATH": f"{bin}:{clean.get('PATH', '')}", **(env or {})},
        cwd=cwd or bin,  # not the checkout: the installed package is what runs
    )


def test_the_student_install_has_the_client_and_nothing_that_grades(venv_bin, tmp_path):
    for command in ("login", "submit", "status", "history", "report", "starter"):
        result = run(venv_bin, command, "--help")
        assert result.returncode == 0, (command, result.stderr)
        assert "Usage: grader " + command in result.stdout
    # nothing that grades, and none of the course (cwd: not the checkout, whose packages `-c` would see)
    python = str(venv_bin / "python")
    for module in ("torch", "numpy", "sqlalchemy", "jinja2", "fastapi", "grader.grading.grade", "exercises",
                   "mutants", "reference_model"):  # fmt: skip
        probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=60,
                               cwd=venv_bin)  # fmt: skip
        assert probe.returncode != 0, f"{module} is installed by the student install"
    for args in (["grade", "day49-data", str(tmp_path)], ["starter", "day49-data", str(tmp_path / "s")]):
        result = run(venv_bin, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert GRADING_HINT in result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "s").exists()
    result = run(venv_bin, "course", "--help")  # the instructor's light client is there too
    assert result.returncode == 0 and "Usage: grader course" in result.stdout, result.stderr


def test_the_student_install_submits_to_a_server(venv_bin, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.py").write_text("def load():\n    return 1\n")
    with Stub() as stub:
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
        login = run(venv_bin, "login", "--server", stub.url, "--token", TOKEN, env=env)
        assert login.returncode == 0, login.stderr
        # logged in: the course's starter, with no --server and no word of the grading install
        starter = run(venv_bin, "starter", "day49-data", str(tmp_path / "start"), env=env)
        assert starter.returncode == 0, starter.stderr
        assert GRADING_HINT not in starter.stderr
        assert (tmp_path / "start" / "data.py").read_bytes() == stub.starter_members["data.py"]
        submitted = run(venv_bin, "submit", "day49-data", str(work), "--wait", env=env)
        assert submitted.returncode == 0, submitted.stderr
        assert submitted.stdout.startswith("REPORT 100 format=text")
        assert run(venv_bin, "history", "day49-data", env=env).returncode == 0
        assert run(venv_bin, "status", env=env).returncode == 0
        report = run(venv_bin, "report", "day49-data", env=env)
        assert report.returncode == 0 and report.stdout.startswith("REPORT 100 "), report.stderr
        # zh-TW from the wheel's own catalog (client.mo: no Babel, no grader.po here)
        zh = run(venv_bin, "status", "--lang", "zh-TW", env=env)
        assert zh.returncode == 0 and "繳交" in zh.stdout and "exercise" not in zh.stdout, zh.stdout
        assert len(stub.uploads) == 1
