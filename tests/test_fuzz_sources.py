"""Fuzzing grader.intake.sources (issue 12, Deliver 7), bounded in count: damaged, truncated and forged
archives of every layout, and hostile submission metadata. Whatever the input, read_source either
returns what it found or raises SourceError (SOURCE unreadable as a whole); a learner's own damaged
archive is that learner's problem and never a SourceError; memory stays within a small multiple of
the input (tracemalloc peak), as the caps in grader/limits.py promise."""

from __future__ import annotations

import io
import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.catalog.exercises import load_exercise
from grader.intake.sources import SourceError, read_source

DATA = load_exercise("day49-data")
CODE = ("def make_xy(tokens, block):\n    return [t * 7 for t in tokens]\n" * 20).encode()
METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2)
META = (
    "submission_1:\n  :created_at: 2024-01-02 03:04:05.000000 +0000\n  :submitters:\n"
    "  - :name: A\n    :sid: '1'\n    :email: a@x\nsubmission_2:\n  :submitters:\n  - :sid: 2\n"
)
LAYOUTS = {
    "folder": {f"s{i}/data.py": (CODE, m) for i, m in enumerate(METHODS)},
    "canvas": {"doe_1234_567_data.py": (CODE, METHODS[1]), "roe_LATE_1235_568_data-1.py": (CODE, METHODS[2])},
    "moodle": {
        "Jane Doe_11_assignsubmission_file_/data.py": (CODE, METHODS[1]),
        "Ro Ro_12_assignsubmission_file_/data.py": (CODE, METHODS[3]),
    },
    "gradescope": {
        "submission_metadata.yml": (META.encode(), METHODS[0]),
        "submission_1/data.py": (CODE, METHODS[1]),
        "submission_2/data.py": (CODE, METHODS[2]),
    },
}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def archive(layout: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, (data, method) in LAYOUTS[layout].items():
            zf.writestr(name, data, compress_type=method)
    return buf.getvalue()


def read(path: Path):
    """read_source's answer: what it found, or the SourceError; anything else escapes the test."""
    try:
        return read_source(path, DATA)
    except SourceError as exc:
        return exc


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


flips = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=6)


def flipped(data: bytes, where) -> bytes:
    raw = bytearray(data)
    for at, mask in where:
        raw[int(at * len(raw))] ^= mask
    return bytes(raw)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@FUZZ
@given(where=flips)
def test_a_byte_flipped_class_archive_is_read_or_refused_as_a_whole(tmp_path, layout, where):
    path = tmp_path / "class.zip"
    path.write_bytes(flipped(archive(layout), where))
    read(path)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@FUZZ
@given(cut=st.floats(0, 1))
def test_a_truncated_class_archive_is_read_or_refused_as_a_whole(tmp_path, layout, cut):
    data = archive(layout)
    path = tmp_path / "class.zip"
    path.write_bytes(data[: int(cut * len(data))] or b"PK")
    read(path)


@FUZZ
@given(where=flips, method=st.sampled_from(METHODS))
def test_a_learners_damaged_zip_is_that_learners_problem_only(tmp_path, where, method):
    root = tmp_path / "class"
    (root / "alice").mkdir(parents=True, exist_ok=True)
    (root / "alice" / "data.py").write_bytes(b"A")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        zf.writestr("work/data.py", CODE)
    (root / "mallory.zip").write_bytes(flipped(buf.getvalue(), where))
    found = read_source(root, DATA)  # never SourceError: the class is fine
    got = {i.learner: i for i in found.incoming}
    assert got["alice"].files == {"data.py": b"A"} and "mallory" in got


eocd = st.tuples(
    *[st.integers(0, 0xFFFF)] * 4,
    st.integers(0, 0xFFFFFFFF),
    st.integers(0, 0xFFFFFFFF),
    st.integers(0, 0xFFFF),
)


@FUZZ
@given(fields=eocd, prefix=st.binary(max_size=200), zip64=st.booleans())
def test_forged_end_of_central_directory_records_never_escape(tmp_path, fields, prefix, zip64):
    body = prefix
    if zip64:  # a ZIP64 record and locator claiming as much, before the classic record
        body += struct.pack(
            "<4sQ2H2L4Q",
            b"PK\x06\x06",
            44,
            45,
            45,
            0,
            0,
            fields[2],
            fields[3] * 99,
            fields[4] * 99,
            fields[5],
        ) + struct.pack("<4sLQL", b"PK\x06\x07", 0, len(prefix), 1)
    path = tmp_path / "class.zip"
    path.write_bytes(body + struct.pack("<4s4H2LH", b"PK\x05\x06", *fields))
    read(path)


yaml_text = st.one_of(
    st.text(max_size=300),
    st.lists(
        st.sampled_from(
            [
                "submission_1:",
                "\n",
                "  ",
                ":submitters:",
                "- ",
                ":sid: ",
                "&a ",
                "*a ",
                "[",
                "]",
                "{",
                "}",
                ":created_at: ",
                "10000-01-01 00:00:00",
                "0001-01-01",
                "!!timestamp ",
                "!!binary ",
                "!!python/name:os.system",
                "'",
                '"',
                "? ",
                ",",
                "<<: ",
                "1e999999",
                "0x" + "f" * 50,
                "\udcff",
                "\x00",
                "\t",
            ]
        ),
        max_size=60,
    ).map("".join),
)


@FUZZ
@given(meta=yaml_text)
def test_hostile_gradescope_metadata_is_read_or_refused(tmp_path, meta):
    root = tmp_path / "gs"
    (root / "submission_1").mkdir(parents=True, exist_ok=True)
    (root / "submission_1" / "data.py").write_bytes(b"A")
    (root / "submission_metadata.yml").write_bytes(meta.encode("utf-8", "surrogateescape"))
    got = read(root)
    if not isinstance(got, SourceError):
        assert all(len(i.learner) <= 256 for i in got.incoming)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_memory_stays_within_a_small_multiple_of_the_input(tmp_path, layout):
    path = tmp_path / "class.zip"
    for k, where in enumerate(([(0.5, 0x40)], [(0.3, 1), (0.7, 2)], [(0.95, 0xFF)])):
        data = flipped(archive(layout), where) if k else archive(layout)
        path.write_bytes(data)
        # what is kept is capped per file and counted as inflated: 8 MiB of fixed cost (imports
        # aside, YAML's loader) plus at most INFLATION_RATIO (200) bytes per archive byte
        assert peak_bytes(lambda: read(path)) < (8 << 20) + 200 * len(data)


names = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)


@settings(max_examples=300, deadline=None)
@given(a=names, b=names)
def test_canonical_names_never_merge_two_distinct_names(a, b):
    import unicodedata

    from grader.intake.sources import canonical_name

    same = unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b)
    assert (canonical_name(a) == canonical_name(b)) == same
    canonical_name(a).encode("utf-8")                      # always storable: never raises


@FUZZ
@given(raw=st.lists(st.binary(min_size=1, max_size=8).filter(lambda b: b"/" not in b and b"\0" not in b
                                                             and b not in (b".", b"..")),
                    min_size=1, max_size=6, unique=True))
def test_a_folder_of_learners_with_any_byte_names_keeps_every_learner(tmp_path, raw):
    import os
    import shutil
    import unicodedata

    root = tmp_path / "class"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for name in raw:
        os.mkdir(os.fsencode(root) + b"/" + name)
    from grader.intake.sources import ignored_name

    kept = [n for n in raw if not ignored_name(os.fsdecode(n))]
    got = read(root)
    if len(kept) == 1 or not kept:                    # one folder only is unwrapped; none: no class
        return
    assert not isinstance(got, SourceError)
    spellings = {unicodedata.normalize("NFC", os.fsdecode(n)) for n in kept}
    assert len({i.learner for i in got.incoming}) == len(spellings)
