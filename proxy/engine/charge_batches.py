"""The charges of concurrent sessions taken to the ledger's thread together.

Each charge is a durable commit and must run on a worker thread (it waits for an fsync).
One trip per charge costs each answer two thread wake-ups (the worker, then the event
loop), and on a busy machine the wait for a CPU that each wake-up means. Here the
charges that arrive while a batch commits wait on the loop and go as the next batch:
one trip there and one back for the batch, and the store commits the batch in one
transaction where it can (accounting/one_commit.py `charge_together`). Nothing changes
for a charge alone: it leaves at once, as before. Each write thread's ledger connection
made its first commit when the proxy started (`prepare`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from accounting import (
    AnswerCharge,
    FailureCharge,
    Ledger,
    charge,
    charge_together,
    prepare_thread,
)

from .workers import Workers

T = TypeVar("T")
Item = AnswerCharge | FailureCharge


class ChargeBatches:
    """Shared by every session of one proxy (one ledger, one event loop)."""

    def __init__(self, ledger: Ledger, workers: Workers, prepare: bool = False):
        """`prepare`: make each write thread's first commit now (the proxy's start), not
        on the way of an answer (one_commit.py `prepare_thread`)."""
        self.ledger = ledger
        self.workers = workers
        self._waiting: list[tuple[Item, asyncio.Future]] = []
        self._busy = False  # a batch is on its way or committing
        if prepare:
            workers.on_every_write_thread(lambda: prepare_thread(ledger))

    async def __call__(self, function: Callable[..., T], *args: Any) -> T:
        """A WorkerPool (errors.ledger_call): `charge(ledger, item)` joins the next
        batch; any other call goes to the ledger's write threads alone."""
        if function is not charge or len(args) != 2 or args[0] is not self.ledger:
            return await self.workers.ledger_write(function, *args)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiting.append((args[1], future))
        if not self._busy:
            self._send()
        return await future

    def _send(self) -> None:
        """Take everything waiting to a write thread; its outcome comes back in one
        callback."""
        batch, self._waiting = self._waiting, []
        self._busy = True
        try:
            sent = asyncio.get_running_loop().run_in_executor(
                self.workers.write_pool, charge_together, self.ledger,
                [item for item, _ in batch])
        except BaseException:
            self._busy = False
            raise
        sent.add_done_callback(lambda done: self._returned(batch, done))

    def _returned(self, batch: list[tuple[Item, asyncio.Future]],
                  done: asyncio.Future) -> None:
        """Each charge's result or exception to its session, then the next batch."""
        error = None if done.cancelled() else done.exception()
        outcomes = done.result() if error is None and not done.cancelled() else \
            [(None, error or asyncio.CancelledError())] * len(batch)
        for (_, future), (result, failure) in zip(batch, outcomes, strict=True):
            if future.done():  # its session was cancelled meanwhile
                continue
            if failure is not None:
                future.set_exception(failure)
            else:
                future.set_result(result)
        self._busy = False
        if self._waiting:
            self._send()
