"""Each analyst's account of reader-seconds: the time its private queries held a reader
connection, paid back at a steady rate.

The fair shares (fair.py) bound how many readers one analyst holds at once, not for how
long: a statement that runs to `private_statement_timeout` is charged its ε, which may be
the floor, and the analyst could repeat it forever. Here every private query's time on its
reader is taken from the analyst's account, which refills at `reader_seconds_per_minute`
up to a burst; while the account is below zero the analyst's next private query is
refused at once, before it is charged or holds anything.

What this tells the analyst is a function of the durations of its own earlier queries,
which it saw end (an answer or a timeout) on its own clock: no new channel about the data,
and the ε charged stays what was decided before the query ran (docs/operations.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..config import BackendSettings


class ReaderTime:
    """Reader-seconds per analyst (one event loop; shared by every session of a proxy)."""

    def __init__(self, per_minute: float, burst: float,
                 clock: Callable[[], float] = time.monotonic):
        self.rate = per_minute / 60  # 0: unlimited
        self.burst = burst
        self.clock = clock
        # analyst -> (balance in seconds, when it was that). An analyst without an entry
        # has a full account: entries are dropped once full, so there are at most as many
        # as analysts who ran a query lately.
        self._accounts: dict[str, tuple[float, float]] = {}

    def wait(self, analyst: str) -> float:
        """Seconds until the analyst's account is back to zero (0: it may run now)."""
        balance = self._balance(analyst)
        return 0.0 if self.rate == 0 or balance >= 0 else -balance / self.rate

    def spend(self, analyst: str, seconds: float) -> None:
        """Take `seconds` a private query held a reader from the analyst's account."""
        if self.rate == 0:
            return
        self._accounts[analyst] = (self._balance(analyst) - seconds, self.clock())

    def _balance(self, analyst: str) -> float:
        if analyst not in self._accounts:
            return self.burst
        balance, at = self._accounts[analyst]
        balance = min(self.burst, balance + (self.clock() - at) * self.rate)
        if balance >= self.burst:
            del self._accounts[analyst]
        return balance

    @contextmanager
    def held(self, analyst: str) -> Iterator[None]:
        """Spend the time the block runs (a private query on its reader)."""
        started = self.clock()
        try:
            yield
        finally:
            self.spend(analyst, self.clock() - started)


def reader_time(backend: BackendSettings) -> ReaderTime:
    """The account the settings describe: the burst lets an analyst's share of the readers
    each run once to the timeout."""
    return ReaderTime(backend.reader_seconds_per_minute,
                      backend.private_statements_per_analyst * backend.private_statement_timeout)
