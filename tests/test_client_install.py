"""The student install, for real: a fresh venv (no system site-packages) and `pip install .` with no
extra, from PyPI. It must give the student commands and nothing that grades: no torch, no numpy.

Slow (a minute or so: pip downloads click, httpx and pydantic), so it can be skipped on a
developer's machine with GRADER_SKIP_INSTALL_TEST=1; in CI (CI=true) it always runs.
`student_venv(target)` is also what an end-to-end test uses to run this install against a server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from client_stub import TOKEN, Stub

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("grader", "reports", "reference_model", "exercises", "mutants")  # [tool.setuptools] include

pytestmark = pytest.mark.skipif(
    os.environ.get("GRADER_SKIP_INSTALL_TEST") == "1" and os.environ.get("CI") != "true",
    reason="GRADER_SKIP_INSTALL_TEST=1: the fresh-venv install test is skipped (it always runs in CI)",
)


def student_venv(target: Path) -> Path:
    """A fresh venv at `target` with `pip install .` (no extra) of this checkout; its bin folder.
    The sources are copied first, so the build leaves nothing (build/, *.egg-info) in the checkout."""
    source = target / "source"
    source.mkdir(parents=True)
    shutil.copy2(ROOT / "pyproject.toml", source)
    for name in PACKAGES:
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.db"))
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
            str(source),
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
    for command in ("login", "submit", "status", "history", "starter"):
        result = run(venv_bin, command, "--help")
        assert result.returncode == 0, (command, result.stderr)
        assert "Usage: grader " + command in result.stdout
    for module in ("torch", "numpy", "sqlalchemy", "jinja2", "fastapi"):
        probe = subprocess.run(
            [str(venv_bin / "python"), "-c", f"import {module}"], capture_output=True, timeout=60
        )
        assert probe.returncode != 0, f"{module} is installed by the student install"
    result = run(venv_bin, "grade", "day49-data", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert (
        "this command needs the grading install: pip install 'gpt-bughunt-grader[grading]'" in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_the_student_install_submits_to_a_server(venv_bin, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.py").write_text("def load():\n    return 1\n")
    with Stub() as stub:
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
        login = run(venv_bin, "login", "--server", stub.url, "--token", TOKEN, env=env)
        assert login.returncode == 0, login.stderr
        starter = run(
            venv_bin, "starter", "day49-data", str(tmp_path / "start"), "--server", stub.url, env=env
        )
        assert starter.returncode == 0, starter.stderr
        assert (tmp_path / "start" / "data.py").read_bytes() == stub.starter_members["data.py"]
        submitted = run(venv_bin, "submit", "day49-data", str(work), "--wait", env=env)
        assert submitted.returncode == 0, submitted.stderr
        assert submitted.stdout.startswith("REPORT 100 format=text")
        assert run(venv_bin, "history", "day49-data", env=env).returncode == 0
        assert run(venv_bin, "status", env=env).returncode == 0
        assert len(stub.uploads) == 1
