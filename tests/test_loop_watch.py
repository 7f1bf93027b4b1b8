"""The loop watch (proxy/server/loop_watch.py) notes the collector's full passes with the
thread that ran them, so that bench/event_loop.py can tell a pass on the event loop from
one on a worker thread; once the server has started (event_loop.settled), what it loaded
is left out of those passes, and so are the recent decisions kept for the dashboard."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path

import pytest

from proxy.ops import Operations
from proxy.ops.decision import ANSWERED, RELAYED, Decision, now
from proxy.server.event_loop import settled
from proxy.server.loop_watch import CollectorPass, collector_file, watch

pytestmark = pytest.mark.unit


def test_full_passes_are_noted_with_the_thread_that_ran_them(tmp_path: Path):
    path = tmp_path / "late-ticks.txt"

    async def run() -> None:
        watcher = asyncio.create_task(watch(path))
        await asyncio.sleep(0.01)
        gc.collect()  # on the loop's thread
        worker = threading.Thread(target=gc.collect)
        worker.start()
        await asyncio.to_thread(worker.join)
        watcher.cancel()

    asyncio.run(run())
    passes = CollectorPass.read(collector_file(path))
    noted = [(p.generation, p.on_loop) for p in passes]  # and any pass the test's own
    assert (2, True) in noted and (2, False) in noted  # allocations set off
    assert all(p.cpu >= 0 for p in passes)
    gc.collect()  # the watch is gone: nothing more is noted
    assert len(CollectorPass.read(collector_file(path))) == len(passes)


def test_settled_leaves_what_the_server_loaded_out_of_full_passes():
    import proxy.server.server  # noqa: F401  (sqlglot, aiohttp…: what `serve` imports)

    gc.collect()
    tracked = len(gc.get_objects())
    settled()
    try:
        assert gc.get_freeze_count() > tracked * 0.9
        assert len(gc.get_objects()) < tracked / 10  # what a full pass walks now
    finally:
        gc.unfreeze()


def test_recent_decisions_are_kept_where_full_passes_do_not_walk_them():
    operations = Operations()
    decisions = [Decision(now(), "alice", "127.0.0.1:5", "private", ANSWERED, "", 0.1, 0.0,
                          f"fingerprint {n}", 0.001) for n in range(3)]
    for decision in decisions:
        operations.record(decision)
        # A relayed statement is counted, not kept: under load it would push the
        # dashboard's hour of answers and refusals out of the RECENT_DECISIONS kept.
        operations.record(Decision(now(), "alice", "127.0.0.1:5", "relay", RELAYED, "", 0.0,
                                   0.0, "relayed", 0.001))
    gc.collect()
    assert operations.recent() == decisions  # as recorded, oldest first
    assert operations.counts["alice"][RELAYED] == 3
    assert not any(gc.is_tracked(row) for row in operations._recent)
