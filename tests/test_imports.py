"""No import cycle among the modules of grader/ and reports/.

The import graph is built from the source with `ast`, nothing is imported. An edge A -> B is an
import of B that runs when A is imported: a statement at A's top level, including inside
top-level `if`, `try` and `with` blocks and class bodies, but not inside a function (an import
in a function runs when it is called: that is how commands stay lazy, and it cannot deadlock a
partly initialised module) and not under `if TYPE_CHECKING:` (never run). `from P import x`
is an edge to P.x when P.x is a module of the tree, else to P; `import P.x` is an edge to P.x
(importing a submodule also runs its packages' __init__, but a package importing its own
submodules is not a cycle worth failing on, so those implicit edges are not drawn). Imports of
modules outside grader/ and reports/ are ignored.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("grader", "reports")


def module_files(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """module name -> its file, for every .py under the packages (a package is its __init__)."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_level_imports(body: list[ast.stmt]):
    """Import statements that run at import time: not in functions, not under TYPE_CHECKING."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _top_level_imports(node.body)
            yield from _top_level_imports(node.orelse)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            yield from _top_level_imports(node.body)
            for handler in node.handlers:
                yield from _top_level_imports(handler.body)
            yield from _top_level_imports(node.orelse)
            yield from _top_level_imports(node.finalbody)
        elif isinstance(node, (ast.With, ast.AsyncWith, ast.ClassDef, ast.For, ast.While)):
            yield from _top_level_imports(node.body)


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    modules = module_files(root, packages)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _top_level_imports(tree.body):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_pkg else name.split(".")[:-1]
                    here = here[:len(here) - (node.level - 1)]
                    base = ".".join(here + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in targets:
                while target and target not in modules:      # import a.b.c where only a.b is ours
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a list of modules, the first repeated at the end) per strongly connected
    component of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for component in components:
        start = min(component)
        path, seen = [start], {start}
        # walk inside the component until we come back to the start: a concrete cycle to name
        while True:
            nxt = sorted(w for w in graph[path[-1]] if w in component)
            back = [w for w in nxt if w == start]
            if back and len(path) > 1:
                path.append(start)
                break
            fresh = [w for w in nxt if w not in seen]
            if not fresh:                      # a dead end inside the SCC: find a way back by BFS
                path += _shortest(graph, path[-1], start, component)[1:]
                break
            path.append(fresh[0])
            seen.add(fresh[0])
        out.append(path)
    return sorted(out)


def _shortest(graph, a: str, b: str, within: set[str]) -> list[str]:
    from collections import deque
    prev = {a: None}
    todo = deque([a])
    while todo:
        v = todo.popleft()
        for w in sorted(graph[v]):
            if w in within and w not in prev:
                prev[w] = v
                if w == b:
                    todo.clear()
                    break
                todo.append(w)
    path, v = [], b
    while v is not None:
        path.append(v)
        v = prev.get(v)
    return path[::-1]


def test_grader_and_reports_have_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles (module-level imports):\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_graph_sees_the_imports_that_run_and_only_those(tmp_path):
    """The checker itself: a cycle is named; lazy and TYPE_CHECKING imports are not edges."""
    pkg = tmp_path / "grader"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from grader import b\n")
    (pkg / "b.py").write_text("try:\n    import grader.sub.c as c\nexcept ImportError:\n    pass\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from ..a import thing\n")              # relative: grader.a
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from grader import e\n")
    (pkg / "e.py").write_text("import json\n\ndef later():\n    from grader import d\n\n"
                              "class K:\n    from grader import f\n")
    (pkg / "f.py").write_text("")
    graph = import_graph(tmp_path, ("grader",))
    assert graph["grader.a"] == {"grader.b"}
    assert graph["grader.b"] == {"grader.sub.c"}
    assert graph["grader.sub.c"] == {"grader.a"}
    assert graph["grader.d"] == set() and graph["grader.e"] == {"grader.f"}
    assert cycles(graph) == [["grader.a", "grader.b", "grader.sub.c", "grader.a"]]


def test_the_command_line_imports_no_torch_and_no_sqlalchemy():
    """`grader --help` and `grader grade` on a quiz must not pay for torch or SQLAlchemy."""
    import subprocess
    import sys
    code = ("import sys, grader.cli; from grader.cli import main; "
            "print(sorted(m for m in ('torch', 'sqlalchemy', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
