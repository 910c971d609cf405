"""The sample class (grader/course/sampleclass.py) that `make demo` grades: each learner hands in the
whole of their template's submission, helper modules included, and every learner meant to be
correct gets full marks (issue 31: the helper-module learner lost its `_util.py` and crashed)."""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.catalog.exercises import all_exercises
from grader.course.sampleclass import make_class, templates

DEMO = "day49-data"  # the Makefile's `make demo` class


def files_of(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def correct_kinds(exercise: str) -> tuple[str, ...]:
    kinds = [kind for kind, _, _ in templates(exercise)]
    return tuple(k for k in kinds if k == "solution" or k.startswith("alternative:"))


@pytest.mark.parametrize("exercise", [e.id for e in all_exercises() if correct_kinds(e.id)])
def test_each_learner_hands_in_the_whole_submission_helper_modules_included(exercise, tmp_path):
    folders = {kind: folder for kind, folder, _ in templates(exercise) if folder is not None}
    kinds = correct_kinds(exercise)
    manifest = make_class(exercise, tmp_path, len(kinds), only=kinds)
    assert sorted(manifest.values()) == sorted(kinds)
    for learner, kind in manifest.items():
        assert files_of(tmp_path / learner) == files_of(folders[kind]), (learner, kind)
    if exercise == DEMO:
        helper = next(k for k in manifest if manifest[k] == "alternative:helper-module")
        assert "_util.py" in files_of(tmp_path / helper)


def test_every_sample_learner_meant_to_be_correct_gets_full_marks(corpus_grades, tmp_path):
    kinds = correct_kinds(DEMO)
    manifest = make_class(DEMO, tmp_path, len(kinds), only=kinds)
    assert "alternative:helper-module" in manifest.values()
    wrong = {}
    for learner, kind in manifest.items():
        grade = corpus_grades.grade(DEMO, tmp_path / learner)
        if not (grade.passed and grade.score == grade.max_score and grade.error is None):
            wrong[learner] = (kind, grade.score, grade.max_score, grade.error)
    assert wrong == {}
