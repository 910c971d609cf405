"""Exercise folders: each holds exercise.toml, starter/, solution/ and hidden/ tests (data, not code).

GRADER_EXERCISES_DIR, when set, points the grader at another folder of exercise folders (a course's
own edition, or a copy under test); it is read once, when this package is first imported.
"""
import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
EXERCISES_DIR = Path(os.environ["GRADER_EXERCISES_DIR"]).resolve() if os.environ.get(
    "GRADER_EXERCISES_DIR") else PACKAGE_DIR
