"""Every msgid of the grader, found in its sources: the extraction step of the gettext workflow.

`extract_messages` is a Babel extraction method (registered as the extractor "grader", so
`pybabel extract -F babel.cfg -o grader/locale/grader.pot .` uses it). It walks the Python AST:

- `msg("...", ...)`, `N_("...")`, `_("...")` and `t("...", lang)` (report chrome): the first
  positional argument, a string literal;
- `check(..., title="...")`: the title of a hidden test's check.

Report templates (`reports/templates/*.j2`) are read with Jinja2's own Babel extractor, which
finds their `_("...")` calls.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = ("msg", "N_", "_", "t")  # t: report chrome, reports/view.py
PYTHON_SOURCES = ("grader/**/*.py", "reports/**/*.py", "exercises/*/hidden/*.py")
TEMPLATE_SOURCES = ("reports/templates/*.j2", "grader/service/templates/*.j2")


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _literal(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def extract_messages(fileobj, keywords, comment_tags, options):
    """Babel extraction method: yields (lineno, funcname, message, comments)."""
    source = fileobj.read()
    if isinstance(source, bytes):
        source = source.decode(options.get("encoding", "utf-8") if options else "utf-8")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        if name in KEYWORDS and node.args and (text := _literal(node.args[0])) is not None:
            yield node.lineno, None, text, []  # funcname None: Babel takes it as is
        elif name == "check":
            for kw in node.keywords:
                if kw.arg == "title" and (text := _literal(kw.value)):
                    yield node.lineno, None, text, ["the title of a graded check"]


def dynamic_calls(path: Path) -> list[str]:
    """msg()/N_() calls whose template is not a literal: extraction cannot see them."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and _name(node.func) in ("msg", "N_")
            and (not node.args or _literal(node.args[0]) is None)
        ):
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return bad


@dataclass
class Extracted:
    msgid: str
    locations: list[tuple[str, int]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)


def python_files() -> list[Path]:
    files: set[Path] = set()
    for pattern in PYTHON_SOURCES:
        files.update(p for p in ROOT.glob(pattern) if "__pycache__" not in p.parts)
    return sorted(files)


def client_files() -> list[Path]:
    """The Python files of the student's wheel: client/pyproject.toml's `files` (a folder: its
    .py files), the one list of what the client ships."""
    import tomllib

    with open(ROOT / "client" / "pyproject.toml", "rb") as f:
        listed = tomllib.load(f)["tool"]["hatch"]["build"]["hooks"]["custom"]["files"]
    files: set[Path] = set()
    for name in listed:
        path = ROOT / name
        if path.is_dir():
            files.update(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
        elif path.suffix == ".py":
            files.add(path)
    return sorted(files)


def client_msgids() -> list[str]:
    """Every msgid the client's own modules use: what its compiled catalog (client.mo) holds."""
    found: dict[str, None] = {}
    for path in client_files():
        with open(path, "rb") as f:
            for _, _, text, _ in extract_messages(f, KEYWORDS, [], {}):
                if text:
                    found.setdefault(text)
    return list(found)


def template_files() -> list[Path]:
    return sorted({p for pattern in TEMPLATE_SOURCES for p in ROOT.glob(pattern)})


def collect() -> dict[str, Extracted]:
    """msgid -> where it occurs, over every source the grader shows text from."""
    from jinja2.ext import babel_extract

    found: dict[str, Extracted] = {}

    def add(msgid, path, lineno, comments):
        if not msgid:
            return
        entry = found.setdefault(msgid, Extracted(msgid))
        entry.locations.append((str(path.relative_to(ROOT)), lineno))
        entry.comments += [c for c in comments if c not in entry.comments]

    for path in python_files():
        with open(path, "rb") as f:
            for lineno, _, text, comments in extract_messages(f, KEYWORDS, [], {}):
                add(text, path, lineno, comments)
    for path in template_files():
        with open(path, "rb") as f:
            for lineno, _, text, comments in babel_extract(f, ("_",), [], {"trimmed": "false"}):
                text = text[0] if isinstance(text, tuple) else text
                add(text, path, lineno, comments)
    return found


def template_catalog():
    """The extracted msgids as a Babel Catalog (the .pot)."""
    from babel.messages.catalog import Catalog

    cat = Catalog(
        project="gpt-bughunt-grader", domain="grader", fuzzy=False, msgid_bugs_address="course staff"
    )
    for entry in collect().values():
        message = cat.add(entry.msgid, locations=entry.locations, auto_comments=entry.comments)
        message.flags.discard("python-format")  # templates use {name}, not %(name)s
        if "{" in entry.msgid:
            message.flags.add("python-brace-format")
    return cat
