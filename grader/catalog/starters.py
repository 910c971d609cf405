"""What every learner began with: an exercise's starter files as `grader starter` writes them."""

from __future__ import annotations

from grader.catalog.exercises import exercise_dir
from grader.catalog.quiz import starter_text
from grader.models import Exercise


def starter_files(exercise: Exercise) -> dict[str, bytes]:
    """The starter as `grader starter` writes it (a quiz: its default variant's sheet), file name
    -> bytes: what every learner began with, so what a comparison of their work leaves out."""
    if exercise.kind == "quiz":
        return {name: starter_text(exercise, None).encode("utf-8") for name in exercise.files}
    folder = exercise_dir(exercise.id) / "starter"
    return {name: (folder / name).read_bytes() for name in exercise.files if (folder / name).is_file()}
