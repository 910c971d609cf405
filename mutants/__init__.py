"""Injected bugs: one TOML file per mutant (find/replace edits against exercise solutions), and
alternatives/: correct submissions in other styles, which must keep full marks."""
from pathlib import Path

MUTANTS_DIR = Path(__file__).resolve().parent
ALTERNATIVES_DIR = MUTANTS_DIR / "alternatives"
