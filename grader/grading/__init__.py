"""One grade: a submission's hidden tests run against its code in the jail, and its bug named.

    grade.py         grade(exercise, path): read the files, start the jail, run the checks, name
                     the bugs, assemble the Grade (a quiz is graded by grader.catalog.quiz)
    runner.py        the hidden tests as a pytest session, each check's result as data
    session.py       the learner's objects as handles in the jail, every call recorded and bounded
    explore.py       hypothesis over the contract's inputs, the smallest failing case reported
    failures.py      what a check raises and attaches, and the tolerance rule
    budgets.py       each call's time budget, a multiple of the reference's own time
    replay.py        the recorded calls replayed in process on the solution and on known bugs
    fingerprints.py  naming the bug: the smallest set of known bugs that reproduces the learner's
                     answers, told apart in the jail, stated as reproduced, candidate or localized

Hidden tests see none of this but grader.testkit, the authoring API above it.
"""
