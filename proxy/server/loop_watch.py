"""How long the event loop keeps every other client waiting: a timer that should fire
every millisecond, and how late it fires.

A late tick means the loop was held: by a callback running long on it, by waiting for
the GIL while a worker thread computes, or by the machine giving the process no CPU. The
loop thread's own CPU time during the tick tells the first apart: that is CPU work on the
event loop. Turned on by DPGATE_LOOP_WATCH=<file> (bench/event_loop.py does so); each tick
later than LATE is appended to the file as "<unix time> <seconds late> <CPU seconds of the
loop's thread meanwhile>", a line per late tick.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

INTERVAL = 0.001
# Below this a tick is on time: uvloop's timers have a resolution of one millisecond.
LATE = 0.002
ENVIRONMENT = "DPGATE_LOOP_WATCH"


async def watch(path: Path) -> None:
    """Tick every INTERVAL until cancelled, noting each late tick in `path`."""
    with path.open("a", buffering=1) as out:
        while True:
            due, cpu = time.monotonic() + INTERVAL, time.thread_time()
            await asyncio.sleep(INTERVAL)
            late = time.monotonic() - due
            if late >= LATE:
                out.write(f"{time.time():.6f} {late:.6f} {time.thread_time() - cpu:.6f}\n")


def watched_file() -> Path | None:
    """The file DPGATE_LOOP_WATCH names, or None when the watch is off."""
    name = os.environ.get(ENVIRONMENT, "")
    return Path(name) if name else None


@dataclass(frozen=True)
class LateTick:
    at: float  # unix time
    late: float  # seconds
    cpu: float  # CPU seconds the loop's thread spent meanwhile


def read_late_ticks(path: Path) -> list[LateTick]:
    """Each late tick a watch wrote."""
    if not path.exists():
        return []
    return [LateTick(*map(float, line.split())) for line in path.read_text().splitlines()]
