"""A class's submissions, as an instructor downloads them: one learner per folder, file or archive.

`read_source(SOURCE, exercise)` understands these layouts (it looks at the files, never at a flag):

- **folder**: one sub-folder per learner (`alice/data.py`), or one file per learner when the exercise
  has one file (`alice.py`, `bob.toml`), or one zip archive per learner (`carol.zip`). The learner
  id is the folder or file name (without its suffix).
- **Canvas** ("Download Submissions"): flat files `{name}_{user id}_{submission id}_{file name}`,
  with `_LATE` after the name for late ones (`doejane_LATE_1234_56789_data.py`); a re-upload gets
  `-1`, `-2` before the suffix (`data-1.py`), which is undone. Learner id: the Canvas user id.
- **Moodle** ("Download all submissions"): folders `{Full Name}_{participant id}_assignsubmission_file_`
  (or flat files with that prefix, when "download submissions in folders" is off); onlinetext
  folders are ignored; an empty file-submission folder is a learner who submitted no file (their
  problem: incoming.no_files_submitted). Learner id: the participant id, read from the end of a
  folder's name only (a display name is the learner's choice: `Mallory_222_assignsubmission_file_`
  is a name, not participant 222); a flat file naming two participants is skipped, and two entries
  naming one participant under different names are both reported, neither graded as it.
  Incoming.submitted_at is the newest time of the learner's files (newest_file_time:
  approximate, see member_time).
- **Gradescope** ("Export Submissions"): `submission_metadata.yml` and one `submission_{id}` folder
  per submission; each submitter (`:sid:`, else `:email:`, else `:name:`) of a group submission gets
  the group's files. Learner id: the student id (sid).

SOURCE may be that folder or a zip archive of it; a single folder wrapping everything is looked
into (unless it holds an exercise file by name: then it is a class of one learner), and a learner
who uploaded a zip of their work has it opened (one level deep). Archives are read in memory,
never extracted: a member with an absolute path or `..`, a symbolic link, an encrypted member, or
one that would inflate past its cap is refused, and caps on the number of members and on the total
inflated size refuse a zip bomb before anything is read. Within a learner's files each exercise
file is found by name at the shallowest depth (an exercise with a single file also takes the one
file with its suffix, unless the learner handed in a notebook), so `mywork/data.py` is found too.
An exercise file found by neither rule comes from the learner's notebook (`alice.ipynb`, or the one
`.ipynb` at the shallowest depth of their files), assembled by grader.intake.notebooks: the file says
where each of its lines came from, and what was left out.

At every level (a learner's own folder and zip too), IGNORED names and every name starting with
"." (.git, .venv, .ipynb_checkpoints, __MACOSX's ._ files) are no learner and no learner's file.
A zip member's name without the UTF-8 flag is decoded as its archiver meant it (member_name:
UTF-8 from macOS and Linux, the Unicode Path field, else the Windows code page, Big5 included).
A learner whose folder holds no file at all gets the problem "no files were submitted".

class_verdict says when SOURCE is likely the wrong input: one learner's own folder, a folder of no
learner's files (`/etc/ssl`), or another exercise's class; `grader batch` refuses it unless --force.
"""

from __future__ import annotations

import bz2  # noqa: F401 - zipfile's bzip2 members: its errors are among READ_ERRORS' OSError
import functools
import hashlib
import io
import itertools
import keyword
import lzma
import os
import re
import stat
import struct
import sys
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from grader.errors import NotebookError, SourceError
from grader.intake.incoming import Incoming, no_files_submitted
from grader.intake.notebooks import assemble, is_notebook
from grader.limits import ARCHIVE_BYTES as MAX_ARCHIVE_BYTES  # the caps: grader/limits.py
from grader.limits import ARCHIVE_MEMBERS as MAX_ARCHIVE_MEMBERS
from grader.limits import CENTRAL_DIRECTORY_BYTES as MAX_DIRECTORY_BYTES
from grader.limits import HELPER_BYTES as MAX_HELPER_BYTES
from grader.limits import HELPER_FILES as MAX_HELPER_FILES
from grader.limits import (
    INFLATION_CHECKED_ABOVE,
    NOTEBOOK_BYTES,
    WRONG_EXERCISE_LEARNERS,
    WRONG_EXERCISE_SHARE,
)
from grader.limits import INFLATION_RATIO as MAX_RATIO
from grader.limits import LEARNER_FILE_BYTES as MAX_FILE_BYTES
from grader.limits import LEARNER_FOLDER_FILES as MAX_FOLDER_FILES
from grader.limits import LEARNER_ID_CHARS as MAX_ID_CHARS
from grader.limits import METADATA_BYTES as MAX_METADATA_BYTES
from grader.limits import METADATA_DEPTH as MAX_METADATA_DEPTH
from grader.limits import METADATA_NODES as MAX_METADATA_NODES
from grader.limits import NESTED_ARCHIVE_BYTES as MAX_NESTED_BYTES
from grader.locale import Message, message_of, msg
from grader.models import Exercise

# Never a learner nor a learner's file, at any level of SOURCE (inside a learner's folder or zip
# too): what operating systems, editors, notebooks and version control leave beside the work. With
# every name that starts with "." (ignored_name): .git, .venv, .idea, .ipynb_checkpoints (whose
# data-checkpoint.py is no submission), macOS's .DS_Store and ._ resource forks.
IGNORED = ("__MACOSX", "__pycache__", ".ipynb_checkpoints", "Thumbs.db", "desktop.ini")

CANVAS = re.compile(r"^(?P<name>[^_]*?)(?P<late>_late)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$", re.I)
MOODLE = re.compile(
    r"^(?P<name>.+?)_(?P<pid>\d+)_assign(?:submission|feedback)_(?P<plugin>[a-z]+)_(?P<rest>.*)$"
)
# A Moodle submission folder's name: the participant id is the one right before the plugin at its
# end, never one earlier in it (a display name is the learner's choice, and can be
# `Mallory_222_assignsubmission_file_`); a flat file's name holds that prefix once (MOODLE_MARK)
MOODLE_FOLDER = re.compile(r"^(?P<name>.+)_(?P<pid>\d+)_assign(?:submission|feedback)_(?P<plugin>[a-z]+)_$")
MOODLE_MARK = re.compile(r"_\d+_assign(?:submission|feedback)_[a-z]+_")
GRADESCOPE_META = "submission_metadata.yml"
REUPLOAD = re.compile(r"^(?P<stem>.+)-\d+(?P<suffix>\.[^.]+)?$")
LEARNER_PROBLEM = "\x00learner-problem"  # a key no canonical name can be (a NUL is escaped)

# Whatever reading one archive or one member can raise: zipfile's own errors, the decompressors'
# (zlib.error, lzma.LZMAError; bz2 raises OSError and ValueError), struct.error from a short header,
# UnicodeDecodeError (a ValueError) from a member name, NotImplementedError from an unknown method.
READ_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    lzma.LZMAError,
    struct.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    OverflowError,
    KeyError,
    IndexError,
)


# -- names: one canonical form for every name that comes in --------------------------------------


def canonical_name(raw: str) -> str:
    """The one form of a name from SOURCE (a folder, file or member name, a Gradescope id):
    every learner id is the canonical name it was found under, on every run and machine.

    - Bytes that are not UTF-8 (a CP1252 or Big5 folder name reaches Python as surrogate escapes)
      are written `\\xHH`, byte by byte: no guess at the encoding, so two names never merge.
    - Unicode NFC normalisation (macOS writes NFD: the same learner is the same id on Linux).
    - A leading or trailing space, any other white space and any control or format character is
      written `\\uHHHH`, and a backslash `\\\\`: visible, and never stripped, so ids that differ
      only by white space stay two learners, and the rule is one-to-one.
    - Longer than LEARNER_ID_CHARS: cut, and a hash of the whole name appended (still unique).
    """
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:  # surrogate escapes from os.fsdecode: try the bytes as UTF-8 again
        try:
            raw = raw.encode("utf-8", "surrogateescape").decode("utf-8")
        except UnicodeError:
            pass
    raw = unicodedata.normalize("NFC", raw)
    out = []
    last = len(raw) - 1
    for i, ch in enumerate(raw):
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        elif (ch == " " and i in (0, last)) or (ch != " " and (ch.isspace() or _invisible(ch))):
            out.append(
                f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"  # \\x is a byte's
            )
        else:
            out.append(ch)
    name = "".join(out)
    if len(name) > MAX_ID_CHARS:
        name = name[: MAX_ID_CHARS - 17] + "-" + hashlib.sha256(name.encode()).hexdigest()[:16]
    return name


def _invisible(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


# -- what a layout found --------------------------------------------------------------------------


@dataclass
class Entry:
    """A file of the source, read only when it may be a learner file."""

    data: bytes | None = None
    problem: str | None = None  # symbolic link, too large, unsafe path, encrypted
    is_dir: bool = False  # kept so that an empty learner folder is still a learner
    fatal: bool = False  # the problem fails the learner whatever else is found (too many files)
    modified: datetime | None = None  # a file's time as SOURCE records it (mtime, zip member time)


@dataclass(frozen=True)
class Skipped:
    """An entry of SOURCE that is no learner's submission: data, for the summary and batch.json."""

    entry: str  # its path in SOURCE
    reason: str  # a Message
    learner_like: bool = True  # a folder, archive or exercise file: a learner may be missing

    def __str__(self) -> str:
        return f"skipped {self.entry}: {self.reason}"

    def as_dict(self) -> dict:
        return {"entry": self.entry, "reason": str.__str__(self.reason), "learner_like": self.learner_like}


@dataclass
class Found:
    layout: str
    incoming: list[Incoming]
    notes: list[Skipped] = field(default_factory=list)  # every entry that was skipped, and why
    # files at SOURCE's top named like an exercise file (folder layout): one learner's own
    # folder given as SOURCE, not a class (not_a_class)
    loose: list[str] = field(default_factory=list)

    @property
    def skipped_learners(self) -> list[Skipped]:
        return [n for n in self.notes if n.learner_like]


Tree = dict[PurePosixPath, Entry]


# -- reading: a folder or an archive into a Tree ---------------------------------------------------


def _wanted(name: str, exercise: Exercise) -> bool:
    """Could this file be a learner file (or something that leads to one)? Others are never read."""
    suffixes = {Path(f).suffix for f in exercise.files}
    suffix = Path(name).suffix.lower()
    return name == GRADESCOPE_META or suffix in suffixes or suffix == ".zip" or is_notebook(name)


def ignored_name(name: str) -> bool:
    """Is this file or folder name one that is never a learner's work (IGNORED, or a dot name)?"""
    return name in IGNORED or name.startswith(".")


def _ignored(parts) -> bool:
    return any(map(ignored_name, parts))


def _symlink(name: str) -> Entry:
    return Entry(problem=msg("{name} is a symbolic link; symbolic links are refused", name=name))


def _too_large(name: str, limit: int) -> Entry:
    return Entry(problem=msg("{name} is larger than {size} KiB", name=name, size=limit // 1024))


def _twice(name: str) -> Entry:
    """Two entries with one canonical name (NFC and NFD spellings, or a zip's duplicate member):
    which is the submission cannot be told, so the learner fails, rather than one being dropped."""
    return Entry(problem=msg("{name} appears twice in the submission", name=name), fatal=True)


def _limit(name: str) -> int:
    lower = name.lower()
    if lower.endswith(".zip"):
        return MAX_NESTED_BYTES
    if is_notebook(lower):
        return NOTEBOOK_BYTES
    return MAX_METADATA_BYTES if name == GRADESCOPE_META else MAX_FILE_BYTES


def _unwrapped(root: Path, exercise: Exercise) -> Path:
    """Into a single folder that wraps everything, on disk: its entries are the learners. A
    folder holding an exercise file by name is a learner's, not a wrapper (a class of one)."""
    while True:
        inside: list[os.DirEntry] = []
        with os.scandir(root) as it:
            for e in it:
                if not _ignored((e.name,)):
                    inside.append(e)
                if len(inside) > 1:
                    return root
        if len(inside) != 1 or not inside[0].is_dir(follow_symlinks=False):
            return root
        if any(os.path.lexists(os.path.join(inside[0].path, f)) for f in exercise.files):
            return root
        root = Path(inside[0].path)


def read_folder(root: Path, exercise: Exercise) -> Tree:
    """A folder as a Tree; names canonical (canonical_name). Each learner's folder is walked up to
    LEARNER_FOLDER_FILES entries: past that the walk stops, and that learner alone fails."""
    root = _unwrapped(Path(root), exercise)
    tree: Tree = {}
    seen = 0
    with os.scandir(root) as it:
        for top in it:  # not sorted: a folder of a million entries is never listed whole
            if _ignored((top.name,)):
                continue
            key = PurePosixPath(canonical_name(top.name))
            if top.is_dir(follow_symlinks=False):
                learner = _read_learner_folder(Path(top.path), key, exercise)
            else:
                learner = {key: _read_file(top, key.name, exercise)}
            if key in tree or (key / LEARNER_PROBLEM) in tree:
                learner = {key / LEARNER_PROBLEM: _twice(str(key))}
            seen += len(learner)
            if seen > MAX_ARCHIVE_MEMBERS:
                raise SourceError(
                    msg("SOURCE: more than {limit} files; is this a class?", limit=MAX_ARCHIVE_MEMBERS)
                )
            tree.update(learner)
    return tree


def _read_learner_folder(path: Path, key: PurePosixPath, exercise: Exercise) -> Tree:
    """One learner's folder, walked level by level, shallowest first, and no deeper once every
    exercise file has been seen by name: match_files takes the shallowest, so what lies below
    cannot change what it finds (and `grader grade EX .` in a checkout with .git or a venv stays
    within LEARNER_FOLDER_FILES)."""
    tree: Tree = {key: Entry(is_dir=True)}
    wanted = {f.lower() for f in exercise.files}
    seen: set[str] = set()
    level = [(path, key)]
    count = 0
    while level and not wanted <= seen:
        below = []
        for folder, folder_key in level:
            try:
                it = os.scandir(folder)
            except OSError as exc:
                tree[folder_key / LEARNER_PROBLEM] = Entry(
                    problem=msg(
                        "{name} cannot be read: {error}", name=str(folder_key), error=exc.strerror or ""
                    ),
                    fatal=True,
                )
                continue
            with it:
                for e in it:
                    if _ignored((e.name,)):
                        continue
                    count += 1
                    if count > MAX_FOLDER_FILES:  # stop here: the rest is never listed
                        return {
                            key: Entry(is_dir=True),
                            key / LEARNER_PROBLEM: Entry(
                                problem=msg(
                                    "{name} holds more than {limit} files and folders; is this a submission?",
                                    name=str(key),
                                    limit=MAX_FOLDER_FILES,
                                ),
                                fatal=True,
                            ),
                        }
                    child = folder_key / canonical_name(e.name)
                    if child in tree:
                        tree[key / LEARNER_PROBLEM] = _twice(str(child))
                    elif e.is_dir(follow_symlinks=False):
                        tree[child] = Entry(is_dir=True)
                        below.append((Path(e.path), child))
                    else:
                        tree[child] = _read_file(e, child.name, exercise)
                        seen.add(child.name.lower())
        level = below
    return tree


def _read_file(entry: os.DirEntry, name: str, exercise: Exercise) -> Entry:
    if entry.is_symlink():
        return _symlink(name)
    if not entry.is_file(follow_symlinks=False):
        return Entry(problem=msg("{name} is not a regular file", name=name))
    modified = _file_time(entry)
    if not _wanted(name, exercise):
        return Entry(modified=modified)
    limit = _limit(name)
    try:  # O_NOFOLLOW: a file swapped for a symbolic link since the listing is not followed
        fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with open(fd, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        return Entry(problem=msg("{name} cannot be read: {error}", name=name, error=exc.strerror or ""))
    return Entry(data=data, modified=modified) if len(data) <= limit else _too_large(name, limit)


def _file_time(entry: os.DirEntry) -> datetime | None:
    try:
        return _in_range(datetime.fromtimestamp(entry.stat(follow_symlinks=False).st_mtime, UTC))
    except (OSError, OverflowError, ValueError):
        return None


def _in_range(when: datetime) -> datetime | None:
    """A time, or None when outside 1970-2200 (no submission is that old or that new)."""
    return when if 1970 <= when.year <= 2200 else None


def _safe_member_path(name: str) -> PurePosixPath | None:
    """The member's path inside the archive (canonical names), or None if it could land outside it."""
    name = name.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or "\x00" in name:
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts) or not parts:
        return None
    return PurePosixPath(*map(canonical_name, parts))


# The zip records read before zipfile parses anything (APPNOTE.TXT 4.3.16, 4.3.15, 4.3.14, 4.3.12)
EOCD = struct.Struct("<4s4H2LH")  # signature, disks, entries here, entries, directory size, offset
ZIP64_LOCATOR = struct.Struct("<4sLQL")
ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
DIRECTORY_HEADER = struct.Struct("<4s4B4HL2L5H2L")  # one central directory entry, 46 bytes


def _check_directory(fh, label: str, max_members: int | None = None) -> None:
    """Refuse an archive on its End Of Central Directory record and its directory's entry count,
    walked with struct as zipfile would walk it, before zipfile builds an object for any entry;
    more than max_members (default ARCHIVE_MEMBERS) members is refused."""
    max_members = MAX_ARCHIVE_MEMBERS if max_members is None else max_members

    def refuse(text: Message):
        raise SourceError(text)

    def not_a_zip(why: str):
        refuse(msg("{label}: not a readable zip archive: {error}", label=label, error=why))

    size = fh.seek(0, os.SEEK_END)
    tail_at = max(0, size - EOCD.size - 0xFFFF)  # the record, and a comment of at most 64 KiB
    fh.seek(tail_at)
    tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < EOCD.size:
        not_a_zip("no end of central directory record")
    _, _, _, _, entries, directory_size, _, _ = EOCD.unpack_from(tail, at)
    record_at = tail_at + at
    if record_at >= ZIP64_LOCATOR.size + ZIP64_EOCD.size:
        fh.seek(record_at - ZIP64_LOCATOR.size)
        if fh.read(4) == b"PK\x06\x07":  # zipfile then trusts the ZIP64 record before the locator
            fh.seek(record_at - ZIP64_LOCATOR.size - ZIP64_EOCD.size)
            record = fh.read(ZIP64_EOCD.size)
            if record[:4] == b"PK\x06\x06":
                fields = ZIP64_EOCD.unpack(record)
                entries, directory_size = fields[7], fields[8]
                record_at -= ZIP64_LOCATOR.size + ZIP64_EOCD.size
    if entries > max_members:
        refuse(_too_many(label, entries, max_members))
    if directory_size > MAX_DIRECTORY_BYTES:
        refuse(
            msg(
                "{label}: a central directory of {mb} MiB, more than the {limit} MiB allowed",
                label=label,
                mb=directory_size >> 20,
                limit=MAX_DIRECTORY_BYTES >> 20,
            )
        )
    if directory_size > record_at:
        not_a_zip("the central directory starts before the file")
    fh.seek(record_at - directory_size)
    directory = fh.read(directory_size)
    count, pos = 0, 0
    while pos + DIRECTORY_HEADER.size <= len(directory):
        header = DIRECTORY_HEADER.unpack_from(directory, pos)
        if header[0] != b"PK\x01\x02":
            break  # zipfile stops here too (and says why)
        count += 1
        if count > max_members:
            refuse(_too_many(label, f"more than {count - 1}", max_members))
        pos += DIRECTORY_HEADER.size + header[12] + header[13] + header[14]


def _too_many(label: str, count, limit: int) -> Message:
    return msg(
        "{label}: {count} members, more than the {limit} allowed", label=label, count=count, limit=limit
    )


def read_zip(
    data_or_path,
    exercise: Exercise,
    *,
    max_total: int | None = None,
    max_members: int | None = None,
    label: str = "SOURCE",
) -> Tree:
    """A zip archive as a Tree, read in memory. Raises SourceError for an archive that is unsafe
    or unreadable as a whole (a damaged directory, traversal, too many members, too big); a member
    that is merely unusable (symbolic link, encrypted, damaged, inflating too far) is kept with
    its problem. Inflated bytes are counted as they are read, against max_total and against
    INFLATION_RATIO times the archive's own size: 512 small members of zeros are a bomb too. A
    server caps an upload's members lower (max_members; default ARCHIVE_MEMBERS)."""
    max_total = MAX_ARCHIVE_BYTES if max_total is None else max_total
    fh = io.BytesIO(data_or_path) if isinstance(data_or_path, bytes) else open(data_or_path, "rb")  # noqa: SIM115
    with fh:
        _check_directory(fh, label, max_members)
        budget = min(max_total, INFLATION_CHECKED_ABOVE + MAX_RATIO * fh.seek(0, os.SEEK_END))
        fh.seek(0)
        try:
            zf = zipfile.ZipFile(fh)
        except READ_ERRORS as exc:
            raise SourceError(
                msg("{label}: not a readable zip archive: {error}", label=label, error=str(exc)[:500])
            ) from None
        with zf:
            return _members(zf, exercise, max_total, budget, label)


# -- zip member names and times, as the archiver meant them (APPNOTE.TXT 4.4.4, 4.5, 4.6.9) ---------

UTF8_FLAG = 0x800  # general purpose bit 11: the name is UTF-8
UNICODE_PATH_EXTRA = 0x7075  # Info-ZIP Unicode Path: version 1, CRC-32 of the header name, UTF-8 name
EXTENDED_TIMESTAMP_EXTRA = 0x5455  # Info-ZIP "UT": flags, then the Unix mtime (UTC) when bit 0 is set
# what Windows Explorer and older archivers write names in when they are not UTF-8: the OEM code
# page of the Windows that made the archive. First wins a tie: this course is taught in Taiwan.
LEGACY_CODE_PAGES = ("cp950", "gbk", "shift_jis", "cp437")
LEGACY_SAMPLE_BYTES = 64 * 1024  # of names read to guess their code page: plenty, and bounded


def _extra_fields(extra: bytes) -> dict[int, bytes]:
    """A member's extra fields (tag -> data), the first of each tag; a truncated one ends it."""
    fields: dict[int, bytes] = {}
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<2H", extra, pos)
        if pos + 4 + size > len(extra):
            break
        fields.setdefault(tag, extra[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return fields


def _raw_name(info: zipfile.ZipInfo) -> bytes:
    """The member name's bytes as stored: zipfile decoded them as UTF-8 (flag set) or cp437,
    which maps every byte to one character, so encoding back gives the bytes."""
    return info.orig_filename.encode("utf-8" if info.flag_bits & UTF8_FLAG else "cp437")


def _unicode_path(info: zipfile.ZipInfo, raw: bytes) -> str | None:
    data = _extra_fields(info.extra).get(UNICODE_PATH_EXTRA)
    if not data or len(data) < 5 or data[0] != 1:
        return None
    if struct.unpack_from("<L", data, 1)[0] != zlib.crc32(raw):
        return None  # the name was changed after the field was written: the field is stale
    try:
        return data[5:].decode("utf-8")
    except UnicodeDecodeError:
        return None


def member_name(info: zipfile.ZipInfo, legacy: str = "cp437") -> str:
    """A zip member's name as its archiver meant it. Python's zipfile decodes a name without the
    UTF-8 flag (bit 11) as cp437, which is right only for old DOS and US Windows archives:

    1. the UTF-8 flag set: the name as zipfile read it;
    2. else an Info-ZIP Unicode Path extra field (0x7075) whose CRC-32 matches the stored name:
       its UTF-8 name (the archiver said so in so many words, so it goes before any inference);
    3. else the stored bytes when they are valid UTF-8 (macOS Archive Utility, Linux `zip` and
       7-Zip write UTF-8 without setting the flag; plain ASCII is this case too);
    4. else `legacy`, the code page guessed for the whole archive (legacy_code_page): Windows
       Explorer writes the OEM code page (cp950, Big5, on Traditional Chinese Windows); cp437,
       which decodes any bytes, when the name is not valid in it.

    As zipfile does, the name ends at a NUL byte."""
    if info.flag_bits & UTF8_FLAG:
        return info.filename
    raw = _raw_name(info)
    name = _unicode_path(info, raw)
    if name is None:
        for encoding in ("utf-8", legacy, "cp437"):
            try:
                name = raw.decode(encoding)
                break
            except UnicodeDecodeError:
                continue
    return (name or "").split("\x00")[0]


def legacy_code_page(raw_names: list[bytes]) -> str:
    """The code page in which an archiver wrote these member names (none of them UTF-8), guessed
    once for the whole archive by charset-normalizer among LEGACY_CODE_PAGES: all names together
    (up to LEGACY_SAMPLE_BYTES), since one short name cannot tell Big5 from GBK. A tie goes to the
    decoding whose non-ASCII characters are most often letters ("Müller", not "M〕ler"), then to
    the order of LEGACY_CODE_PAGES. cp437, zipfile's own choice, when charset-normalizer is not
    installed (the student client, whose own zips have ASCII exercise file names) or nothing fits."""
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        return "cp437"
    sample, size = [], 0
    for raw in raw_names:
        if size + len(raw) > LEGACY_SAMPLE_BYTES:
            break
        sample.append(raw)
        size += len(raw) + 1
    matches = [
        m
        for m in from_bytes(b"\n".join(sample), cp_isolation=list(LEGACY_CODE_PAGES))
        if m.encoding in LEGACY_CODE_PAGES
    ]
    if not matches:
        return "cp437"

    def rank(match) -> tuple:
        wide = [c for c in str(match) if ord(c) > 127]
        letters = sum(unicodedata.category(c).startswith("L") for c in wide) / max(len(wide), 1)
        order = LEGACY_CODE_PAGES.index(match.encoding)
        return (round(match.chaos, 3), -round(match.coherence, 3), -letters, order)

    return min(matches, key=rank).encoding


def _member_names(infos: list[zipfile.ZipInfo]) -> list[str]:
    """Each member's name (member_name), the legacy code page guessed from those that need one."""
    legacy_raw = []
    for info in infos:
        if not info.flag_bits & UTF8_FLAG:
            raw = _raw_name(info)
            if not raw.isascii() and _unicode_path(info, raw) is None:
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    legacy_raw.append(raw)
    legacy = legacy_code_page(legacy_raw) if legacy_raw else "cp437"
    return [member_name(info, legacy) for info in infos]


def member_time(info: zipfile.ZipInfo) -> datetime | None:
    """When a member was last changed, as the archive records it: the Extended Timestamp extra
    field (0x5455) when present (Unix time: UTC by definition), else the DOS date_time, which
    carries no zone and is read as UTC: nothing in the archive says which zone its writer's clock
    was in (Moodle writes its server's), so this time may be off by that zone's offset. None
    when it is not a real time."""
    data = _extra_fields(info.extra).get(EXTENDED_TIMESTAMP_EXTRA)
    try:
        if data and len(data) >= 5 and data[0] & 1:
            return _in_range(datetime.fromtimestamp(struct.unpack_from("<l", data, 1)[0], UTC))
        return _in_range(datetime(*info.date_time, tzinfo=UTC))
    except (ValueError, OverflowError, OSError):
        return None


def _members(zf: zipfile.ZipFile, exercise: Exercise, max_total: int, budget: int, label: str) -> Tree:
    infos = zf.infolist()
    total = sum(max(i.file_size, 0) for i in infos)
    if total > max_total:
        raise SourceError(
            msg(
                "{label}: would inflate to {mb} MiB, more than the {limit} MiB allowed",
                label=label,
                mb=total >> 20,
                limit=max_total >> 20,
            )
        )
    tree: Tree = {}
    inflated = 0
    for info, name in zip(infos, _member_names(infos), strict=True):
        path = _safe_member_path(name)
        if path is None:
            raise SourceError(
                msg(
                    "{label}: member {member} would be written outside the archive's "
                    "folder (an absolute path or ..); refusing the archive",
                    label=label,
                    member=repr(name)[:500],
                )
            )
        if _ignored(path.parts):  # its folders are kept, as on disk: `bob/.ipynb_checkpoints/x`
            kept = list(itertools.takewhile(lambda p: not ignored_name(p), path.parts))
            if kept:  # leaves learner bob, who handed in nothing
                tree.setdefault(PurePosixPath(*kept), Entry(is_dir=True))
            continue
        if info.is_dir():
            tree.setdefault(path, Entry(is_dir=True))
            continue
        if path in tree:
            tree[path] = _twice(str(path))
            continue
        if stat.S_ISLNK(info.external_attr >> 16):
            tree[path] = _symlink(path.name)
            continue
        modified = member_time(info)
        if not _wanted(path.name, exercise):
            tree[path] = Entry(modified=modified)
            continue
        if info.flag_bits & 0x1:
            tree[path] = Entry(problem=msg("{name} is encrypted in the archive", name=path.name))
            continue
        limit = _limit(path.name)
        if info.file_size > limit or (
            info.file_size > INFLATION_CHECKED_ABOVE
            and info.file_size > MAX_RATIO * max(info.compress_size, 1)
        ):
            tree[path] = _too_large(path.name, limit)
            continue
        try:
            with zf.open(info) as member:  # never trust the declared size
                data = member.read(min(limit, budget - inflated) + 1)
        except READ_ERRORS as exc:
            tree[path] = Entry(
                problem=msg(
                    "{name} cannot be read from the archive: {error}",
                    name=path.name,
                    error=f"{type(exc).__name__}: {exc}"[:500],
                )
            )
            continue
        inflated += len(data)
        if inflated > budget:
            raise SourceError(
                msg(
                    "{label}: inflates to more than {mb} MiB, over {ratio} times its own size; "
                    "refusing the archive",
                    label=label,
                    mb=budget >> 20,
                    ratio=MAX_RATIO,
                )
            )
        fits = len(data) <= limit
        tree[path] = Entry(data=data, modified=modified) if fits else _too_large(path.name, limit)
    return tree


def unwrap(tree: Tree, exercise: Exercise) -> Tree:
    """Look into a single folder that wraps everything (`submissions/...`), but not into one that
    holds an exercise file by name: that is a learner's folder (a class of one)."""
    while tree:
        tops = {p.parts[0] for p in tree}
        if len(tops) != 1 or any(len(p.parts) == 1 and not e.is_dir for p, e in tree.items()):
            break
        if any(len(p.parts) == 2 and p.parts[1] in exercise.files for p in tree):
            break
        tree = {PurePosixPath(*p.parts[1:]): e for p, e in tree.items() if len(p.parts) > 1}
    return tree


def subtree(tree: Tree, top: str) -> Tree:
    return {PurePosixPath(*p.parts[1:]): e for p, e in tree.items() if p.parts[0] == top and len(p.parts) > 1}


# -- matching a learner's files with the exercise's -----------------------------------------------


class Matched(NamedTuple):
    """One learner's files as found: the exercise files plus their helper modules (name ->
    contents), a problem that stops grading (or None), and warnings (helpers left out)."""

    files: dict[str, bytes]
    problem: str | None = None
    warnings: tuple[str, ...] = ()  # Messages


class Listing(NamedTuple):
    """What else matching saw of one learner's files: for `grader batch --dry-run` and its
    wrong-exercise warning (they are never stored)."""

    found: dict[str, str]  # each exercise file of Matched.files -> its path in the submission
    names: frozenset[str]  # every file name handed in, lower case (Canvas re-uploads undone)


def match_files(exercise: Exercise, tree: Tree, *, canvas: bool = False, as_named: bool = False) -> Matched:
    """The exercise files found in one learner's tree, with the helper modules beside them: the
    one rule `grader grade`, `grader batch`, `grader submit` and the server find learner files by.
    Missing files are simply absent: grading then says which are missing. A file named like an
    exercise file but for its case (`Data.py`) is that file; the exact name wins a tie. A file
    neither rule finds is assembled from the learner's notebook, if they handed in one.

    as_named: never take a file by its suffix alone (`grader submit`: the learner's own files are
    never renamed); the one file of a one-file exercise missing while others of its suffix are
    there is then a problem that names what was found."""
    return _match(exercise, tree, canvas, as_named)[0]


def _plain_name(path: PurePosixPath, canvas: bool) -> str:
    name = path.name.lower()
    m = REUPLOAD.match(name) if canvas else None
    return m["stem"] + (m["suffix"] or "") if m else name


def _match(exercise: Exercise, tree: Tree, canvas: bool, as_named: bool = False) -> tuple[Matched, Listing]:
    wanted = {f.lower(): f for f in exercise.files}

    def logical(path: PurePosixPath) -> str:
        name = path.name
        if canvas and name not in exercise.files:
            m = REUPLOAD.match(name)
            if m and (m["stem"] + (m["suffix"] or "")).lower() in wanted:
                name = m["stem"] + (m["suffix"] or "")
        return wanted.get(name.lower(), name)

    fatal = [e.problem for e in tree.values() if e.fatal]
    tree = {p: e for p, e in tree.items() if not e.is_dir}
    listing = Listing({}, frozenset(_plain_name(p, canvas) for p in tree if p.name != LEARNER_PROBLEM))
    if fatal:
        return Matched({}, fatal[0]), listing
    nested = [p for p, e in tree.items() if p.suffix.lower() == ".zip" and e.data is not None]
    direct = {logical(p) for p in tree} & set(exercise.files)
    if not direct and len(nested) == 1:  # the learner uploaded a zip of their work
        try:
            inner = read_zip(
                tree[nested[0]].data, exercise, max_total=MAX_NESTED_BYTES, label=f"{nested[0].name}"
            )
        except SourceError as exc:
            return Matched({}, message_of(exc)), listing
        inner = {p: e for p, e in inner.items() if p.suffix.lower() != ".zip"}  # one level only
        matched, (found, names) = _match(exercise, inner, canvas, as_named)
        return matched, Listing({name: f"{nested[0]}/{path}" for name, path in found.items()}, names)

    files: dict[str, bytes] = {}
    where: dict[str, PurePosixPath] = {}
    notebooks = [p for p in tree if is_notebook(p.name)]
    for name in exercise.files:
        hits = [p for p in tree if logical(p) == name]
        if not hits and len(exercise.files) == 1 and not as_named and not notebooks:
            suffix = Path(name).suffix
            hits = [p for p in tree if p.suffix == suffix]
            if len(hits) > 1:
                return (
                    Matched(
                        {},
                        msg(
                            "{count} {suffix} files ({files}) and none named {name}: which one is the submission?",  # noqa: E501
                            count=len(hits),
                            suffix=suffix,
                            files=", ".join(sorted(map(str, hits))[:4]),
                            name=name,
                        ),
                    ),
                    listing,
                )
        if not hits:
            continue
        depth = min(len(p.parts) for p in hits)
        shallow = sorted(p for p in hits if len(p.parts) == depth)
        exact = [p for p in shallow if p.name == name]
        if len(exact) == 1 and all(p.name.lower() == name.lower() for p in shallow):
            shallow = exact  # `data.py` beside `Data.py`
        if len(shallow) > 1:
            # a re-upload on Canvas: the highest -N is the latest
            if canvas and all(logical(p) == name for p in shallow):
                shallow = [max(shallow, key=lambda p: _reupload_number(p.name))]
            else:
                return Matched(
                    {},
                    msg(
                        "{count} files could be {name}: {files}",
                        count=len(shallow),
                        name=name,
                        files=", ".join(map(str, shallow[:4])),
                    ),
                ), listing
        entry = tree[shallow[0]]
        if entry.problem:
            return Matched({}, entry.problem), listing
        files[name] = entry.data or b""
        where[name] = shallow[0]
    absent = [name for name in exercise.files if name not in files]
    if absent and notebooks:
        problem = _from_notebook(exercise, tree, notebooks, absent, files, where)
        if problem is not None:
            return Matched({}, problem), listing
    elif absent and as_named and len(exercise.files) == 1:
        suffix = Path(absent[0]).suffix
        others = sorted(str(p) for p in tree if p.suffix.lower() == suffix)
        if others:
            return Matched(
                {},
                msg(
                    "no {name}, only {found}: the grader never renames a file, so rename yours {name} "
                    "if it is that file (this exercise needs {files})",
                    found=", ".join(others[:4]) + (", ..." if len(others) > 4 else ""),
                    name=absent[0],
                    files=", ".join(exercise.files),
                ),
            ), listing
    helpers, warnings = _helpers(exercise, tree, where)
    return Matched({**files, **helpers}, None, tuple(warnings)), listing._replace(
        found={n: str(p) for n, p in where.items()}
    )


def _from_notebook(
    exercise: Exercise,
    tree: Tree,
    notebooks: list[PurePosixPath],
    absent: list[str],
    files: dict[str, bytes],
    where: dict[str, PurePosixPath],
) -> str | None:
    """The `absent` exercise files, assembled from the learner's notebook (the one at the
    shallowest depth) into `files` and `where` (the notebook's path); the `.py` modules it writes
    with %%writefile join `tree` beside it, as helpers (a file of that name on disk wins). The
    problem that stops it, or None. Its notes travel in the files it makes (grader.intake.notebooks)."""
    depth = min(len(p.parts) for p in notebooks)
    shallow = sorted(p for p in notebooks if len(p.parts) == depth)
    if len(shallow) > 1:
        return msg(
            "{count} notebooks ({files}) and no {missing}: which one is the submission?",
            count=len(shallow),
            files=", ".join(map(str, shallow[:4])),
            missing=", ".join(absent),
        )
    path = shallow[0]
    entry = tree[path]
    if entry.problem:
        return entry.problem
    try:
        assembled = assemble(entry.data or b"", exercise, path.name)
    except NotebookError as exc:
        return message_of(exc)
    for name, text in assembled.files.items():
        data = text.encode("utf-8")
        fits = len(data) <= MAX_FILE_BYTES
        if name in absent:
            if not fits:
                return msg(
                    "{name}, as assembled from {notebook}, is larger than {size} KiB",
                    name=name,
                    notebook=path.name,
                    size=MAX_FILE_BYTES // 1024,
                )
            files[name], where[name] = data, path
        elif name not in exercise.files:
            tree.setdefault(
                path.parent / name, Entry(data=data) if fits else _too_large(name, MAX_FILE_BYTES)
            )
    return None


# Module names a helper may not take: it would hide the standard library's module, torch's or
# numpy's, or the package the jail imports learner files under (grader/jail/worker.py PACKAGE)
RESERVED_MODULES = frozenset(sys.stdlib_module_names) | {"torch", "numpy", "submission"}


def helper_name(name: str, exercise: Exercise) -> bool:
    """Can a file of this name travel with the learner files as a helper module? A plain `.py`
    file Python can import, not an exercise file, not a test or setup script of the learner's,
    not named like a module it would hide (RESERVED_MODULES)."""
    stem, suffix = name[:-3], name[-3:]
    if suffix != ".py" or not stem.isidentifier() or keyword.iskeyword(stem):
        return False
    if name.lower() in {f.lower() for f in exercise.files} or stem.startswith("__"):
        return False
    if stem in ("conftest", "setup", "test", "tests") or stem.startswith("test_") or stem.endswith("_test"):
        return False
    return stem not in RESERVED_MODULES


def _helpers(
    exercise: Exercise, tree: Tree, where: dict[str, PurePosixPath]
) -> tuple[dict[str, bytes], list[str]]:
    """The helper modules a learner shipped: other `.py` files in the folder of a learner `.py`
    file, by name, up to HELPER_FILES files and HELPER_BYTES bytes; the rest is left out with a
    warning (a learner file that imports one then fails as Python would, and the warning says why)."""
    folders = {p.parent for name, p in where.items() if name.endswith(".py")}
    taken = set(where.values())
    helpers: dict[str, bytes] = {}
    left_out: list[str] = []
    warnings: list[str] = []
    total = 0
    for path in sorted(p for p in tree if p.parent in folders and p not in taken):
        if not helper_name(path.name, exercise) or path.name in helpers:
            continue
        entry = tree[path]
        if entry.problem:  # a symbolic link, too large, unreadable
            warnings.append(entry.problem)
        elif len(helpers) >= MAX_HELPER_FILES or total + len(entry.data or b"") > MAX_HELPER_BYTES:
            left_out.append(path.name)
        else:
            helpers[path.name] = entry.data or b""
            total += len(entry.data or b"")
    if left_out:
        warnings.append(
            msg(
                "helper modules left out: {names} (at most {count} other .py files of {kib} KiB "
                "together are sent with the learner files)",
                names=", ".join(left_out[:8]) + (", ..." if len(left_out) > 8 else ""),
                count=MAX_HELPER_FILES,
                kib=MAX_HELPER_BYTES // 1024,
            )
        )
    return helpers, warnings


def read_learner(path: Path, exercise: Exercise, *, as_named: bool = False) -> Matched:
    """One learner's own submission at `path` (a folder, one file, a notebook, or a zip of their
    work), read as a class's folder layout reads learner `alice/`, `alice.py`, `alice.ipynb` or
    `alice.zip`: the same match_files, so what `grader submit` packs is what the server and
    `grader batch` find (`as_named`: match_files'). Raises SourceError when `path` is missing or a
    symbolic link."""
    path = Path(path)
    if path.is_symlink():
        raise SourceError(msg("{path} is a symbolic link; give the folder or file itself", path=str(path)))
    if path.is_dir():
        top = PurePosixPath("learner")
        tree = subtree(_read_learner_folder(path, top, exercise), top.name)
        return match_files(exercise, tree, as_named=as_named)
    if not path.exists():
        raise SourceError(msg("{path} does not exist", path=str(path)))
    with os.scandir(path.parent) as it:  # the DirEntry the folder layout reads a file through
        entry = next(e for e in it if e.name == path.name)
    name = canonical_name(path.name)
    return match_files(exercise, {PurePosixPath(name): _read_file(entry, name, exercise)}, as_named=as_named)


def read_notebook(data: bytes, name: str, exercise: Exercise) -> Matched:
    """A notebook's bytes (named `name`), read as `grader submit EX NAME` reads that file: what
    grader.client.notebook submits from inside a kernel is what the command line would."""
    key = PurePosixPath(canonical_name(name) if is_notebook(name) else "notebook.ipynb")
    entry = Entry(data=data) if len(data) <= NOTEBOOK_BYTES else _too_large(key.name, NOTEBOOK_BYTES)
    return match_files(exercise, {key: entry}, as_named=True)


def holds_exercise_files(inc: Incoming, exercise: Exercise) -> bool:
    """Whether a learner handed in files of `exercise`: one named like an exercise file (case
    aside), one assembled from their notebook, or the file named after the learner in a class
    with a file per learner (`alice.py`: its name is the learner's, not the exercise's)."""
    if {f.lower() for f in exercise.files} & inc.names:
        return True
    for name in exercise.files:
        where = inc.found.get(name)
        if where and (is_notebook(PurePosixPath(where).name) or where == f"{inc.learner}{Path(name).suffix}"):
            return True
    return False


def wrong_exercise(found: Found, exercise: Exercise, others=()) -> Message | None:
    """Why this class looks like another exercise's, or None: more than WRONG_EXERCISE_SHARE of
    the learners who handed in files (no problem found in reading them), and at least
    WRONG_EXERCISE_LEARNERS, hold none of `exercise`'s files (holds_exercise_files). It names the
    exercise, how many, the files it expected and, when some of those learners hold files of one
    of `others` (grader.catalog.exercises.all_exercises) by name, the one most of them match. A batch
    refuses such a class (class_verdict) unless told to grade it all the same."""
    handed_in = [i for i in found.incoming if i.problem is None and i.names]
    lacking = [i for i in handed_in if not holds_exercise_files(i, exercise)]
    if len(lacking) < WRONG_EXERCISE_LEARNERS or len(lacking) <= WRONG_EXERCISE_SHARE * len(handed_in):
        return None
    return _wrong(lacking, handed_in, exercise, others)[0]


def _wrong(
    lacking: list[Incoming], handed_in: list[Incoming], exercise: Exercise, others
) -> tuple[Message, bool]:
    """wrong_exercise's message, and whether it names the exercise the files belong to."""
    scores = []
    for other in others:
        if other.id == exercise.id:
            continue
        theirs = {f.lower() for f in other.files}
        holders = sum(bool(theirs & i.names) for i in lacking)
        if holders:
            scores.append((holders, other.id, other.files))
    warning = msg(
        "{exercise} may be the wrong exercise: {count} of {total} learners handed in none of its "
        "files ({files})",
        exercise=exercise.id,
        count=len(lacking),
        total=len(handed_in),
        files=", ".join(exercise.files),
    )
    if not scores:
        return warning, False
    holders, other_id, other_files = max(scores, key=lambda s: (s[0], len(s[2]), s[1]))
    named = msg(
        "{warning}; {holders} of them hold files of {other} ({files})",
        warning=warning,
        holders=holders,
        other=other_id,
        files=", ".join(other_files),
    )
    return named, True


def not_a_class(found: Found, exercise: Exercise, others=()) -> Message | None:
    """Why SOURCE does not look like a class for `exercise`, or None: one learner's own folder
    (an exercise file by name at its top: `grader batch EX class/s003` would make a learner
    `data` of `data.py`), or no learner holding any of the exercise's files (holds_exercise_files;
    `/etc/ssl` has learners `certs` and `private`; learners whose files could not be read, or who
    handed in none, do not count). It says what was found: when those learners hold another of
    `others`' files, that it is that exercise's class (wrong_exercise's message)."""
    if found.loose:
        return msg(
            "SOURCE looks like one learner's submission, not a class: it holds {files} itself "
            "(a class holds one folder, file or archive per learner); grade one learner with "
            "`grader grade {exercise} FOLDER`",
            files=", ".join(found.loose[:4]),
            exercise=exercise.id,
        )
    handed_in = [i for i in found.incoming if i.problem is None and i.names]
    if not handed_in or any(holds_exercise_files(i, exercise) for i in handed_in):
        return None
    wrong, named = _wrong(handed_in, handed_in, exercise, others)
    if named:
        return wrong
    shown = [i.learner for i in found.incoming[:6]]
    return msg(
        "SOURCE does not look like a class of {exercise}: none of its {count} learners "
        "({learners}) holds any of its files ({files})",
        exercise=exercise.id,
        count=len(found.incoming),
        learners=", ".join(shown) + (", ..." if len(found.incoming) > len(shown) else ""),
        files=", ".join(exercise.files),
    )


def class_verdict(found: Found, exercise: Exercise, others=()) -> Message | None:
    """Why SOURCE, as found, is likely the wrong input, or None: no class at all (not_a_class),
    else another exercise's class (wrong_exercise). `grader batch` refuses it unless --force."""
    return not_a_class(found, exercise, others) or wrong_exercise(found, exercise, others)


def _reupload_number(name: str) -> int:
    m = REUPLOAD.match(name)
    return int(name[len(m["stem"]) + 1 : len(name) - len(m["suffix"] or "")]) if m else 0


# -- the layouts ---------------------------------------------------------------------------------


def read_source(source: Path, exercise: Exercise) -> Found:
    """SOURCE as one Found. The layout is decided per top-level entry: a Moodle-named entry is
    read as Moodle, Canvas-named flat files as Canvas (when they are at least half the flat
    files), everything else as the folder layout; a class that mixes them says so in its layout
    ("moodle+folder"). Raises SourceError, naming SOURCE, when SOURCE as a whole is unreadable.
    A learner's helper modules left out (match_files) are notes: the gradebook keeps files only,
    so the summary and batch.json are where the instructor sees them."""
    found = _read_source(source, exercise)
    for inc in found.incoming:
        found.notes += [Skipped(inc.learner, w, learner_like=False) for w in inc.warnings]
    return found


def _read_source(source: Path, exercise: Exercise) -> Found:
    source = Path(source)
    label = str(source)
    if source.is_symlink():
        raise SourceError(f"SOURCE: {source} is a symbolic link; give the folder or archive itself")
    if source.is_dir():
        try:
            tree = read_folder(source, exercise)
        except OSError as exc:
            raise SourceError(f"SOURCE: {source} cannot be read: {exc.strerror}") from None
    elif source.is_file() and _is_zip(source):
        if source.stat().st_size > MAX_ARCHIVE_BYTES:
            raise SourceError(f"SOURCE: {source} is larger than {MAX_ARCHIVE_BYTES >> 20} MiB")
        tree = read_zip(source, exercise, label=label)
    elif source.exists():
        raise SourceError(f"SOURCE: {source} is neither a folder nor a zip archive")
    else:
        raise SourceError(f"SOURCE: {source} does not exist")
    tree = unwrap(tree, exercise)
    if not tree:
        raise SourceError(f"SOURCE: {source} holds no submissions")
    if PurePosixPath(GRADESCOPE_META) in tree:
        return gradescope(tree, exercise, label)
    tops = {p.parts[0] for p in tree}
    moodle_tops = {t for t in tops if MOODLE.match(t)}
    rest = {p: e for p, e in tree.items() if p.parts[0] not in moodle_tops}
    flat = [p for p, e in rest.items() if len(p.parts) == 1 and not e.is_dir]
    canvas_files = {p for p in flat if CANVAS.match(p.name)}
    if len(canvas_files) < max(1, len(flat) // 2):
        canvas_files = set()
    parts = [
        (reader, part)
        for reader, part in (
            (moodle, {p: e for p, e in tree.items() if p.parts[0] in moodle_tops}),
            (canvas, {p: e for p, e in rest.items() if p in canvas_files}),
            (folder, {p: e for p, e in rest.items() if p not in canvas_files}),
        )
        if part
    ]
    founds = [reader(part, exercise) for reader, part in parts]
    if len(founds) == 1:
        return founds[0]
    notes = [n for f in founds for n in f.notes]
    incoming = _merge_duplicates([i for f in founds for i in f.incoming], notes, learner_like=True)
    return Found("+".join(f.layout for f in founds), incoming, notes, [n for f in founds for n in f.loose])


def _is_zip(path: Path) -> bool:
    try:
        return zipfile.is_zipfile(path)
    except READ_ERRORS:
        return False


def _incoming(exercise, tree, learner, *, layout, origin, canvas=False, **kw) -> Incoming:
    """One learner's Incoming from their tree. A learner whose folder holds no file at all (an
    empty Moodle submission folder, an empty learner folder) submitted nothing: that is their
    problem (graded 0, invalid-submission, saying so: incoming.no_files_submitted)."""
    (files, problem, warnings), (found, names) = _match(exercise, tree, canvas)
    if problem is None and all(e.is_dir for e in tree.values()):
        problem = no_files_submitted(exercise.files)
    return Incoming(
        learner=learner,
        files=files,
        problem=problem,
        layout=layout,
        origin=origin,
        warnings=warnings,
        found=found,
        names=names,
        **kw,
    )


def folder(tree: Tree, exercise: Exercise) -> Found:
    groups: dict[str, Tree] = {}
    refused: dict[str, str] = {}
    tops: dict[str, set[str]] = {}  # learner -> the entries of SOURCE that are theirs
    notes = []
    suffixes = {Path(f).suffix for f in exercise.files}
    for path, entry in tree.items():
        top = path.parts[0]
        if len(path.parts) > 1:
            groups.setdefault(top, {})[PurePosixPath(*path.parts[1:])] = entry
        elif entry.is_dir:
            groups.setdefault(top, {})  # a learner folder, maybe empty
        elif (
            path.suffix.lower() == ".zip"
            or is_notebook(path.name)
            or (len(exercise.files) == 1 and path.suffix in suffixes)
        ):
            groups.setdefault(Path(top).stem, {})[PurePosixPath(top)] = entry  # a file per learner
            tops.setdefault(Path(top).stem, set()).add(top)
            continue
        elif entry.problem and not path.suffix:  # a learner "folder" that is a symbolic link
            refused[top] = entry.problem
        else:
            notes.append(
                Skipped(
                    top,
                    msg(
                        "not a learner folder, archive or {suffixes} file",
                        suffixes="/".join(sorted(suffixes)),
                    ),
                    learner_like=_wanted(top, exercise) or entry.problem is not None,
                )
            )
            continue
        tops.setdefault(top, set()).add(top)
    # `alice/`, `alice.py` and `alice.zip` are all learner alice: which is the submission cannot
    # be told, so that learner fails rather than one entry being dropped unseen
    for learner, entries in tops.items():
        if len(entries) > 1:
            refused[learner] = msg(
                "{entries} are all learner {learner}: which one is the submission?",
                entries=", ".join(sorted(entries)[:4]),
                learner=learner,
            )
    incoming = [
        _incoming(exercise, t, learner, layout="folder", origin=learner)
        for learner, t in groups.items()
        if learner not in refused
    ]
    incoming += [
        Incoming(learner=learner, files={}, problem=problem, layout="folder", origin=learner)
        for learner, problem in refused.items()
    ]
    wanted = {f.lower() for f in exercise.files}
    loose = sorted(
        str(p) for p, e in tree.items() if len(p.parts) == 1 and not e.is_dir and p.name.lower() in wanted
    )
    return Found(
        "folder",
        sorted(incoming, key=lambda i: i.learner),
        sorted(notes, key=lambda n: n.entry),
        loose=loose,
    )


def canvas(tree: Tree, exercise: Exercise) -> Found:
    groups: dict[str, Tree] = {}
    meta: dict[str, dict] = {}
    notes = []
    for path, entry in sorted(tree.items()):
        if entry.is_dir:
            continue
        m = CANVAS.match(path.name)
        if not m:
            notes.append(Skipped(path.name, msg("not named like a Canvas submission file")))
            continue
        uid = m["uid"]
        groups.setdefault(uid, {})[PurePosixPath(m["file"])] = entry
        info = meta.setdefault(uid, {"name": m["name"] or None, "late": False, "origins": []})
        info["late"] |= bool(m["late"])
        info["origins"].append(path.name)
    return Found(
        "canvas",
        [
            _incoming(
                exercise,
                t,
                uid,
                layout="canvas",
                canvas=True,
                origin=", ".join(meta[uid]["origins"])[:2000],
                name=meta[uid]["name"],
                late=meta[uid]["late"],
            )
            for uid, t in sorted(groups.items())
        ],
        notes,
    )


def moodle(tree: Tree, exercise: Exercise) -> Found:
    """The Moodle layout. A folder's participant id is read from the end of its name only
    (MOODLE_FOLDER); a flat file whose name holds more than one `_<id>_assignsubmission_..._`
    cannot be told whose it is, and is skipped, saying so. Two entries naming one participant
    under different display names are both reported, and that participant is not graded (a
    problem naming both): neither is graded as the other."""
    groups: dict[str, Tree] = {}
    names: dict[str, set[str]] = {}
    origins: dict[str, list[str]] = {}
    notes = []
    skipped: set[str] = set()
    for path, entry in sorted(tree.items()):
        top = path.parts[0]
        is_folder = len(path.parts) > 1 or entry.is_dir
        m = MOODLE_FOLDER.match(top) if is_folder else MOODLE.match(top)
        if m and not is_folder and len(MOODLE_MARK.findall(top)) > 1:
            if top not in skipped:
                skipped.add(top)
                pids = ", ".join(dict.fromkeys(re.findall(r"_(\d+)_assign", top)))
                notes.append(
                    Skipped(
                        top,
                        msg(
                            "names more than one Moodle participant ({ids}): whose file it is "
                            "cannot be told (a display name may hold another's id)",
                            ids=pids,
                        ),
                    )
                )
            continue
        if not m:
            if top not in skipped:
                skipped.add(top)
                notes.append(Skipped(str(path), msg("not named like a Moodle submission")))
            continue
        if m["plugin"] != "file":  # onlinetext, comments, feedback: listed, not a learner's file
            if len(path.parts) == 1:
                notes.append(Skipped(top, msg("a Moodle {plugin} entry", plugin=m["plugin"]), False))
            continue
        pid = m["pid"]
        names.setdefault(pid, set()).add(m["name"])
        origins.setdefault(pid, [])
        if top not in origins[pid]:
            origins[pid].append(top)
        if len(path.parts) == 1:  # flat: prefix + file name, or an empty submission folder
            if entry.is_dir:
                groups.setdefault(pid, {})
                continue
            if not m["rest"]:
                notes.append(Skipped(top, msg("a Moodle file entry without a file name")))
                continue
            rel = PurePosixPath(m["rest"])
        else:
            rel = PurePosixPath(*path.parts[1:])
        groups.setdefault(pid, {})[rel] = entry
    incoming = []
    for pid, t in sorted(groups.items()):
        claimed = sorted(names[pid])
        problem = None
        if len(claimed) > 1:
            problem = msg(
                "{entries} all claim Moodle participant {pid}: which one is theirs cannot be told "
                "(a display name may hold another's id), so none is graded as {pid}",
                entries=", ".join(origins[pid][:4]),
                pid=pid,
            )
            notes += [
                Skipped(
                    o,
                    msg(
                        "claims Moodle participant {pid}, as {others} does",
                        pid=pid,
                        others=", ".join(x for x in origins[pid] if x != o)[:500],
                    ),
                )
                for o in origins[pid]
            ]
        inc = _incoming(
            exercise,
            {} if problem else t,
            pid,
            layout="moodle",
            name=None if problem else claimed[0],
            origin=", ".join(origins[pid])[:2000],
            submitted_at=None if problem else newest_file_time(t),
        )
        if problem:
            inc.problem, inc.files = problem, {}
        incoming.append(inc)
    return Found("moodle", incoming, notes)


def newest_file_time(tree: Tree) -> datetime | None:
    """When a Moodle learner submitted, approximately: the newest time of the files in their
    submission folder (Moodle gives each file in its download the time it was uploaded; on disk,
    the files' mtime, which an unzip keeps). On disk only the files walked count: a folder is
    walked no deeper than its exercise files (_read_learner_folder). None when no file has a
    time. The zone caveat of member_time applies to a zip's times."""
    times = [e.modified for e in tree.values() if not e.is_dir and e.modified is not None]
    return max(times, default=None)


@functools.cache
def _metadata_loader():
    """PyYAML's SafeLoader, bounded: no aliases (an alias bomb made a 5 MB learner id), at most
    METADATA_NODES nodes and METADATA_DEPTH levels (counted as composed, before anything is
    built; deeper raised RecursionError), and timestamps left as text for _parse_time."""
    import yaml

    class MetadataLoader(yaml.SafeLoader):
        def __init__(self, stream):
            super().__init__(stream)
            self.nodes = self.depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                raise yaml.YAMLError("aliases (*name) are not allowed here")
            self.nodes += 1
            if self.nodes > MAX_METADATA_NODES:
                raise yaml.YAMLError(f"more than {MAX_METADATA_NODES} values")
            self.depth += 1
            try:
                if self.depth > MAX_METADATA_DEPTH:
                    raise yaml.YAMLError(f"nested more than {MAX_METADATA_DEPTH} deep")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    timestamp = "tag:yaml.org,2002:timestamp"
    MetadataLoader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != timestamp]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    MetadataLoader.add_constructor(timestamp, lambda loader, node: loader.construct_scalar(node))
    return MetadataLoader


def load_metadata(data: bytes, label: str = GRADESCOPE_META):
    """submission_metadata.yml as plain data; SourceError naming it when it cannot be read."""
    import yaml

    try:
        return yaml.load(data.decode("utf-8"), Loader=_metadata_loader()) or {}
    except (yaml.YAMLError, UnicodeDecodeError, ValueError, TypeError, RecursionError, OverflowError) as exc:
        raise SourceError(
            msg("{label} is not readable YAML: {error}", label=label, error=str(exc)[:500])
        ) from None


def gradescope(tree: Tree, exercise: Exercise, label: str = "SOURCE") -> Found:
    entry = tree[PurePosixPath(GRADESCOPE_META)]
    where = f"{label}: {GRADESCOPE_META}"
    if entry.data is None:
        raise SourceError(f"{where}: {entry.problem}")
    meta = load_metadata(entry.data, where)
    if not isinstance(meta, dict):
        raise SourceError(f"{where} is not a mapping of submissions")
    incoming: list[Incoming] = []
    notes: list[Skipped] = []
    listed = set()
    for raw_folder, record in sorted(meta.items(), key=lambda kv: str(kv[0])):
        folder_name = canonical_name(str(raw_folder))
        listed.add(folder_name)
        record = record if isinstance(record, dict) else {}
        submitters = record.get(":submitters") or record.get("submitters") or []
        submitted_at = _parse_time(record.get(":created_at") or record.get("created_at"))
        sub_tree = subtree(tree, folder_name)
        if not isinstance(submitters, list) or not submitters:
            notes.append(Skipped(folder_name, msg("no submitters in {file}", file=GRADESCOPE_META)))
            continue
        for person in submitters:
            person = person if isinstance(person, dict) else {}

            def field_(k, person=person):
                v = person.get(":" + k, person.get(k))
                return canonical_name(str(v)) if v not in (None, "") else None

            key = field_("sid") or field_("email") or field_("name")
            if not key:
                notes.append(Skipped(folder_name, msg("a submitter without sid, email or name")))
                continue
            incoming.append(
                _incoming(
                    exercise,
                    sub_tree,
                    key,
                    layout="gradescope",
                    origin=folder_name,
                    name=field_("name"),
                    email=field_("email"),
                    submitted_at=submitted_at,
                )
            )
    for top in sorted({p.parts[0] for p in tree} - listed - {GRADESCOPE_META}):
        notes.append(Skipped(top, msg("not listed in {file}", file=GRADESCOPE_META)))
    return Found("gradescope", _merge_duplicates(incoming, notes), notes)


def _merge_duplicates(incoming: list[Incoming], notes: list[Skipped], learner_like=False) -> list[Incoming]:
    """One submission per learner: the latest, where a learner appears twice (the other listed)."""
    by_key: dict[str, Incoming] = {}
    for inc in incoming:
        old = by_key.get(inc.learner)
        if old is not None:
            newer, older = (inc, old) if _when(inc) >= _when(old) else (old, inc)
            notes.append(
                Skipped(
                    older.origin,
                    msg(
                        "learner {learner} is also in {other}, which is used",
                        learner=inc.learner,
                        other=newer.origin,
                    ),
                    learner_like,
                )
            )
            inc = newer
        by_key[inc.learner] = inc
    return sorted(by_key.values(), key=lambda i: i.learner)


def _when(inc: Incoming) -> float:
    try:
        return inc.submitted_at.timestamp() if inc.submitted_at else float("-inf")
    except (OverflowError, ValueError, OSError):
        return float("-inf")


def _parse_time(value) -> datetime | None:
    """A Gradescope timestamp, or None: unreadable, or outside 1970-2200 (year 10000 overflowed)."""
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str) and value.strip() and len(value) < 100:
        try:
            when = datetime.fromisoformat(value.strip().replace(" ", "T", 1))
        except ValueError:
            return None
    else:
        return None
    return _in_range(when)
