"""CPU work and ledger calls kept off the event loop, so one client cannot stall the rest.

The event loop serves every client; anything that may take more than a few milliseconds
runs in a thread of its own pool instead:

- `cpu`: whatever may take more than about a millisecond, so that the event loop never
  holds other sessions up for longer: the analysis of statements, calibration, noise for
  large or Gaussian releases, the exponential mechanism's sampling, the encoding of long
  answers and the freeing of long results (`free`). A few threads: Python runs one at a
  time, but the event loop gets the GIL back within the switch interval (1 ms, set in
  proxy/server/event_loop.py) instead of waiting for the end.
- `ledger_writes`: charges and stored answers, each a durable SQLite commit (an fsync).
- `ledger_reads`: `SHOW dp.budget` and logins, which must not queue behind the commits.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class Workers:
    def __init__(self, cpu_threads: int = 4, write_threads: int = 8, read_threads: int = 4):
        self.write_threads = write_threads
        self.cpu_pool = ThreadPoolExecutor(cpu_threads, thread_name_prefix="dpgate-cpu")
        self.write_pool = ThreadPoolExecutor(write_threads, thread_name_prefix="dpgate-write")
        self.read_pool = ThreadPoolExecutor(read_threads, thread_name_prefix="dpgate-read")

    async def cpu(self, function: Callable[..., T], *args: object) -> T:
        return await _run(self.cpu_pool, function, *args)

    def free(self, rows: list) -> None:
        """Empty a long list on a worker thread, a piece at a time, without waiting: the
        last reference to 182,000 rows dropped on the event loop would hold it ~8 ms."""
        if len(rows) > _FREED_PER_PIECE:
            try:
                self.cpu_pool.submit(_free_in_pieces, rows)
            except RuntimeError:  # the pool is shut down: the caller frees them
                pass

    async def ledger_write(self, function: Callable[..., T], *args: object) -> T:
        return await _run(self.write_pool, function, *args)

    async def ledger_read(self, function: Callable[..., T], *args: object) -> T:
        return await _run(self.read_pool, function, *args)

    def on_every_write_thread(self, function: Callable[[], object]) -> None:
        """Run `function` once on each write thread, starting them all now (at the
        proxy's start rather than on the way of the first charges)."""
        meeting = threading.Barrier(self.write_threads)

        def once() -> None:
            try:  # together, so that each runs on a thread of its own
                meeting.wait(timeout=60)
            except threading.BrokenBarrierError:
                pass
            function()
        for _ in range(self.write_threads):
            self.write_pool.submit(once)

    def close(self) -> None:
        for pool in (self.cpu_pool, self.write_pool, self.read_pool):
            pool.shutdown(wait=False, cancel_futures=True)


# Rows freed at once (about 0.2 ms with the GIL held, between two of which the event loop
# may take it back).
_FREED_PER_PIECE = 4096


def _free_in_pieces(rows: list) -> None:
    while rows:
        del rows[-_FREED_PER_PIECE:]


async def _run(pool: ThreadPoolExecutor, function: Callable[..., T], *args: object) -> T:
    return await asyncio.get_running_loop().run_in_executor(
        pool, functools.partial(function, *args))
