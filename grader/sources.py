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
  folders are ignored. Learner id: the participant id.
- **Gradescope** ("Export Submissions"): `submission_metadata.yml` and one `submission_{id}` folder
  per submission; each submitter (`:sid:`, else `:email:`, else `:name:`) of a group submission gets
  the group's files. Learner id: the student id (sid).

SOURCE may be that folder or a zip archive of it; a single folder wrapping everything is looked
into, and a learner who uploaded a zip of their work has it opened (one level deep). Archives are
read in memory, never extracted: a member with an absolute path or `..`, a symbolic link, an
encrypted member, or one that would inflate past its cap is refused, and caps on the number of
members and on the total inflated size refuse a zip bomb before anything is read. Within a
learner's files each exercise file is found by name at the shallowest depth (an exercise with a
single file also takes the one file with its suffix), so `mywork/data.py` is found too.
"""

from __future__ import annotations

import io
import os
import re
import stat
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from grader.errors import SourceError
from grader.limits import ARCHIVE_BYTES as MAX_ARCHIVE_BYTES  # the caps: grader/limits.py
from grader.limits import ARCHIVE_MEMBERS as MAX_ARCHIVE_MEMBERS
from grader.limits import INFLATION_CHECKED_ABOVE
from grader.limits import INFLATION_RATIO as MAX_RATIO
from grader.limits import LEARNER_FILE_BYTES as MAX_FILE_BYTES
from grader.limits import METADATA_BYTES as MAX_METADATA_BYTES
from grader.limits import NESTED_ARCHIVE_BYTES as MAX_NESTED_BYTES
from grader.locale import message_of, msg
from grader.models import Exercise
from grader.store.gradebook import Incoming

IGNORED = ("__MACOSX", ".DS_Store", "Thumbs.db", "desktop.ini", "__pycache__")

CANVAS = re.compile(r"^(?P<name>[^_]*?)(?P<late>_late)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$", re.I)
MOODLE = re.compile(
    r"^(?P<name>.+?)_(?P<pid>\d+)_assign(?:submission|feedback)_(?P<plugin>[a-z]+)_(?P<rest>.*)$"
)
GRADESCOPE_META = "submission_metadata.yml"
REUPLOAD = re.compile(r"^(?P<stem>.+)-\d+(?P<suffix>\.[^.]+)?$")


@dataclass
class Entry:
    """A file of the source, read only when it may be a learner file."""

    data: bytes | None = None
    problem: str | None = None  # symbolic link, too large, unsafe path, encrypted
    is_dir: bool = False  # kept so that an empty learner folder is still a learner


@dataclass
class Found:
    layout: str
    incoming: list[Incoming]
    notes: list[str] = field(default_factory=list)  # what was skipped, and why


Tree = dict[PurePosixPath, Entry]


# -- reading: a folder or an archive into a Tree ---------------------------------------------------


def _wanted(name: str, exercise: Exercise) -> bool:
    """Could this file be a learner file (or something that leads to one)? Others are never read."""
    suffixes = {Path(f).suffix for f in exercise.files}
    suffix = Path(name).suffix.lower()
    return name == GRADESCOPE_META or suffix in suffixes or suffix == ".zip"


def _ignored(parts) -> bool:
    return any(p in IGNORED or p.startswith("._") for p in parts)


def read_folder(root: Path, exercise: Exercise) -> Tree:
    tree: Tree = {}
    count = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel = Path(dirpath).relative_to(root)
        for d in list(dirnames):
            key = PurePosixPath(*rel.parts, d)
            if (Path(dirpath) / d).is_symlink():  # os.walk does not descend; record it
                dirnames.remove(d)
                tree[key] = Entry(
                    problem=msg("{name} is a symbolic link; symbolic links are refused", name=d)
                )
            elif _ignored(key.parts):
                dirnames.remove(d)
            else:
                tree[key] = Entry(is_dir=True)
        for f in filenames:
            count += 1
            if count > MAX_ARCHIVE_MEMBERS:
                raise SourceError(f"SOURCE: more than {MAX_ARCHIVE_MEMBERS} files; is this a class?")
            path = Path(dirpath) / f
            key = PurePosixPath(*rel.parts, f)
            if _ignored(key.parts):
                continue
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                tree[key] = Entry(
                    problem=msg("{name} is a symbolic link; symbolic links are refused", name=f)
                )
            elif not stat.S_ISREG(st.st_mode):
                tree[key] = Entry(problem=msg("{name} is not a regular file", name=f))
            elif _wanted(f, exercise):
                limit = MAX_NESTED_BYTES if f.lower().endswith(".zip") else MAX_FILE_BYTES
                with open(path, "rb") as fh:
                    data = fh.read(limit + 1)
                tree[key] = (
                    Entry(data=data)
                    if len(data) <= limit
                    else Entry(problem=msg("{name} is larger than {size} KiB", name=f, size=limit // 1024))
                )
            else:
                tree[key] = Entry()
    return tree


def _safe_member_path(name: str) -> PurePosixPath | None:
    """The member's path inside the archive, or None if it could land outside it."""
    name = name.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or "\x00" in name:
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts) or not parts:
        return None
    return PurePosixPath(*parts)


def read_zip(
    data_or_path, exercise: Exercise, *, max_total: int | None = None, label: str = "SOURCE"
) -> Tree:
    """A zip archive as a Tree, read in memory. Raises SourceError for an archive that is unsafe
    as a whole (unreadable, traversal, too many members, too big); a member that is merely
    unusable (symbolic link, encrypted, inflating too far) is kept with its problem."""
    max_total = MAX_ARCHIVE_BYTES if max_total is None else max_total
    try:
        zf = zipfile.ZipFile(io.BytesIO(data_or_path) if isinstance(data_or_path, bytes) else data_or_path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise SourceError(
            msg("{label}: not a readable zip archive: {error}", label=label, error=str(exc))
        ) from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ARCHIVE_MEMBERS:
            raise SourceError(
                msg(
                    "{label}: {count} members, more than the {limit} allowed",
                    label=label,
                    count=len(infos),
                    limit=MAX_ARCHIVE_MEMBERS,
                )
            )
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
        for info in infos:
            path = _safe_member_path(info.filename)
            if path is None:
                raise SourceError(
                    msg(
                        "{label}: member {member} would be written outside the archive's "
                        "folder (an absolute path or ..); refusing the archive",
                        label=label,
                        member=repr(info.filename),
                    )
                )
            if _ignored(path.parts):
                continue
            if info.is_dir():
                tree[path] = Entry(is_dir=True)
                continue
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                tree[path] = Entry(
                    problem=msg("{name} is a symbolic link; symbolic links are refused", name=path.name)
                )
                continue
            if not _wanted(path.name, exercise):
                tree[path] = Entry()
                continue
            if info.flag_bits & 0x1:
                tree[path] = Entry(problem=msg("{name} is encrypted in the archive", name=path.name))
                continue
            limit = (
                MAX_NESTED_BYTES
                if path.name.lower().endswith(".zip")
                else (MAX_METADATA_BYTES if path.name == GRADESCOPE_META else MAX_FILE_BYTES)
            )
            if info.file_size > limit or (
                info.file_size > INFLATION_CHECKED_ABOVE
                and info.file_size > MAX_RATIO * max(info.compress_size, 1)
            ):
                tree[path] = Entry(
                    problem=msg("{name} is larger than {size} KiB", name=path.name, size=limit // 1024)
                )
                continue
            try:
                with zf.open(info) as fh:  # never trust the declared size
                    data = fh.read(limit + 1)
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError) as exc:
                tree[path] = Entry(
                    problem=msg(
                        "{name} cannot be read from the archive: {error}", name=path.name, error=str(exc)
                    )
                )
                continue
            tree[path] = (
                Entry(data=data)
                if len(data) <= limit
                else Entry(
                    problem=msg("{name} is larger than {size} KiB", name=path.name, size=limit // 1024)
                )
            )
        return tree


def unwrap(tree: Tree) -> Tree:
    """Look into a single folder that wraps everything (`submissions/...`)."""
    while tree:
        tops = {p.parts[0] for p in tree}
        if len(tops) != 1 or any(len(p.parts) == 1 and not e.is_dir for p, e in tree.items()):
            break
        tree = {PurePosixPath(*p.parts[1:]): e for p, e in tree.items() if len(p.parts) > 1}
    return tree


def subtree(tree: Tree, top: str) -> Tree:
    return {PurePosixPath(*p.parts[1:]): e for p, e in tree.items() if p.parts[0] == top and len(p.parts) > 1}


# -- matching a learner's files with the exercise's -----------------------------------------------


def match_files(
    exercise: Exercise, tree: Tree, *, canvas: bool = False
) -> tuple[dict[str, bytes], str | None]:
    """The exercise files found in one learner's tree, and a problem that stops grading (or None).
    Missing files are simply absent: grading then says which are missing, as for `grader grade`."""

    def logical(path: PurePosixPath) -> str:
        name = path.name
        if canvas and name not in exercise.files:
            m = REUPLOAD.match(name)
            if m and (m["stem"] + (m["suffix"] or "")) in exercise.files:
                return m["stem"] + (m["suffix"] or "")
        return name

    tree = {p: e for p, e in tree.items() if not e.is_dir}
    nested = [p for p, e in tree.items() if p.suffix.lower() == ".zip" and e.data is not None]
    direct = {logical(p) for p in tree} & set(exercise.files)
    if not direct and len(nested) == 1:  # the learner uploaded a zip of their work
        try:
            inner = read_zip(
                tree[nested[0]].data, exercise, max_total=MAX_NESTED_BYTES, label=f"{nested[0].name}"
            )
        except SourceError as exc:
            return {}, message_of(exc)
        inner = {p: e for p, e in inner.items() if p.suffix.lower() != ".zip"}  # one level only
        return match_files(exercise, inner, canvas=canvas)

    files: dict[str, bytes] = {}
    for name in exercise.files:
        hits = [p for p in tree if logical(p) == name]
        if not hits and len(exercise.files) == 1:
            suffix = Path(name).suffix
            hits = [p for p in tree if p.suffix == suffix]
            if len(hits) > 1:
                return {}, msg(
                    "{count} {suffix} files ({files}) and none named {name}: which one is the submission?",
                    count=len(hits),
                    suffix=suffix,
                    files=", ".join(sorted(map(str, hits))[:4]),
                    name=name,
                )
        if not hits:
            continue
        depth = min(len(p.parts) for p in hits)
        shallow = sorted(p for p in hits if len(p.parts) == depth)
        if len(shallow) > 1:
            # a re-upload on Canvas: the highest -N is the latest
            if canvas and all(logical(p) == name for p in shallow):
                shallow = [max(shallow, key=lambda p: _reupload_number(p.name))]
            else:
                return {}, msg(
                    "{count} files could be {name}: {files}",
                    count=len(shallow),
                    name=name,
                    files=", ".join(map(str, shallow[:4])),
                )
        entry = tree[shallow[0]]
        if entry.problem:
            return {}, entry.problem
        files[name] = entry.data or b""
    return files, None


def _reupload_number(name: str) -> int:
    m = REUPLOAD.match(name)
    return int(name[len(m["stem"]) + 1 : len(name) - len(m["suffix"] or "")]) if m else 0


# -- the layouts ---------------------------------------------------------------------------------


def read_source(source: Path, exercise: Exercise) -> Found:
    source = Path(source)
    if source.is_symlink():
        raise SourceError(f"SOURCE: {source} is a symbolic link; give the folder or archive itself")
    if source.is_dir():
        tree = read_folder(source, exercise)
    elif source.is_file() and zipfile.is_zipfile(source):
        if source.stat().st_size > MAX_ARCHIVE_BYTES:
            raise SourceError(f"SOURCE: {source} is larger than {MAX_ARCHIVE_BYTES >> 20} MiB")
        tree = read_zip(source, exercise)
    elif source.exists():
        raise SourceError(f"SOURCE: {source} is neither a folder nor a zip archive")
    else:
        raise SourceError(f"SOURCE: {source} does not exist")
    tree = unwrap(tree)
    if not tree:
        raise SourceError(f"SOURCE: {source} holds no submissions")
    if PurePosixPath(GRADESCOPE_META) in tree:
        return gradescope(tree, exercise)
    tops = {p.parts[0] for p in tree}
    if any(MOODLE.match(t) for t in tops):
        return moodle(tree, exercise)
    flat = [p for p, e in tree.items() if len(p.parts) == 1 and not e.is_dir]
    if (
        flat
        and len(flat) == len(tree)
        and sum(bool(CANVAS.match(p.name)) for p in flat) >= max(1, len(flat) // 2)
    ):
        return canvas(tree, exercise)
    return folder(tree, exercise)


def _incoming(exercise, tree, learner, *, layout, origin, canvas=False, **kw) -> Incoming:
    files, problem = match_files(exercise, tree, canvas=canvas)
    return Incoming(learner=learner, files=files, problem=problem, layout=layout, origin=origin, **kw)


def folder(tree: Tree, exercise: Exercise) -> Found:
    groups: dict[str, Tree] = {}
    refused: dict[str, str] = {}
    notes = []
    suffixes = {Path(f).suffix for f in exercise.files}
    for path, entry in tree.items():
        top = path.parts[0]
        if len(path.parts) > 1:
            groups.setdefault(top, {})[PurePosixPath(*path.parts[1:])] = entry
        elif entry.is_dir:
            groups.setdefault(top, {})  # a learner folder, maybe empty
        elif path.suffix.lower() == ".zip" or (len(exercise.files) == 1 and path.suffix in suffixes):
            groups.setdefault(Path(top).stem, {})[PurePosixPath(top)] = entry  # a file per learner
        elif entry.problem and not path.suffix:  # a learner "folder" that is a symbolic link
            refused[top] = entry.problem
        else:
            notes.append(f"skipped {top}: not a learner folder, archive or {'/'.join(sorted(suffixes))} file")
    incoming = [
        _incoming(exercise, t, learner, layout="folder", origin=learner)
        for learner, t in groups.items()
        if learner not in refused
    ]
    incoming += [
        Incoming(learner=learner, files={}, problem=problem, layout="folder", origin=learner)
        for learner, problem in refused.items()
    ]
    return Found("folder", sorted(incoming, key=lambda i: i.learner), notes)


def canvas(tree: Tree, exercise: Exercise) -> Found:
    groups: dict[str, Tree] = {}
    meta: dict[str, dict] = {}
    notes = []
    for path, entry in sorted(tree.items()):
        if entry.is_dir:
            continue
        m = CANVAS.match(path.name)
        if not m:
            notes.append(f"skipped {path.name}: not named like a Canvas submission file")
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
    groups: dict[str, Tree] = {}
    names: dict[str, str] = {}
    origins: dict[str, list[str]] = {}
    notes = []
    for path, entry in sorted(tree.items()):
        m = MOODLE.match(path.parts[0])
        if not m:
            notes.append(f"skipped {path}: not named like a Moodle submission")
            continue
        if m["plugin"] != "file":
            continue  # onlinetext, comments, feedback
        pid = m["pid"]
        if len(path.parts) == 1:  # flat: prefix + file name
            if not m["rest"]:
                continue
            rel = PurePosixPath(m["rest"])
        else:
            rel = PurePosixPath(*path.parts[1:])
        groups.setdefault(pid, {})[rel] = entry
        names[pid] = m["name"]
        origins.setdefault(pid, [])
        if path.parts[0] not in origins[pid]:
            origins[pid].append(path.parts[0])
    return Found(
        "moodle",
        [
            _incoming(
                exercise, t, pid, layout="moodle", name=names[pid], origin=", ".join(origins[pid])[:2000]
            )
            for pid, t in sorted(groups.items())
        ],
        notes,
    )


def gradescope(tree: Tree, exercise: Exercise) -> Found:
    import yaml

    entry = tree[PurePosixPath(GRADESCOPE_META)]
    if entry.data is None:
        raise SourceError(f"SOURCE: {GRADESCOPE_META}: {entry.problem}")
    try:
        meta = yaml.safe_load(entry.data.decode("utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SourceError(f"SOURCE: {GRADESCOPE_META} is not readable YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise SourceError(f"SOURCE: {GRADESCOPE_META} is not a mapping of submissions")
    incoming, notes = [], []
    listed = set()
    for folder_name, record in sorted(meta.items(), key=lambda kv: str(kv[0])):
        folder_name = str(folder_name)
        listed.add(folder_name)
        record = record if isinstance(record, dict) else {}
        submitters = record.get(":submitters") or record.get("submitters") or []
        when = record.get(":created_at") or record.get("created_at")
        submitted_at = when if isinstance(when, datetime) else _parse_time(when)
        sub_tree = subtree(tree, folder_name)
        if not isinstance(submitters, list) or not submitters:
            notes.append(f"skipped {folder_name}: no submitters in {GRADESCOPE_META}")
            continue
        for person in submitters:
            person = person if isinstance(person, dict) else {}

            def field_(k, person=person):
                v = person.get(":" + k, person.get(k))
                return str(v).strip() if v not in (None, "") else None

            key = field_("sid") or field_("email") or field_("name")
            if not key:
                notes.append(f"skipped a submitter of {folder_name}: no sid, email or name")
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
        notes.append(f"skipped {top}: not listed in {GRADESCOPE_META}")
    return Found("gradescope", _merge_duplicates(incoming, notes), notes)


def _merge_duplicates(incoming: list[Incoming], notes: list[str]) -> list[Incoming]:
    """One submission per learner: the latest, where a learner appears twice."""
    by_key: dict[str, Incoming] = {}
    for inc in incoming:
        old = by_key.get(inc.learner)
        if old is not None:
            newer = inc if _when(inc) >= _when(old) else old
            notes.append(
                f"learner {inc.learner} appears in {old.origin} and {inc.origin}: using {newer.origin}"
            )
            inc = newer
        by_key[inc.learner] = inc
    return sorted(by_key.values(), key=lambda i: i.learner)


def _when(inc: Incoming) -> float:
    return inc.submitted_at.timestamp() if inc.submitted_at else float("-inf")


def _parse_time(value) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).strip().replace(" ", "T", 1))
    except ValueError:
        return None
