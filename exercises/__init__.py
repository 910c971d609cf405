"""Where the course's exercises are: a folder of exercise folders, each with exercise.toml,
starter/, solution/ and hidden/ tests (data, not code).

GRADER_EXERCISES_DIR, when set, is that folder (a course's private edition, or a copy under test);
otherwise it is this package's own folder, which holds them in a checkout of the grader's
repository. No wheel carries them: the grading distribution ships this file alone (so an install
from a wheel grades what GRADER_EXERCISES_DIR names), and the student client not even this.
Read once, when this package is first imported.
"""

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
EXERCISES_DIR = Path(os.environ["GRADER_EXERCISES_DIR"]).resolve() if os.environ.get(
    "GRADER_EXERCISES_DIR") else PACKAGE_DIR
