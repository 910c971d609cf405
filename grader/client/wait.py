"""`grader submit --wait`: wait for one submission until it is graded or failed, within WAIT_SECONDS.

Each poll is a long poll: the server holds it until the grade is recorded or LONG_POLL_SECONDS
pass (grader/service/waiting.py), so the grade arrives the moment it exists, and a thousand
waiting learners send one request each per LONG_POLL_SECONDS. A server that answers sooner without
a grade (a proxy that cuts long requests) is polled again after a pause, short at first and then
every POLL_CEILING seconds. A spinner on stderr says what the server last said, only when stderr is
a terminal (a log or a pipe gets nothing); the poll then runs in a thread, so the spinner turns.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Protocol, TextIO

from grader.client.models import Submission
from grader.limits import LONG_POLL_SECONDS, WAIT_SECONDS

# seconds between polls the server did not hold: 0.25, 0.38, ... 3
POLL_FIRST, POLL_GROWTH, POLL_CEILING = 0.25, 1.5, 3.0
SPIN_SECONDS = 0.2  # the spinner's frame
FRAMES = "|/-\\"


class Progress(Protocol):
    """What shows the waiting: the terminal's Spinner, or a notebook's bar (grader.client.notebook).
    `live`: show() is called while a poll runs (in a thread), so it moves."""

    live: bool

    def show(self, text: str) -> None: ...

    def clear(self) -> None: ...


class Spinner:
    def __init__(self, stream: TextIO | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty()
        self.frame, self.width = 0, 0

    def show(self, text: str) -> None:
        if not self.live:
            return
        line = f"{FRAMES[self.frame % len(FRAMES)]} {text}"
        self.frame += 1
        self.stream.write("\r" + line + " " * max(0, self.width - len(line)))
        self.stream.flush()
        self.width = len(line)

    def clear(self) -> None:
        if self.live and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def wait_until_finished(
    poll: Callable[[float], Submission],
    first: Submission,
    *,
    seconds: float = WAIT_SECONDS,
    spinner: Progress | None = None,
    label: Callable[[Submission, float], str] = lambda s, elapsed: f"{s.status} {elapsed:.0f} s",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Submission:
    """The submission once `finished` (graded or failed), or as it last was when `seconds` ran out.
    `poll(s)` asks the server for it, to be held up to s seconds until it is finished."""
    spinner = spinner or Spinner()
    start = clock()
    sub, pause = first, POLL_FIRST

    def shown(last: Submission) -> str:
        return label(last, clock() - start)

    def spin_until(end: float) -> None:
        while (now := clock()) < end:
            spinner.show(shown(sub))
            sleep(min(SPIN_SECONDS, end - now))

    try:
        while not sub.finished and (left := seconds - (clock() - start)) > 0:
            asked, asked_at = min(LONG_POLL_SECONDS, left), clock()
            sub = spinning(partial(poll, asked), spinner, partial(shown, sub))
            if not sub.finished and clock() - asked_at < asked / 2:  # not held: do not hammer it
                spin_until(min(clock() + pause, start + seconds))
                pause = min(POLL_CEILING, pause * POLL_GROWTH)
    finally:
        spinner.clear()
    return sub


def spinning(call: Callable[[], Submission], spinner: Progress, text: Callable[[], str]) -> Submission:
    """call(), turning the spinner while it runs (in a thread, only for a live spinner)."""
    if not spinner.live:
        return call()
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="grader-poll", daemon=True)  # ^C does not wait for it
    worker.start()
    while worker.is_alive():
        spinner.show(text())
        worker.join(SPIN_SECONDS)
    if "error" in box:
        raise box["error"]
    return box["value"]
