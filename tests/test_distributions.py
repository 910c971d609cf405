"""The two distributions built from this checkout, as pip builds them (`pip wheel --no-deps`, once
per run: conftest.py's `distribution_wheels`):

- the student's wheel (client/pyproject.toml, `gpt-bughunt-grader`) holds the client's commands and
  the files they import, and nothing of the course: no path under exercises/, mutants/ or
  reference_model/, and no line of a hidden test, a solution, a quiz key or answer sheet, a mutant
  or an alternative; importing every module of it and every client command imports nothing that
  grades (no torch);
- the grading wheel (pyproject.toml, `gpt-bughunt-grader-server`) holds every other file of
  grader/, reports/ and reference_model/, none of the client's (one owner per file, so uninstalling
  one never removes the other's), and of the course's data only the two __init__.py that find it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"client": ROOT / "client", "grading": ROOT}
COURSE_DATA = ("exercises", "mutants", "reference_model")
# What of the course a learner must never get: globs under the checkout
SECRETS = (
    "exercises/*/hidden/**/*",
    "exercises/*/solution/**/*",  # a quiz's answer sheet is its solution/
    "exercises/*/key.toml",
    "exercises/*/mutants/**/*",
    "exercises/*/alternatives/**/*",
    "mutants/**/*",
    "reference_model/**/*",
)
PUBLIC = ("exercises/*/starter/**/*", "exercises/*/exercise.toml")  # what a learner gets anyway
LOCATORS = ("exercises/__init__.py", "mutants/__init__.py")  # where the data is: code, in the grading wheel
FRAGMENT_CHARS = 24  # a secret file's line this long (and not in a starter) is its own
CLIENT_MO = "grader/locale/zh_TW/LC_MESSAGES/client.mo"  # the client's zh-TW: its own msgids only
TRANSLATION_CHARS = 10  # a hidden message's zh-TW translation this long is its own


def build_wheels(target: Path) -> dict[str, Path]:
    """Both wheels of this checkout, built by pip into `target` (pip fetches hatchling for the
    build): {"client": the student's, "grading": the grading side's}."""
    wheels = {}
    for name, source in SOURCES.items():
        out = target / name
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
             "-w", str(out), str(source)],
            capture_output=True, text=True, timeout=400,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        [wheels[name]] = out.glob("*.whl")
    return wheels


def members(wheel: Path) -> dict[str, bytes]:
    """The wheel's files but its .dist-info, by path."""
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist() if ".dist-info/" not in n and not n.endswith("/")}


def metadata(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        [path] = [n for n in zf.namelist() if n.endswith(f".dist-info/{name}")]
        return zf.read(path).decode()


def files(*patterns: str) -> list[Path]:
    found = {p for pattern in patterns for p in ROOT.glob(pattern) if p.is_file()}
    return sorted(p for p in found if "__pycache__" not in p.parts and p not in {ROOT / n for n in LOCATORS})


def lines(path: Path) -> set[str]:
    return {line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()}


def secret_fragments(patterns=SECRETS) -> dict[str, Path]:
    """Each line (stripped, FRAGMENT_CHARS or longer) of a secret file that no public file of the
    course has: a line only that file would bring. Maps it to one file it is from."""
    public = set().union(*(lines(p) for p in files(*PUBLIC)))
    out: dict[str, Path] = {}
    for path in files(*patterns):
        for line in lines(path):
            if len(line) >= FRAGMENT_CHARS and line not in public:
                out.setdefault(line, path)
    return out


def found_in(wheel: Path, fragments: dict[str, Path]) -> dict[str, tuple[str, str]]:
    """fragment -> (the secret file it is from, the wheel member that has it)."""
    found = {}
    for member, data in members(wheel).items():
        text = data.decode("utf-8", errors="replace")
        for fragment, path in fragments.items():
            if fragment in text:
                found.setdefault(fragment, (str(path.relative_to(ROOT)), member))
    return found


@pytest.fixture(scope="module")
def wheels(distribution_wheels):
    return distribution_wheels  # conftest.py: built once per run, for this file and the student install


def test_the_student_wheel_has_no_path_of_the_course(wheels):
    names = set(members(wheels["client"]))
    assert "grader/cli/client.py" in names and "grader/client/api.py" in names
    assert not [n for n in names if n.split("/")[0] in COURSE_DATA], "course data in the student wheel"
    assert not [n for n in names if "/hidden/" in n or "/solution/" in n or n.endswith("key.toml")]
    assert not [n for n in names if not n.endswith(".py") and n != CLIENT_MO], "only the client's modules"
    assert CLIENT_MO in names and "grader/locale/zh_TW/LC_MESSAGES/grader.po" not in names


def test_the_student_wheel_has_no_line_of_a_hidden_test_key_solution_or_mutant(wheels):
    fragments = secret_fragments()
    sources = set(fragments.values())
    by_kind = {pattern: (len(sources & set(files(pattern))), len(files(pattern))) for pattern in SECRETS}
    print(f"\n{len(fragments)} lines searched; of each kind's files, those with a line of its own: {by_kind}")
    assert all(mine for mine, every in by_kind.values() if every), by_kind  # the search has lines to find
    leaked = found_in(wheels["client"], fragments)
    assert not leaked, f"the student wheel holds lines of the course's secrets: {leaked}"


def test_the_search_finds_a_line_planted_in_a_wheel(wheels, tmp_path):
    """One line of each kind of secret, planted in a copy of the student wheel's client.py: found."""
    fragments = secret_fragments()
    planted = []
    for pattern in SECRETS:
        kind = set(files(pattern))
        planted += [f for f, p in fragments.items() if p in kind][:1]  # none if the checkout has no such file
    copy = tmp_path / "planted.whl"
    with zipfile.ZipFile(copy, "w") as zf:
        for name, data in members(wheels["client"]).items():
            extra = "\n".join(planted) if name == "grader/cli/client.py" else ""
            zf.writestr(name, data + extra.encode())
    assert len(planted) >= 5
    assert set(planted) <= set(found_in(copy, fragments))  # a planted line may hold a shorter one too


def hidden_messages() -> dict[str, str]:
    """The text (msgid, and its zh-TW translation) of every message only a hidden test uses: none
    may reach the student's wheel, in its catalog or anywhere else. text -> the msgid it is of."""
    from babel.messages.pofile import read_po

    from grader.locale import po_path
    from grader.locale.extract import client_msgids, collect

    client = set(client_msgids())
    with open(po_path("zh-TW"), "rb") as f:
        zh = read_po(f)
    out = {}
    for msgid, entry in collect().items():
        if msgid in client or not all(path.startswith("exercises/") for path, _ in entry.locations):
            continue
        if len(msgid) >= FRAGMENT_CHARS:
            out[msgid] = msgid
        translated = zh.get(msgid)
        if translated is not None and len(translated.string or "") >= TRANSLATION_CHARS:
            out[translated.string] = msgid
    return out


def wheel_texts(wheel: Path) -> dict[str, str]:
    """Each member's text (a .mo's strings too: gettext keeps them as UTF-8)."""
    return {n: data.decode("utf-8", errors="replace") for n, data in members(wheel).items()}


def test_the_student_wheel_has_no_hidden_tests_message_in_either_language(wheels):
    import gettext
    import io

    from grader.locale.extract import client_msgids

    hidden = hidden_messages()
    assert len(hidden) > 100  # the search has messages to find: the checks' titles, their diagnoses
    texts = wheel_texts(wheels["client"])
    leaked = {text: member for text in hidden for member, data in texts.items() if text in data}
    assert not leaked, f"the student wheel holds hidden tests' messages: {list(leaked.items())[:5]}"
    # its catalog is the client's msgids, each translated, and nothing else
    catalog = gettext.GNUTranslations(io.BytesIO(members(wheels["client"])[CLIENT_MO]))._catalog  # type: ignore[attr-defined]
    assert {k for k in catalog if k} == set(client_msgids())


def test_the_hidden_message_search_finds_one_planted_in_the_catalog(wheels, tmp_path):
    """A hidden test's message and its translation, planted in a copy of the wheel's client.mo: found."""
    hidden = hidden_messages()
    msgid = next(m for t, m in hidden.items() if t != m)  # one with a translation of its own
    planted = [t for t, m in hidden.items() if m == msgid]
    copy = tmp_path / "planted.whl"
    with zipfile.ZipFile(copy, "w") as zf:
        for name, data in members(wheels["client"]).items():
            zf.writestr(name, data + ("\0".join(planted).encode() if name == CLIENT_MO else b""))
    texts = wheel_texts(copy)
    assert all(any(t in data for data in texts.values()) for t in planted) and len(planted) >= 1


def test_the_search_finds_what_a_wheel_does_hold(wheels):
    """The same search on the grading wheel, which ships the reference model (never the student's),
    finds every line of it. (Not a search for the course's data there: the grading code shares
    lines with hidden tests, `from hypothesis import strategies as st`; its paths are checked below.)"""
    reference = secret_fragments(("reference_model/**/*",))
    assert len(found_in(wheels["grading"], reference)) == len(reference) > 50


def test_the_grading_wheel_ships_no_course_data_and_none_of_the_client_files(wheels):
    client, grading = set(members(wheels["client"])), set(members(wheels["grading"]))
    assert not client & grading, "a file with two owners"
    assert {n for n in grading if n.split("/")[0] in ("exercises", "mutants")} == set(LOCATORS)
    # every file of the grader's packages is in one of the two
    ours = {
        p.relative_to(ROOT).as_posix()
        for package in ("grader", "reports", "reference_model")
        for p in (ROOT / package).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".db")
    }
    assert ours - (client | grading) == set()
    # one list of the client's files: the client's build hook ships what the grading wheel excludes
    client_build = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    grading_build = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    listed, excluded = client_build["hooks"]["custom"]["files"], grading_build["targets"]["wheel"]["exclude"]
    assert sorted(listed) == sorted(e.strip("/") for e in excluded)


def test_one_version_one_command_and_the_grading_side_requires_its_client(wheels):
    from grader import __version__

    client = Parser().parsestr(metadata(wheels["client"], "METADATA"))
    grading = Parser().parsestr(metadata(wheels["grading"], "METADATA"))
    assert (client["Name"], client["Version"]) == ("gpt-bughunt-grader", __version__)
    assert (grading["Name"], grading["Version"]) == ("gpt-bughunt-grader-server", __version__)
    assert f"gpt-bughunt-grader=={__version__}" in grading.get_all("Requires-Dist")
    assert not [r for r in client.get_all("Requires-Dist") if r.split("=")[0].split(">")[0] == "torch"]
    assert "grader = grader.cli:main" in metadata(wheels["client"], "entry_points.txt")
    with zipfile.ZipFile(wheels["grading"]) as zf:  # bin/grader has one owner too
        entry_points = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        assert not entry_points or "console_scripts" not in zf.read(entry_points[0]).decode()


def test_uninstalling_the_grading_side_leaves_the_client_whole(wheels, tmp_path):
    """Both wheels in one venv (--no-deps: only their own files matter here), then the grading
    distribution uninstalled: every file of the client is still there, `grader` with it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    for args in (["install", "--no-deps", str(wheels["client"]), str(wheels["grading"])],
                 ["uninstall", "-y", "gpt-bughunt-grader-server"]):  # fmt: skip
        proc = subprocess.run([*pip, "-q", *args], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    [site] = venv.glob("lib/python3*/site-packages")
    assert not (site / "grader" / "grading.py").exists() and not (site / "reference_model").exists()
    missing = [name for name in members(wheels["client"]) if not (site / name).is_file()]
    assert missing == [], "the grading side's uninstall removed files of the client"
    assert (venv / "bin" / "grader").is_file()


# The student's commands, from the student's wheel alone, in this suite's Python (which has torch):
# whatever they import is recorded, and a grader or reports module not in the wheel cannot load.
IMPORTS = """
import importlib, json, sys
from pathlib import Path
wheel = Path(sys.argv[1]).resolve()
class OnlyTheWheel:  # this Python finds the checkout's packages too; the student has the wheel alone
    def find_spec(self, name, path=None, target=None):
        top, file = name.split(".")[0], wheel.joinpath(*name.split("."))
        ours = top in ("grader", "reports") and not (file.with_suffix(".py").is_file()
                                                      or (file / "__init__.py").is_file())
        if top in %r or ours:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, OnlyTheWheel())
from grader.cli import COMMANDS, GRADING_COMMANDS, GRADING_IMPORTS, main
modules = [p.relative_to(wheel).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
           for p in sorted(wheel.rglob("*.py")) if p.name != "__main__.py"]  # that one runs the CLI
for name in modules:
    importlib.import_module(name)
for command in sorted(set(COMMANDS) - GRADING_COMMANDS):
    assert main.get_command(None, command) is not None, command
outside = sorted(n for n, m in sys.modules.items() if n.split(".")[0] in ("grader", "reports")
                 and wheel not in Path(getattr(m, "__file__", None) or wheel / "x").resolve().parents)
print(json.dumps({"modules": len(modules), "outside": outside,
                  "grading": sorted({n.split(".")[0] for n in sys.modules} & set(GRADING_IMPORTS))}))
"""


def test_the_student_commands_import_nothing_that_grades(wheels, tmp_path):
    unpacked = tmp_path / "wheel"
    with zipfile.ZipFile(wheels["client"]) as zf:
        zf.extractall(unpacked, [n for n in zf.namelist() if ".dist-info/" not in n])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "PYTHON"))}
    proc = subprocess.run(
        [sys.executable, "-c", IMPORTS % (COURSE_DATA,), str(unpacked)],
        capture_output=True, text=True, timeout=120, cwd=unpacked,
        env={**env, "PYTHONPATH": str(unpacked)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["modules"] > 20
    assert seen["outside"] == [], "a module of the grader's packages came from outside the wheel"
    assert seen["grading"] == [], f"the student's commands import {seen['grading']}"
