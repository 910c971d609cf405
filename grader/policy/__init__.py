"""The course's own rules, as data and pure functions: course.toml, its clock, its roster, lateness.

    course.py   course.toml read: when an exercise opens, is due and closes, what lateness
                costs, how often a learner may submit, which upload counts, what a learner sees
    clock.py    the course's clock: every time a person reads, in the course's zone
    roster.py   a class roster in (Canvas or Moodle CSV), access tokens out
    adjust.py   the honest gradebook's rules: which submission counts, how late, overrides

Below the store, the server, the batch and the client alike (the student wheel ships clock.py).
"""
