"""A synthetic class of submissions whose verdicts we know, for batch tests and benchmarks.

Learners s000, s001, ... each get a folder with a whole submission (helper modules included, as
mutants/alternatives/day49-data/helper-module's `_util.py`): the reference solution or a
correct alternative (mutants/alternatives/), one injected bug (mutants/, via apply_mutant), or a
hostile submission (an endless loop at import, a syntax error, a malformed TOML file, a missing
file). Every learner's files differ (a comment names the learner), so no two submissions share a
hash, as in a real class.

    python -m grader.course.sampleclass day49-data 200 /tmp/class --hostile import-loop,syntax-error
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from grader.catalog.exercises import exercise_dir, load_exercise
from grader.catalog.mutants import Mutant, alternatives, apply_mutant, load_mutants

HOSTILE = ("import-loop", "syntax-error", "malformed-toml", "missing-file")


Template = tuple[str, Path | None, Mutant | None]


def templates(exercise_id: str) -> list[Template]:
    """(kind, folder, mutant): the correct and buggy submissions there are for this exercise."""
    out: list[Template] = [("solution", exercise_dir(exercise_id) / "solution", None)]
    out += [(f"alternative:{name}", path, None) for ex, name, path in alternatives() if ex == exercise_id]
    out += [(f"mutant:{m.id}", None, m) for m in load_mutants() if exercise_id in m.exercises]
    return out


def _tag(files: dict[str, bytes], learner: str) -> dict[str, bytes]:
    """Make this learner's copy unique without changing what it does."""
    return {
        name: data + (f"\n# {learner}\n".encode() if name.endswith((".py", ".toml")) else b"")
        for name, data in files.items()
    }


def _read(folder: Path, names: list[str]) -> dict[str, bytes]:
    """The exercise's files `names` in `folder` (those there are)."""
    return {n: (folder / n).read_bytes() for n in names if (folder / n).is_file()}


def _read_all(folder: Path) -> dict[str, bytes]:
    """A whole submission: every file in `folder`, its helper modules (`_util.py`) included, by
    name relative to the folder (no bytecode caches)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.relative_to(folder).parts
    }


def hostile_files(kind: str, solution: dict[str, bytes], exercise) -> dict[str, bytes] | None:
    files = dict(solution)
    py = next((n for n in exercise.files if n.endswith(".py")), None)
    toml = next((n for n in exercise.files if n.endswith(".toml")), None)
    if kind == "import-loop" and py:
        files[py] = b"while True:\n    pass\n" + files[py]
    elif kind == "syntax-error" and py:
        files[py] = files[py] + b"\ndef broken(:\n    return\n"
    elif kind == "malformed-toml" and toml:
        files[toml] = b"[answers\nnot = valid = toml\n" if toml == "answers.toml" else b"[bugs.A\nrule = \n"
    elif kind == "missing-file":
        files.pop(exercise.files[0], None)
    else:
        return None  # this exercise has no such file: skip the kind
    return files


def make_class(
    exercise_id: str,
    dest: Path,
    n: int,
    *,
    hostile: tuple[str, ...] = (),
    per_hostile: int = 1,
    only: tuple[str, ...] = (),
) -> dict[str, str]:
    """Write n learner folders under dest; returns learner -> kind ("solution", "mutant:post-ln",
    "hostile:syntax-error", ...). Hostile ones come first, then the templates in turn (only the
    kinds named in `only`, when given)."""
    exercise = load_exercise(exercise_id)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    solution = _read(exercise_dir(exercise_id) / "solution", exercise.files)
    plan: list[tuple[str, dict[str, bytes]]] = []
    for kind in hostile:
        files = hostile_files(kind, solution, exercise)
        if files is not None:
            plan += [(f"hostile:{kind}", files)] * per_hostile
    built: list[tuple[str, dict[str, bytes]]] = []
    with tempfile.TemporaryDirectory(prefix="grader-class-") as tmp:
        for i, (kind, folder, mutant) in enumerate(templates(exercise_id)):
            if only and kind not in only:
                continue
            if mutant is not None:
                folder = apply_mutant(mutant, exercise_id, Path(tmp) / f"m{i}")
            assert folder is not None  # templates(): each has a folder or a mutant to make one
            built.append((kind, _read_all(folder)))
    for i in range(max(0, n - len(plan))):
        plan.append(built[i % len(built)])
    manifest = {}
    for i, (kind, files) in enumerate(plan[:n]):
        learner = f"s{i:03d}"
        folder = dest / learner
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        for name, data in _tag(files, learner).items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        manifest[learner] = kind
    return manifest


def renamed_locals(source: bytes) -> bytes:
    """A near copy, as a learner who copies makes one: the same code with every variable assigned
    inside a function renamed (parameters and module names kept, so it still runs the same)."""
    tree = ast.parse(source)
    params = {a.arg for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for a in f.args.args}
    local = {
        n.id
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef)
        for n in ast.walk(f)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in params
    }
    text = source.decode("utf-8")
    for name in sorted(local, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(name)}\b", f"{name}_v", text)
    return text.encode("utf-8")


CANVAS_NAMES = ("chenwei", "linmei", "wangjun", "huangli", "zhangyu", "liuting", "yangming", "wuhao")


def make_canvas_export(
    exercise_id: str,
    dest: Path,
    n: int,
    *,
    late: int = 3,
    copies: int = 2,
    near_copies: int = 1,
    wrong_exercise: str | None = "day45-attention",
    only: tuple[str, ...] = (),
) -> dict[str, dict]:
    """A Canvas "Download Submissions" zip of n learners at `dest`, as an instructor gets one:
    flat files `{name}[_LATE]_{user id}_{submission id}_{file}`. The last `late` learners are late;
    `copies` learners hand in another learner's files byte for byte and `near_copies` with renamed
    variables; one learner (when `wrong_exercise` is given) hands in that exercise's solution
    instead. Returns Canvas user id -> {kind, name, late, copy_of}."""
    with tempfile.TemporaryDirectory(prefix="grader-canvas-") as tmp:
        kinds = make_class(exercise_id, Path(tmp), n, only=only)
        learners = sorted(kinds)
        submitted = {who: _read_all(Path(tmp) / who) for who in learners}
    manifest: dict[str, dict] = {}
    for i, who in enumerate(learners):
        manifest[str(1000 + i)] = {
            "kind": kinds[who],
            "name": f"{CANVAS_NAMES[i % len(CANVAS_NAMES)]}{i}",
            "late": i >= n - late,
            "copy_of": None,
            "files": submitted[who],
        }
    ids = list(manifest)
    for j in range(copies + near_copies):  # copiers take from the first learners (correct work)
        copier, original = ids[-(late + 1 + j)], ids[j % max(1, len(ids) // 4)]
        files = manifest[original]["files"]
        if j >= copies:
            files = {k: renamed_locals(v) if k.endswith(".py") else v for k, v in files.items()}
        kind = "copy" if j < copies else "near-copy"
        manifest[copier].update(files=dict(files), kind=kind, copy_of=original)
    if wrong_exercise is not None:
        other = load_exercise(wrong_exercise)
        wrong = ids[len(ids) // 2]
        files = _read(exercise_dir(wrong_exercise) / "solution", other.files)
        manifest[wrong].update(files=files, kind=f"wrong-exercise:{wrong_exercise}", copy_of=None)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for sid, (uid, info) in enumerate(manifest.items(), 50000):
            flag = "_LATE" if info["late"] else ""
            for name, data in info["files"].items():
                zf.writestr(f"{info['name']}{flag}_{uid}_{sid}_{name}", data)
    return {uid: {k: v for k, v in info.items() if k != "files"} for uid, info in manifest.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m grader.course.sampleclass",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("exercise")
    parser.add_argument("n", type=int)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--hostile", default="", help=f"comma-separated: {', '.join(HOSTILE)}")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.hostile.split(",") if k)
    for learner, kind in make_class(args.exercise, args.dest, args.n, hostile=kinds).items():
        print(learner, kind)


if __name__ == "__main__":
    main()
