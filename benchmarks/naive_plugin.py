"""Row (c) of bench_jail.py: the naive way, as a pytest plugin for a fresh `python -m pytest` process.

    GRADER_BENCH_SUBMISSION=path python -m pytest exercises/day45-attention/hidden -p naive_plugin

provides the hidden tests' `submission` fixture by importing the learner's files straight into the
test process (no jail: the naive way isolates only by paying for a new process each time).
"""
import os

import pytest

from inprocess import InProcessSubmission


@pytest.fixture
def submission():
    return InProcessSubmission(os.environ["GRADER_BENCH_SUBMISSION"], ["attention"])
