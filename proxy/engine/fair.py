"""Fair shares of a pool that every analyst uses (worker threads, reader connections).

A pool of `capacity` slots: an analyst holds at most `per_analyst` of them at once, and
when slots are short the next one to free goes to the analyst whose turn it is (round
robin over the analysts waiting), not to whoever asked first. One analyst's eight
sessions looping on a slow statement then hold `per_analyst` slots and queue behind each
other; another analyst's statement waits for at most one slot to free.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class FairShares:
    """Slots of one pool, shared fairly between analysts (asyncio; one event loop)."""

    def __init__(self, capacity: int, per_analyst: int):
        if not 0 < per_analyst:
            raise ValueError("per_analyst must be positive")
        self.capacity = capacity
        self.per_analyst = min(per_analyst, capacity)
        self.used = 0
        self.held: Counter[str] = Counter()
        # Analysts with statements waiting, in the order their turns come.
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    @asynccontextmanager
    async def slot(self, analyst: str) -> AsyncIterator[None]:
        """Hold one slot for `analyst` while the block runs."""
        await self._acquire(analyst)
        try:
            yield
        finally:
            self._release(analyst)

    def waiting(self, analyst: str) -> int:
        """How many of the analyst's requests wait for a slot."""
        return len(self._waiting.get(analyst, ()))

    async def _acquire(self, analyst: str) -> None:
        if not self._waiting and self._free_for(analyst):
            self._take(analyst)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(analyst, deque()).append(granted)
        self._grant()
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release(analyst)  # granted just as the waiter gave up
            else:
                self._drop(analyst, granted)
            raise

    def _free_for(self, analyst: str) -> bool:
        return self.used < self.capacity and self.held[analyst] < self.per_analyst

    def _take(self, analyst: str) -> None:
        self.used += 1
        self.held[analyst] += 1

    def _release(self, analyst: str) -> None:
        self.used -= 1
        self.held[analyst] -= 1
        if not self.held[analyst]:
            del self.held[analyst]
        self._grant()

    def _grant(self) -> None:
        """Give free slots to waiting analysts, each in turn (round robin)."""
        while self.used < self.capacity:
            analyst = next((a for a in self._waiting if self._free_for(a)), None)
            if analyst is None:
                return
            queue = self._waiting.pop(analyst)
            granted = queue.popleft()
            if queue:
                self._waiting[analyst] = queue  # to the end of the round
            if granted.done():
                continue  # its waiter was cancelled and has not dropped it yet
            self._take(analyst)
            granted.set_result(None)

    def _drop(self, analyst: str, granted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(analyst)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self._waiting[analyst]
