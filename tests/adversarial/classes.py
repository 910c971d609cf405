"""The adversarial corpus of class inputs: hostile and broken SOURCEs for `grader batch`, one attack each.

Where tests/adversarial/cases.py attacks the grading of one submission, these attack the reading of
a class (grader/intake/sources.py) and what the batch prints and stores of it (grader/course/batch.py,
grader/text.py): damaged and forged archives, names that are not UTF-8 or carry terminal
sequences, ids that collide, Gradescope metadata bombs, folders and archives past their caps.

Every case builds its SOURCE (a folder or a class zip) under a temporary folder and says, as data,
what the batch must make of it: the honest learners found and graded (by canonical id,
grader.intake.sources.canonical_name), the learners that fail alone with a reason (and a fragment of it),
the entries listed as skipped, and the exit code of `grader batch` with and without
--allow-skipped. A SOURCE unreadable as a whole exits 2 naming it (`source_error`). Honest
learners' files are the day49-data solution, tagged so that no two share a hash.

The builders here are also used by tests/test_batch_sources.py (one place for each).
"""

from __future__ import annotations

import io
import os
import stat
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = "day49-data"
SOLUTION = (ROOT / "exercises" / EXERCISE / "solution" / "data.py").read_bytes()
HUGE = b"# HUGE-REPLY\n"  # a learner whose (faked) grading returns an oversized error message
OSC_TITLE = "\x1b]0;pwned\x07"
OSC_CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
CSI_CLEAR = "\x1b[2J\x1b[H"
FORMULA = "=cmd|' -C calc'!A0"  # a spreadsheet would run it


# -- builders ------------------------------------------------------------------------------------


def write(root: Path, files: dict[str, bytes | str]) -> Path:
    for name, data in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    return root


def zip_bytes(
    files: dict[str, bytes | str], symlinks: dict[str, str] | None = None, method: int = zipfile.ZIP_DEFLATED
) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return buf.getvalue()


def damaged(files: dict[str, bytes], method: int, only: str | None = None) -> bytes:
    """A zip whose members' (or member `only`'s) compressed streams have bytes flipped midway."""
    raw = bytearray(zip_bytes(files, method=method))
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as zf:
        for info in zf.infolist():
            if only and info.filename != only:
                continue
            start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
            for k in range(start + info.compress_size // 3, start + info.compress_size // 2):
                raw[k] ^= 0x5A
    return bytes(raw)


def zip64_claiming(entries: int, directory_size: int) -> bytes:
    """An empty archive whose ZIP64 end records claim `entries` entries (1.4 million is more than
    the 16-bit EOCD can say): forged, so nothing of that size is ever written."""
    zip64_eocd = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, directory_size, 0
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, 0, 1)
    return zip64_eocd + locator + struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0
    )


CODE = ("def make_xy(tokens, block):\n    return [t * 7 for t in tokens]\n" * 200).encode()


def honest(learner: str) -> bytes:
    """An honest learner's data.py: the solution, tagged (every learner's files differ)."""
    return SOLUTION + f"\n# {learner.encode('unicode_escape').decode()}\n".encode()


def folder_class(root: Path, learners: list[str], extra: dict[str, bytes | str] | None = None) -> Path:
    return write(root / "class", {**{f"{n}/data.py": honest(n) for n in learners}, **(extra or {})})


def zip_class(root: Path, members: dict[str, bytes | str], method: int = zipfile.ZIP_DEFLATED) -> Path:
    archive = root / "class.zip"
    archive.write_bytes(zip_bytes(members, method=method))
    return archive


def raw_folders(root: Path, names: list[bytes], files: dict[bytes, bytes] | None = None) -> Path:
    """Learner folders whose names are raw bytes (not UTF-8: how Linux hands them over)."""
    src = root / "class"
    src.mkdir(parents=True)
    for name in names:
        folder = Path(os.fsdecode(os.fsencode(src) + b"/" + name))
        folder.mkdir()
        (folder / "data.py").write_bytes(honest(os.fsdecode(name)))
    for name, data in (files or {}).items():
        Path(os.fsdecode(os.fsencode(src) + b"/" + name)).parent.mkdir(parents=True, exist_ok=True)
        Path(os.fsdecode(os.fsencode(src) + b"/" + name)).write_bytes(data)
    return src


# -- the cases ---------------------------------------------------------------------------------------


@dataclass
class ClassCase:
    name: str
    build: Callable[[Path], Path]  # tmp_path -> SOURCE (a folder or a class zip)
    honest: tuple[str, ...] = ()  # canonical ids found and graded by a worker
    failing: dict[str, str] = field(default_factory=dict)  # id -> a fragment of its reason
    skipped: tuple[str, ...] = ()  # entries listed as skipped (summary and batch.json)
    exit_code: int = 0
    exit_allowed: int | None = None  # with --allow-skipped, where it differs
    source_error: str | None = None  # exit 2: SOURCE unreadable as a whole; a fragment of why
    patch: dict[str, int] = field(default_factory=dict)  # "module.NAME" -> a lower cap for the case
    notes: str = ""


def _damaged_stream(method: int) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        src = folder_class(tmp, ["alice", "bob"])
        (src / "mallory.zip").write_bytes(damaged({"data.py": CODE}, method))
        return src

    return build


def _byte_flipped(tmp: Path) -> Path:
    """The CRC of mallory's only member flipped in the central directory: it reads, then fails."""
    raw = bytearray(zip_bytes({"data.py": honest("mallory")}))
    at = raw.rindex(b"PK\x01\x02") + 16
    raw[at : at + 4] = bytes(b ^ 0xFF for b in raw[at : at + 4])
    src = folder_class(tmp, ["alice", "bob"])
    (src / "mallory.zip").write_bytes(bytes(raw))
    return src


def _truncated(tmp: Path) -> Path:
    raw = zip_bytes({"data.py": honest("mallory")})
    src = folder_class(tmp, ["alice", "bob"])
    (src / "mallory.zip").write_bytes(raw[: len(raw) // 2])
    return src


def _non_utf8(tmp: Path) -> Path:
    return raw_folders(tmp, [b"caf\xe9", b"\xa4\xa4\xa4\xe5", b"alice"])  # CP1252, Big5, ASCII


def _one_moodle_folder(tmp: Path) -> Path:
    return folder_class(
        tmp,
        ["alice", "bob", "carol", "Dan Ng_77_assignsubmission_file_"],
        {"Dan Ng_77_assignsubmission_onlinetext_/onlinetext.html": "<p>hi</p>"},
    )


def _safe_name_collisions(tmp: Path) -> Path:
    from grader.course.learners import safe_name

    return folder_class(tmp, ["a b", safe_name("a b"), "Alice", "alice", "ALICE"])


def _gradescope(meta: str, folders: dict[str, bytes] | None = None) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        files = {f"{k}/data.py": v for k, v in (folders or {"submission_1": honest("1")}).items()}
        return write(tmp / "export", {"submission_metadata.yml": meta, **files})

    return build


NESTED = "submission_1:\n  :x: " + "[" * 5000 + "]" * 5000 + "\n"
ALIAS_BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "submission_1:\n  :submitters:\n  - :sid: *i\n"
)
YEAR_10000 = (
    "submission_1:\n  :created_at: 10000-01-01 00:00:00\n  :submitters:\n  - :sid: '42'\n"
    "submission_3:\n  :created_at: 2026-05-01 10:00:00\n  :submitters:\n  - :sid: '43'\n"
)
LONG_SID = "x" * 5_000_000
LONG_SID_META = (  # and a name and an email as long: all stored, within their columns
    f"submission_1:\n  :submitters:\n  - :sid: '{LONG_SID}'\n    :name: '{'n' * 5000}'\n"
    f"    :email: '{'e' * 5000}@x'\n"
)


def _directory_of_1_4_million(tmp: Path) -> Path:
    src = folder_class(tmp, ["alice", "bob"])
    (src / "mallory.zip").write_bytes(zip64_claiming(1_400_000, 46 * 1_400_000))
    return src


def _megabyte_members(tmp: Path) -> Path:
    """512 members of exactly 1 MiB of zeros: each under the per-member inflation check."""
    archive = tmp / "class.zip"
    zero = b"\0" * (1 << 20)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("alice/data.py", honest("alice"))
        for i in range(512):
            zf.writestr(f"s{i:03d}/data.py", zero)
    return archive


def _too_many_files(tmp: Path) -> Path:
    return folder_class(tmp, ["alice", "bob"], {f"mallory/f{i}.txt": "" for i in range(60)})


def _terminal_sequences_folder(tmp: Path) -> Path:
    return folder_class(
        tmp,
        ["alice", OSC_TITLE, "bob\rcarol"],
        {
            f"readme{OSC_CLIPBOARD}.txt": "x",  # skipped and listed: its name printed
            f"mallory/{CSI_CLEAR}a.py": "x",  # two .py, none data.py: both names in the reason
            f"mallory/{OSC_TITLE}b.py": "x",
        },
    )


def _terminal_sequences_zip(tmp: Path) -> Path:
    return zip_class(
        tmp,
        {
            "class/alice/data.py": honest("alice"),
            f"class/{OSC_CLIPBOARD}/data.py": honest("clip"),
            f"class/notes{CSI_CLEAR}\r.txt": "x",
            f"class/mallory/{OSC_TITLE}x.py": "x",
            "class/mallory/y\r.py": "y",
        },
    )


def _huge_reply(tmp: Path) -> Path:
    src = folder_class(tmp, ["alice"])
    (src / "mallory").mkdir()
    (src / "mallory" / "data.py").write_bytes(HUGE + honest("mallory"))
    return src


def _not_a_zip(tmp: Path) -> Path:
    source = tmp / f"class{OSC_CLIPBOARD}\r.zip"
    source.write_bytes(b"not a zip")
    return source


def _folder_and_file(tmp: Path) -> Path:
    extra = {"alice.py": honest("alice"), "bob.zip": zip_bytes({"data.py": honest("bob")})}
    return folder_class(tmp, ["alice", "bob", "carol"], extra)


def _special_files(tmp: Path) -> Path:
    """FIFOs (opened, they would block the batch forever) and a symbolic link to /dev/zero."""
    src = folder_class(tmp, ["alice", "bob"])
    (src / "mallory").mkdir()
    os.mkfifo(src / "mallory" / "data.py")
    os.mkfifo(src / "eve.py")
    os.symlink("/dev/zero", src / "zed.py")
    return src


def canonical(raw: str) -> str:
    from grader.intake.sources import canonical_name

    return canonical_name(raw)


def _cases() -> list[ClassCase]:
    from grader.course.learners import safe_name

    two = ("alice", "bob")
    return [
        ClassCase("damaged-deflate-stream", _damaged_stream(zipfile.ZIP_DEFLATED), two,
                  {"mallory": "data.py cannot be read from the archive"}),
        ClassCase("damaged-lzma-stream", _damaged_stream(zipfile.ZIP_LZMA), two,
                  {"mallory": "data.py cannot be read from the archive"}),
        ClassCase("damaged-bzip2-stream", _damaged_stream(zipfile.ZIP_BZIP2), two,
                  {"mallory": "data.py cannot be read from the archive"}),
        ClassCase("byte-flipped-learner-zip", _byte_flipped, two, {"mallory": "CRC"}),
        ClassCase("truncated-learner-zip", _truncated, two, {"mallory": "not a readable zip archive"}),
        ClassCase("non-utf8-folder-names", _non_utf8, ("caf\\xe9", "\\xa4\\xa4\\xa4\\xe5", "alice"),
                  notes="CP1252 and Big5 bytes: two learners, never merged (an IntegrityError before)"),
        ClassCase("one-moodle-folder-among-plain-ones", _one_moodle_folder, ("77", "alice", "bob", "carol"),
                  skipped=("Dan Ng_77_assignsubmission_onlinetext_",),
                  notes="the whole class parsed as Moodle before: three learners skipped, exit 0"),
        ClassCase("ids-differ-only-by-white-space",
                  lambda tmp: folder_class(tmp, [" alice", "alice", "alice "]),
                  ("\\u0020alice", "alice", "alice\\u0020")),
        ClassCase("safe-names-would-collide", _safe_name_collisions,
                  ("a b", safe_name("a b"), "Alice", "alice", "ALICE")),
        ClassCase("gradescope-deeply-nested-metadata", _gradescope(NESTED), exit_code=2,
                  source_error="nested more than"),
        ClassCase("gradescope-alias-bomb", _gradescope(ALIAS_BOMB), exit_code=2, source_error="aliases"),
        ClassCase("gradescope-year-10000",
                  _gradescope(YEAR_10000, {f"submission_{i}": honest(str(i)) for i in (1, 2, 3)}),
                  ("42", "43"), skipped=("submission_2",), exit_code=1, exit_allowed=0,
                  notes="the unlisted submission_2 is learner-like: exit 1 unless --allow-skipped"),
        ClassCase("gradescope-5-mb-learner-id", _gradescope(LONG_SID_META), (canonical(LONG_SID),)),
        ClassCase("learner-zip-claims-1.4-million-entries", _directory_of_1_4_million, two,
                  {"mallory": "1400000 members, more than"}),
        ClassCase("512-members-of-1-mib", _megabyte_members, exit_code=2, source_error="times its own size"),
        ClassCase("learner-folder-over-the-file-cap", _too_many_files, two, {"mallory": "more than 40 files"},
                  patch={"grader.intake.sources.MAX_FOLDER_FILES": 40}),
        ClassCase("terminal-sequences-in-folder-names", _terminal_sequences_folder,
                  ("alice", canonical(OSC_TITLE), canonical("bob\rcarol")),
                  {"mallory": "and none named data.py"}, skipped=(canonical(f"readme{OSC_CLIPBOARD}.txt"),)),
        ClassCase("terminal-sequences-in-member-names", _terminal_sequences_zip,
                  ("alice", canonical(OSC_CLIPBOARD)), {"mallory": "and none named data.py"},
                  skipped=(canonical(f"notes{CSI_CLEAR}\r.txt"),)),
        ClassCase("terminal-sequences-in-the-source-path",
                  lambda tmp: folder_class(tmp / f"from{OSC_TITLE}{CSI_CLEAR}mail\r", list(two)), two),
        ClassCase("unreadable-source-named-with-terminal-sequences", _not_a_zip, exit_code=2,
                  source_error="is neither a folder nor a zip archive"),
        ClassCase("a-class-of-one-learner-folder", lambda tmp: folder_class(tmp, ["alice"]), ("alice",),
                  notes="the one folder was taken for a wrapper: the learner became `data`"),
        ClassCase("a-class-zip-of-one-learner-folder",
                  lambda tmp: zip_class(tmp, {"class/alice/data.py": honest("alice")}), ("alice",)),
        ClassCase("one-learner-as-a-folder-and-a-file", _folder_and_file, ("carol",),
                  {"alice": "alice, alice.py are all learner alice", "bob": "bob, bob.zip are all"},
                  notes="one of the two was dropped unseen before"),
        ClassCase("fifos-and-a-link-to-dev-zero", _special_files, two,
                  {"mallory": "data.py is not a regular file", "eve": "eve.py is not a regular file",
                   "zed": "symbolic links are refused"}),
        ClassCase("csv-formula-learner-id", lambda tmp: folder_class(tmp, [FORMULA, "+1", "alice"]),
                  (FORMULA, "+1", "alice")),
        ClassCase("oversized-error-message", _huge_reply, ("alice", "mallory"),
                  notes="a grade whose error message is 8 MiB (the whole `where` of an import error)"),
    ]


CLASS_CASES = _cases()
