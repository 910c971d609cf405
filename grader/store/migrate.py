"""Alembic, driven from code: the gradebook upgrades itself in place when it is opened.

For developers changing the schema (grader/store/schema.py), a new migration is written with
    python -m grader.store revision --db sqlite:///scratch.db -m "what changed"
which autogenerates it against a scratch gradebook upgraded to the current head.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

from grader.store.engine import StoreError, make_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


class SchemaError(StoreError):
    """The gradebook's schema is one this grader does not know (written by a newer grader)."""


def config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("version_path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head() -> str:
    newest = ScriptDirectory.from_config(config()).get_current_head()
    assert newest is not None  # the package ships its migrations (migrations/versions/)
    return newest


def current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the gradebook to `revision` (the newest by default); nothing to do when it is there."""
    scripts = ScriptDirectory.from_config(config())
    with engine.connect() as conn:
        now = current(conn)
    if now is not None:
        try:
            scripts.get_revision(now)
        except Exception:  # noqa: BLE001 - Alembic raises several kinds for a revision it does not know
            raise SchemaError(
                f"the gradebook is at schema revision {now!r}, which this grader does "
                f"not know (its newest is {scripts.get_current_head()!r}): it was "
                "written by a newer grader; upgrade the grader"
            ) from None
    if revision == "head" and now == scripts.get_current_head():
        return
    with engine.begin() as conn:
        command.upgrade(config(conn), revision)


def downgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as conn:
        command.downgrade(config(conn), revision)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m grader.store",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", choices=["upgrade", "current", "revision"])
    parser.add_argument("--db", required=True, help="gradebook URL or SQLite file")
    parser.add_argument("-m", "--message", default="schema change")
    args = parser.parse_args(argv)
    engine = make_engine(args.db)
    if args.action == "upgrade":
        upgrade(engine)
    elif args.action == "current":
        with engine.connect() as conn:
            print(current(conn), "(head:", head() + ")")
    else:
        upgrade(engine)
        with engine.begin() as conn:
            command.revision(config(conn), message=args.message, autogenerate=True)
    engine.dispose()
