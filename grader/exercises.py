"""Exercises are data: a folder with exercise.toml, starter/, solution/ and hidden/ tests."""
from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from exercises import EXERCISES_DIR
from grader.models import Exercise


class UnknownExercise(LookupError):
    pass


def exercise_dir(exercise_id: str) -> Path:
    return EXERCISES_DIR / exercise_id


@cache
def load_exercise(exercise_id: str) -> Exercise:
    path = exercise_dir(exercise_id) / "exercise.toml"
    if not path.is_file():
        known = ", ".join(e.id for e in all_exercises())
        raise UnknownExercise(f"unknown exercise {exercise_id!r}; known exercises: {known}")
    with open(path, "rb") as f:
        return Exercise.model_validate(tomllib.load(f))


def all_exercises() -> list[Exercise]:
    return [load_exercise(p.parent.name) for p in sorted(EXERCISES_DIR.glob("*/exercise.toml"))]
