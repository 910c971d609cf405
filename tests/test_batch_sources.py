"""Reading a class from SOURCE: the layouts of a folder, Canvas, Moodle and Gradescope downloads,
and zip archives read safely. Nothing is graded here."""
from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from grader.catalog.exercises import load_exercise
from grader.intake.sources import MAX_ARCHIVE_MEMBERS, SourceError, read_source
from tests.adversarial.classes import CODE, damaged, write, zip_bytes

DATA = load_exercise("day49-data")             # one file: data.py
BUGHUNT = load_exercise("day49-bughunt")       # two: bughunt.py, diagnosis.toml


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
    assert all(v.problem is None for k, v in got.items() if k != "empty")
    assert got["empty"].problem.startswith("no files were submitted")   # still a learner: graded 0
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
    monkeypatch.setattr("grader.intake.sources.MAX_ARCHIVE_MEMBERS", 20)
    with pytest.raises(SourceError, match="members"):
        read_source(many, DATA)
    monkeypatch.setattr("grader.intake.sources.MAX_ARCHIVE_MEMBERS", MAX_ARCHIVE_MEMBERS)
    monkeypatch.setattr("grader.intake.sources.MAX_ARCHIVE_BYTES", 1000)
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
    damaged = tmp_path / "class.zip"                 # a zip whose central directory is garbage
    data = bytearray(zip_bytes({"alice/data.py": "A", "bob/data.py": "B"}))
    data[data.index(b"PK\x01\x02"):data.index(b"PK\x01\x02") + 4] = b"XXXX"
    damaged.write_bytes(bytes(data))
    with pytest.raises(SourceError, match=f"{damaged}: not a readable zip archive"):
        read_source(damaged, DATA)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no submissions"):
        read_source(tmp_path / "empty", DATA)


# -- issue 12: one learner's damage never breaks the class ------------------------------------------


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2])
def test_a_damaged_stream_in_one_learners_zip_fails_that_learner_alone(tmp_path, method):
    src = write(tmp_path / "class", {"alice/data.py": "A", "bob/data.py": "B"})
    (src / "mallory.zip").write_bytes(damaged({"data.py": CODE}, method))
    got = by_learner(read_source(src, DATA))
    assert got["alice"].problem is None and got["bob"].files == {"data.py": b"B"}
    assert "data.py cannot be read from the archive" in got["mallory"].problem
    archive = tmp_path / "class.zip"                 # the same damage in a member of the class zip
    archive.write_bytes(damaged({"alice/data.py": CODE, "bob/data.py": b"B"}, method, "alice/data.py"))
    assert "cannot be read" in by_learner(read_source(archive, DATA))["alice"].problem


def test_names_that_are_not_utf8_stay_distinct_and_stable_ids(tmp_path):
    src = tmp_path / "class"
    src.mkdir()
    raw = [b"caf\xe9", b"\xa4\xa4\xa4\xe5", b"caf\xc3\xa9", b" alice", b"alice", b"a\\xe9"]
    for name in raw:                                  # CP1252, Big5, UTF-8, white space, backslash
        os.mkdir(os.fsencode(src) + b"/" + name)
        (Path(os.fsdecode(os.fsencode(src) + b"/" + name)) / "data.py").write_text("x")
    ids = sorted(by_learner(read_source(src, DATA)))
    assert ids == sorted(["caf\\xe9", "\\xa4\\xa4\\xa4\\xe5", "café", "\\u0020alice", "alice", "a\\\\xe9"])
    assert ids == sorted(by_learner(read_source(src, DATA)))       # the same on every run
    from grader.store import Gradebook

    db = str(tmp_path / "g.db")
    for _ in range(2):                                # no IntegrityError, and again on a re-run
        with Gradebook(db) as gb:
            gb.add_submissions("day49-data", read_source(src, DATA).incoming)
    with Gradebook(db) as gb:
        assert len({s.learner for s in gb.submissions("day49-data", with_files=False)}) == 6


def test_canonical_names_are_nfc_visible_and_capped():
    from grader.limits import LEARNER_ID_CHARS
    from grader.intake.sources import canonical_name

    assert canonical_name("Jose\u0301") == canonical_name("Jos\u00e9") == "Jos\u00e9"
    assert canonical_name("a\tb\x1b]0;x\x07") == "a\\u0009b\\u001b]0;x\\u0007"
    assert canonical_name("a b") == "a b" and canonical_name("a ") == "a\\u0020"
    assert canonical_name("\udc80") == "\\x80" != canonical_name("\x80")   # a byte is no character
    long = canonical_name("x" * 5_000_000)
    assert len(long) == LEARNER_ID_CHARS and long != canonical_name("x" * 4_999_999)


def test_output_file_names_are_unique_per_learner():
    from grader.course.learners import output_names, safe_name

    hashed = safe_name("a b")
    assert hashed.startswith("a_b-") and safe_name(hashed) != hashed
    names = output_names(["a b", hashed, "Alice", "alice", "bob"])
    assert len({n.casefold() for n in names.values()}) == 5 and names["bob"] == "bob"


def test_one_moodle_named_folder_does_not_make_the_class_moodle(tmp_path):
    src = write(tmp_path / "class", {"alice/data.py": "A", "bob/data.py": "B", "carol/data.py": "C",
                                     "Dan Ng_77_assignsubmission_file_/data.py": "D",
                                     "Dan Ng_77_assignsubmission_onlinetext_/onlinetext.html": "t"})
    found = read_source(src, DATA)
    assert found.layout == "moodle+folder"
    assert sorted(by_learner(found)) == ["77", "alice", "bob", "carol"]
    assert [(n.entry, n.learner_like) for n in found.notes] == [
        ("Dan Ng_77_assignsubmission_onlinetext_", False)]


def test_gradescope_metadata_bombs_are_refused_or_bounded(tmp_path):
    def source(meta: str) -> Path:
        return write(tmp_path / f"gs{len(list(tmp_path.iterdir()))}",
                     {"submission_metadata.yml": meta, "submission_1/data.py": "A"})

    nested = "submission_1:\n  :x: " + "[" * 5000 + "]" * 5000 + "\n"
    with pytest.raises(SourceError, match="nested more than"):
        read_source(source(nested), DATA)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    bomb += "submission_1:\n  :submitters:\n  - :sid: *i\n"
    with pytest.raises(SourceError, match="aliases"):
        read_source(source(bomb), DATA)
    late = "submission_1:\n  :created_at: 10000-01-01 00:00:00\n  :submitters:\n  - :sid: '42'\n"
    got = by_learner(read_source(source(late), DATA))
    assert got["42"].submitted_at is None and got["42"].files == {"data.py": b"A"}


def test_archive_caps_bite_before_zipfile_parses_the_directory(tmp_path, monkeypatch):
    import tracemalloc

    archive = tmp_path / "huge.zip"                  # 1.4 million real entries, 64 MB of directory
    entry = zipfile.ZipInfo("x")
    one = io.BytesIO()
    with zipfile.ZipFile(one, "w") as zf:
        zf.writestr(entry, b"")
    raw = one.getvalue()
    cd_at = raw.index(b"PK\x01\x02")
    local, header = raw[:cd_at], raw[cd_at:raw.index(b"PK\x05\x06")]
    n = 1_400_000
    import struct
    with open(archive, "wb") as fh:
        fh.write(local)
        fh.write(header * n)
        fh.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1000, 1000, len(header) * n,
                             len(local), 0))
    tracemalloc.start()
    with pytest.raises(SourceError, match="central directory of"):
        read_source(archive, DATA)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 << 20                            # zipfile built nothing (686 MB before)
    monkeypatch.setattr("grader.intake.sources.MAX_ARCHIVE_MEMBERS", 20)
    lying = bytearray(zip_bytes({f"s{i}/data.py": "x" for i in range(50)}))
    at = lying.rindex(b"PK\x05\x06")
    lying[at + 8:at + 12] = struct.pack("<2H", 3, 3)  # the record claims 3 entries: walked anyway
    (tmp_path / "lying.zip").write_bytes(bytes(lying))
    with pytest.raises(SourceError, match="more than 20"):
        read_source(tmp_path / "lying.zip", DATA)


def test_small_members_count_towards_the_inflation_cap(tmp_path):
    archive = tmp_path / "class.zip"                 # 100 members of exactly 1 MiB of zeros
    archive.write_bytes(zip_bytes({f"s{i}/data.py": b"\0" * (1 << 20) for i in range(100)}))
    assert archive.stat().st_size < 200_000
    with pytest.raises(SourceError, match="times its own size"):
        read_source(archive, DATA)


def test_a_learner_folder_over_the_file_cap_fails_that_learner_alone(tmp_path, monkeypatch):
    monkeypatch.setattr("grader.intake.sources.MAX_FOLDER_FILES", 40)
    src = write(tmp_path / "class", {"alice/data.py": "A", **{f"mallory/f{i}.txt": "" for i in range(200)}})
    yielded = []
    real = os.scandir

    class Counting:                                   # how many entries the walk asked for
        def __init__(self, path):
            self.it = real(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.it.close()

        def __iter__(self):
            for e in self.it:
                yielded.append(e.name)
                yield e
    monkeypatch.setattr("grader.intake.sources.os.scandir", Counting)
    got = by_learner(read_source(src, DATA))
    assert got["alice"].files == {"data.py": b"A"}
    assert "more than 40 files" in got["mallory"].problem and got["mallory"].files == {}
    assert len(yielded) < 60                          # the walk stopped at the cap, not at 200


def test_every_skipped_entry_is_listed_and_learner_like_ones_are_marked(tmp_path):
    src = write(tmp_path / "class", {"alice/data.py": "A", "readme.txt": "x"})
    found = read_source(write(tmp_path / "gs", {
        "submission_metadata.yml": "submission_1:\n  :submitters: []\n",
        "submission_1/data.py": "A", "submission_2/data.py": "B"}), DATA)
    assert sorted((n.entry, n.learner_like) for n in found.notes) == [
        ("submission_1", True), ("submission_2", True)]
    assert [n.learner_like for n in read_source(src, DATA).notes] == [False]


def test_two_spellings_of_one_name_fail_that_learner_instead_of_dropping_one(tmp_path):
    src = write(tmp_path / "class", {"alice/data.py": "A", "Jose\u0301/data.py": "1",
                                     "Jos\u00e9/data.py": "2"})
    got = by_learner(read_source(src, DATA))
    assert sorted(got) == ["Jos\u00e9", "alice"]
    assert "appears twice" in got["Jos\u00e9"].problem and got["alice"].problem is None
    buf = io.BytesIO()                                # a zip with one member name twice
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("bob/data.py", "1")
        zf.writestr("carol/data.py", "C")
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zf.writestr("bob/data.py", "2")
    (tmp_path / "class.zip").write_bytes(buf.getvalue())
    got = by_learner(read_source(tmp_path / "class.zip", DATA))
    assert "appears twice" in got["bob"].problem and got["carol"].files == {"data.py": b"C"}


# -- issue 16: batch input as it really comes ------------------------------------------------------


def test_dot_folders_macosx_and_checkpoints_are_never_learners_nor_their_files(tmp_path):
    files = {
        "alice/data.py": "A",
        "alice/.ipynb_checkpoints/data-checkpoint.py": "old",
        "bob/.ipynb_checkpoints/data-checkpoint.py": "only a checkpoint",   # bob handed in nothing
        "carol/.backup/data.py": "a dot-folder copy",
        "carol/work/data.py": "C",
        ".git/objects/data.py": "x", ".venv/lib/data.py": "x", ".idea/data.py": "x",
        "__MACOSX/alice/._data.py": "junk", ".ipynb_checkpoints/data-checkpoint.py": "x",
    }
    src = write(tmp_path / "class", files)
    archive = tmp_path / "class.zip"
    archive.write_bytes(zip_bytes({f"class/{k}": v for k, v in files.items()}))
    for source in (src, archive):
        found = read_source(source, DATA)
        got = by_learner(found)
        assert sorted(got) == ["alice", "bob", "carol"], source
        assert got["alice"].files == {"data.py": b"A"} and got["carol"].files == {"data.py": b"C"}
        assert got["carol"].found == {"data.py": "work/data.py"}
        assert got["bob"].files == {} and got["bob"].problem.startswith("no files were submitted")
        assert found.notes == []                      # silently not learners: no "skipped" noise


def test_ignored_names_live_in_one_rule():
    from grader.intake.sources import IGNORED, ignored_name

    assert all(map(ignored_name, [*IGNORED, ".git", ".venv", ".DS_Store", "._data.py", ".x"]))
    assert not any(map(ignored_name, ["data.py", "alice", "__init__.py", "x.git"]))


class RawName(zipfile.ZipInfo):
    """A member whose name is written as these bytes, with the UTF-8 flag unset (as Windows
    Explorer, macOS Archive Utility and Info-ZIP's zip write them); zipfile would set the flag."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes, extra: bytes = b"", date_time=(2026, 11, 8, 12, 0, 0)):
        super().__init__(raw.decode("cp437"), date_time)
        self.raw, self.extra = raw, extra

    def _encodeFilenameFlags(self):
        return self.raw, self.flag_bits & ~0x800


def raw_zip(members: list[tuple[RawName, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for info, data in members:
            zf.writestr(info, data)
    return buf.getvalue()


def unicode_path(raw: bytes, name: str) -> bytes:
    import struct
    import zlib

    utf8 = name.encode()
    return struct.pack("<2HBL", 0x7075, 5 + len(utf8), 1, zlib.crc32(raw)) + utf8


def names_in(data: bytes) -> list[str]:
    from grader.intake.sources import read_zip

    return sorted(str(p) for p in read_zip(data, DATA))


def test_zip_names_without_the_utf8_flag_decode_as_the_archiver_meant(tmp_path):
    with zipfile.ZipFile(io.BytesIO(raw_zip([(RawName("王小明_data.py".encode("cp950")), b"x")]))) as zf:
        assert zf.infolist()[0].filename != "王小明_data.py"      # what zipfile alone makes of it
    roster = ["王小明", "陳美玲", "林志豪"]
    cases = {
        "utf-8": "utf-8",                          # macOS Archive Utility, Linux zip: no flag
        "big5": "cp950",                           # Traditional Chinese Windows Explorer
    }
    for label, encoding in cases.items():
        members = [(RawName(f"第四十九天作業/{who}/{file}".encode(encoding)), b"x = 1\n")
                   for who, file in zip(roster, ["王小明_data.py", "data.py", "data.py"], strict=True)]
        data = raw_zip(members)
        assert names_in(data) == sorted(f"第四十九天作業/{who}/{file}" for who, file in
                                        zip(roster, ["王小明_data.py", "data.py", "data.py"], strict=True))
        (tmp_path / f"{label}.zip").write_bytes(data)
        got = by_learner(read_source(tmp_path / f"{label}.zip", DATA))
        assert sorted(got) == sorted(roster), label        # canonical ids meet the roster's
        assert got["王小明"].found == {"data.py": "王小明_data.py"}
    one = raw_zip([(RawName("王小明_data.py".encode("cp950")), b"x")])
    assert names_in(one) == ["王小明_data.py"]                 # a single Big5 name alone
    german = raw_zip([(RawName(n.encode("cp437")), b"x") for n in ("Müller/data.py", "Jürgen Groß/data.py",
                                                                    "Ärzte/data.py")])
    assert names_in(german) == ["Jürgen Groß/data.py", "Müller/data.py", "Ärzte/data.py"]


def test_the_unicode_path_extra_field_is_honoured_when_its_crc_matches():
    raw = "陳美玲/data.py".encode("cp950")
    good = raw_zip([(RawName(raw, unicode_path(raw, "陳美玲/data.py")), b"x")])
    assert names_in(good) == ["陳美玲/data.py"]
    renamed = "Chen/data.py".encode()                   # renamed after the field was written: stale
    stale = raw_zip([(RawName(renamed, unicode_path(raw, "陳美玲/data.py")), b"x")])
    assert names_in(stale) == ["Chen/data.py"]
    latin = "Müller/data.py".encode("cp437")            # the field outranks a guess at the bytes
    assert names_in(raw_zip([(RawName(latin, unicode_path(latin, "Müller/data.py")), b"x")])) == [
        "Müller/data.py"]


def test_a_learners_own_zip_with_big5_names_is_decoded_too(tmp_path):
    inner = raw_zip([(RawName("第四十九天/王小明_資料.py".encode("cp950")), b"x = 1\n")])
    src = write(tmp_path / "class", {"alice/data.py": "A"})
    (src / "bob").mkdir()
    (src / "bob" / "work.zip").write_bytes(inner)
    got = by_learner(read_source(src, DATA))
    assert got["bob"].files == {"data.py": b"x = 1\n"}
    assert got["bob"].found == {"data.py": "work.zip/第四十九天/王小明_資料.py"}


def test_zip_safety_checks_still_bite_on_decoded_names(tmp_path):
    archive = tmp_path / "evil.zip"
    archive.write_bytes(raw_zip([(RawName(b"alice/data.py"), b"A"),
                                 (RawName("../作業/data.py".encode("cp950")), b"x")]))
    with pytest.raises(SourceError, match="outside"):
        read_source(archive, DATA)


def test_moodle_file_times_set_submitted_at_to_the_newest_file(tmp_path):
    from datetime import UTC, datetime

    import struct

    prefix = "Jane Doe_12345_assignsubmission_file_/"
    later = RawName(f"{prefix}notes.txt".encode(), date_time=(2026, 11, 9, 1, 30, 0))
    earlier = RawName(f"{prefix}data.py".encode(), date_time=(2026, 11, 8, 23, 50, 0))
    stamp = datetime(2026, 11, 10, 4, 0, tzinfo=UTC)    # Info-ZIP's UT field: Unix time, UTC
    ut = RawName("Bob Ray_555_assignsubmission_file_/data.py".encode(), date_time=(2026, 11, 8, 12, 0, 0),
                 extra=struct.pack("<2HBl", 0x5455, 5, 1, int(stamp.timestamp())))
    archive = tmp_path / "moodle.zip"
    archive.write_bytes(raw_zip([(earlier, b"J"), (later, b"n"), (ut, b"B")]))
    got = by_learner(read_source(archive, DATA))
    assert got["12345"].submitted_at == datetime(2026, 11, 9, 1, 30, tzinfo=UTC)   # zone-less: UTC
    assert got["555"].submitted_at == stamp
    src = write(tmp_path / "moodle", {"Jane Doe_12345_assignsubmission_file_/data.py": "J",
                                      "Jane Doe_12345_assignsubmission_file_/util.py": "u",
                                      "Bob Ray_555_assignsubmission_file_/data.py": "B"})
    newest = datetime(2026, 11, 9, 8, 15, 30, tzinfo=UTC).timestamp()
    os.utime(src / "Jane Doe_12345_assignsubmission_file_/data.py", (newest - 3600, newest - 3600))
    os.utime(src / "Jane Doe_12345_assignsubmission_file_/util.py", (newest, newest))
    got = by_learner(read_source(src, DATA))
    assert got["12345"].submitted_at == datetime.fromtimestamp(newest, UTC)
    folder_class = write(tmp_path / "plain", {"alice/data.py": "A", "bob/data.py": "B"})
    assert all(i.submitted_at is None for i in read_source(folder_class, DATA).incoming)  # Moodle's only


def test_an_empty_moodle_folder_is_no_submission(tmp_path):
    from grader.intake.incoming import NO_FILES_SUBMITTED

    src = write(tmp_path / "moodle", {"Jane Doe_12345_assignsubmission_file_/data.py": "J"})
    (src / "Li Wei_777_assignsubmission_file_").mkdir()
    (src / "Ann Lee_888_assignsubmission_file_").mkdir()
    (src / "Ann Lee_888_assignsubmission_file_" / ".DS_Store").write_text("junk")  # still nothing
    archive = tmp_path / "moodle.zip"
    archive.write_bytes(zip_bytes({"Jane Doe_12345_assignsubmission_file_/data.py": "J",
                                   "Li Wei_777_assignsubmission_file_/": "",
                                   "Ann Lee_888_assignsubmission_file_/__MACOSX/._x": ""}))
    for source in (src, archive):
        got = by_learner(read_source(source, DATA))
        assert sorted(got) == ["12345", "777", "888"]
        assert got["12345"].problem is None
        for pid in ("777", "888"):
            assert got[pid].files == {} and got[pid].problem.msgid == NO_FILES_SUBMITTED
            assert str(got[pid].problem) == "no files were submitted (this exercise needs data.py)"


def test_no_submission_grades_are_counted_apart_in_the_class_report_and_exports():
    from grader.course.learners import failed
    from grader.intake.incoming import is_no_submission, no_files_submitted
    from reports.class_report import summarize
    from reports.gradebook import row

    empty = failed(DATA, "invalid-submission", no_files_submitted(DATA.files), "777")
    broken = failed(DATA, "invalid-submission", "data.py is a symbolic link", "mallory")
    assert is_no_submission(empty) and not is_no_submission(broken)
    assert summarize([empty, broken, empty]).errors == {"no-submission": 2, "invalid-submission": 1}
    assert row(empty)["error_kind"] == "no-submission" and row(broken)["error_kind"] == "invalid-submission"


def test_a_class_of_another_exercise_is_warned_about():
    from grader.catalog.exercises import all_exercises
    from grader.intake.sources import Found, wrong_exercise
    from grader.intake.incoming import Incoming

    def learner(key, *names):
        return Incoming(key, {}, names=frozenset(names))

    wrong = Found("folder", [learner("a", "bughunt.py", "diagnosis.toml"), learner("b", "bughunt.py"),
                             learner("c", "data.py"), learner("d")])       # d: nothing, not counted
    warning = wrong_exercise(wrong, DATA, all_exercises())
    assert str(warning) == ("day49-data may be the wrong exercise: 2 of 3 learners handed in none of "
                            "its files (data.py); 2 of them hold files of day49-bughunt "
                            "(bughunt.py, diagnosis.toml)")
    assert str(wrong_exercise(wrong, DATA)).endswith("(data.py)")        # no other exercise known
    half = Found("folder", [learner("a", "x.py"), learner("b", "x.py"), learner("c", "data.py"),
                            learner("d", "Data.py".lower())])
    assert wrong_exercise(half, DATA, all_exercises()) is None            # half is not most
    alone = Found("folder", [learner("a", "bughunt.py")])
    assert wrong_exercise(alone, DATA, all_exercises()) is None           # one learner is no pattern


def moodle_class(root: Path) -> Path:
    """A Moodle download of day49-data where most learners handed in the bug hunt instead, and one
    submission folder is empty."""
    src = write(root, {
        "Jane Doe_12345_assignsubmission_file_/week49/data.py": "x = 1\n",
        "Bob Ray_555_assignsubmission_file_/bughunt.py": "x = 1\n",
        "Bob Ray_555_assignsubmission_file_/diagnosis.toml": "[bugs]\n",
        "Cy Ho_9_assignsubmission_file_/bughunt.py": "x = 1\n",
        "Cy Ho_9_assignsubmission_onlinetext_/onlinetext.html": "<p>see file</p>",
    })
    (src / "Li Wei_777_assignsubmission_file_").mkdir()
    return src


def test_dry_run_shows_the_class_without_grading_or_a_gradebook(tmp_path):
    from tests.test_batch import ROOT, grader

    src = moodle_class(tmp_path / "moodle")
    db = tmp_path / "never.db"
    proc = grader("batch", "day49-data", src, "--dry-run", "--db", db, exercises=ROOT / "exercises",
                  check_rc=2)                              # the verdict a batch would stop with
    out = proc.stdout
    assert "(moodle layout); dry run: nothing graded" in out
    assert "  12345  Jane Doe  submitted " in out and "    data.py  6 bytes  (from week49/data.py)" in out
    assert "  777  Li Wei\n    problem: no files were submitted (this exercise needs data.py)" in out
    wrong = ("day49-data may be the wrong exercise: 2 of 3 learners handed in none of its files "
             "(data.py); 2 of them hold files of day49-bughunt (bughunt.py, diagnosis.toml)")
    assert f"WARNING: {wrong}\n" in out
    assert f"error: {wrong}; nothing was graded or written (pass --force" in proc.stderr
    assert not db.exists() and not list(tmp_path.glob("never.db*"))         # not opened, not created
    stray = "Dan Ng_42_assignsubmission_file_"          # a file, not a folder: no layout places it
    (src / stray).write_text("x")
    had_default = (ROOT / "gradebook.db").exists()
    proc = grader("batch", "day49-data", src, "--dry-run", "--force", exercises=ROOT / "exercises",
                  check_rc=1)
    assert f"skipped {stray}: a Moodle file entry without a file name" in proc.stdout
    assert "--allow-skipped" in proc.stderr
    assert (ROOT / "gradebook.db").exists() == had_default     # the default --db is not created either
    grader("batch", "day49-data", src, "--dry-run", "--allow-skipped", "--force",
           exercises=ROOT / "exercises")
    proc = grader("batch", "day49-data", tmp_path / "nope", "--dry-run", exercises=ROOT / "exercises",
                  check_rc=2)
    assert "does not exist" in proc.stderr


def test_a_batch_refuses_the_wrong_exercise_grades_it_with_force_and_records_the_empty_folder(tmp_path):
    """Refused: exit 2, nothing written. With --force, graded from a fresh working folder that
    is left holding --out only (hypothesis's files go under GRADER_CACHE_DIR, never `.hypothesis/`)."""
    import json
    import subprocess
    import sys

    from grader.store import Gradebook
    from grader.intake.incoming import is_no_submission
    from reports.gradebook import render_export_csv
    from tests.test_batch import ROOT, copy_exercise

    exercises = copy_exercise(tmp_path / "exercises")
    src = moodle_class(tmp_path / "moodle")
    cwd, cache = tmp_path / "cwd", tmp_path / "cache"
    cwd.mkdir()
    db = str(tmp_path / "class.db")
    env = {**os.environ, "GRADER_EXERCISES_DIR": str(exercises), "GRADER_CACHE_DIR": str(cache),
           "PYTHONPATH": str(ROOT)}
    env.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)

    def batch(*more):
        return subprocess.run([sys.executable, "-m", "grader", "batch", "day49-data", str(src), "--db", db,
                               "--out", "out", "--workers", "1", *more],
                              capture_output=True, text=True, timeout=300, cwd=cwd, env=env)

    refused = batch()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "day49-data may be the wrong exercise" in refused.stderr and "--force" in refused.stderr
    assert not list(cwd.iterdir()) and not list(tmp_path.glob("class.db*"))   # nothing written
    proc = batch("--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in cwd.iterdir()) == ["out"]                 # no .hypothesis/ left behind
    out = cwd / "out"
    warning = "day49-data may be the wrong exercise: 2 of 3 learners handed in none of its files (data.py)"
    assert f"WARNING: {warning}" in proc.stdout and "graded all the same (--force)" in proc.stdout
    assert "1 submitted no file (graded 0, no submission): 777" in proc.stdout
    report = json.loads((out / "batch.json").read_text())
    assert report["warnings"] == [warning] and report["no_submission"] == ["777"]
    assert "777" not in [u["learner"] for u in report["unreadable_found"]]
    with Gradebook(db) as gb:
        current = {c.learner: c for c in gb.current_grades("day49-data")}
        export = render_export_csv(list(current.values()))
    empty = current["777"].grade
    assert empty.score == 0 and empty.error.kind == "invalid-submission" and is_no_submission(empty)
    assert not any(is_no_submission(current[k].grade) for k in ("12345", "555", "9"))
    assert [line.split(",")[0] for line in export.splitlines() if ",no-submission," in line] == ["777"]
    assert 'data-error="no-submission"' in (out / "class.html").read_text()
