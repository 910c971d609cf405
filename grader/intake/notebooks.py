"""A Jupyter or Colab notebook (.ipynb) as learner files: the exercise's files assembled from its code cells.

Pure functions, shared by the student client (`grader submit EX nb.ipynb`, `--dry-run`,
grader.client.notebook) and the grading side (`grader grade`, `grader batch`, the server, through
grader.intake.sources.match_files): one rule, so what the client shows is what is graded. Nothing of the
notebook runs, here or anywhere: its cells are read with nbformat and parsed with `ast`; IPython is
not needed (its TransformerManager is not on the grading side).

    assemble(data, exercise, name) -> Assembled(files, lines, notes)

- A code cell that starts with `%%writefile NAME` (or `%%writefile -a NAME`, `%%file NAME`) is that
  file, as IPython would write it: NAME is a plain file name (`../x.py`, `a/b.py`, `/content/x.py`
  are refused: NotebookError); an exercise file (case aside) or a `.py` module (a helper, if
  grader.intake.sources.helper_name takes it); any other name is left out, with a note.
- Otherwise, for an exercise with one learner `.py` file that no such cell writes, the file is the
  code cells in order, reduced to what the exercise's names (Exercise.names) need: the top-level
  definitions (def, class), imports and assignments (constants, dataclass configs) those names
  use, followed name by name (symtable: a function's own locals are not the module's). Dropped, each
  listed in a note: IPython magics (`%matplotlib inline`, cell magics but %%writefile and the
  Python-bodied %%time, %%timeit, %%capture), shell escapes (`!pip install torch`, `x = !ls`),
  `get_ipython()` calls (an nbconvert export), top-level code that runs (calls, loops, `with`,
  `if __name__ == "__main__":` blocks, bare expressions), and definitions the names do not use.
  `from __future__` imports go first. A cell that does not parse is kept as it is, so the syntax
  error is reported where it is.

**Cells are numbered as they stand in the notebook**: the first cell from the top is cell 1,
markdown cells included (nbformat's `cells[N-1]`). Jupyter's `In [7]` is the execution count,
which changes on every run and is absent from an unexecuted notebook or in Colab; the position
is the same for everyone who opens the file. Lines count from 1 within the cell.

**The assembled file says where each line came from**, so that every later reader (the grade's
syntax error, the client's checks, a batch worker or the server, which get the files only) names
the notebook's `cell N, line M`: its first line names the notebook (HEADER), each run of lines is
preceded by `# %% cell N, line M` (the percent format VS Code and Jupytext read as cells), and the
notes are `# grader-note: {json}` lines at its end, the first assembled file's (exercise order, a
`.py` first). `origin(text)` reads all three back; a note is only ever one of NOTES' messages.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import shlex
import symtable
from collections.abc import Iterable
from dataclasses import dataclass

from grader.errors import NotebookError
from grader.limits import NOTEBOOK_BYTES, NOTEBOOK_CELLS, NOTEBOOK_CODE_CHARS, NOTEBOOK_NOTES, SHORT_CHARS
from grader.locale import N_, Message, msg
from grader.models import Exercise

SUFFIX = ".ipynb"
HEADER = "# grader: assembled from the notebook "  # then its name as a JSON string, then HEADER_TAIL
HEADER_TAIL = '; each "# %% cell N, line M" says where the lines after it are in it'
MARKER = re.compile(r"^# %% cell (\d{1,9}), line (\d{1,9})$")
NOTE = "# grader-note: "
NOTE_TEXT_CHARS = 60  # of a dropped line, quoted in its note

# cell magics whose body is Python that runs: the magic line is dropped, the body read as code
PYTHON_CELL_MAGICS = ("time", "timeit", "capture", "prun")
WRITEFILE_MAGICS = ("writefile", "file")

# why a line was dropped (the `why` of a note)
WHY = {
    "magic": N_("an IPython magic"),
    "shell": N_("a shell command"),
    "runs": N_("top-level code that runs"),
    "unused": N_("not used by the exercise's names"),
    "broken": N_("a cell that does not parse, defining nothing the code sent needs"),
}

# every note a notebook can carry (origin() reads back no other message from a file)
DROPPED_LINE = N_('cell {cell}, line {line}: dropped "{text}" ({why})')
DROPPED_LINES = N_('cell {cell}, lines {line}-{last}: dropped "{text}" ({why})')
SET_ONLY_WHERE_DROPPED = N_(
    "cell {cell}, line {line}: {name} is set here, in code that is dropped ({why}), and the code "
    "that is sent uses it: set it in a cell of its own (an assignment or a def at the top level)"
)
NOT_SENT_FILE = N_(
    "cell {cell}: %%writefile {name} is not sent: it is neither one of this exercise's files "
    "({files}) nor a .py module"
)
NOT_SENT_CELLS = N_("cells {cells} are not sent: the notebook writes {files} with %%writefile")
REPLACED = N_("cell {cell}: %%writefile {name} replaces what cell {earlier} wrote")
NO_WRITEFILE = N_(
    "{notebook} writes no {missing} with %%writefile: for an exercise of several .py files, a "
    "notebook writes each with a cell that starts with %%writefile NAME"
)
MORE_NOTES = N_("and {count} more notes")
NOTES = frozenset(
    {DROPPED_LINE, DROPPED_LINES, SET_ONLY_WHERE_DROPPED, NOT_SENT_FILE, NOT_SENT_CELLS, REPLACED}
    | {NO_WRITEFILE, MORE_NOTES}
)


@dataclass(frozen=True)
class Assembled:
    """What a notebook assembles to. `files`: file name -> its text (exercise files, and `.py`
    modules written with %%writefile); `lines`: file name -> {line of the file: (cell, line in that
    cell)} for every line that came from a cell (origin()); `notes`: what was left out, and why."""

    files: dict[str, str]
    lines: dict[str, dict[int, tuple[int, int]]]
    notes: tuple[Message, ...] = ()


@dataclass(frozen=True)
class Origin:
    """What an assembled file says of itself (origin()): the notebook's name, where its lines
    come from, and the notes it carries."""

    notebook: str
    lines: dict[int, tuple[int, int]]
    notes: tuple[Message, ...] = ()

    @property
    def cells(self) -> list[int]:
        return sorted({cell for cell, _ in self.lines.values()})


def is_notebook(name: str) -> bool:
    return name.lower().endswith(SUFFIX)


# -- reading a notebook ---------------------------------------------------------------------------


def read_cells(data: bytes, name: str) -> list[tuple[str, str]]:
    """The notebook's cells as (cell type, source), in order (cell N is the N-th). NotebookError,
    naming the notebook, when it is too large, not JSON, not nbformat 4, or its cells are not
    cells: nothing of a notebook that cannot be read is guessed at."""
    if len(data) > NOTEBOOK_BYTES:
        raise NotebookError(
            msg(
                "{notebook} is larger than {mib} MiB (its outputs included): clear its outputs "
                "(Edit > Clear All Outputs) and save it again",
                notebook=name,
                mib=NOTEBOOK_BYTES >> 20,
            )
        )
    try:
        raw = json.loads(data)
    except RecursionError:
        raise NotebookError(msg("{notebook} is not a notebook: nested too deeply", notebook=name)) from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise NotebookError(
            msg("{notebook} is not a notebook: not JSON ({error})", notebook=name, error=str(exc)[:200])
        ) from None
    if not isinstance(raw, dict):
        raise NotebookError(msg("{notebook} is not a notebook: its JSON is not an object", notebook=name))
    version = raw.get("nbformat")
    if version != 4 or isinstance(version, bool):
        raise NotebookError(
            msg(
                "{notebook} is a notebook of nbformat {version}, not 4: open it in Jupyter and save it again",
                notebook=name,
                version=str(version)[:20],
            )
        )
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(msg("{notebook} is not a notebook: it has no list of cells", notebook=name))
    if len(cells) > NOTEBOOK_CELLS:
        raise NotebookError(
            msg(
                "{notebook} has {count} cells, more than the {limit} a notebook may have",
                notebook=name,
                count=len(cells),
                limit=NOTEBOOK_CELLS,
            )
        )
    slim: list[dict] = []  # what is read of each cell: its type and source (outputs, attachments: never)
    for number, cell in enumerate(cells, 1):
        kind = cell.get("cell_type") if isinstance(cell, dict) else None
        source = cell.get("source", "") if isinstance(cell, dict) else None
        lines = source if isinstance(source, list) else [source]
        if not isinstance(kind, str) or not all(isinstance(line, str) for line in lines):
            raise NotebookError(
                msg(
                    "{notebook}: cell {cell} is not a cell (a cell_type and a source of text)",
                    notebook=name,
                    cell=number,
                )
            )
        slim.append({"cell_type": kind, "source": source, "metadata": {}})
    from nbformat.v4 import to_notebook_json  # the format's own reading: a source split in lines

    try:
        nb = to_notebook_json({"nbformat": 4, "nbformat_minor": 0, "metadata": {}, "cells": slim})
        read = [(str(cell.cell_type), str(cell.source)) for cell in nb.cells]
    except Exception as exc:  # noqa: BLE001 - whatever a hostile file makes it raise: that file's problem
        raise NotebookError(
            msg(
                "{notebook} is not a notebook nbformat can read: {error}",
                notebook=name,
                error=f"{type(exc).__name__}: {exc}"[:200],
            )
        ) from None
    code = sum(len(source) for kind, source in read if kind == "code")
    if code > NOTEBOOK_CODE_CHARS:
        raise NotebookError(
            msg(
                "{notebook}: the code of its cells is larger than {mib} MiB",
                notebook=name,
                mib=NOTEBOOK_CODE_CHARS >> 20,
            )
        )
    out = []
    for number, (kind, source) in enumerate(read, 1):
        if kind == "code" and "\x00" in source:
            raise NotebookError(
                msg(
                    "{notebook}: cell {cell} holds a NUL character, which Python cannot read",
                    notebook=name,
                    cell=number,
                )
            )
        out.append((kind, source))
    return out


def split_lines(text: str) -> list[str]:
    """Lines as Python counts them (\\n, \\r\\n or \\r end one; a form feed does not)."""
    lines = re.split(r"\r\n|\r|\n", text)
    return lines[:-1] if lines and lines[-1] == "" else lines


# -- IPython's syntax, found without IPython ------------------------------------------------------

_TARGETS = r"[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*"
SHELL_ASSIGN = re.compile(rf"^\s*{_TARGETS}\s*=\s*!")
MAGIC_ASSIGN = re.compile(rf"^\s*{_TARGETS}\s*=\s*%")
HELP = re.compile(r"^\s*[A-Za-z_][\w.]*\s*\?\??\s*$")


def magic_kind(line: str | None) -> str | None:
    """ "shell" or "magic" when this line, at the start of a statement, is IPython's syntax (none
    of these is Python): `!cmd`, `%magic`, `%%magic`, `?obj`, `obj?`, `x = !cmd`, `x = %magic`."""
    if not line:
        return None
    stripped = line.lstrip()
    if stripped.startswith("!") or SHELL_ASSIGN.match(line):
        return "shell"
    if stripped.startswith(("%", "?")) or MAGIC_ASSIGN.match(line) or HELP.match(line):
        return "magic"
    return None


def _scan(line: str, depth: int, quote: str | None) -> tuple[int, str | None, bool]:
    """(bracket depth, open string quote, continued by a backslash) after one line of Python."""
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
            elif line.startswith(quote, i):
                i += len(quote)
                quote = None
            else:
                i += 1
            continue
        if c == "#":
            break
        if c in "\"'":
            quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else c
            i += len(quote)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        i += 1
    continued = line.endswith("\\")
    if quote in ("'", '"') and not continued:
        quote = None  # a one-quote string ends with its line (it was a syntax error)
    return depth, quote, continued and quote is None


def escaped_lines(lines: list[str]) -> dict[int, str]:
    """Line index -> "shell" or "magic" for each line IPython would run as such (a line that
    starts a statement: not inside brackets, a string or after a backslash), and "cont" for the
    lines a trailing backslash joins to one."""
    out: dict[int, str] = {}
    depth, quote, continued = 0, None, False
    i = 0
    while i < len(lines):
        kind = magic_kind(lines[i]) if depth == 0 and quote is None and not continued else None
        if kind:
            out[i] = kind
            while lines[i].endswith("\\") and i + 1 < len(lines):
                i += 1
                out[i] = "cont"
            continued = False
        else:
            depth, quote, continued = _scan(lines[i], depth, quote)
        i += 1
    return out


def calls_get_ipython(node: ast.AST) -> str | None:
    """ "shell" (get_ipython().system / .getoutput) or "magic" when `node` calls get_ipython()."""
    found = None
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "get_ipython":
            found = found or "magic"
        if (
            isinstance(sub, ast.Attribute)
            and sub.attr in ("system", "getoutput")
            and isinstance(sub.value, ast.Call)
            and isinstance(sub.value.func, ast.Name)
            and sub.value.func.id == "get_ipython"
        ):
            found = "shell"
    return found


# -- names a module binds at its top level --------------------------------------------------------


def _target_names(target: ast.AST, out: set[str]) -> None:
    if isinstance(target, ast.Name):
        out.add(target.id)
    elif isinstance(target, ast.Tuple | ast.List):
        for elt in target.elts:
            _target_names(elt, out)
    elif isinstance(target, ast.Starred):
        _target_names(target.value, out)


def bound_names(stmts: Iterable[ast.stmt]) -> tuple[set[str], bool]:
    """The names these module-level statements bind (defs, classes, imports, assignments, and
    those inside top-level if/for/while/with/try blocks), and whether a `from x import *` binds
    names no one can list without running it."""
    names: set[str] = set()
    star = False
    for st in stmts:
        if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(st.name)
        elif isinstance(st, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in st.names)
        elif isinstance(st, ast.ImportFrom):
            for a in st.names:
                if a.name == "*":
                    star = True
                else:
                    names.add(a.asname or a.name)
        elif isinstance(st, ast.Assign):
            for t in st.targets:
                _target_names(t, names)
        elif isinstance(st, ast.AnnAssign | ast.AugAssign):
            if not (isinstance(st, ast.AnnAssign) and st.value is None):
                _target_names(st.target, names)
        elif isinstance(st, ast.For | ast.AsyncFor):
            _target_names(st.target, names)
        elif isinstance(st, ast.With | ast.AsyncWith):
            for item in st.items:
                if item.optional_vars is not None:
                    _target_names(item.optional_vars, names)
        elif type(st).__name__ == "TypeAlias":  # Python 3.12's `type X = ...`
            _target_names(st.name, names)  # type: ignore[attr-defined]
        if isinstance(st, BLOCKS):  # what a top-level block binds, the module binds
            blocks = [getattr(st, f, None) or [] for f in ("body", "orelse", "finalbody")]
            blocks += [h.body for h in getattr(st, "handlers", [])]
            blocks += [c.body for c in getattr(st, "cases", [])]
            names.update(h.name for h in getattr(st, "handlers", []) if h.name)
            for block in blocks:
                inner, inner_star = bound_names(block)
                names |= inner
                star |= inner_star
    return names, star


BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ()
)


# -- the code cells of one file -------------------------------------------------------------------


@dataclass
class _Stmt:
    node: ast.stmt
    start: int  # index of its first line in the cell's lines (a decorator's, for a decorated def)
    end: int  # index of its last line
    kind: str  # "future", "def", or a WHY key: how it is treated unless it is needed
    binds: set[str]
    keep: bool = False
    _loads: set[str] | None = None


@dataclass
class _Code:
    """One code cell (or the body of a Python cell magic) being reduced to what is needed."""

    cell: int
    first: int  # the cell line number of lines[0]
    lines: list[str]  # magics and shell escapes replaced by `pass` at their indentation
    original: list[str]
    escaped: dict[int, str]  # escaped_lines()
    stmts: list[_Stmt] | None = None  # None: the cell does not parse ...
    keep_broken: bool = True  # ... and is kept as it is (its syntax error located), if needed

    def segment(self, st: _Stmt) -> str:
        """The statement's own text (a shared line cut at its columns, which are UTF-8 offsets)."""
        node = st.node
        lines = self.lines[st.start : st.end + 1]
        if not lines:
            return ""
        end_col = getattr(node, "end_col_offset", None)
        last = lines[-1].encode()
        lines[-1] = last[:end_col].decode(errors="replace") if end_col is not None else lines[-1]
        if st.start == node.lineno - 1:  # no decorator before it
            lines[0] = lines[0].encode()[node.col_offset :].decode(errors="replace")
        return "\n".join(lines) + "\n"

    def loads(self, st: _Stmt) -> set[str]:
        """The module-level names the statement reads (when it runs, or when what it defines is
        called): symtable's view, so a function's own locals are not taken for module names."""
        if st._loads is None:
            try:
                table = symtable.symtable(self.segment(st), "<cell>", "exec")
                found = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
                found |= _global_refs(table)
            except (SyntaxError, ValueError, RecursionError, MemoryError):  # symtable is stricter than ast
                found = {n.id for n in ast.walk(st.node) if isinstance(n, ast.Name)}
            st._loads = found
        return st._loads


def _global_refs(table) -> set[str]:
    found: set[str] = set()
    for child in table.get_children():
        found |= {
            s.get_name()
            for s in child.get_symbols()
            if s.is_global() and (s.is_referenced() or s.is_declared_global())
        }
        found |= _global_refs(child)
    return found


GUESSED_BINDING = re.compile(
    r"^(?:async\s+def|def|class)\s+(\w+)"  # 1: a def or a class
    r"|^(\w+)\s*(?::[^=]*)?=(?!=)"  # 2: an assignment
    r"|^import\s+(?:[\w.]+\s+as\s+)?(\w+)"  # 3: an import
    r"|^from\s+[\w.]+\s+import\s+\(?([\w\s,]+)"  # 4: from ... import a, b as c
)


def _guess_binds(lines: list[str]) -> set[str]:
    """The names a cell that does not parse seems to bind at its top level (a def, a class, an
    assignment, an import at the start of a line): enough to tell a scratch cell from a broken
    definition the exercise needs."""
    names: set[str] = set()
    for line in lines:
        m = GUESSED_BINDING.match(line)
        if m and m[4]:
            names.update(part.split()[-1] for part in m[4].split(",") if part.split())
        elif m:
            names.add(m[1] or m[2] or m[3])
    return names


def _is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def _definition_like(st: ast.stmt) -> bool:
    """A statement that only binds names when it runs (nothing else happens): a def, a class, an
    import, an assignment to names, or an if/try block of only these."""
    if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom):
        return True
    if type(st).__name__ == "TypeAlias" or isinstance(st, ast.Pass):
        return True
    if isinstance(st, ast.Assign):
        return all(_plain_target(t) for t in st.targets)
    if isinstance(st, ast.AnnAssign):
        return isinstance(st.target, ast.Name)
    if isinstance(st, ast.Expr):
        return isinstance(st.value, ast.Constant)  # a docstring, a bare string
    if isinstance(st, ast.If) and not _is_main_guard(st):
        return all(map(_definition_like, st.body + st.orelse))
    if isinstance(st, ast.Try):
        blocks = st.body + st.orelse + st.finalbody + [s for h in st.handlers for s in h.body]
        return all(map(_definition_like, blocks))
    return False


def _plain_target(t: ast.AST) -> bool:
    if isinstance(t, ast.Name):
        return True
    if isinstance(t, ast.Tuple | ast.List):
        return all(_plain_target(e) for e in t.elts)
    return isinstance(t, ast.Starred) and _plain_target(t.value)


def _code(cell: int, first: int, original: list[str]) -> _Code:
    escaped = escaped_lines(original)
    lines = list(original)
    for i, kind in escaped.items():
        indent = original[i][: len(original[i]) - len(original[i].lstrip())]
        lines[i] = "" if kind == "cont" else indent + "pass"
    code = _Code(cell, first, lines, original, escaped)
    try:
        module = compile(
            "\n".join(lines) + "\n",
            "<cell>",
            "exec",
            flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            dont_inherit=True,
        )
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code  # kept as it is: the syntax error is reported at its own line
    stmts = []
    ipython_called = any("get_ipython" in line for line in lines)
    for node in module.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        end = (node.end_lineno or node.lineno) - 1
        if isinstance(node, ast.Pass) and escaped.get(start) in ("shell", "magic"):
            kind = "escaped"  # a magic's placeholder: its note comes from `escaped`
        elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
            kind = "future"
        elif ipython_called and (ipython := calls_get_ipython(node)) is not None:
            kind = ipython
        elif _definition_like(node):
            kind = "def"
        else:
            kind = "runs"
        binds = bound_names([node])[0] if kind == "def" else set()
        stmts.append(_Stmt(node, start, end, kind, binds))
    code.stmts = stmts
    return code


def _keep_needed(codes: list[_Code], roots: set[str] | None) -> set[str]:
    """Mark the statements the roots need (every def and class when the exercise names none),
    following what each kept one loads, whichever cell binds it; a star import is kept when a
    needed name is bound by nothing else. Returns the names needed: the roots and what the kept
    code loads."""
    stmts = [(c, s) for c in codes for s in (c.stmts or []) if s.kind in ("def", "future")]
    for _, s in stmts:
        s.keep = s.kind == "future"
    all_defs = roots is None
    if roots is None:
        defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        roots = {n for _, s in stmts if isinstance(s.node, defs) for n in s.binds}
    needed = set(roots)
    changed = True
    while changed:
        changed = False
        for code, s in stmts:
            if not s.keep and s.binds & needed:
                s.keep = changed = True
                needed |= code.loads(s)
    bound = {n for _, s in stmts if s.keep for n in s.binds}
    if needed - bound - set(dir(builtins)):
        for _, s in stmts:
            if isinstance(s.node, ast.ImportFrom) and any(a.name == "*" for a in s.node.names):
                s.keep = True
    for code in codes:  # a cell that does not parse: kept if it looks like it binds a needed name
        if code.stmts is None:
            code.keep_broken = all_defs or bool(_guess_binds(code.lines) & needed)
    return needed


def _note_text(line: str) -> str:
    text = "".join(c if c.isprintable() else "?" for c in line.strip())
    return text if len(text) <= NOTE_TEXT_CHARS else text[: NOTE_TEXT_CHARS - 1] + "…"


class _Notes:
    """The notes of one notebook, made only while they fit NOTEBOOK_NOTES (the last one then
    counts the rest): a cell of 100,000 dropped lines costs no 100,000 messages."""

    def __init__(self) -> None:
        self.kept: list[tuple[str, dict]] = []
        self.more = 0

    def add(self, template: str, **params) -> None:
        if len(self.kept) < NOTEBOOK_NOTES:
            self.kept.append((template, params))
        else:
            self.more += 1

    def dropped(self, cell: int, first: int, last: int, text: str, why: str) -> None:
        if len(self.kept) >= NOTEBOOK_NOTES:
            self.more += 1
            return
        said = {"cell": cell, "line": first, "text": _note_text(text), "why": Message(WHY[why], {})}
        if last > first:
            self.add(DROPPED_LINES, last=last, **said)
        else:
            self.add(DROPPED_LINE, **said)

    def messages(self) -> list[Message]:
        if not self.more:
            return [Message(template, params) for template, params in self.kept]
        shown = [Message(template, params) for template, params in self.kept[: NOTEBOOK_NOTES - 1]]
        return [*shown, Message(MORE_NOTES, {"count": self.more + len(self.kept) - len(shown)})]


def _blank(line: str, lo: int, hi: int, last: bool) -> str:
    """The line with its UTF-8 bytes lo:hi blanked: spaces, or `0` and spaces where the statement
    ended (a harmless expression, so that a `; kept()` after it still parses)."""
    b = line.encode()
    fill = (b"0" if last and hi > lo else b"") + b" " * max(0, hi - lo - (1 if last and hi > lo else 0))
    return (b[:lo] + fill + b[hi:]).decode(errors="replace")


def _emit(code: _Code, notes: _Notes) -> tuple[list[str], list[str]]:
    """The cell's lines as sent, each run of them after its marker; its __future__ imports (they
    go first in the file); a note for each line it drops."""
    lines = list(code.lines)
    state = ["free"] * len(lines)  # free (blank or comment), kept, dropped
    for i, kind in code.escaped.items():
        if kind != "cont":
            last = i
            while code.escaped.get(last + 1) == "cont":
                last += 1
            notes.dropped(code.cell, code.first + i, code.first + last, code.original[i], kind)
    if code.stmts is None and not code.keep_broken:
        text = next((line for line in code.original if line.strip()), "")
        notes.dropped(code.cell, code.first, code.first + len(lines) - 1, text, "broken")
        return [], []
    if code.stmts is None:  # does not parse: kept as it is, but its top-level magics
        for i, line in enumerate(lines):
            top_magic = i in code.escaped and line in ("pass", "")
            state[i] = "dropped" if top_magic else "kept" if line.strip() else "free"
        return _marked(code, lines, state), []
    future: list[str] = []
    kept_lines = {i for s in code.stmts if s.keep for i in range(s.start, s.end + 1)}
    for s in code.stmts:
        span = range(s.start, s.end + 1)
        if s.keep and s.kind == "future":
            future += [f"# %% cell {code.cell}, line {code.first + s.start}", *lines[s.start : s.end + 1]]
            for i in span:
                state[i] = "dropped"  # moved to the top of the file
        elif s.keep:
            for i in span:
                state[i] = "kept"
        else:
            if s.kind != "escaped":  # a magic's placeholder has its note already
                why = "unused" if s.kind == "def" else s.kind
                text = code.original[s.start]
                if s.start == s.node.lineno - 1:  # its own text, where it shares its line
                    stop = s.node.end_col_offset if s.end == s.start else None
                    text = text.encode()[s.node.col_offset : stop].decode(errors="replace")
                notes.dropped(code.cell, code.first + s.start, code.first + s.end, text, why)
            if kept_lines.intersection(span):  # shares a line with a kept one: `x = 1; print(x)`
                node = s.node
                for i in span:
                    lo = node.col_offset if i == node.lineno - 1 else 0
                    hi = (node.end_col_offset or 0) if i == s.end else len(lines[i].encode())
                    lines[i] = _blank(lines[i], lo, hi, i == s.end)
            else:
                for i in span:
                    state[i] = "dropped"
    return _marked(code, lines, state), future


def _marked(code: _Code, lines: list[str], state: list[str]) -> list[str]:
    """Each run of kept lines (with the blank and comment lines among and before them) after the
    marker of its first line; runs of nothing but comments are left out."""
    out: list[str] = []
    run: list[int] = []

    def flush() -> None:
        while run and state[run[-1]] == "free":
            run.pop()
        if run:
            out.append(f"# %% cell {code.cell}, line {code.first + run[0]}")
            out.extend(lines[i] for i in run)
        run.clear()

    for i in range(len(lines)):
        if state[i] == "dropped":
            flush()
        else:
            run.append(i)
    flush()
    return out


# -- %%writefile ----------------------------------------------------------------------------------

CELL_MAGIC = re.compile(r"^%%(\w+)(.*)$")


def _first_line(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        if line.strip():
            return i
    return len(lines)


def _writefile_target(args: str, cell: int, notebook: str) -> tuple[str, bool] | None:
    """(file name, append) of `%%writefile [-a] NAME`; None when the line names no file (left out
    with a note, as IPython would refuse to run it); NotebookError for a path."""
    try:
        words = shlex.split(args)
    except ValueError:
        return None
    append = any(w in ("-a", "--append") for w in words)
    names = [w for w in words if w not in ("-a", "--append")]
    if len(names) != 1:
        return None
    name = names[0].removeprefix("./")
    if (
        not name
        or any(c in name for c in "/\\:")
        or name in (".", "..")
        or name.startswith("~")
        or not name.isprintable()
        or len(name) > SHORT_CHARS
    ):
        raise NotebookError(
            msg(
                "{notebook}: cell {cell} writes {name}, a path: write each file by its name alone "
                "(%%writefile attention.py), beside the notebook",
                notebook=notebook,
                cell=cell,
                name=repr(names[0][:SHORT_CHARS]),
            )
        )
    return name, append


# -- assembling -----------------------------------------------------------------------------------


def label(name: str) -> str:
    """The notebook's name as messages and the header show it: printable, at most SHORT_CHARS."""
    text = "".join(c if c.isprintable() else "?" for c in name)
    return text[:SHORT_CHARS] or SUFFIX


def assemble(data: bytes, exercise: Exercise, name: str = "notebook" + SUFFIX) -> Assembled:
    """The exercise's files as the notebook `data` (named `name`) holds them. Pure: nothing of
    it runs. NotebookError when the notebook cannot be read, or a %%writefile names a path."""
    notebook = label(name)
    cells = read_cells(data, notebook)
    wanted = {f.lower(): f for f in exercise.files}
    notes = _Notes()
    written: dict[str, list[tuple[int, int, list[str]]]] = {}  # file -> (cell, first line, lines)
    writer: dict[str, int] = {}
    codes: list[_Code] = []
    code_cells: list[int] = []
    for number, (kind, source) in enumerate(cells, 1):
        if kind != "code":
            continue
        lines = split_lines(source)
        top = _first_line(lines)
        if top == len(lines):
            continue
        m = CELL_MAGIC.match(lines[top])
        if m and m[1] in WRITEFILE_MAGICS:
            target = _writefile_target(m[2], number, notebook)
            if target is None:
                notes.dropped(number, top + 1, len(lines), lines[top], "magic")
                continue
            file, append = target
            file = wanted.get(file.lower(), file)
            if file not in exercise.files and not (file.endswith(".py") and file[:-3].isidentifier()):
                notes.add(NOT_SENT_FILE, cell=number, name=file, files=", ".join(exercise.files))
                continue
            if not append and file in written:
                notes.add(REPLACED, cell=number, name=file, earlier=writer[file])
                written[file] = []
            written.setdefault(file, []).append((number, top + 2, lines[top + 1 :]))
            writer[file] = number
            continue
        code_cells.append(number)
        if m and m[1] in PYTHON_CELL_MAGICS:
            notes.dropped(number, top + 1, top + 1, lines[top], "magic")
            codes.append(_code(number, top + 2, lines[top + 1 :]))
        elif m:
            notes.dropped(number, top + 1, len(lines), lines[top], "magic")
        else:
            codes.append(_code(number, 1, lines))

    files: dict[str, str] = {}
    python = [f for f in exercise.files if f.endswith(".py")]
    from_cells = [f for f in python if f not in written]
    if len(python) == 1 and from_cells:
        roots = exercise.names.get(from_cells[0])
        needed = _keep_needed(codes, set(roots) if roots else None)
        _set_only_where_dropped(codes, needed, notes)
        body: list[str] = []
        future: list[str] = []
        for code in codes:
            lines, moved = _emit(code, notes)
            body += lines
            future += moved
        files[from_cells[0]] = "\n".join([_header(notebook), *future, *body]) + "\n"
    else:
        if from_cells and len(python) > 1:
            notes.add(NO_WRITEFILE, notebook=notebook, missing=", ".join(from_cells))
        if written and code_cells:
            notes.add(NOT_SENT_CELLS, cells=cell_ranges(code_cells), files=", ".join(sorted(written)))
    for file, parts in written.items():
        text = [_header(notebook)]
        for number, first, lines in parts:
            text += [f"# %% cell {number}, line {first}", *lines]
        files[file] = "\n".join(text) + "\n"
    said = notes.messages()
    carrier = next((f for f in [*python, *exercise.files, *sorted(files)] if f in files), None)
    if said and carrier is not None:
        files[carrier] += "".join(NOTE + _note_json(n) + "\n" for n in said)
    lines_of = {f: found.lines for f, text in files.items() if (found := origin(text)) is not None}
    return Assembled(files=files, lines=lines_of, notes=tuple(said))


def _set_only_where_dropped(codes: list[_Code], needed: set[str], notes: _Notes) -> None:
    """A name needed (one of the exercise's, or one the code sent uses) that only a dropped
    statement sets (`with open(...) as f: vocab = ...`, a def inside `if __name__ ==
    "__main__":`): the learner's NameError or missing name, said where it is. (A dropped
    definition never sets one: it would have been kept.)"""
    kept = {n for c in codes for s in (c.stmts or []) if s.keep for n in s.binds}
    told: set[str] = set()
    for code in codes:
        for s in code.stmts or []:
            if s.kind not in ("runs", "magic", "shell"):
                continue
            for name in sorted(bound_names([s.node])[0] & needed - kept - told):
                told.add(name)
                notes.add(
                    SET_ONLY_WHERE_DROPPED,
                    cell=code.cell,
                    line=code.first + s.start,
                    name=name,
                    why=Message(WHY[s.kind], {}),
                )


def _header(notebook: str) -> str:
    return HEADER + json.dumps(notebook, ensure_ascii=True) + HEADER_TAIL


def _note_json(note: Message) -> str:
    return json.dumps(note.to_data(), ensure_ascii=True, separators=(",", ":"))


def cell_ranges(cells: Iterable[int]) -> str:
    """3, 4, 5, 7 -> "3-5, 7"."""
    out: list[str] = []
    run: list[int] = []
    for n in sorted(set(cells)):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [n]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(out)


# -- reading an assembled file back ---------------------------------------------------------------


def origin(text: str | bytes) -> Origin | None:
    """What an assembled file says of itself (HEADER, markers, notes); None for any other file.
    Only the notebook's own kind of note is read back (NOTES), each with its own params."""
    if isinstance(text, bytes):
        if not text.startswith(HEADER.encode()):
            return None
        text = text.decode("utf-8", errors="replace")
    if not text.startswith(HEADER):
        return None
    lines = split_lines(text)
    try:
        notebook, end = json.JSONDecoder().raw_decode(lines[0], len(HEADER))
    except ValueError:
        return None
    if not isinstance(notebook, str) or not lines[0][end:].startswith("; "):
        return None
    where: dict[int, tuple[int, int]] = {}
    notes: list[Message] = []
    at: tuple[int, int] | None = None
    for number, line in enumerate(lines[1:], 2):
        m = MARKER.match(line)
        if m:
            at = (int(m[1]), int(m[2]))
            continue
        if line.startswith(NOTE):
            note = _read_note(line[len(NOTE) :])
            if note is not None:
                notes.append(note)
            continue
        if at is not None:
            where[number] = at
            at = (at[0], at[1] + 1)
    return Origin(notebook=label(notebook), lines=where, notes=tuple(notes[:NOTEBOOK_NOTES]))


def _read_note(text: str) -> Message | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("id") not in NOTES or not isinstance(data.get("params"), dict):
        return None
    params: dict[str, object] = {}
    for key, value in data["params"].items():
        if key == "why":
            why = value.get("id") if isinstance(value, dict) else None
            if not isinstance(why, str) or why not in WHY.values():
                return None
            params[key] = Message(why, {})
        elif isinstance(value, str | int) and not isinstance(value, bool) and key.isidentifier():
            params[key] = value[: SHORT_CHARS * 4] if isinstance(value, str) else value
        else:
            return None
    return Message(data["id"], params)


def located(text: str | bytes, line: int) -> tuple[str, int, int] | None:
    """(notebook, cell, line in that cell) of line `line` of an assembled file; None when the
    file is not one, or that line did not come from a cell."""
    found = origin(text)
    if found is None or line not in found.lines:
        return None
    return (found.notebook, *found.lines[line])
