"""Fair shares of shared pools (proxy/engine/fair.py) and work that stops at its deadline
(proxy/engine/workers.py), in process: issue 24's first two points, without the proxy."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from proxy.engine.fair import FairShares
from proxy.engine.workers import Workers

pytestmark = pytest.mark.unit


async def _hold(shares: FairShares, analyst: str, order: list[str], release: asyncio.Event
                ) -> None:
    async with shares.slot(analyst):
        order.append(analyst)
        await release.wait()


def test_one_analyst_holds_at_most_its_share_and_others_go_round_robin():
    async def scenario() -> list[str]:
        shares = FairShares(capacity=3, per_analyst=2)
        order: list[str] = []
        release = asyncio.Event()
        tasks = [asyncio.create_task(_hold(shares, "mallory", order, release))
                 for _ in range(6)]
        await asyncio.sleep(0)
        assert shares.held["mallory"] == 2 and shares.waiting("mallory") == 4
        # A third slot is free, but not for mallory: the victim gets it at once.
        tasks.append(asyncio.create_task(_hold(shares, "victim", order, release)))
        await asyncio.sleep(0)
        assert order == ["mallory", "mallory", "victim"]
        release.set()
        await asyncio.gather(*tasks)
        assert shares.used == 0 and not shares.held
        return order
    assert asyncio.run(scenario()).count("mallory") == 6


def test_a_freed_slot_goes_to_the_analyst_whose_turn_it_is():
    async def scenario() -> list[str]:
        shares = FairShares(capacity=1, per_analyst=1)
        order: list[str] = []
        gates = {name: asyncio.Event() for name in ("a1", "a2", "a3", "b1", "c1")}

        async def hold(analyst: str, gate: str) -> None:
            async with shares.slot(analyst):
                order.append(gate)
                await gates[gate].wait()
        first = asyncio.create_task(hold("a", "a1"))
        await asyncio.sleep(0)
        rest = [asyncio.create_task(hold(who, gate)) for who, gate in
                (("a", "a2"), ("a", "a3"), ("b", "b1"), ("c", "c1"))]
        await asyncio.sleep(0)
        for gate in ("a1", "a2", "b1", "c1", "a3"):
            gates[gate].set()
            await asyncio.sleep(0.01)
        await asyncio.gather(first, *rest)
        return order
    # a asked three times first; b and c each get their turn before a's third.
    assert asyncio.run(scenario()) == ["a1", "a2", "b1", "c1", "a3"]


def test_a_cancelled_waiter_gives_its_turn_back():
    async def scenario() -> None:
        shares = FairShares(capacity=1, per_analyst=1)
        release = asyncio.Event()
        order: list[str] = []
        holder = asyncio.create_task(_hold(shares, "a", order, release))
        await asyncio.sleep(0)
        waiter = asyncio.create_task(_hold(shares, "b", order, release))
        await asyncio.sleep(0)
        waiter.cancel()
        release.set()
        await holder
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert shares.used == 0 and not shares.waiting("b")
        async with shares.slot("c"):
            assert shares.used == 1
    asyncio.run(scenario())


def test_work_past_its_deadline_stops_and_frees_its_thread():
    """asyncio.timeout alone only stops waiting: the thread analysed on for minutes."""
    steps = [0]

    def spin() -> None:
        while True:  # pure Python, as the rewriter's passes are
            steps[0] += 1

    async def scenario() -> int:
        workers = Workers(cpu_threads=1, cpu_per_analyst=1)
        try:
            with pytest.raises(TimeoutError):
                await workers.cpu_until(0.05, spin, analyst="mallory")
            stopped_at = steps[0]
            time.sleep(0.05)
            assert steps[0] == stopped_at  # no one is spinning any more
            # The only thread takes the next work (mallory's own, too).
            assert await asyncio.wait_for(workers.cpu(sum, [1, 2], analyst="mallory"), 5) == 3
            return stopped_at
        finally:
            workers.close()
    assert asyncio.run(scenario()) > 0


def test_a_stop_just_as_the_work_ends_never_reaches_the_pool():
    """Deadlines about as long as the work: whichever ends first, the pool's threads
    survive and every later job runs."""
    def briefly() -> int:
        until = time.perf_counter() + 0.002
        while time.perf_counter() < until:
            pass
        return 1

    async def scenario() -> None:
        workers = Workers(cpu_threads=2, cpu_per_analyst=2)
        try:
            outcomes = await asyncio.gather(
                *(workers.cpu_until(0.002, briefly, analyst="a") for _ in range(200)),
                return_exceptions=True)
            assert all(o == 1 or isinstance(o, TimeoutError) for o in outcomes)
            assert await asyncio.wait_for(asyncio.gather(
                *(workers.cpu(briefly, analyst="a") for _ in range(20))), 30) == [1] * 20
        finally:
            workers.close()
        alive = [t for t in threading.enumerate() if t.name.startswith("dpgate-cpu")]
        assert len(alive) <= 2
    asyncio.run(scenario())


def test_the_work_of_a_cancelled_statement_stops_too():
    """A client that goes away (or a statement cancelled) leaves no analysis behind."""
    steps = [0]

    def spin() -> None:
        while True:
            steps[0] += 1

    async def scenario() -> None:
        workers = Workers(cpu_threads=1, cpu_per_analyst=1)
        try:
            task = asyncio.create_task(workers.cpu_until(60, spin, analyst="a"))
            while not steps[0]:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await asyncio.wait_for(workers.cpu(sum, [1, 2], analyst="a"), 5) == 3
            stopped_at = steps[0]
            await asyncio.sleep(0.05)
            assert steps[0] == stopped_at
        finally:
            workers.close()
    asyncio.run(scenario())


@pytest.mark.parametrize("pool", ["cpu", "cpu_until", "ledger_write", "ledger_read"])
def test_a_stop_iteration_in_work_is_an_error_not_a_wait_for_ever(pool: str):
    """A bare `next()` that runs dry inside work on a thread: asyncio cannot set a
    StopIteration on a Future, so the statement awaiting it used to wait for ever."""
    def dry() -> int:
        return next(iter([]))

    async def scenario() -> None:
        workers = Workers(cpu_threads=1, write_threads=1, read_threads=1)
        try:
            work = (workers.cpu_until(5.0, dry) if pool == "cpu_until"
                    else getattr(workers, pool)(dry))
            with pytest.raises(RuntimeError, match="StopIteration"):
                await asyncio.wait_for(work, 5.0)
        finally:
            workers.close()
    asyncio.run(scenario())
