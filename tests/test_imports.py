"""grader/ by concern, with no import circle among the modules of grader/ and reports/.

The import graph is built from the source with `ast`, nothing is imported. An edge A -> B is any
import of B written in A: at A's top level, inside `if`, `try`, `with` and class bodies, and inside
functions too (an import in a function runs when it is called, and ties A to B just the same; a
circle broken only by deferring an import is still a circle). Only imports under
`if TYPE_CHECKING:` are no edge (they never run). `from P import x` is an edge to P.x when P.x is a
module of the tree, else to P; `import P.x` is an edge to P.x (importing a submodule also runs its
packages' __init__, but a package importing its own submodules is not a cycle worth failing on,
so those implicit edges are not drawn). Imports of modules outside grader/ and reports/ are ignored.

The layout: grader/'s top level holds packages, each saying its role in the first line of its
__init__.py, and as modules only the shared vocabulary, the authoring API and the entry points
(TOP_LEVEL_MODULES). Hidden tests import from the grader only grader.testkit, whose names of
bb88852 all still import, and a hidden test written against it then still grades.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("grader", "reports")
# grader/'s own modules beside its packages: the vocabulary every package shares, the one module
# hidden tests import, and the entry points. A new concern is a package, never a module here.
TOP_LEVEL_MODULES = {"__init__", "__main__", "models", "errors", "limits", "text", "testkit"}
# what grader.testkit offered hidden tests as of bb88852 (a private edition's tests import these)
TESTKIT_BB88852 = (
    "COLLAPSE_MARGIN", "CURVE_POINTS", "CheckFailure", "FIRST_LOSS_TOLERANCE", "FLOAT_DTYPES",
    "LEARNED_MARGIN", "LearnerError", "Message", "N_", "PROBE_BRANCHING", "PROBE_HELD_OUT_TOKENS",
    "PROBE_HELD_OUT_WINDOWS", "PROBE_TRAIN_TOKENS", "Probe", "ProbeResult", "Remote", "TOLERANCE_FACTOR",
    "Unusable", "as_tensor", "attach", "batch_dims", "check", "conditioned_tolerance", "construct",
    "corner", "describe", "dtype_name", "expect_close", "expect_dtype", "expect_raises", "expect_shape",
    "expect_tuple", "explore", "fail", "float_dtypes", "is_close", "judge_probe", "judge_training",
    "magnitudes", "markov_corpus", "max_error", "msg", "random_tensor", "randomize", "reported_curve",
    "seeds", "sizes", "take_attachments", "tensors", "tolerance", "training_probe", "type_name",
)


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


def _imports(node: ast.AST):
    """Every import statement under `node` that can run: all but those under TYPE_CHECKING."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.orelse:
                yield from _imports(ast.Module(body=[stmt], type_ignores=[]))
        else:
            yield from _imports(child)


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    modules = module_files(root, packages)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
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
    assert not found, "import cycles (every import, in functions too):\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_graph_sees_every_import_that_can_run(tmp_path):
    """The checker itself: a cycle is named, one closed by an import inside a function too;
    TYPE_CHECKING imports are not edges (but their `else:` is)."""
    pkg = tmp_path / "grader"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from grader import b\n")
    (pkg / "b.py").write_text("try:\n    import grader.sub.c as c\nexcept ImportError:\n    pass\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from ..a import thing\n")              # relative: grader.a
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from grader import e\n"
                              "else:\n    from grader import f\n")
    (pkg / "e.py").write_text("import json\n\ndef later():\n    if json:\n        from grader import d\n\n"
                              "class K:\n    from grader import f\n")
    (pkg / "f.py").write_text("")
    graph = import_graph(tmp_path, ("grader",))
    assert graph["grader.a"] == {"grader.b"}
    assert graph["grader.b"] == {"grader.sub.c"}
    assert graph["grader.sub.c"] == {"grader.a"}
    assert graph["grader.d"] == {"grader.f"} and graph["grader.e"] == {"grader.d", "grader.f"}
    assert cycles(graph) == [["grader.a", "grader.b", "grader.sub.c", "grader.a"]]
    (pkg / "g.py").write_text("def late():\n    from grader.h import x\n")   # g -> h -> g, one deferred
    (pkg / "h.py").write_text("from grader import g\n")
    assert ["grader.g", "grader.h", "grader.g"] in cycles(import_graph(tmp_path, ("grader",)))


def test_grader_top_level_is_packages_and_the_shared_vocabulary():
    """A module at grader/'s top level is the vocabulary, the authoring API or an entry point;
    every folder there is a package, and every package's __init__.py says its role in its first
    line (store/migrations is Alembic's script folder, no package)."""
    grader = ROOT / "grader"
    loose = {p.stem for p in grader.glob("*.py")} - TOP_LEVEL_MODULES
    assert not loose, f"grader/{sorted(loose)[0]}.py: a new concern is a package (see README, Layout)"
    for folder in sorted(p for p in grader.iterdir() if p.is_dir() and any(p.rglob("*.py"))):
        assert (folder / "__init__.py").is_file(), f"{folder.relative_to(ROOT)}/__init__.py is missing"
    for init in sorted(grader.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and doc.splitlines()[0].strip(), f"{init.relative_to(ROOT)}: no one-line role"


def test_hidden_tests_import_only_the_testkit_from_the_grader():
    """grader.testkit is the one module a hidden test needs: the rest of grader/ may move."""
    for path in sorted((ROOT / "exercises").glob("*/hidden/*.py")):
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name.split(".")[0] == "grader":
                    assert name == "grader.testkit", f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"


def test_the_testkit_still_offers_what_it_did_at_bb88852():
    import grader.testkit

    missing = [name for name in TESTKIT_BB88852 if not hasattr(grader.testkit, name)]
    assert not missing, f"grader.testkit no longer has {missing}"


def test_a_hidden_test_written_against_the_testkit_of_bb88852_still_grades(tmp_path):
    """A private edition's day45 as of bb88852 (its exercise.toml and hidden test, kept in
    tests/fixtures/testkit_bb88852), graded from GRADER_EXERCISES_DIR: the solution at full marks,
    the starter not."""
    kept = ROOT / "tests" / "fixtures" / "testkit_bb88852"
    folder = tmp_path / "edition" / "day45-attention"
    shutil.copytree(ROOT / "exercises" / "day45-attention", folder,
                    ignore=shutil.ignore_patterns("hidden", "exercise.toml", "mutants", "alternatives"))
    (folder / "hidden").mkdir()
    shutil.copy(kept / "hidden_test_attention.py", folder / "hidden" / "test_attention.py")
    shutil.copy(kept / "exercise.toml", folder / "exercise.toml")
    env = {**os.environ, "GRADER_EXERCISES_DIR": str(folder.parent)}
    scores = {}
    for work in ("solution", "starter"):
        proc = subprocess.run([sys.executable, "-m", "grader", "grade", "day45-attention", str(folder / work),
                               "--format", "json"], capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=300)
        assert "Traceback" not in proc.stderr, proc.stderr
        grade = json.loads(proc.stdout)
        scores[work] = (grade["score"], grade["max_score"], grade["error"])
    assert scores["solution"] == (34.0, 34.0, None)
    assert scores["starter"][0] < 34.0


def test_the_command_line_imports_no_torch_and_no_sqlalchemy():
    """`grader --help` and `grader grade` on a quiz must not pay for torch or SQLAlchemy."""
    code = ("import sys, grader.cli; from grader.cli import main; "
            "print(sorted(m for m in ('torch', 'sqlalchemy', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_readme_layout_shows_every_package():
    """README's Layout is the newcomer's map: every package of grader/ has its line there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("```")[1]
    packages = sorted(p.name for p in (ROOT / "grader").iterdir() if (p / "__init__.py").is_file())
    missing = [name for name in packages if f"  {name}/ " not in layout]
    assert not missing, f"README.md, Layout: no line for grader/{missing[0]}/"
