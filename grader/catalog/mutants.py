"""Known bugs as data: the mutants (find/replace edits against exercise solutions, each the line a
learner would have written), read and applied, and the correct alternatives' folders.

Loading them grades nothing: grader.grading.fingerprints names bugs with them, and
grader.mutation.verify grades them (DESIGN.md, principle 3: mutants are submissions whose
verdict we know).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from exercises import EXERCISES_DIR
from grader.catalog.exercises import read_toml_model
from grader.errors import MutantError, shown_path
from grader.models import Rule, Title
from mutants import ALTERNATIVES_DIR, MUTANTS_DIR


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    exercise: str = ""  # in an exercise's own mutants/ folder, that exercise when left out
    file: str
    find: str
    replace: str


class Mutant(BaseModel):
    """A mutant's TOML file; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    id: str
    rule: Rule
    day: int
    description: str
    symptoms: list[str] = []  # each must appear in the grade
    # what a learner reads when their code behaves like this mutant, in every language
    message: Title
    edit: list[Edit]

    @property
    def exercises(self) -> list[str]:
        return sorted({e.exercise for e in self.edit})


def mutant_files() -> list[tuple[Path, str]]:
    """(TOML file, the exercise its edits default to) of every mutant: the shared mutants/ folder
    (no default), then each exercise's own `<exercise>/mutants/`."""
    shared = [(p, "") for p in sorted(MUTANTS_DIR.glob("*.toml"))]
    own = [(p, p.parent.parent.name) for p in sorted(EXERCISES_DIR.glob("*/mutants/*.toml"))]
    return shared + own


def load_mutants() -> list[Mutant]:
    found: dict[str, Mutant] = {}
    for path, exercise in mutant_files():
        mutant = read_toml_model(path, Mutant, MutantError)
        if mutant.id != path.stem:
            raise MutantError(f"{shown_path(path)}: id {mutant.id!r} differs from the file name")
        if mutant.id in found:
            raise MutantError(f"{shown_path(path)}: mutant id {mutant.id!r} is used twice")
        for i, edit in enumerate(mutant.edit, 1):
            if not edit.exercise:
                if not exercise:
                    raise MutantError(f"{shown_path(path)}: [[edit]] #{i}: missing key 'exercise'")
                edit.exercise = exercise
        found[mutant.id] = mutant
    return list(found.values())


def apply_mutant(mutant: Mutant, exercise: str, target: Path) -> Path:
    """Copy the exercise's solution into `target` and inject the bug there."""
    shutil.copytree(EXERCISES_DIR / exercise / "solution", target)
    files = {e.file: (target / e.file).read_text() for e in mutant.edit if e.exercise == exercise}
    for name, text in _edited(mutant, exercise, files).items():
        (target / name).write_text(text)
    return target


def mutated_sources(mutant: Mutant, exercise: str, files: dict[str, str]) -> dict[str, str] | None:
    """`files` (name -> source) with the mutant's edits of `exercise` made; None where an edit's
    text is not there exactly once (another bug already changed it)."""
    try:
        return {**files, **_edited(mutant, exercise, files)}
    except (MutantError, KeyError):
        return None


def _edited(mutant: Mutant, exercise: str, files: dict[str, str]) -> dict[str, str]:
    edited: dict[str, str] = {}
    for edit in (e for e in mutant.edit if e.exercise == exercise):
        text = edited.get(edit.file, files[edit.file])
        if text.count(edit.find) != 1:
            raise MutantError(
                f"mutant {mutant.id}: {edit.file} of {exercise} contains "
                f"{text.count(edit.find)} copies of the text to replace; expected 1"
            )
        edited[edit.file] = text.replace(edit.find, edit.replace)
    return edited


def alternatives() -> list[tuple[str, str, Path]]:
    """(exercise, name, folder) of every alternative correct submission: the shared
    mutants/alternatives/<exercise>/NAME/ and each exercise's own `<exercise>/alternatives/NAME/`."""
    shared = [(d.parent.name, d.name, d) for d in sorted(ALTERNATIVES_DIR.glob("*/*")) if d.is_dir()]
    own = [(d.parent.parent.name, d.name, d) for d in sorted(EXERCISES_DIR.glob("*/alternatives/*"))]
    return shared + [a for a in own if a[2].is_dir()]
