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

The `cpu` threads are shared fairly (fair.py): an analyst's work holds at most
`per_analyst` of them, and freed threads go round robin to the analysts waiting. Work
with a deadline (`cpu_until`: analysis, calibration) is stopped when the deadline passes:
a thread cannot be killed, but an exception raised in it at its next Python instruction
(PyThreadState_SetAsyncExc) unwinds the work, so the thread is free again within
milliseconds instead of analysing on for minutes after the client got its error. The
compiled parts of sqlglot cannot be interrupted this way; limits.py bounds their input.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from ..pgwire.backend import ROWS_PER_CHUNK, Row, RowList
from .fair import FairShares

T = TypeVar("T")


class Stopped(BaseException):
    """Raised inside a worker thread whose work's deadline passed. A BaseException, so
    that the work's own `except Exception` clauses let it through."""


class Workers:
    def __init__(self, cpu_threads: int = 4, write_threads: int = 8, read_threads: int = 4,
                 cpu_per_analyst: int = 1):
        self.write_threads = write_threads
        self.cpu_pool = ThreadPoolExecutor(cpu_threads, thread_name_prefix="dpgate-cpu")
        self.cpu_shares = FairShares(cpu_threads, cpu_per_analyst)
        self.write_pool = ThreadPoolExecutor(write_threads, thread_name_prefix="dpgate-write")
        self.read_pool = ThreadPoolExecutor(read_threads, thread_name_prefix="dpgate-read")

    async def cpu(self, function: Callable[..., T], *args: object, analyst: str = "") -> T:
        """`function(*args)` on a cpu thread, within the analyst's share of them."""
        async with self.cpu_shares.slot(analyst):
            running = asyncio.get_running_loop().run_in_executor(
                self.cpu_pool, functools.partial(_call, function, args))
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:  # the slot is held until the thread is free
                await _finished(running)
                raise

    async def cpu_until(self, seconds: float, function: Callable[..., T], *args: object,
                        analyst: str = "") -> T:
        """As `cpu`, but the work is stopped after `seconds` (TimeoutError). The analyst's
        thread is given back only once the work has stopped."""
        job = _StoppableJob(functools.partial(_call, function, args))
        async with self.cpu_shares.slot(analyst):
            running = asyncio.get_running_loop().run_in_executor(self.cpu_pool, job)
            try:
                return await asyncio.wait_for(asyncio.shield(running), seconds)
            except TimeoutError:
                job.stop()
                try:
                    await running
                except Stopped:
                    pass
                raise
            except asyncio.CancelledError:  # the client went away: its work stops too,
                job.stop()                    # and the slot is held until it has
                await _finished(running)
                raise

    def free(self, rows: Sequence[Row]) -> None:
        """Empty a long result on a worker thread, a chunk at a time, without waiting: the
        last reference to 182,000 rows dropped on the event loop would hold it ~8 ms."""
        if isinstance(rows, RowList) and len(rows) > ROWS_PER_CHUNK:
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


def _free_in_pieces(rows: RowList) -> None:
    # A chunk at a time (~0.05 ms with the GIL held, between two of which the event
    # loop may take it back).
    while rows.drop_chunk():
        pass


class _StoppableJob(Generic[T]):
    """A function run on a worker thread that another thread may stop (`stop`)."""

    def __init__(self, function: Callable[[], T]):
        self.function = function
        self.lock = threading.Lock()
        self.thread: int | None = None
        self.stopped = self.done = False

    def __call__(self) -> T:
        with self.lock:
            if self.stopped:
                raise Stopped()
            self.thread = threading.get_ident()
        try:
            return self.function()
        finally:
            with self.lock:
                self.done = True
                # A stop that came after the work ended must not hit the pool's own code.
                _raise_in_thread(threading.get_ident(), None)

    def stop(self) -> None:
        """Stop the work at its next Python instruction (before it starts, if it has not)."""
        with self.lock:
            self.stopped = True
            if self.thread is not None and not self.done:
                _raise_in_thread(self.thread, Stopped)


async def _finished(running: asyncio.Future) -> None:
    """Wait for work on a thread to end, whatever it ends with (its caller is gone)."""
    try:
        await asyncio.shield(running)
    except (Exception, Stopped):
        pass


def _raise_in_thread(thread: int, exception: type[BaseException] | None) -> None:
    """Raise `exception` in `thread` at its next Python instruction (None: take back one
    raised before that has not happened yet)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread), None if exception is None else ctypes.py_object(exception))


async def _run(pool: ThreadPoolExecutor, function: Callable[..., T], *args: object) -> T:
    return await asyncio.get_running_loop().run_in_executor(
        pool, functools.partial(_call, function, args))


def _call(function: Callable[..., T], args: tuple[object, ...]) -> T:
    """`function(*args)` on a worker thread. A StopIteration escaping it (a bare `next`)
    becomes a RuntimeError: asyncio cannot set a StopIteration on a Future, which would
    then never finish, and the statement awaiting it would wait for ever."""
    try:
        return function(*args)
    except StopIteration as error:
        raise RuntimeError(f"StopIteration escaped {function!r}") from error
