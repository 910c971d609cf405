"""docs/instructors.md and docs/students.md run as written (issue 31.7): every ```sh block of each
guide is run, command by command in the guide's order, by bash in one folder, against one `grader
serve` on a loopback port and a sample class of six day49-data learners (a Canvas "Download
Submissions" zip and its gradebook export), with the course.toml the instructors' guide shows.

`https://grader.example.edu` is this server; a command whose line says `# not run by the tests:`
(or follows a comment line saying so) is left out, and the guide says why. A command passes when
it exits 0 or 1 (1: graded, not all passed), prints no `error:` and no traceback.

Cost: one server with one worker; the class is six learners of the cheapest code exercise, graded
once by the guide's batch; the learner's one upload is the day45-attention starter.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.course.sampleclass import make_canvas_export
from tests.server_harness import ROOT, Server, clean_env, issue_token

GUIDES = ROOT / "docs"
SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
FILE_BLOCK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.S)
SKIP = "# not run by the tests:"
EXAMPLE_URL = "https://grader.example.edu"
EXAMPLE_YEAR = "2027"  # the guide's course runs in spring 2027: moved a year ahead of today's
EXERCISE = "day49-data"
KINDS = ("solution", "alternative:unfold-gather", "mutant:unshifted-targets", "mutant:windows-off-the-end")
CLASS_SIZE = 6
COMMAND_SECONDS = 600


def commands(guide: str) -> list[str]:
    return commands_of((GUIDES / guide).read_text(encoding="utf-8"))


def commands_of(text: str) -> list[str]:
    """The shell commands of a guide's ```sh blocks in order: continuation lines joined, comment
    lines and the commands marked `# not run by the tests:` left out."""
    found: list[str] = []
    for block in SH_BLOCK.findall(text):
        skip_next = False
        for line in block.replace("\\\n", " ").splitlines():
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                skip_next = skip_next or SKIP in stripped
                continue
            if skip_next or SKIP in stripped:
                skip_next = False
                continue
            found.append(stripped)
    return found


def year() -> str:
    return str(max(int(EXAMPLE_YEAR), dt.date.today().year + 1))


def as_here(text: str, url: str) -> str:
    return text.replace(EXAMPLE_URL, url).replace(f"{EXAMPLE_YEAR}-", f"{year()}-")


def run(command: str, cwd: Path, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    # a session of its own: no controlling terminal, so a hidden prompt reads its answer from stdin
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
        start_new_session=True,
    )


def trouble(command: str, proc: subprocess.CompletedProcess) -> str | None:
    said = proc.stdout + proc.stderr
    if proc.returncode in (0, 1) and "Traceback" not in said and not re.search(r"(?m)^error:", proc.stderr):
        return None
    return f"$ {command}\nexit {proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    work = tmp_path_factory.mktemp("guides")
    for name, text in FILE_BLOCK.findall((GUIDES / "instructors.md").read_text(encoding="utf-8")):
        (work / name).write_text(as_here(text, EXAMPLE_URL), encoding="utf-8")
    manifest = make_canvas_export(
        EXERCISE,
        work / "submissions.zip",
        CLASS_SIZE,
        late=1,
        copies=1,
        near_copies=0,
        wrong_exercise=None,
        only=KINDS,
    )
    with (work / "canvas-gradebook.csv").open("w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        out.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section"])
        out.writerow(["    Points Possible", "", "", "", ""])
        for uid, info in manifest.items():
            out.writerow([info["name"], uid, f"sis-{uid}", f"{uid}@example.edu", "A"])
    server = Server(
        work / "gradebook.db", work / "server.log", course=work / "course.toml", workers=1
    ).start()
    bin_dir = str(Path(sys.executable).parent)
    try:
        yield {
            "work": work,
            "server": server,
            "manifest": manifest,
            "env": lambda who: clean_env(
                PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                XDG_CONFIG_HOME=str(work / f"config-{who}"),
            ),
        }
    finally:
        server.kill()


def run_guide(course, guide: str, cwd: Path, env: dict[str, str], stdin: str = "") -> list[str]:
    problems = []
    for command in commands(guide):
        proc = run(as_here(command, course["server"].url), cwd, env, stdin)
        problem = trouble(command, proc)
        if problem:
            problems.append(problem)
    return problems


def test_the_extractor_reads_each_guide_and_leaves_out_only_the_marked_commands():
    instructors, students = commands("instructors.md"), commands("students.md")
    assert any(c.startswith("grader batch ") for c in instructors)
    assert any(c.startswith("grader gradebook publish ") and "--roster" in c for c in instructors)
    for sub in ("extend", "grades", "release", "queue"):
        assert any(
            c.startswith(f"grader course {sub} ") or c == f"grader course {sub}" for c in instructors
        ), sub
    assert not any(c.startswith("grader serve") or "grader course retry" in c for c in instructors)
    assert not any("curl" in c for c in instructors + students)
    assert [c.split()[1] for c in students] == ["login", "starter", "submit", "report", "status", "history"]
    text = textwrap.dedent("""
        ```sh
        a one
        # not run by the tests: a reason
        b two \\
            --more
        c three  # not run by the tests: another
        d four   # kept
        ```
        """)
    assert commands_of(text) == ["a one", "d four   # kept"]


def test_the_instructors_guide_runs_as_written(course):
    work = course["work"]
    problems = run_guide(course, "instructors.md", work, course["env"]("instructor"))
    assert not problems, "\n\n".join(problems)
    report = work / "report"
    for name in ("class.html", "items.csv", "canvas-import.csv", "published.json"):
        assert (report / name).is_file(), name
    with (work / "tokens.csv").open(encoding="utf-8", newline="") as f:
        assert {row["learner"] for row in csv.DictReader(f)} >= set(course["manifest"])
    grades = (work / "grades.csv").read_text(encoding="utf-8")
    assert "the curve read by hand" in grades
    for name in ("1001.html", "index.html", "autograder.zip", "live-grades.csv", "report.html"):
        assert (work / name).is_file(), name


def test_the_students_guide_runs_as_written(course):
    work = course["work"] / "student"
    work.mkdir()
    token = issue_token(course["work"] / "gradebook.db", "2001", name="Student 2001")
    env = course["env"]("student")
    problems = run_guide(course, "students.md", work, env, stdin=token + "\n")
    assert not problems, "\n\n".join(problems)
    assert (work / "mywork" / "attention.py").is_file()
    history = run("grader history day45-attention", work, env)
    assert history.returncode == 0 and "*" in history.stdout, history.stdout + history.stderr
