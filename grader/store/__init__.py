"""The gradebook store: SQLAlchemy 2 over SQLite (default) or PostgreSQL, schema under Alembic."""

from grader.store.gradebook import (
    CurrentGrade,
    Gradebook,
    Incoming,
    Outcome,
    StoredSubmission,
    StoreError,
    normalize_url,
    redact,
)

__all__ = [
    "CurrentGrade",
    "Gradebook",
    "Incoming",
    "Outcome",
    "StoreError",
    "StoredSubmission",
    "normalize_url",
    "redact",
]
