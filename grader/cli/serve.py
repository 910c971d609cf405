"""`grader serve`: the course's grading server (grader/service) on uvicorn."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import click

from grader.cli.common import db_option, echo, usage_error


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that `--port 0` can say which port it got."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # without it every answer waited ~40 ms for the client's delayed ACK (Nagle)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        usage_error(f"--host/--port: cannot listen on {host}:{port}: {exc.strerror or exc}")
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@click.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="0: any free port."
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=2,
    show_default=True,
    help="Grading processes kept warm (ignored with --scheduler).",
)
@click.option(
    "--scheduler", metavar="ADDRESS", help="Grade on this Dask distributed cluster (tcp://HOST:PORT)."
)
@click.option(
    "--course",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The course policy (course.toml): dates, late days, rate limits, visibility. "
    "Without it every exercise is open, with no limits.",
)
@click.option("--tls-cert", type=click.Path(dir_okay=False, path_type=Path), help="TLS certificate (PEM).")
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path), help="TLS private key (PEM).")
@click.option(
    "--allow-plain-http",
    is_flag=True,
    help="Listen on a non-loopback address without TLS (behind a reverse proxy that terminates it).",
)
def serve(db, host, port, workers, scheduler, course, tls_cert, tls_key, allow_plain_http):
    """Run the course's grading server: the HTTP API under /api/v1 and the browser pages.

    Uploads are queued in the gradebook DB and graded by --workers warm worker processes (or a
    Dask cluster); several servers may share one PostgreSQL gradebook. Hidden tests, keys and
    solutions (GRADER_EXERCISES_DIR) never leave this machine."""
    if (tls_cert is None) != (tls_key is None):
        usage_error("--tls-cert and --tls-key go together")
    for option, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key), ("--course", course)):
        if path is not None and not path.is_file():
            usage_error(f"{option}: {path} does not exist")
    if tls_cert is None and not is_loopback(host) and not allow_plain_http:
        usage_error(
            f"--host {host}: refusing to serve tokens and reports over plain HTTP on a non-loopback "
            "address; give --tls-cert and --tls-key, or --allow-plain-http behind a TLS reverse proxy"
        )
    import logging

    import uvicorn

    from grader.errors import GraderError
    from grader.service.app import create_app
    from grader.service.dispatch import DaskExecutor, Dispatcher, WarmPool
    from grader.service.service import Service
    from grader.store import StoreError, redact

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)  # "Context impl SQLiteImpl." at every start
    try:
        service = Service.open(db, course)
    except StoreError as exc:
        usage_error(f"--db: {exc}")
    except GraderError as exc:  # PolicyError names course.toml and the field
        usage_error(f"--course: {exc}" if course is not None else str(exc))
    try:
        executor = DaskExecutor(scheduler) if scheduler else WarmPool(workers)
    except GraderError as exc:
        service.close()
        usage_error(str(exc))
    dispatcher = Dispatcher(service.queue, service.exercises, executor, on_record=service.waiters.notify)
    service.notify = dispatcher.wake
    sock = bind(host, port)
    scheme = "https" if tls_cert else "http"
    try:
        resumed = service.queue.resume()
        dispatcher.start()
        shown = f"[{host}]" if ":" in host else host
        echo(
            f"grader serve: listening on {scheme}://{shown}:{sock.getsockname()[1]} "
            f"(gradebook {redact(service.gradebook.url)}, {len(service.exercises)} exercises, "
            f"{executor.describe()}; {resumed} jobs resumed)",
            err=True,
        )
        config = uvicorn.Config(
            create_app(service),
            log_level="info",
            access_log=True,
            ssl_certfile=str(tls_cert) if tls_cert else None,
            ssl_keyfile=str(tls_key) if tls_key else None,
            timeout_graceful_shutdown=5,
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        dispatcher.stop()
        service.close()
        sock.close()
