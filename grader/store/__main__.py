"""python -m grader.store upgrade|current|revision --db URL: see grader/store/migrate.py."""

from grader.store.migrate import main

main()
