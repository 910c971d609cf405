"""The student client: what a learner's machine runs to reach the course's grading server.

    config.py   where the server and the token are kept (a 0600 file, or GRADER_SERVER /
                GRADER_TOKEN), and which URLs a token may be sent to
    api.py      the HTTP API of contract section 3, over httpx: timeouts, retries of a network
                error with the same Idempotency-Key, capped answers, error JSON as exceptions
    models.py   the server's answers, read into pydantic models (a server's text is untrusted)
    packing.py  the learner files of PATH, found by grader.intake.sources' rules (a notebook's assembled
                by grader.intake.notebooks, no file renamed), zipped, with their digest, and what
                would fail at once (grader.intake.submission.precheck): then nothing is sent
    show.py     tables and times for the terminal, through grader.text's sanitising
    errors.py   ClientError (exit 2), Refused (exit 3), ServerFailure (exit 4)

It imports no torch, numpy, SQLAlchemy, Jinja2, Babel, YAML or FastAPI, and no exercise folder:
the exercise's file list comes from the server (tests/test_client.py holds this). The commands
are grader/cli/client.py.
"""
