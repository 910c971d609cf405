# The two quick-start commands (README): `make demo` and `make test`.
.PHONY: setup demo test lint mutation

setup:
	@scripts/setup.sh

# Grade the day-49 bug-hunt starter (it has four bugs, so it fails: exit code 1 is expected),
# then grade a small class into the embedded defaults: a SQLite gradebook and the local pool.
demo: setup
	-.venv/bin/grader grade day49-bughunt exercises/day49-bughunt/starter
	rm -rf demo/class && mkdir -p demo && .venv/bin/python -m grader.course.sampleclass day49-data 12 demo/class --hostile syntax-error \
		>demo/class-kinds.txt && awk '$$2 ~ /^hostile:/ {print "sample class: " $$1 " is " $$2 ", meant to fail"}' demo/class-kinds.txt
	.venv/bin/grader batch day49-data demo/class --db demo/gradebook.db --out demo/out
	@echo "class report: demo/out/class.html   gradebook: demo/gradebook.db"

# The whole suite on both cores (tests/README.md: its 30-minute budget, how to measure it), then
# the lint: its findings never hide a test result. loadgroup: conftest.py's groups stay on one worker.
test: setup
	@start=$$(date +%s); status=0; \
	.venv/bin/python -m pytest -q -n 2 --dist loadgroup --durations=25 || status=$$?; \
	echo "make test: the suite took $$(( $$(date +%s) - start )) s wall (budget 1800 s, tests/README.md)"; \
	exit $$status
	@$(MAKE) --no-print-directory lint

# ruff (lint and format check) and mypy on grader/ and reports/, as configured in pyproject.toml
lint: setup
	.venv/bin/ruff check grader reports
	.venv/bin/ruff format --check grader reports
	.venv/bin/mypy

# Generated mutants of every code exercise's solution, 60 each (docs/automutants.md): about
# 2 minutes on 2 idle cores from a cold cache; exit 1 if an exercise's adjusted score is under its floor.
mutation: setup
	@status=0; for ex in day45-attention day48-decoder day49-data day49-bughunt; do \
		.venv/bin/grader mutants auto $$ex --budget 60 || status=1; done; exit $$status
