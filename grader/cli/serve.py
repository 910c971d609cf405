"""`grader serve`: the course's grading server (grader/service) on uvicorn."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import click

from grader.cli.common import db_option, echo, usage_error
from grader.limits import (
    CONNECTIONS_PER_CLIENT,
    KEEP_ALIVE_SECONDS,
    LISTEN_BACKLOG,
    MAX_CONNECTIONS,
    REQUEST_BODY_SECONDS,
    REQUEST_HEAD_SECONDS,
)


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
    sock.listen(LISTEN_BACKLOG)
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
@click.option(
    "--keep-alive",
    type=click.FloatRange(min=0.1),
    default=KEEP_ALIVE_SECONDS,
    show_default=True,
    help="Seconds an idle connection is kept between two requests.",
)
@click.option(
    "--head-timeout",
    type=click.FloatRange(min=0.1),
    default=REQUEST_HEAD_SECONDS,
    show_default=True,
    help="Seconds a request's line and headers may take; then the connection is closed.",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0.1),
    default=REQUEST_BODY_SECONDS,
    show_default=True,
    help="Seconds a request's body may take after its headers; then the connection is closed.",
)
@click.option(
    "--connections-per-client",
    type=click.IntRange(min=0),
    default=CONNECTIONS_PER_CLIENT,
    show_default=True,
    help="Open connections of one client address; more are answered 429 and closed "
    "(0: no cap, for a reverse proxy on this machine, whose address is every client's).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=MAX_CONNECTIONS,
    show_default=True,
    help="Open connections in all (and at most the open-file limit less a reserve); more are "
    "answered 503 and closed.",
)
def serve(
    db,
    host,
    port,
    workers,
    scheduler,
    course,
    tls_cert,
    tls_key,
    allow_plain_http,
    keep_alive,
    head_timeout,
    body_timeout,
    connections_per_client,
    max_connections,
):
    """Run the course's grading server: the HTTP API under /api/v1 and the browser pages.

    Uploads are queued in the gradebook DB and graded by --workers warm worker processes (or a
    Dask cluster); several servers may share one PostgreSQL gradebook. Hidden tests, keys and
    solutions (GRADER_EXERCISES_DIR) never leave this machine. Every connection is timed
    (--keep-alive, --head-timeout, --body-timeout) and counted (--connections-per-client,
    --max-connections): grader/service/edge.py."""
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
    from grader.service.edge import Edge, raise_open_files, uvicorn_options
    from grader.service.edge import max_connections as connections_allowed
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
    edge = Edge(
        keep_alive_seconds=keep_alive,
        head_seconds=head_timeout,
        body_seconds=body_timeout,
        per_client=connections_per_client,
        max_connections=connections_allowed(raise_open_files(), max_connections),
    )
    sock = bind(host, port)
    scheme = "https" if tls_cert else "http"
    try:
        resumed = service.queue.resume()
        dispatcher.start()
        shown = f"[{host}]" if ":" in host else host
        echo(
            f"grader serve: listening on {scheme}://{shown}:{sock.getsockname()[1]} "
            f"(gradebook {redact(service.gradebook.url)}, {len(service.exercises)} exercises, "
            f"{executor.describe()}; {resumed} jobs resumed; at most {edge.max_connections} "
            f"connections, {edge.per_client or 'any number'} per client)",
            err=True,
        )
        config = uvicorn.Config(
            create_app(service),
            log_level="info",
            access_log=True,
            ssl_certfile=str(tls_cert) if tls_cert else None,
            ssl_keyfile=str(tls_key) if tls_key else None,
            timeout_graceful_shutdown=5,
            **uvicorn_options(edge),
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        dispatcher.stop()
        service.close()
        sock.close()
