"""The course's material as data: exercises and their known bugs, read and checked, and answers judged.

    exercises.py        an exercise's folder and its exercise.toml, loaded and checked
    rules.py            the rule catalog: the shipped rules and the exercises' own, with titles
    starters.py         what every learner began with (a quiz: its default sheet)
    mutants.py          the known bugs (mutants/, an exercise's own) and correct alternatives,
                        read and applied; grading them is grader.mutation's
    quiz.py             a quiz exercise: its sheet, its variants' keys, its answers graded
    answers.py          one answer as learners write it, parsed and compared to the key
    variants.py         per-learner variants of quiz questions, keys from reference_model
    diagnosis_sheet.py  a bug hunt's diagnosis.toml read as learners write it, and judged

Reading and judging only: nothing here runs learner code or grades a submission.
"""
