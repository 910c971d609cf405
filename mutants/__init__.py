"""Injected bugs: one TOML file per mutant (find/replace edits against exercise solutions), and
alternatives/: correct submissions in other styles, which must keep full marks.

GRADER_MUTANTS_DIR, when set, is the folder holding them (the Gradescope autograder's own copy);
otherwise it is this package's own folder, which holds them in a checkout of the grader's
repository. No wheel carries them (they quote the solutions): the grading distribution ships this
file alone. An exercise's own mutants and alternatives live in its folder (exercises/__init__.py).
"""

import os
from pathlib import Path

MUTANTS_DIR = Path(os.environ["GRADER_MUTANTS_DIR"]).resolve() if os.environ.get(
    "GRADER_MUTANTS_DIR") else Path(__file__).resolve().parent
ALTERNATIVES_DIR = MUTANTS_DIR / "alternatives"
