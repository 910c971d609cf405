"""docs/authoring.md's worked example, built from the guide's own fenced blocks with `grader
exercise new` and checked with `grader exercise check`; then broken three ways, each one clean
line and exit 2."""
import re
import shutil

import pytest

from conftest import ROOT, run_grader

GUIDE = ROOT / "docs" / "authoring.md"
FILE_BLOCK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.S)
PLACEHOLDERS = ("starter/day50_topk.py", "solution/day50_topk.py", "hidden/test_day50_topk.py",
                "mutants/scale-adds.toml")


def guide_files() -> dict[str, str]:
    return dict(FILE_BLOCK.findall(GUIDE.read_text()))


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    folder = tmp_path_factory.mktemp("course") / "day50-topk"
    proc = run_grader("exercise", "new", "day50-topk", folder)
    assert proc.returncode == 0, proc.stderr
    for name in PLACEHOLDERS:
        (folder / name).unlink()
    for name, text in guide_files().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def test_the_guide_holds_the_example_files():
    assert set(guide_files()) == {"exercise.toml", "solution/topk.py", "starter/topk.py",
                                  "hidden/test_topk.py", "mutants/topk-drops-kth.toml"}


def test_the_worked_example_checks_green(example):
    proc = run_grader("exercise", "check", example, "--no-auto", "--format", "json", timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    import json

    rows = {(r["kind"], r["name"]): r for r in json.loads(proc.stdout)["rows"]}
    assert rows[("solution", "solution")]["ok"] and rows[("solution", "solution")]["score"] == "4/4"
    assert rows[("mutant", "topk-drops-kth")]["ok"]


def test_a_scaffold_refuses_a_folder_that_is_not_empty(example):
    proc = run_grader("exercise", "new", "day50-topk", example)
    assert proc.returncode == 2 and "not empty" in proc.stderr


def broken(example, tmp_path, path, old, new):
    copy = tmp_path / "day50-topk"
    shutil.copytree(example, copy)
    text = (copy / path).read_text()
    assert old in text
    (copy / path).write_text(text.replace(old, new, 1))
    return copy


@pytest.mark.parametrize("path, old, new, expected", [
    ("exercise.toml", "points = 4", "points = 5", r"exercise\.toml: points = 5, but the checks of hidden/ add up to 4"),
    ("hidden/test_topk.py", 'rule="api-contract"', 'rule="kv-cache"',
     r"hidden/test_topk\.py::test_batched_logits: unknown rule 'kv-cache'"),
    ("exercise.toml", "day = 50\n", 'day = 50\ncolour = "red"\n', r"exercise\.toml: \(top level\): unknown key 'colour'"),
    ("exercise.toml", ', zh-TW = "top-k 取樣"', "", r"exercise\.toml: \[rules\.title\] \(#1\): missing key 'zh-TW'"),
])
def test_a_broken_example_is_one_clean_line_and_exit_2(example, tmp_path, path, old, new, expected):
    folder = broken(example, tmp_path, path, old, new)
    proc = run_grader("exercise", "check", folder, "--no-auto")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("error: ") and re.search(expected, lines[0]), lines[0]
    assert "INTERNALERROR" not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr
