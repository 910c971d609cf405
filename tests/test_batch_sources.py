"""Reading a class from SOURCE: the layouts of a folder, Canvas, Moodle and Gradescope downloads,
and zip archives read safely. Nothing is graded here."""
from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path

import pytest

from grader.exercises import load_exercise
from grader.sources import MAX_ARCHIVE_MEMBERS, SourceError, read_source

DATA = load_exercise("day49-data")             # one file: data.py
BUGHUNT = load_exercise("day49-bughunt")       # two: bughunt.py, diagnosis.toml


def write(root: Path, files: dict[str, bytes | str]) -> Path:
    for name, data in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    return root


def zip_bytes(files: dict[str, bytes | str], symlinks: dict[str, str] = {}) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        for name, target in symlinks.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return buf.getvalue()


def by_learner(found):
    return {i.learner: i for i in found.incoming}


def test_folder_layout_subfolders_single_files_nested_folders_and_learner_zips(tmp_path):
    src = write(tmp_path / "class", {
        "alice/data.py": "A",
        "bob/mywork/data.py": "B",                    # found one level down
        "carol.py": "C",                              # one file per learner (single-file exercise)
        "dave/data_final.py": "D",                    # the one .py of a single-file exercise
        "notes.txt": "not a learner",
        "alice/__MACOSX/._data.py": "junk",
    })
    (src / "empty").mkdir()                           # a learner with nothing: still a learner
    (src / "erin.zip").write_bytes(zip_bytes({"erin/data.py": "E"}))
    found = read_source(src, DATA)
    got = by_learner(found)
    assert found.layout == "folder"
    assert {k: v.files for k, v in got.items()} == {
        "alice": {"data.py": b"A"}, "bob": {"data.py": b"B"}, "carol": {"data.py": b"C"},
        "dave": {"data.py": b"D"}, "empty": {}, "erin": {"data.py": b"E"}}
    assert all(v.problem is None for v in got.values())
    assert [(n.entry, n.learner_like) for n in found.notes] == [("notes.txt", False)]


def test_folder_layout_refuses_symlinks_and_ambiguity_per_learner(tmp_path):
    src = write(tmp_path / "class", {"ok/data.py": "fine", "twice/a/data.py": "1", "twice/b/data.py": "2",
                                     "outside/secret.py": "s"})
    (src / "linker").mkdir()
    os.symlink(src / "outside" / "secret.py", src / "linker" / "data.py")
    os.symlink(src / "outside", src / "dirlink")
    got = by_learner(read_source(src, DATA))
    assert got["ok"].problem is None
    assert "symbolic link" in got["linker"].problem and got["linker"].files == {}
    assert "symbolic link" in got["dirlink"].problem
    assert "2 files could be data.py" in got["twice"].problem


def test_canvas_download_learner_ids_late_marker_and_reuploads(tmp_path):
    src = write(tmp_path / "submissions", {
        "doejane_1234_56789_bughunt.py": "old",
        "doejane_1234_56790_bughunt-1.py": "new",          # re-uploaded: the highest -N wins
        "doejane_1234_56789_diagnosis.toml": "[bugs]",
        "smithbob_LATE_777_888_bughunt.py": "late",
        "smithbob_LATE_777_888_diagnosis.toml": "[bugs]",
        "lee_42_43_report.pdf": "%PDF",
    })
    found = read_source(src, BUGHUNT)
    got = by_learner(found)
    assert found.layout == "canvas"
    assert got["1234"].files == {"bughunt.py": b"new", "diagnosis.toml": b"[bugs]"}
    assert got["1234"].name == "doejane" and not got["1234"].late
    assert got["777"].late and got["777"].files["bughunt.py"] == b"late"
    assert got["42"].files == {}                               # submitted only a PDF: graded as missing


def test_moodle_download_folders_flat_files_and_onlinetext(tmp_path):
    src = write(tmp_path / "moodle", {
        "Jane Doe_12345_assignsubmission_file_/data.py": "J",
        "Jane Doe_12345_assignsubmission_onlinetext_/onlinetext.html": "<p>hi</p>",
        "Wang Xiao Ming_67890_assignsubmission_file_/week49/data.py": "W",
        "Bob Ray_555_assignsubmission_file_data.py": "flat",
    })
    found = read_source(src, DATA)
    got = by_learner(found)
    assert found.layout == "moodle"
    assert got["12345"].files == {"data.py": b"J"} and got["12345"].name == "Jane Doe"
    assert got["67890"].files == {"data.py": b"W"} and got["67890"].name == "Wang Xiao Ming"
    assert got["555"].files == {"data.py": b"flat"}


GRADESCOPE_META = """\
submission_1001:
  :submitters:
  - :name: Solo Student
    :sid: 'A100'
    :email: solo@example.edu
  :created_at: 2026-05-01 10:00:00.000000000 -07:00
  :score: 0.0
submission_1002:
  :submitters:
  - :name: Pair One
    :sid: 'A200'
    :email: one@example.edu
  - :name: Pair Two
    :sid: ''
    :email: two@example.edu
  :created_at: 2026-05-01 11:00:00.000000000 -07:00
"""


def test_gradescope_export_metadata_and_group_submissions(tmp_path):
    archive = tmp_path / "assignment_export.zip"
    archive.write_bytes(zip_bytes({
        "assignment_123_export/submission_metadata.yml": GRADESCOPE_META,
        "assignment_123_export/submission_1001/data.py": "solo",
        "assignment_123_export/submission_1002/src/data.py": "pair",
        "assignment_123_export/submission_9999/data.py": "unlisted",
    }))
    found = read_source(archive, DATA)
    got = by_learner(found)
    assert found.layout == "gradescope"
    assert set(got) == {"A100", "A200", "two@example.edu"}
    assert got["A100"].files == {"data.py": b"solo"} and got["A100"].email == "solo@example.edu"
    assert got["A200"].files == got["two@example.edu"].files == {"data.py": b"pair"}
    assert got["A100"].submitted_at is not None
    assert any(n.entry == "submission_9999" and n.learner_like for n in found.notes)


def test_a_zip_source_is_read_like_its_folder(tmp_path):
    archive = tmp_path / "class.zip"
    archive.write_bytes(zip_bytes({"class/alice/data.py": "A", "class/bob/data.py": "B"}))
    got = by_learner(read_source(archive, DATA))
    assert {k: v.files for k, v in got.items()} == {"alice": {"data.py": b"A"}, "bob": {"data.py": b"B"}}


@pytest.mark.parametrize("evil", ["../escape/data.py", "/etc/data.py", "a/../../data.py", "C:/x/data.py",
                                  "..\\..\\data.py"])
def test_an_archive_with_a_path_out_of_it_is_refused(tmp_path, evil):
    archive = tmp_path / "evil.zip"
    archive.write_bytes(zip_bytes({"alice/data.py": "A", evil: "pwned"}))
    with pytest.raises(SourceError, match="outside"):
        read_source(archive, DATA)
    assert not (tmp_path.parent / "escape").exists()


def test_archive_symlinks_and_bombs_are_refused(tmp_path):
    bomb = b"\0" * (3 << 20)                       # 3 MiB of zeros: deflates ~1000:1
    archive = tmp_path / "class.zip"
    archive.write_bytes(zip_bytes({"alice/data.py": "A", "bob/data.py": bomb},
                                  symlinks={"carol/data.py": "/etc/shadow"}))
    got = by_learner(read_source(archive, DATA))
    assert got["alice"].problem is None
    assert "larger than" in got["bob"].problem
    assert "symbolic link" in got["carol"].problem and got["carol"].files == {}


def test_archive_caps_on_members_and_declared_size(tmp_path, monkeypatch):
    many = tmp_path / "many.zip"
    many.write_bytes(zip_bytes({f"s{i}/data.py": "x" for i in range(50)}))
    monkeypatch.setattr("grader.sources.MAX_ARCHIVE_MEMBERS", 20)
    with pytest.raises(SourceError, match="members"):
        read_source(many, DATA)
    monkeypatch.setattr("grader.sources.MAX_ARCHIVE_MEMBERS", MAX_ARCHIVE_MEMBERS)
    monkeypatch.setattr("grader.sources.MAX_ARCHIVE_BYTES", 1000)
    big = tmp_path / "big.zip"
    big.write_bytes(zip_bytes({"a/data.py": "x" * 2000}))
    with pytest.raises(SourceError, match="inflate"):
        read_source(big, DATA)


def test_a_learners_own_unsafe_zip_fails_only_that_learner(tmp_path):
    src = write(tmp_path / "class", {"alice/data.py": "A"})
    (src / "mallory").mkdir()
    (src / "mallory" / "work.zip").write_bytes(zip_bytes({"../../data.py": "x"}))
    got = by_learner(read_source(src, DATA))
    assert got["alice"].problem is None
    assert "outside" in got["mallory"].problem


def test_unusable_sources_are_usage_errors(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        read_source(tmp_path / "nope", DATA)
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(SourceError, match="neither a folder nor a zip"):
        read_source(tmp_path / "x.txt", DATA)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no submissions"):
        read_source(tmp_path / "empty", DATA)
