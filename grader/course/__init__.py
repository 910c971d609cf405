"""The instructor's week: a class graded in batch, published, compared, and built for Gradescope.

    batch.py        `grader batch`: a class's export graded on a pool, every grade stored
    learners.py     one safe file name per learner, and a learner's whole-grade failure
    publish.py      the reports, class report and LMS import files written from the gradebook
    copies.py       identical and near-copied submissions, as hints for a person
    autograder.py   the Gradescope autograder of one exercise, built and run
    sampleclass.py  a sample class of known learners, for demos, tests and benchmarks

The course's rules these apply (course.toml, lateness, the roster) are grader.policy's.
"""
