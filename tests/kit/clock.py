"""A clock that tests move by hand, so that nothing waits real seconds for a deadline.

``FakeClock`` is what the spot controller's ``Clock`` is (``time()``, ``sleep()``, ``wait()``)
and what the leader elector's ``clock`` and ``sleep`` are (calling it says the time). Sleeps and
waits end only when ``advance`` moves the time past their end (or, for ``wait``, when the event
is set); ``sleeps`` counts the ones begun, so a test can wait for the code under test to go back
to sleep (poll for a condition) instead of sleeping itself.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeClock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:  # 2027-01-15T08:00:00Z
        self.now = now
        self.sleeps = 0
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the time on; every sleep and wait that ends by then is woken."""
        self.now += seconds
        while self._timers and self._timers[0][0] <= self.now:
            _, _, future = heapq.heappop(self._timers)
            if not future.done():
                future.set_result(None)

    @property
    def waiting(self) -> int:
        """Sleeps and waits not yet over."""
        return sum(1 for _, _, future in self._timers if not future.done())

    def _timer(self, seconds: float) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.now + seconds, next(self._order), future))
        return future

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        await self._timer(seconds)

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        if event.is_set():
            return True
        if timeout <= 0:
            return False
        self.sleeps += 1
        timer = self._timer(timeout)
        waiter = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({timer, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            waiter.cancel()
        return event.is_set()
