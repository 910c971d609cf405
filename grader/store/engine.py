"""Opening a gradebook's database: a URL or a SQLite file path, the SQLite settings, its errors."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url

from grader.errors import UsageError


class StoreError(UsageError, RuntimeError):
    """The gradebook cannot be opened or used (bad URL, missing driver, unknown schema, a file
    that does not exist for a command that only reads): exit code 2."""


def normalize_url(db: str) -> str:
    """A SQLAlchemy URL from what a user typed: a URL, or the path of a SQLite file."""
    db = str(db).strip()
    if "://" not in db:
        return "sqlite:///" + str(Path(db).expanduser().resolve())
    if db.startswith("postgres://"):
        db = "postgresql://" + db[len("postgres://") :]
    if db.startswith("postgresql://"):
        db = "postgresql+psycopg://" + db[len("postgresql://") :]
    return db


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite URL (None for another backend or an in-memory database)."""
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - what SQLAlchemy cannot read as a URL is no SQLite file either
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return parsed.database


BUSY_TIMEOUT_MS = 30_000


def redact(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - naming a gradebook in a message must never fail
        return "<gradebook>"


def make_engine(db: str) -> Engine:
    url = normalize_url(db)
    try:
        parsed = make_url(url)
    except Exception as exc:  # noqa: BLE001 - any URL make_url rejects is a usage error, said so
        raise StoreError(f"--db: {db!r} is not a database URL or file path: {exc}") from None
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            folder = Path(parsed.database).parent
            if not folder.is_dir():
                raise StoreError(f"--db: folder {folder} does not exist")
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")  # WAL: durable across a killed process
            cursor.close()

        return engine
    try:
        return create_engine(url, pool_pre_ping=True)
    except ImportError as exc:
        raise StoreError(f"--db: no driver for {parsed.get_backend_name()}: {exc}") from None
