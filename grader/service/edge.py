"""The HTTP edge of `grader serve`: what one connection may hold, and for how long, before a route runs.

uvicorn 0.55 (h11) times out only the idle wait between two requests (`timeout_keep_alive`), and
counts its `limit_concurrency` only once a request's headers are in: a connection that sends half
a request, or a body and then nothing, holds an open file for ever, and about a thousand of them
take every file the process may open. `EdgeProtocol` is uvicorn's h11 protocol with

- a deadline per request: its line and headers within `head_seconds` of its first byte (or of
  the connection's start), its body within `body_seconds` of its headers. Past it the connection
  is closed with nothing answered (the client is not sending; a half-read body has no answer);
- caps on open connections, checked the moment one is accepted, before a byte is read: one
  client address (`per_client`) is answered 429, everyone together (`max_connections`, below the
  open-file limit) 503, each with `Connection: close`, and the connection is closed at once.

`raise_open_files()` lifts the soft RLIMIT_NOFILE to the hard one at start and `max_connections()`
leaves FD_RESERVE of it to the gradebook, the workers' pipes, the logs and one burst of accepts
(asyncio accepts up to LISTEN_BACKLOG connections at one wake-up, each an open file before the
edge can refuse it), so a server full of half-open connections still accepts, answers and closes.

The functional core (`Edge`, `refusal`) is plain data; `EdgeProtocol` is the shell uvicorn runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from collections import Counter
from typing import Literal

import h11
from pydantic import BaseModel, ConfigDict, Field
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.utils import get_remote_addr

from grader.limits import (
    CONNECTIONS_PER_CLIENT,
    FD_RESERVE,
    HEAD_BYTES,
    KEEP_ALIVE_SECONDS,
    LISTEN_BACKLOG,
    MAX_CONNECTIONS,
    REQUEST_BODY_SECONDS,
    REQUEST_HEAD_SECONDS,
)
from grader.locale import msg

log = logging.getLogger("grader.service.edge")


class Edge(BaseModel):
    """The edge's limits of one server (`grader serve`'s options; defaults in grader/limits.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keep_alive_seconds: float = Field(KEEP_ALIVE_SECONDS, gt=0)  # idle between two requests
    head_seconds: float = Field(REQUEST_HEAD_SECONDS, gt=0)  # a request's line and headers
    body_seconds: float = Field(REQUEST_BODY_SECONDS, gt=0)  # its body, after its headers
    head_bytes: int = Field(HEAD_BYTES, gt=0)  # a request's line and headers
    per_client: int = Field(CONNECTIONS_PER_CLIENT, ge=0)  # open connections of one address (0: no cap)
    max_connections: int = Field(MAX_CONNECTIONS, gt=0)  # open connections in all


Refusal = Literal["client", "server"]


def refusal(edge: Edge, open_in_all: int, open_of_client: int) -> Refusal | None:
    """Whether a connection just accepted goes over a cap (counts taken before it): its client's
    ("client": 429) or the server's ("server": 503); None: it is served."""
    if open_in_all >= edge.max_connections:
        return "server"
    if edge.per_client and open_of_client >= edge.per_client:
        return "client"
    return None


def max_connections(open_files: int, wanted: int = MAX_CONNECTIONS) -> int:
    """Connections the server keeps open at most: what it was asked, and never more than the
    open-file limit leaves once FD_RESERVE is set aside (at least one)."""
    return max(1, min(wanted, open_files - FD_RESERVE))


def raise_open_files() -> int:
    """The soft RLIMIT_NOFILE raised to the hard limit (a distribution's default soft limit, 1,024,
    is what a thousand half-open connections exhausted); the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # a container may forbid it: the reserve still applies
            pass
    return soft


def refusal_bytes(kind: Refusal) -> bytes:
    """The whole answer to a connection over a cap, in English: no header of it was read yet."""
    status, phrase, code, text = {
        "client": (
            429,
            "Too Many Requests",
            "rate-limited",
            msg("too many open connections from your address; close some and try again"),
        ),
        "server": (
            503,
            "Service Unavailable",
            "server-busy",
            msg("the server has too many open connections; try again shortly"),
        ),
    }[kind]
    body = json.dumps({"error": {"code": code, "message": text.render("en"), "field": None}}).encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "retry-after: 1\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def edge_protocol(edge: Edge) -> type[H11Protocol]:
    """uvicorn's h11 protocol under `edge`'s deadlines and caps (one class per server: the open
    connections of each address are counted in it)."""
    open_of: Counter[str] = Counter()  # the connections served, by address (refused ones not counted)
    # what the edge did, logged at most once a second as counts: a flood must not become one log
    # line per connection (events after the last line wait for the next one)
    noted: Counter[str] = Counter()
    logged_at = [0.0]

    def note(event: str) -> None:
        noted[event] += 1
        now = time.monotonic()
        if now - logged_at[0] >= 1:
            log.warning("connections (%s open) %s", open_of.total(), dict(noted))
            noted.clear()
            logged_at[0] = now

    class EdgeProtocol(H11Protocol):
        deadline: asyncio.TimerHandle | None = None
        address: str | None = None
        head_received = False

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            peer = get_remote_addr(transport)
            address = peer[0] if peer else ""
            # counted here, not in uvicorn's set of connections: a refused one stays in that set
            # until its close completes, and a burst of them would read as a full server
            refused = refusal(edge, open_of.total(), open_of[address])
            if refused is not None:
                note("refused: too many from one address" if refused == "client" else "refused: server full")
                transport.write(refusal_bytes(refused))
                transport.close()  # after what was written is sent
                return
            self.address = address
            open_of[address] += 1
            self._arm(edge.head_seconds)

        def connection_lost(self, exc) -> None:
            self._disarm()
            if self.address is not None:
                open_of[self.address] -= 1
                if open_of[self.address] <= 0:
                    del open_of[self.address]
                self.address = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            state = self.conn.their_state
            if state is h11.IDLE:  # a next request's first bytes (uvicorn's keep-alive timer is off)
                if self.deadline is None:
                    self._arm(edge.head_seconds)
            elif state is h11.SEND_BODY:
                if not self.head_received:
                    self.head_received = True
                    self._arm(edge.body_seconds)
            else:  # all of it is in (or the connection is closing): the app answers in its own time
                self._disarm()

        def on_response_complete(self) -> None:
            self._disarm()  # uvicorn's keep-alive timer takes over the idle wait
            super().on_response_complete()
            if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
                # a pipelined request, its headers already in: uvicorn just turned its keep-alive
                # timer off for it, so its body is on our clock
                self.head_received = True
                self._arm(edge.body_seconds)

        def _arm(self, seconds: float) -> None:
            self._cancel()
            self.deadline = self.loop.call_later(seconds, self._expired)

        def _cancel(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
                self.deadline = None

        def _disarm(self) -> None:  # the request is all in: the next one starts its own clock
            self._cancel()
            self.head_received = False

        def _expired(self) -> None:
            self.deadline = None
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
                note("closed: its request not sent in time")
                self.transport.close()

    return EdgeProtocol


def uvicorn_options(edge: Edge) -> dict:
    """uvicorn.Config's own part of the edge."""
    return {
        "http": edge_protocol(edge),
        "timeout_keep_alive": edge.keep_alive_seconds,
        "h11_max_incomplete_event_size": edge.head_bytes,
        # uvicorn answers 503 to a request once this many connections are open; ours refuses the
        # connection over max_connections at accept, so its check only backs ours up
        "limit_concurrency": edge.max_connections + 1,
        "backlog": LISTEN_BACKLOG,
    }
