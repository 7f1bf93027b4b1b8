"""The event loop dpgate serves on: uvloop when it is installed, else asyncio's own.

Measured with bench/private_latency.py (README, Performance): uvloop's loop and
transports take fewer Python steps per relayed message. DPGATE_EVENT_LOOP=asyncio picks
asyncio's loop whatever is installed (to compare, or to rule uvloop out).
DPGATE_LOOP_WATCH=<file> notes how late the loop serves a 1 ms timer (loop_watch.py).
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .loop_watch import watch, watched_file

T = TypeVar("T")

# How long a thread computing on a worker keeps the GIL when the event loop asks for it.
# Python's default, 5 ms, is paid several times per message of every other session while
# a worker samples a quantile or noises a histogram; 1 ms bounds that wait.
GIL_SWITCH_INTERVAL = 0.001


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for asyncio's default loop."""
    if os.environ.get("DPGATE_EVENT_LOOP", "uvloop").lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on the chosen loop."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    gc.freeze()  # what is imported and configured by now: see `settled`
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(_watched(coroutine))


def settled() -> None:
    """The server has started: what it imported (sqlglot, aiohttp…, ~57,000 objects the
    collector tracks) and built by now lives as long as the process, so it is left out of
    the collector's full passes, each of which stops every thread, the loop's too, for
    ~0.4 µs per object it walks (9-25 ms a pass on a loaded machine before; the loop
    watch notes them, bench/event_loop.py). Collected once first, so that no garbage of
    the start is kept for good."""
    gc.collect()
    gc.freeze()


async def _watched(coroutine: Coroutine[Any, Any, T]) -> T:
    """The coroutine, beside the loop's watch when DPGATE_LOOP_WATCH asks for one."""
    path = watched_file()
    if path is None:
        return await coroutine
    watcher = asyncio.create_task(watch(path))
    try:
        return await coroutine
    finally:
        watcher.cancel()
