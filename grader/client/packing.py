"""The learner files of PATH, as the server will read them, zipped for the upload.

The files are found by grader.intake.sources.read_learner: the rules the grader reads one learner of a
class with (each exercise file by name at the shallowest depth, a zip of their work opened one
level deep, a notebook assembled into the files it holds, symbolic links refused), so the
learner sees, before sending, exactly what will be graded (helper modules beside the learner
files included, and a warning for any left out), and only for file names an exercise may
declare (models.learner_file_name: a .py module or a .toml answer sheet), checked before any
file is read: the names come from the server. One rule of the grader's is not the client's: a
file is never taken for an exercise file by its suffix alone (`my_attention.py` is not sent as
attention.py; `grader batch`'s `alice.py` still is alice's). The digest is the gradebook's
(grader.intake.incoming.files_digest): the same files give the same digest here and in every report.

`Packed.problems` (grader.intake.submission.precheck) are what a grade would fail on before anything of
it runs: `grader submit` sends nothing while there is one, so no submission is spent on it.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from grader.client.errors import ClientError, ServerFailure
from grader.client.models import learner_file_name
from grader.errors import SourceError
from grader.intake import notebooks
from grader.intake.incoming import files_digest
from grader.intake.submission import precheck
from grader.limits import UPLOAD_BYTES
from grader.locale import Message, message_of, msg

ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # every member's time: the same files make the same archive


@dataclass(frozen=True)
class Packed:
    files: dict[str, bytes]  # exercise file (or helper module) name -> contents
    digest: str
    archive: bytes  # the upload's body: a zip of exactly these files, at its top level
    warnings: tuple = ()  # Messages: helper modules left out
    notes: tuple = ()  # Messages: what assembling a notebook left out (they go with the files)
    origins: dict = field(default_factory=dict)  # file -> Message: the notebook cells it comes from
    problems: tuple = ()  # Messages: what a grade would fail on at once (precheck): not sent


def pack(exercise, path: Path) -> Packed:
    """`exercise` (a grader.models.Exercise: its `files` are what is looked for, its `names` what
    they must define) at `path`. Raises ClientError (exit 2) when the files cannot be read or some
    are missing: an upload that can only fail would cost the learner a submission for nothing. A
    file name no exercise may declare is the server's fault: ServerFailure (exit 4), before any
    file is read."""
    from grader.intake.sources import read_learner

    _check_names(exercise)
    try:
        matched = read_learner(Path(path), exercise, as_named=True)
    except SourceError as exc:
        raise ClientError(msg("PATH: {problem}", problem=message_of(exc))) from None
    return _packed(exercise, matched, str(path))


def pack_notebook(exercise, data: bytes, name: str) -> Packed:
    """A notebook's bytes (named `name`) packed as `pack(exercise, NAME)` packs that file on
    disk (grader.client.notebook: the cells a kernel ran)."""
    from grader.intake.sources import read_notebook

    _check_names(exercise)
    return _packed(exercise, read_notebook(data, name, exercise), name)


def _check_names(exercise) -> None:
    strange = [name for name in exercise.files if not learner_file_name(name)]
    if strange:
        raise ServerFailure(
            msg(
                "the server names {names} as this exercise's files, which no exercise has (a .py "
                "module or a .toml answer sheet): nothing was read or sent",
                names=", ".join(repr(n[:100]) for n in strange[:5]),
            )
        )


def _packed(exercise, matched, path: str) -> Packed:
    files, problem, warnings = matched
    if problem:
        raise ClientError(msg("PATH: {problem}", problem=problem))
    missing = [name for name in exercise.files if name not in files]
    if missing and notebooks.is_notebook(path):
        raise ClientError(
            msg(
                "PATH: {path} makes no {missing} (this exercise needs {files}): a notebook writes each "
                "file of an exercise of several with a cell that starts with %%writefile NAME",
                path=str(path),
                missing=", ".join(missing),
                files=", ".join(exercise.files),
            )
        )
    if missing:
        raise ClientError(
            msg(
                "PATH: {path} has no {missing} (this exercise needs {files})",
                path=str(path),
                missing=", ".join(missing),
                files=", ".join(exercise.files),
            )
        )
    archive = zip_files(files)
    if len(archive) > UPLOAD_BYTES:
        raise ClientError(
            msg(
                "PATH: the files take {kib} KiB zipped, more than the {limit} KiB allowed",
                kib=len(archive) >> 10,
                limit=UPLOAD_BYTES >> 10,
            )
        )
    notes: list[Message] = []
    origins: dict[str, Message] = {}
    for name, data in files.items():
        found = notebooks.origin(data)
        if found is not None:
            notes += found.notes
            origins[name] = msg(
                "from {notebook}, cells {cells}",
                notebook=found.notebook,
                cells=notebooks.cell_ranges(found.cells) or "-",
            )
    return Packed(
        files=files,
        digest=files_digest(files),
        archive=archive,
        warnings=tuple(warnings),
        notes=tuple(notes),
        origins=origins,
        problems=tuple(precheck(exercise, files)),
    )


def zip_files(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, ZIP_EPOCH)
            info.external_attr = 0o644 << 16  # a regular file, rw-r--r--
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[name])
    return buf.getvalue()


def unpack_starter(archive: bytes, names: list[str], limit: int) -> dict[str, bytes]:
    """The starter files of a server's zip: only members named as the exercise's files (plain
    names, checked in models.ExerciseInfo), each within `limit` bytes as it inflates."""
    out: dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            for info in zf.infolist()[: 4 * len(names) + 16]:
                if info.filename not in names or info.is_dir() or info.filename in out:
                    continue
                with zf.open(info) as member:
                    data = member.read(limit + 1)
                if len(data) > limit:
                    raise ClientError(
                        msg("{name} is larger than {size} KiB", name=info.filename, size=limit >> 10)
                    )
                out[info.filename] = data
    except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise ServerFailure(
            msg("the server's starter is not a readable zip: {error}", error=str(exc)[:500])
        ) from None
    return out
