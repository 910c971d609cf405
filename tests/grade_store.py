"""Grades of the corpus, graded once per test run and shared by every test that asserts on them
(tests/README.md: reuse a stored grade unless the test's point is the grading itself).

A grade is keyed by what decides it: the exercise's version (grader.course.batch.exercise_version: its
exercise.toml, hidden tests, key and solution), the bytes of every file of the submitted folder,
and the grading options. The store is a folder shared by the xdist workers of one run; each
grade is made under a file lock, so two workers never make the same grade, and is stored as a
pickle (lossless, NaN losses included; only this run's own processes read it).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from filelock import FileLock

from grader.course.batch import exercise_version
from grader.models import Grade


def folder_digest(path: Path) -> str:
    """Every file under `path` (or `path` itself), by relative name and bytes."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for p in files:
        if "__pycache__" in p.parts:
            continue
        h.update(p.relative_to(path.parent if path.is_file() else path).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def grade_key(exercise: str, path: Path, options: dict) -> str:
    parts = [exercise, exercise_version(exercise), folder_digest(Path(path)), sorted(options.items())]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]


def _grade_apart(test_id: str, exercise: str, path: str, options: dict) -> Grade:
    from grader.grading.grade import grade

    os.environ["GRADER_TEST_ID"] = test_id  # the suite's map names the test that asked first
    return grade(exercise, Path(path), **options)


class GradeStore:
    """Grades are made in a grading process of the store's own (one per xdist worker), as
    `grader mutants verify` makes them: never in the test process, whose other tests may have
    changed what the grader's own process holds (modules, torch's settings)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._pool: ProcessPoolExecutor | None = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def _graded_apart(self, exercise: str, path: Path, options: dict) -> Grade:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"))
        test_id = os.environ.get("GRADER_TEST_ID", "")
        return self._pool.submit(_grade_apart, test_id, exercise, str(path), options).result()

    def grade(self, exercise: str, path: Path, **options) -> Grade:
        """The grade of `path` as grader.grading.grade.grade makes it, made once per run: a fresh copy
        for each caller, so that no test sees what another changed."""
        from grader.catalog.exercises import load_exercise

        options = {"student": None, "name_bugs": True, "max_failures": None, **options}  # grade()'s defaults
        student = options["student"]
        if student is not None and load_exercise(exercise).kind == "code":
            # a code grade is the same for every learner (grade() only writes the name on it)
            made = self.grade(exercise, path, **{**options, "student": None})
            return made.model_copy(update={"student": student})
        key = grade_key(exercise, Path(path), options)
        return self._once(key, lambda: self._graded_apart(exercise, Path(path), options))

    def cli_json(self, exercise: str, path: Path) -> tuple[int, dict]:
        """`grader grade EXERCISE PATH --format json`, run once per run: (exit code, the JSON)."""
        from conftest import grade_json

        return self._once(grade_key(exercise, Path(path), {"cli": "json"}), lambda: grade_json(exercise, path))

    def _once(self, key: str, make):
        stored = self.root / f"{key}.pickle"
        with FileLock(f"{stored}.lock"):
            if not stored.exists():
                tmp = stored.with_suffix(".tmp")
                tmp.write_bytes(pickle.dumps(make()))
                os.replace(tmp, stored)
            return pickle.loads(stored.read_bytes())


_store: GradeStore | None = None


def shared() -> GradeStore:
    """This run's store, for helpers that are not fixtures (a module's cached real grades)."""
    assert _store is not None, "the `corpus_grades` fixture (conftest.py) sets the store up"
    return _store


def set_shared(store: GradeStore) -> None:
    global _store
    _store = store
