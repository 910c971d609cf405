"""The grading server (`grader serve`): an HTTP API over the gradebook, its queue and the jail.

    app.py       create_app(service): the /api/v1 routes, auth, JSON errors, body caps (FastAPI)
    service.py   Service: what the routes and pages call (gradebook, queue, policy, exercises)
    dispatch.py  Dispatcher: leases queued jobs and grades them in worker processes
    pages.py     the browser pages (signed-in session, CSRF-safe forms)
    edge.py      what one connection may hold, and for how long, before a route runs
    waiting.py   requests waiting for a grade (a long poll)

The course's rules it applies (course.toml, the roster) are grader.policy's. The web process
never imports or runs learner code: uploads are read as data and graded by
grader.course.batch.grade_task in a warm pool of spawned processes (or on a Dask cluster).
"""
