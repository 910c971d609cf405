"""Long polls (grader/service/waiting.py): the dispatcher's thread wakes the requests waiting for
one upload, on their own event loop, and only those. Events are awaited with timeouts far beyond
what a wake-up needs, so a failure is a missed wake-up, never a slow machine."""

from __future__ import annotations

import asyncio
import threading

from grader.service.waiting import Waiters, wait_for

NEVER = 30.0  # a wake-up that has not come in this long will not come


def test_a_recording_in_another_thread_wakes_the_waiters_of_that_upload_only():
    waiters = Waiters()

    async def scenario():
        with waiters.listen(7) as mine, waiters.listen(8) as other:
            assert len(waiters) == 2
            threading.Thread(target=waiters.notify, args=(7,)).start()
            assert await wait_for(mine, NEVER)
            assert not other.is_set(), "another upload's waiter sleeps on"
            assert not await wait_for(other, 0.05)
        assert len(waiters) == 0, "a finished request stops listening"

    asyncio.run(scenario())


def test_a_grade_recorded_between_the_look_and_the_wait_is_not_missed():
    waiters = Waiters()

    async def scenario():
        with waiters.listen(7) as recorded:
            waiters.notify(7)  # after the request looked at the gradebook, before it waits
            assert await wait_for(recorded, NEVER), "the wait returns at once: it was already news"

    asyncio.run(scenario())


def test_notifying_a_waiter_whose_loop_has_closed_does_not_raise():
    waiters = Waiters()
    holder = {}

    async def leave_a_waiter():
        holder["cm"] = waiters.listen(7)
        holder["cm"].__enter__()

    asyncio.run(leave_a_waiter())  # the loop closes with the waiter still registered
    waiters.notify(7)
    waiters.notify(99)  # nobody waits for it
    assert len(waiters) == 1
