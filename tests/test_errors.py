"""The error hierarchy drawn in grader/errors.py is the one the code defines: every exception class
of grader/ and reports/ is in the tree, under the base it really has."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grader.errors

ROOT = Path(__file__).resolve().parents[1]
TREE = grader.errors.__doc__ or ""


def exception_classes() -> dict[str, list[str]]:
    """Class name -> its bases' names, for every class of grader/ and reports/ whose base names an
    exception (by the usual suffixes, or one of the classes found so far)."""
    shaped = re.compile(r"(Error|Exception|Refused|Failure|Unsound|Full|Stopped|Unusable|Abort|Failed)$")
    files = sorted((ROOT / "grader").rglob("*.py")) + sorted((ROOT / "reports").rglob("*.py"))
    classes = [
        (node.name, [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases])
        for path in files
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
    ]
    found: dict[str, list[str]] = {}
    for _ in range(3):  # a class's base may be defined in a later file
        for name, bases in classes:
            if any(shaped.search(b) or b in found or b == "BaseException" for b in bases):
                found[name] = bases
    return found


def test_every_exception_class_is_in_the_drawn_tree():
    missing = [name for name in exception_classes() if not re.search(rf"\b{re.escape(name)}\b", TREE)]
    assert missing == [], f"add these to the tree in grader/errors.py: {missing}"


def test_the_tree_draws_each_class_under_its_real_base():
    drawn = [  # (column, class name) of each line that draws a class, in order
        (found.start(), found.group(1))
        for found in map(re.compile(r"[├└]── (?:[a-z_.]+\.)?([A-Za-z_]+)").search, TREE.splitlines())
        if found is not None
    ]
    classes = exception_classes()
    for i, (column, name) in enumerate(drawn):
        if name not in classes:
            continue
        parent = next((above for col, above in reversed(drawn[:i]) if col < column), "Exception")
        bases = classes[name]
        assert parent in bases or parent == "Exception", f"{name} is drawn under {parent}: {bases}"


def test_the_scan_sees_classes_of_every_kind():
    """Else the two tests above pass by seeing nothing: a GraderError, a plain Exception, a
    BaseException, one defined under a base of another module, a private one."""
    found = exception_classes()
    for name in ("JailTimeout", "QueueFull", "TimingStopped", "Unusable", "GradebookInputError", "_Abort"):
        assert name in found, name
