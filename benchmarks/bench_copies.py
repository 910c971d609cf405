"""How long do the class report's copies take? A script, not a test:

    .venv/bin/python benchmarks/bench_copies.py [--sizes 30 300] [--files 5]

Two classes of n learners with `--files` files each, every tenth learner handing in another's
files with renamed variables: "independent work", where each file is code of the learner's own
(random functions of about the solution's length), and "one solution for all", the slow case,
where each file is one of day49-data's solution, its correct alternatives and its mutants (so
most pairs of learners share most of their code, and every such pair has its overlap counted),
with a helper function of the learner's own appended so that no two files are the same bytes.
The starter is each file's boilerplate. Printed:
the time of grader.course.copies.find_copies (fingerprints and comparisons; copydetect's import apart),
(and, timed again on their own, the fingerprints: copydetect's Pygments tokenizing), and how
many identical groups and near-copy pairs it found.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.course.copies import find_copies, fingerprints, own_files  # noqa: E402
from grader.catalog.exercises import load_exercise  # noqa: E402
from grader.catalog.starters import starter_files  # noqa: E402
from grader.catalog.mutants import apply_mutant  # noqa: E402
from grader.course.sampleclass import renamed_locals, templates  # noqa: E402

EXERCISE = "day49-data"


def variants() -> list[bytes]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (_, folder, mutant) in enumerate(templates(EXERCISE)):
            if mutant is not None:
                folder = apply_mutant(mutant, EXERCISE, Path(tmp) / f"m{i}")
            if folder is not None and (folder / "data.py").is_file():
                out.append((folder / "data.py").read_bytes())
    return out


def own_helper(rng: random.Random) -> bytes:
    names = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)) for _ in range(4)]
    a, b, c, d = names
    return (
        f"\n\ndef {a}({b}, {c}={rng.randint(1, 99)}):\n"
        f"    {d} = [{b} * {rng.randint(2, 9)} + i for i in range({c})]\n"
        f"    return sum({d}) / max(len({d}), {rng.randint(1, 5)})\n"
    ).encode()


def own_code(rng: random.Random, lines: int = 45) -> bytes:
    """A file of the learner's own: functions of random statements (so a class of them shares
    little, as independent work does), about the length of day49-data's solution."""
    ops = ["+", "-", "*", "//", "%", "**", "<<", "|"]
    out = ["import torch", ""]
    while len(out) < lines:
        out += ["", f"def f{rng.randint(0, 999)}(a, b):"]
        for _ in range(rng.randint(3, 8)):
            expr = " ".join(
                f"{rng.choice(['a', 'b', str(rng.randint(0, 999))])} {rng.choice(ops)}"
                for _ in range(rng.randint(1, 4))
            )
            kind = rng.randrange(4)
            if kind == 0:
                out.append(f"    a = {expr} {rng.randint(1, 99)}")
            elif kind == 1:
                out += [f"    for i in range({rng.randint(2, 50)}):", f"        b = b {rng.choice(ops)} i"]
            elif kind == 2:
                out += [f"    if a > {rng.randint(0, 99)}:", f"        a = torch.tensor([{expr} 1]).sum()"]
            else:
                out.append(f"    b = [{expr} {rng.randint(1, 9)} for _ in range({rng.randint(1, 9)})]")
        out.append("    return a, b")
    return ("\n".join(out) + "\n").encode()


def _class_of(n: int, own_files, seed: int) -> dict[str, dict[str, bytes]]:
    """n learners, each with own_files(rng); every tenth hands in a renamed copy of another's."""
    rng = random.Random(seed)
    subs: dict[str, dict[str, bytes]] = {}
    for i in range(n):
        who = f"s{i:03d}"
        if i % 10 == 9:
            original = subs[f"s{rng.randrange(i):03d}"]
            subs[who] = {name: renamed_locals(data) for name, data in original.items()}
        else:
            subs[who] = own_files(rng)
    return subs


def make_diverse_class(n: int, files: int, seed: int = 0) -> dict[str, dict[str, bytes]]:
    """Every learner's files their own (own_code)."""
    return _class_of(n, lambda rng: {f"part{k}.py": own_code(rng) for k in range(files)}, seed)


def make_class(n: int, files: int, pool: list[bytes], seed: int = 0) -> dict[str, dict[str, bytes]]:
    """Every learner's files drawn from one pool of solutions, each with a helper of their own."""
    names = [f"part{k}.py" for k in range(files)]
    return _class_of(n, lambda rng: {name: rng.choice(pool) + own_helper(rng) for name in names}, seed)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 300])
    parser.add_argument("--files", type=int, default=5)
    args = parser.parse_args()
    import copydetect  # noqa: F401 - its import (matplotlib) is not the comparison's cost

    pool = variants()
    starter_py = starter_files(load_exercise(EXERCISE))["data.py"]
    starter = {f"part{k}.py": starter_py for k in range(args.files)}
    print(f"{len(pool)} distinct day49-data files to draw from; {args.files} files per learner")
    classes = {
        "independent work": lambda n: make_diverse_class(n, args.files),
        "one solution for all": lambda n: make_class(n, args.files, pool),
    }
    for kind, make in classes.items():
        for n in args.sizes:
            subs = make(n)
            started = time.perf_counter()
            found = find_copies(subs, starter)
            seconds = time.perf_counter() - started
            started = time.perf_counter()
            fingerprints({w: own_files(f, starter) for w, f in subs.items()}, starter)
            printing = time.perf_counter() - started
            print(
                f"{kind:>20}, n={n:4d}: {seconds:7.2f} s, of which fingerprints ~{printing:.2f} s "
                f"({n * (n - 1) // 2} pairs; "
                f"{len(found.identical)} identical groups, {len(found.near)} near-copy pairs, "
                f"{len(found.learners)} learners flagged)"
            )


if __name__ == "__main__":
    main()
