"""The loop watch (proxy/server/loop_watch.py) notes the collector's full passes with the
thread that ran them, so that bench/event_loop.py can tell a pass on the event loop from
one on a worker thread."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path

import pytest

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
