"""Reading learner files as Python reads them, by one rule for `grade`, `batch` and the server.

A learner's local `grader grade` must agree with the instructor's `grader batch`: both (and the
server's upload, and `grader submit`'s packing) find the files with grader.intake.sources.match_files.
Files saved with a UTF-8 BOM, a PEP 263 coding line or CRLF endings are what CPython accepts, so
they get full marks; a learner file may import a helper module it ships beside it; an extra `.py`
file nobody imports travels with the files but never runs. Grading is real (the jail), on
day49-data, the fastest code exercise, in this process (grading.grade, batch.grade_task).
"""
from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pytest
from conftest import EXERCISES

from grader.course.batch import exercise_version, grade_task
from grader.client.packing import pack
from grader.errors import InvalidSubmission, UsageError
from grader.catalog.exercises import load_exercise
from grader.grading.grade import grade
from grader.limits import HELPER_BYTES, HELPER_FILES, LEARNER_FOLDER_FILES
from grader.course.sampleclass import make_class
from grader.service.service import Service
from grader.intake.sources import read_learner, read_source
from grader.intake.submission import check_files, read_submission

DATA = "day49-data"
SOLUTION = (EXERCISES / DATA / "solution" / "data.py").read_bytes()


def batch_grade(files: dict[str, bytes], exercise: str = DATA, learner: str = "x") -> dict:
    """What a batch (or the server's dispatcher) does with one learner's stored files."""
    out = grade_task({"submission_id": 1, "exercise": exercise, "version": exercise_version(exercise),
                      "learner": learner, "files": files})
    assert out["status"] != "error", out
    return out


def score(path: Path, exercise: str = DATA) -> float:
    return grade(exercise, path).score


def write(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def with_helper(relative: bool) -> dict[str, bytes]:
    """The solution with its token conversion moved into `_util.py`, imported as learners do."""
    text = SOLUTION.decode()
    start, end = text.index("def _as_tokens"), text.index("def make_xy")
    util = "import numpy as np\nimport torch\nfrom torch import Tensor\n\n\n" + text[start:end]
    importer = "from ._util import _as_tokens\n" if relative else "from _util import _as_tokens\n"
    return {"data.py": (text[:start] + importer + "\n\n" + text[end:]).encode(), "_util.py": util.encode()}


def latin1_crlf() -> bytes:
    text = "# -*- coding: latin-1 -*-\n# données d'entraînement, café\n" + SOLUTION.decode()
    return text.replace("\n", "\r\n").encode("latin-1")


# -- accept what Python accepts ------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf" + SOLUTION, latin1_crlf()], ids=["bom", "pep263-crlf"])
def test_a_solution_saved_as_python_accepts_it_gets_full_marks_in_grade_and_batch(tmp_path, data):
    compile(data, "data.py", "exec")  # CPython itself reads it
    folder = write(tmp_path / "me", {"data.py": data})
    graded = grade(DATA, folder)
    assert graded.error is None and graded.score == graded.max_score == 20
    assert batch_grade({"data.py": data})["grade"]["score"] == 20


def test_a_bom_in_a_toml_file_is_dropped_and_crlf_is_fine():
    exercise = load_exercise("day49-bughunt")
    solution = {n: (EXERCISES / "day49-bughunt" / "solution" / n).read_bytes() for n in exercise.files}
    plain = check_files(exercise, solution)
    toml = b"\xef\xbb\xbf" + solution["diagnosis.toml"].replace(b"\n", b"\r\n")
    read = check_files(exercise, {**solution, "diagnosis.toml": toml})
    assert read.problems == {} and read.toml == plain.toml and read.toml["diagnosis.toml"]


def test_a_quiz_sheet_with_a_bom_gets_full_marks(tmp_path):
    sheet = (EXERCISES / "day49-quiz" / "solution" / "answers.toml").read_bytes()
    graded = grade("day49-quiz", write(tmp_path / "me", {"answers.toml": b"\xef\xbb\xbf" + sheet}))
    assert graded.score == graded.max_score > 0


def test_each_broken_file_gets_its_own_located_problem_and_the_rest_is_graded(tmp_path):
    exercise = load_exercise("day48-decoder")
    files = {n: (EXERCISES / "day48-decoder" / "solution" / n).read_bytes() for n in exercise.files}
    files["positions.py"] = b"def broken(:\n"
    del files["gpt.py"]
    read = check_files(exercise, files)
    assert set(read.problems) == {"positions.py", "gpt.py"}
    assert read.problems["positions.py"].startswith("positions.py line 1, column ")
    assert read.problems["gpt.py"].startswith("missing file: gpt.py")
    with pytest.raises(InvalidSubmission, match=r"data\.py line 1, column .*decode"):  # nothing left
        check_files(load_exercise(DATA), {"data.py": b"x = '\xff'\n"})
    with pytest.raises(InvalidSubmission, match=r"data\.py line 1, column"):
        read_submission(load_exercise(DATA), write(tmp_path / "me", {"data.py": b"def broken(:\n"}))


def test_a_malformed_toml_in_a_code_exercise_is_graded_and_a_malformed_quiz_sheet_is_a_located_0(tmp_path):
    bughunt = load_exercise("day49-bughunt")
    files = {n: (EXERCISES / "day49-bughunt" / "solution" / n).read_bytes() for n in bughunt.files}
    files["diagnosis.toml"] = b'[bugs.A]\nrule = "attention-scaling"\nday = 43x\n'
    read = check_files(bughunt, files)
    assert "diagnosis.toml" not in read.toml and "line 3, column" in read.problems["diagnosis.toml"]
    out = batch_grade(files, "day49-bughunt")
    assert out["status"] == "graded", "the fixed code is graded, not `unreadable`"
    code = [c for c in out["grade"]["checks"] if not c["id"].startswith("diagnosis-")]
    assert code and all(c["passed"] for c in code)
    sheet = {"answers.toml": b"[answers]\nq1 = \n"}
    with pytest.raises(UsageError, match="line 2, column"):  # `grader grade` exits 2 (SPEC)
        read_submission(load_exercise("day49-quiz"), write(tmp_path / "quiz", sheet))
    out = batch_grade(sheet, "day49-quiz")
    assert out["grade"]["score"] == 0 and "line 2, column" in out["grade"]["error"]["message"]


# -- helper modules ------------------------------------------------------------------------------


@pytest.mark.parametrize("relative", [False, True], ids=["import-util", "from-dot-util"])
def test_a_learner_file_importing_a_helper_it_ships_gets_full_marks_in_grade_batch_and_upload(tmp_path,
                                                                                           relative):
    files = with_helper(relative)
    folder = write(tmp_path / "me", files)
    assert score(folder) == 20
    assert batch_grade(files)["grade"]["score"] == 20
    packed = pack(load_exercise(DATA), folder)  # `grader submit`: what the server receives ...
    assert set(packed.files) == {"data.py", "_util.py"}
    received = Service.read_upload(object.__new__(Service), load_exercise(DATA), packed.archive)  # no state
    assert received == files  # ... and keeps


def test_an_extra_py_file_nobody_imports_travels_but_never_runs(tmp_path):
    never = b"import os\nos._exit(3)  # would kill the jail at import\n"
    folder = write(tmp_path / "me", {"data.py": SOLUTION, "scratch.py": never})
    assert read_submission(load_exercise(DATA), folder).files["scratch.py"] == never
    graded = grade(DATA, folder)
    assert graded.error is None and graded.score == 20


def test_helpers_over_the_caps_are_left_out_with_a_warning(tmp_path):
    exercise = load_exercise(DATA)
    helpers = {f"h{i:02d}.py": b"X = 1\n" for i in range(HELPER_FILES + 2)}
    folder = write(tmp_path / "many", {"data.py": SOLUTION, **helpers})
    read = read_submission(exercise, folder)
    assert sorted(n for n in read.files if n != "data.py") == sorted(helpers)[:HELPER_FILES]
    left_out = f"h{HELPER_FILES:02d}.py, h{HELPER_FILES + 1:02d}.py"
    assert len(read.warnings) == 1 and left_out in read.warnings[0]
    graded = grade(DATA, folder)
    assert graded.score == 20 and [w.message for w in graded.warnings] == read.warnings
    found = read_source(tmp_path, exercise)  # a batch lists it among its notes
    assert [(n.entry, n.reason) for n in found.notes] == [("many", read.warnings[0])]
    big = write(tmp_path / "big", {"data.py": SOLUTION, "big.py": b"#" * (HELPER_BYTES + 1), "small.py": b""})
    files, problem, warnings = read_learner(big, exercise)
    assert problem is None and set(files) == {"data.py", "small.py"} and "big.py" in warnings[0]


def test_only_importable_helpers_beside_the_learner_files_travel(tmp_path):
    folder = write(tmp_path / "me", {
        "data.py": SOLUTION, "util.py": b"", "random.py": b"", "test_data.py": b"", "conftest.py": b"",
        "my-notes.py": b"", "__init__.py": b"", "notes.txt": b"",
    })
    write(folder / "old", {"helper.py": b""})
    assert set(read_learner(folder, load_exercise(DATA)).files) == {"data.py", "util.py"}


# -- one rule for grade and batch ----------------------------------------------------------------


@pytest.fixture(scope="module")
def learners(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """A solution and a mutant, so that the scores compared are not all full marks."""
    root = tmp_path_factory.mktemp("learners")
    kinds = make_class(DATA, root, 2, only=("solution", "mutant:unshifted-targets"))
    return {kind: {p.name: p.read_bytes() for p in (root / learner).iterdir()}
            for learner, kind in kinds.items()}


def zipped(files: dict[str, bytes], folder: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(f"{folder}/{name}", data)
    return buf.getvalue()


def test_grade_and_batch_give_the_same_score_in_every_layout_batch_accepts(tmp_path, learners):
    """Each learner of a class in a layout of its own: `grader grade` on what the learner has and
    a batch on what read_source found in the class folder read the same files (so grade them
    alike); a few of them are graded both ways for real, a mutant among them."""
    klass, own = tmp_path / "class", {}
    expected = {"helper": with_helper(relative=False)}
    for kind, files in learners.items():
        tag = kind.split(":")[-1]
        own[f"folder-{tag}"] = write(klass / f"folder-{tag}", files)
        own[f"nested-{tag}"] = write(klass / f"nested-{tag}" / "week7" / "mywork", files).parents[1]
        own[f"case-{tag}"] = write(klass / f"case-{tag}", {"Data.py": files["data.py"]})
        (klass / f"zip-{tag}.zip").write_bytes(zipped(files, "handin"))
        own[f"zip-{tag}"] = klass / f"zip-{tag}.zip"
        (klass / f"file-{tag}.py").write_bytes(files["data.py"])
        own[f"file-{tag}"] = klass / f"file-{tag}.py"
        expected.update({learner: files for learner in own if learner.endswith(tag)})
    own["helper"] = write(klass / "helper" / "src", expected["helper"]).parent
    exercise = load_exercise(DATA)
    found = {i.learner: i for i in read_source(klass, exercise).incoming}
    assert sorted(found) == sorted(own)
    for learner, path in own.items():
        assert found[learner].problem is None, (learner, found[learner].problem)
        assert found[learner].files == read_submission(exercise, path).files == expected[learner], learner
    scores = {learner: (score(own[learner]), batch_grade(found[learner].files)["grade"]["score"])
              for learner in ("zip-solution", "case-unshifted-targets", "helper")}
    assert scores["zip-solution"] == scores["helper"] == (20, 20), scores
    assert scores["case-unshifted-targets"][0] == scores["case-unshifted-targets"][1] < 20, scores


def test_grade_of_a_checkout_with_a_big_venv_below_stops_at_the_learner_file(tmp_path):
    """The walk is shallowest first and stops once every exercise file is seen: what lies below
    cannot change what is found, so thousands of files there cost nothing."""
    folder = write(tmp_path / "repo", {"data.py": SOLUTION})
    venv = folder / ".venv" / "lib"
    venv.mkdir(parents=True)
    for i in range(LEARNER_FOLDER_FILES + 1):  # past it, the walk would fail the learner
        (venv / f"m{i}.py").touch()
    files, problem, _ = read_learner(folder, load_exercise(DATA))
    assert problem is None and files == {"data.py": SOLUTION}
    shutil.rmtree(venv)
