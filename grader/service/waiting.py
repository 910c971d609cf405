"""Requests waiting for a grade: `GET /api/v1/submissions/{id}?wait=S` (a long poll).

A waiting request is an asyncio task of the web process; the dispatcher that records the grade is
a thread of the same process. `Waiters.notify(upload_id)` (the dispatcher, after it recorded that
upload's outcome) wakes the requests waiting for that upload only, through their event loop
(`call_soon_threadsafe`), so a surge of 500 waiting learners costs one look at the gradebook per
grade, not 500. A request starts listening before it looks at the gradebook, so a grade recorded
between its look and its wait still wakes it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class Waiters:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # notify() runs in the dispatcher's thread
        self._waiting: dict[int, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    @contextmanager
    def listen(self, upload_id: int) -> Iterator[asyncio.Event]:
        """An event set when `upload_id`'s outcome is recorded, from now until the block ends."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiting.setdefault(upload_id, set()).add(waiter)
        try:
            yield waiter[1]
        finally:
            with self._lock:
                others = self._waiting.get(upload_id, set())
                others.discard(waiter)
                if not others:
                    self._waiting.pop(upload_id, None)

    def notify(self, upload_id: int) -> None:
        with self._lock:
            waiting = list(self._waiting.get(upload_id, ()))
        for loop, event in waiting:
            with suppress(RuntimeError):  # its loop has closed: the server is stopping
                loop.call_soon_threadsafe(event.set)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._waiting.values())


async def wait_for(event: asyncio.Event, seconds: float) -> bool:
    """Whether `event` was set within `seconds`."""
    try:
        await asyncio.wait_for(event.wait(), max(0.0, seconds))
    except TimeoutError:
        return False
    return True
