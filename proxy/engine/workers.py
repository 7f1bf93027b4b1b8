"""CPU work and ledger calls kept off the event loop, so one client cannot stall the rest.

The event loop serves every client; anything that may take more than a few milliseconds
runs in a thread of its own pool instead:

- `cpu`: the analysis of long statements, calibration, noise for large releases and the
  exponential mechanism's sampling. A few threads: Python runs one at a time, but the
  event loop gets its turn every few milliseconds instead of waiting for the end.
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


async def _run(pool: ThreadPoolExecutor, function: Callable[..., T], *args: object) -> T:
    return await asyncio.get_running_loop().run_in_executor(
        pool, functools.partial(function, *args))
