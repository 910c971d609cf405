"""Exercise folders: each holds exercise.toml, starter/, solution/ and hidden/ tests (data, not code)."""
from pathlib import Path

EXERCISES_DIR = Path(__file__).resolve().parent
