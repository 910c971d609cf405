"""The grading server (`grader serve`): an HTTP API over the gradebook, its queue and the jail.

    app.py       create_app(service): the /api/v1 routes, auth, JSON errors, body caps (FastAPI)
    service.py   Service: what the routes and pages call (gradebook, queue, policy, exercises)
    dispatch.py  Dispatcher: leases queued jobs and grades them in worker processes
    policy.py    the course policy (course.toml): dates, late days, rate limits, visibility
    pages.py     the browser pages (signed-in session, CSRF-safe forms)
    roster.py    Canvas and Moodle roster CSVs, for `grader tokens issue --roster`

The web process never imports or runs learner code: uploads are read as data and graded by
grader.course.batch.grade_task in a warm pool of spawned processes (or on a Dask cluster).
"""
