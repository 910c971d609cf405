"""Proving the hidden tests: every known bug caught and named, alone and composed; a mutation score.

    verify.py       every solution, alternative and mutant graded as a learner, and judged
    compose.py      known bugs composed in pairs and triples: is each still named?
    automutants.py  generated mutants of the solutions: the hidden tests' mutation score
    authoring.py    course staff's loop: scaffold an exercise folder, check it whole (the above)

Each grades through grader.grading, the same path as a learner's submission (DESIGN.md, principle 3).
"""
