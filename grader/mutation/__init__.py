"""Known bugs: the mutants as data, grading them to prove each is caught and named, and more.

known.py        the mutants and the correct alternatives, read and applied (no grading)
verify.py       every solution, alternative and mutant graded as a learner, and judged
compose.py      known bugs composed in pairs and triples: is each still named?
automutants.py  generated mutants of the solutions: the hidden tests' mutation score
"""
