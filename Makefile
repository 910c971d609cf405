# The two quick-start commands (README): `make demo` and `make test`.
.PHONY: setup demo test

setup:
	@scripts/setup.sh

# Grade the day-49 bug-hunt starter (it has four bugs, so it fails: exit code 1 is expected).
demo: setup
	-.venv/bin/grader grade day49-bughunt exercises/day49-bughunt/starter

test: setup
	.venv/bin/python -m pytest -q
