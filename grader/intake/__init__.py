"""Learner files as they arrive, before anything of them runs: found, read, assembled, checked.

    incoming.py     one learner's files as they arrived (`Incoming`), and their digest
    sources.py      a class's export (folder, zip; Canvas, Moodle, Gradescope) read into learners
    notebooks.py    a notebook's cells assembled into the exercise's files
    submission.py   one submission read from disk and checked (syntax, names) for grading

Light by design (no torch, no SQLAlchemy): the student client ships this package.
"""
