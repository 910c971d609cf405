"""Alembic environment for the gradebook, driven from code (grader/store/migrate.py): no alembic.ini.

The caller hands over an open connection in config.attributes["connection"]; so does
`python -m grader.store revision` (autogenerate). Migrations use plain SQLAlchemy types, never
the classes of schema.py, so an old migration means the same thing forever.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import TypeDecorator, text

from grader.store.schema import Base

config = context.config
connection = config.attributes["connection"]


def render_item(kind, obj, autogen_context):
    """Autogenerate writes the plain type under a TypeDecorator of schema.py (CleanText -> sa.Text)."""
    if kind == "type" and isinstance(obj, TypeDecorator):
        return f"sa.{obj.impl!r}"
    return False


context.configure(
    connection=connection,
    render_item=render_item,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
    compare_type=True,
)

with context.begin_transaction():
    if connection.dialect.name == "postgresql":
        # two graders opening one new gradebook at once: the second waits, then finds it upgraded
        connection.execute(text("SELECT pg_advisory_xact_lock(7417)"))
    context.run_migrations()
