"""A throwaway PostgreSQL cluster for tests and benchmarks: initdb + pg_ctl in a temporary folder.

The server listens only on a unix socket inside that folder (no TCP port to collide with anyone),
trusts local connections, and is stopped and deleted on close. PostgreSQL refuses to run as root,
so as root the cluster is made and run as the `postgres` account (Debian's package creates it)
or, failing that, `nobody`.

    with TempPostgres() as pg:
        gradebook = Gradebook(pg.url("grader"))

Binaries: $GRADER_PG_BIN, else the newest /usr/lib/postgresql/*/bin (Debian's `postgresql`),
else initdb on PATH.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

PORT = 5432  # only names the socket file: the socket lives in our own folder


class PostgresUnavailable(RuntimeError):
    pass


def find_bindir() -> Path | None:
    env = os.environ.get("GRADER_PG_BIN")
    candidates = [Path(env)] if env else []
    candidates += [
        Path(p).parent
        for p in sorted(
            glob.glob("/usr/lib/postgresql/*/bin/initdb"),
            key=lambda p: [int(x) if x.isdigit() else 0 for x in p.split("/")[4].split(".")],
            reverse=True,
        )
    ]
    which = shutil.which("initdb")
    if which:
        candidates.append(Path(which).parent)
    for c in candidates:
        if (c / "initdb").is_file() and (c / "pg_ctl").is_file():
            return c
    return None


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise PostgresUnavailable(
        "running as root and there is neither a postgres nor a nobody account to run PostgreSQL as"
    )


class TempPostgres:
    def __init__(self, *, durable: bool = False):
        bindir = find_bindir()
        if bindir is None:
            raise PostgresUnavailable(
                "PostgreSQL server binaries (initdb, pg_ctl) not found: install "
                "Debian's `postgresql` (scripts/setup.sh does) or set GRADER_PG_BIN"
            )
        self.bindir = bindir
        self.user = _run_as()
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="grader-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root
        self.log = self.root / "server.log"
        self.started = False

    def _cmd(self, *argv: str) -> list[str]:
        cmd = [str(self.bindir / argv[0]), *argv[1:]]
        return ["runuser", "-u", self.user, "--", *cmd] if self.user else cmd

    def start(self) -> TempPostgres:
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        os.chmod(self.root, 0o755)
        env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        init = subprocess.run(
            self._cmd(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
                "--no-sync",
            ),
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
        )
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
        options = [
            "-c listen_addresses=''",
            f"-c unix_socket_directories={self.socket_dir}",
            f"-p {PORT}",
            "-c max_connections=60",
            "-c shared_buffers=32MB",
        ]
        if not self.durable:  # a throwaway cluster: no need to survive a power cut
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        start = subprocess.run(
            self._cmd(
                "pg_ctl",
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-w",
                "-t",
                "60",
                "-o",
                " ".join(options),
                "start",
            ),
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
        )
        if start.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise PostgresUnavailable(f"pg_ctl start failed: {start.stderr.strip()} {log}")
        self.started = True
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.socket_dir}&port={PORT}"

    def create_database(self, name: str | None = None) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = name or "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(
            host=str(self.socket_dir), port=PORT, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.started:
            subprocess.run(
                self._cmd("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop"),
                capture_output=True,
                text=True,
                cwd=self.root,
            )
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TempPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
