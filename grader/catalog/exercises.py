"""Exercises are data: a folder with exercise.toml, starter/, solution/ and hidden/ tests."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from pydantic import ValidationError

from exercises import EXERCISES_DIR
from grader.errors import ExerciseFileError, UnknownExercise, shown_path
from grader.models import SHIPPED_RULES, Exercise


def exercise_dir(exercise_id: str) -> Path:
    return EXERCISES_DIR / exercise_id


@cache
def load_exercise(exercise_id: str) -> Exercise:
    path = exercise_dir(exercise_id) / "exercise.toml"
    if not path.is_file():
        known = ", ".join(e.id for e in all_exercises())
        raise UnknownExercise(f"unknown exercise {exercise_id!r}; known exercises: {known}")
    exercise = read_toml_model(path, Exercise)
    problems = declaration_problems(exercise)
    if exercise.id != exercise_id:
        problems.insert(0, f"id {exercise.id!r} differs from the folder name {exercise_id!r}")
    if problems:
        raise ExerciseFileError("\n".join(f"{shown_path(path)}: {p}" for p in problems))
    return exercise


def read_toml_model(path: Path, model, error=ExerciseFileError):
    """A course's TOML file read into `model`; any problem is `error`, naming file, table and key."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise error.from_toml(path, exc) from None
    except OSError as exc:
        raise error(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error.from_validation(path, exc, model) from None


def all_exercises() -> list[Exercise]:
    return [load_exercise(p.parent.name) for p in sorted(EXERCISES_DIR.glob("*/exercise.toml"))]


def declaration_problems(exercise: Exercise) -> list[str]:
    """What is wrong with the exercise's `[[rules]]`: a rule declared twice, or a shipped one."""
    seen: set[str] = set()
    problems = []
    for i, rule in enumerate(exercise.rules, 1):
        if rule.id in SHIPPED_RULES:
            problems.append(f"[[rules]] #{i}: rule {rule.id!r} is a shipped rule; declare only new ones")
        elif rule.id in seen:
            problems.append(f"[[rules]] #{i}: rule {rule.id!r} is declared twice")
        seen.add(rule.id)
    return problems
