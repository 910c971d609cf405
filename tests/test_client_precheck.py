"""`grader submit` never wastes a submission (issue 30.3): what would fail at once (a syntax
error, a notebook's magic left in, a get_ipython() call, a name the exercise needs and the file
does not define, an answer sheet that is not TOML) is refused before anything is sent, with its
location and what to do, exit 2; a file is never renamed for the upload; `--dry-run` shows what
would be sent and sends nothing; a notebook is submitted as the files it assembles to.

Against the stub server (tests/client_stub.py), which records every upload; then against a real
`grader serve` on loopback (tests/server_harness.py), whose count of submissions must not move,
and which grades the issue's notebook, submitted with `grader submit EX nb.ipynb --wait`, to
full marks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from client_stub import TOKEN, Stub, isolate_client
from server_harness import Learner, clean_env, learner_server
from test_notebooks import DONE_WHEN, SOLUTION, notebook

from grader.cli import main
from grader.catalog.exercises import load_exercise

ATTENTION = load_exercise("day45-attention")
MERGE_LINE = SOLUTION.splitlines().index("def merge_heads(x):") + 1
ATTENTION_INFO = {  # as the server lists it: its names with it (grader/service/service.py)
    "id": "day45-attention",
    "kind": "code",
    "title": {"en": "Attention"},
    "day": 45,
    "files": ["attention.py"],
    "names": ATTENTION.names,
    "points": 35,
    "open": True,
}


@pytest.fixture
def stub(tmp_path, monkeypatch):
    isolate_client(tmp_path, monkeypatch)
    with Stub() as s:
        s.exercises.append(dict(ATTENTION_INFO))
        monkeypatch.setenv("GRADER_SERVER", s.url)
        monkeypatch.setenv("GRADER_TOKEN", TOKEN)
        yield s


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)), catch_exceptions=False)


def folder(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    path = tmp_path / name
    path.mkdir()
    for file, text in files.items():
        (path / file).write_text(text, encoding="utf-8")
    return path


def problems(result) -> list[str]:
    return [
        line.removeprefix("problem: ") for line in result.stderr.splitlines() if line.startswith("problem: ")
    ]


REFUSED = (
    "error: nothing was sent, and no submission spent: fix what is said above, then submit again "
    "(grader submit --dry-run checks without sending)"
)


# -- refused here, nothing sent -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "files", "expected"),
    [
        (
            "a syntax error",
            {"attention.py": SOLUTION.replace("def merge_heads(x):", "def merge_heads(x)")},
            f"attention.py line {MERGE_LINE}, column 19: syntax error: expected ':'",
        ),
        (
            "a Colab export's shell escape",
            {"attention.py": "!pip install torch\n" + SOLUTION},
            'attention.py line 1: "!pip install torch" is a shell command, which only a notebook runs, '
            "not Python: delete the line, or submit the notebook (.ipynb) itself",
        ),
        (
            "an nbconvert export",
            {"attention.py": "get_ipython().run_line_magic('matplotlib', 'inline')\n" + SOLUTION},
            "attention.py line 1 calls get_ipython(), which only a notebook has (it is how nbconvert "
            "writes an IPython magic): delete the line, or submit the notebook (.ipynb) itself",
        ),
        (
            "a missing name",
            {"attention.py": SOLUTION.replace("def split_heads(", "def split_head(")},
            "attention.py defines no split_heads at its top level (it needs stable_softmax, "
            "scaled_dot_product_attention, split_heads, merge_heads, MultiHeadAttention): define each "
            'there (not inside a function, a loop or an if __name__ == "__main__" block), spelled so',
        ),
        (
            "a helper that does not parse",
            {"attention.py": SOLUTION, "helpers.py": "def f(:\n"},
            "helpers.py line 1, column 7: syntax error",
        ),
    ],
)
def test_what_would_fail_at_once_is_refused_here(stub, tmp_path, case, files, expected):
    result = run("submit", "day45-attention", folder(tmp_path, "work", files))
    assert result.exit_code == 2, result.output
    [problem] = problems(result)
    assert problem.startswith(expected), problem
    assert result.stderr.splitlines()[-1] == REFUSED
    assert stub.posts == [] and stub.uploads == []  # nothing reached the server: nothing spent


def test_a_notebook_with_a_bug_is_refused_at_its_cell_and_line(stub, tmp_path):
    cells = list(DONE_WHEN)
    cells[6] = cells[6].replace("B, T, d_model = x.shape", "B, T, d_model = x.shape)")
    (tmp_path / "nb.ipynb").write_bytes(notebook(*cells))
    result = run("submit", "day45-attention", tmp_path / "nb.ipynb")
    assert result.exit_code == 2
    [problem] = problems(result)
    assert problem.startswith(
        "nb.ipynb cell 7, line 2, column 28: syntax error: unmatched ')' (attention.py line "
    )
    assert stub.posts == []


def test_an_answer_sheet_that_is_not_toml_is_refused_here(stub, tmp_path):
    stub.exercises.append({"id": "day45-quiz", "kind": "quiz", "files": ["answers.toml"], "open": True})
    result = run("submit", "day45-quiz", folder(tmp_path, "quiz", {"answers.toml": "[answers]\nx = = 1\n"}))
    assert result.exit_code == 2
    assert problems(result)[0].startswith("answers.toml: malformed TOML")
    assert stub.posts == []


# -- never renamed ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["data.py", "my_attention.py"])
def test_a_file_not_named_as_the_exercise_is_never_renamed(stub, tmp_path, name):
    work = folder(tmp_path, "other", {name: SOLUTION})
    for path in (work, work / name):
        result = run("submit", "day45-attention", path)
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [
            f"error: PATH: no attention.py, only {name}: the grader never renames a file, so rename "
            "yours attention.py if it is that file (this exercise needs attention.py)"
        ]
    assert stub.posts == []


# -- --dry-run ----------------------------------------------------------------------------------


def test_dry_run_shows_what_would_be_sent_and_sends_nothing(stub, tmp_path):
    (tmp_path / "nb.ipynb").write_bytes(notebook(*DONE_WHEN))
    result = run("submit", "day45-attention", tmp_path / "nb.ipynb", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("  attention.py  ") and lines[0].endswith(
        " bytes  from nb.ipynb, cells 3-5, 7-8"
    )
    assert lines[1] == 'note: cell 2, line 1: dropped "!pip install torch" (a shell command)'
    assert 'note: cell 9, lines 4-7: dropped "for step in range(100):" (top-level code that runs)' in lines
    assert lines[-2].startswith("digest (SHA-256): ") and lines[-1] == "dry run: nothing was sent"
    assert stub.posts == [] and stub.uploads == []
    # and what it showed is what a submit sends
    result = run("submit", "day45-attention", tmp_path / "nb.ipynb")
    assert result.exit_code == 0, result.output
    [upload] = stub.uploads
    assert list(upload["files"]) == ["attention.py"]
    assert upload["files"]["attention.py"].startswith(b"# grader: assembled from the notebook \"nb.ipynb\"")
    assert lines[-2].removeprefix("digest (SHA-256): ") in result.stderr


def test_dry_run_of_what_would_fail_says_so_and_exits_2(stub, tmp_path):
    work = folder(tmp_path, "work", {"attention.py": "%matplotlib inline\n" + SOLUTION})
    result = run("submit", "day45-attention", work, "--dry-run")
    assert result.exit_code == 2
    assert 'problem: attention.py line 1: "%matplotlib inline" is an IPython magic' in result.stdout
    assert stub.posts == []


def test_a_server_of_before_names_checks_files_without_them(stub, tmp_path):
    del stub.exercises[-1]["names"]  # the server lists no names: only what can be told without them
    result = run("submit", "day45-attention", folder(tmp_path, "work", {"attention.py": "x = 1\n"}))
    assert result.exit_code == 0, result.output
    assert len(stub.uploads) == 1


# -- a real server: its count does not move; the notebook gets full marks -------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with learner_server(tmp_path_factory.mktemp("precheck"), "nora") as srv:
        yield srv


def submissions(server) -> list:
    with server.client(server.token) as c:
        return c.get("/submissions").raise_for_status().json()["items"]


def test_a_real_server_records_nothing_refused_here_and_grades_the_notebook(server, tmp_path):
    learner = Learner(tmp_path / "nora", env=clean_env())
    assert learner.run("login", "--server", server.url, "--token", server.token).returncode == 0
    bad = {
        "syntax.py": SOLUTION.replace("def merge_heads(x):", "def merge_heads(x)"),
        "magic.py": "!pip install torch\n" + SOLUTION,
        "missing.py": SOLUTION.replace("class MultiHeadAttention", "class MultiheadAttention"),
    }
    for case, text in bad.items():
        work = folder(tmp_path, case.removesuffix(".py"), {"attention.py": text})
        proc = learner.run("submit", "day45-attention", work)
        assert proc.returncode == 2, (case, proc.stderr)
        assert "nothing was sent, and no submission spent" in proc.stderr, case
    cells = list(DONE_WHEN)
    cells[6] = cells[6].replace("B, T, d_model = x.shape", "B, T, d_model = x.shape)")
    (tmp_path / "bug.ipynb").write_bytes(notebook(*cells))
    proc = learner.run("submit", "day45-attention", tmp_path / "bug.ipynb")
    assert proc.returncode == 2 and "problem: bug.ipynb cell 7, line 2, column 28" in proc.stderr
    (tmp_path / "nb.ipynb").write_bytes(notebook(*DONE_WHEN))
    proc = learner.run("submit", "day45-attention", tmp_path / "nb.ipynb", "--dry-run")
    assert proc.returncode == 0 and "dry run: nothing was sent" in proc.stdout
    assert submissions(server) == []  # the server recorded none of them

    proc = learner.run("submit", "day45-attention", tmp_path / "nb.ipynb", "--wait", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "from nb.ipynb, cells 3-5, 7-8" in proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] and report["score"] == report["max_score"] == 35
    assert len(submissions(server)) == 1
    with server.client(server.token) as c:
        sub = c.get(f"/submissions/{submissions(server)[0]['id']}").raise_for_status().json()
    assert [f["name"] for f in sub["files"]] == ["attention.py"]
