"""`grader submit --wait`: poll one submission until it is graded or failed, within WAIT_SECONDS.

The polls come quickly at first (most gradings take seconds) and then every POLL_CEILING seconds,
so a thousand waiting learners do not hammer a busy server. A spinner on stderr says what the
server last said, only when stderr is a terminal (a log or a pipe gets nothing).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from grader.client.models import Submission
from grader.limits import WAIT_SECONDS

POLL_FIRST, POLL_GROWTH, POLL_CEILING = 0.25, 1.5, 3.0  # seconds between polls: 0.25, 0.38, ... 3
SPIN_SECONDS = 0.2  # the spinner's frame
FRAMES = "|/-\\"


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
    poll: Callable[[], Submission],
    first: Submission,
    *,
    seconds: float = WAIT_SECONDS,
    spinner: Spinner | None = None,
    label: Callable[[Submission, float], str] = lambda s, elapsed: f"{s.status} {elapsed:.0f} s",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Submission:
    """The submission once `finished` (graded or failed), or as it last was when `seconds` ran out."""
    spinner = spinner or Spinner()
    start = clock()
    sub, pause = first, POLL_FIRST
    try:
        while not sub.finished:
            next_poll = clock() + pause
            while (now := clock()) < next_poll:
                spinner.show(label(sub, now - start))
                sleep(min(SPIN_SECONDS, next_poll - now))
            if clock() - start >= seconds:
                break
            sub = poll()
            pause = min(POLL_CEILING, pause * POLL_GROWTH)
    finally:
        spinner.clear()
    return sub
