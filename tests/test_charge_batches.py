"""Charges of concurrent sessions go to the ledger's thread in batches
(proxy/engine/charge_batches.py), each batch one transaction, each charge's own outcome
back to its own session."""

from __future__ import annotations

import asyncio
import threading

import pytest

from accounting import (
    AnswerCharge,
    BudgetExceeded,
    Charged,
    FailureCharge,
    SqliteLedger,
    charge,
    charge_answer,
)
from proxy.engine.charge_batches import ChargeBatches
from proxy.engine.workers import Workers
from tests.test_ledger import make_ledger, request

pytestmark = pytest.mark.unit


class CountingLedger(SqliteLedger):
    """The SQLite ledger, noting the size of each batch it commits."""

    batches: list[int]

    def charge_together(self, charges):  # type: ignore[override]
        self.batches.append(len(charges))
        return super().charge_together(charges)


def test_concurrent_charges_travel_together_and_fail_alone(tmp_path):
    ledger = CountingLedger(tmp_path / "ledger.sqlite3")
    ledger.batches = []
    make_ledger(lambda: ledger, epsilon=1.05)  # room for ten charges of 0.1
    workers = Workers()
    batches = ChargeBatches(ledger, workers)

    async def scenario() -> list:
        async def one(n: int):
            item = AnswerCharge(request(n), 0.3, [[n]]) if n % 2 else \
                FailureCharge(request(n), "failed")
            try:
                return await batches(charge, ledger, item)
            except BudgetExceeded as exceeded:
                return exceeded
        return await asyncio.gather(*(one(n) for n in range(12)))

    try:
        outcomes = asyncio.run(scenario())
    finally:
        workers.close()
    assert sum(ledger.batches) == 12 and len(ledger.batches) < 12
    assert [isinstance(o, Charged) for o in outcomes] == [True] * 10 + [False] * 2
    assert all(isinstance(o, BudgetExceeded) for o in outcomes[10:])
    recorded = [c.outcome for c in ledger.charges("ann")]
    assert recorded == ["failed" if n % 2 == 0 else "answered" for n in range(10)]


def test_other_calls_go_to_the_write_threads_alone(tmp_path):
    ledger = make_ledger(lambda: SqliteLedger(tmp_path / "ledger.sqlite3"))
    workers = Workers()
    batches = ChargeBatches(ledger, workers)
    try:
        outcome = asyncio.run(batches(charge_answer, ledger, request(1), 0.3, [[1]]))
    finally:
        workers.close()
    assert isinstance(outcome, Charged)
    assert ledger.budget("ann").queries == 1


def test_every_write_thread_makes_its_first_commit_before_any_answer(tmp_path):
    """Each thread that may commit batches opens its connection and commits once when
    the proxy starts (the first commit of a connection syncs the folder too): the thread
    that charges has made its own first; the others make theirs beside it."""
    threads: list[tuple[str, str]] = []

    class Noting(SqliteLedger):
        def prepare_thread(self) -> None:
            threads.append(("prepare", threading.current_thread().name))
            super().prepare_thread()

        def charge_together(self, charges):  # type: ignore[override]
            threads.append(("charge", threading.current_thread().name))
            return super().charge_together(charges)

    ledger = make_ledger(lambda: Noting(tmp_path / "ledger.sqlite3"))
    workers = Workers(write_threads=3)
    batches = ChargeBatches(ledger, workers, prepare=True)
    try:
        outcome = asyncio.run(batches(charge, ledger, AnswerCharge(request(1), 0.3, [[1]])))
        # A loaded machine may run the charge before another thread's prepare starts.
        workers.write_pool.shutdown(wait=True)
    finally:
        workers.close()
    assert isinstance(outcome, Charged)
    prepared = {thread for what, thread in threads if what == "prepare"}
    assert len(prepared) == 3 and sorted(what for what, _ in threads) == \
        ["charge", "prepare", "prepare", "prepare"]
    (charged,) = [i for i, (what, _) in enumerate(threads) if what == "charge"]
    assert threads.index(("prepare", threads[charged][1])) < charged  # its thread: first
