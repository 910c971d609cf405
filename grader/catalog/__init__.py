"""Exercises as data: the folders under exercises/ read, and what they say judged.

exercises.py        an exercise's folder and its exercise.toml, loaded and checked
rules.py            the rule catalog: the shipped rules and the exercises' own, with titles
starters.py         what every learner began with (a quiz: its default sheet)
quiz.py             a quiz exercise: its sheet, its variants' keys, its answers graded
answers.py          one answer as learners write it, parsed and compared to the key
variants.py         per-learner variants of quiz questions, keys from reference_model
diagnosis_sheet.py  a bug hunt's diagnosis.toml read as learners write it, and judged
authoring.py        course staff's loop: scaffold an exercise folder, check it whole
"""
