"""The GPT bug-hunt grader."""

__version__ = "0.1.0"
