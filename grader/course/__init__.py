"""The instructor's week: a class graded in batch, published, adjusted, compared, on the course's clock.

batch.py        `grader batch`: a class's export graded on a pool, every grade stored
learners.py     one safe file name per learner, and a learner's whole-grade failure
publish.py      the reports, class report and LMS import files written from the gradebook
adjust.py       the honest gradebook's rules: which submission counts, lateness, overrides
copies.py       identical and near-copied submissions, as hints for a person
autograder.py   the Gradescope autograder of one exercise, built and run
sampleclass.py  a sample class of known learners, for demos, tests and benchmarks
clock.py        the course's clock: every time a person reads, in the course's zone
"""
