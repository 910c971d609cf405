# The two quick-start commands (README): `make demo` and `make test`.
.PHONY: setup demo test lint

setup:
	@scripts/setup.sh

# Grade the day-49 bug-hunt starter (it has four bugs, so it fails: exit code 1 is expected),
# then grade a small class into the embedded defaults: a SQLite gradebook and the local pool.
demo: setup
	-.venv/bin/grader grade day49-bughunt exercises/day49-bughunt/starter
	rm -rf demo/class && .venv/bin/python -m grader.sampleclass day49-data 12 demo/class --hostile syntax-error >/dev/null
	.venv/bin/grader batch day49-data demo/class --db demo/gradebook.db --out demo/out
	@echo "class report: demo/out/class.html   gradebook: demo/gradebook.db"

# The whole suite, then the lint: its findings never hide a test result.
test: setup
	.venv/bin/python -m pytest -q
	@$(MAKE) --no-print-directory lint

# ruff (lint and format check) and mypy on grader/ and reports/, as configured in pyproject.toml
lint: setup
	.venv/bin/ruff check grader reports
	.venv/bin/ruff format --check grader reports
	.venv/bin/mypy
