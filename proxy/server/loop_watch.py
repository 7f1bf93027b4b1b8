"""How long the event loop keeps every other client waiting: a timer that should fire
every millisecond, and how late it fires.

A late tick means the loop was held: by a callback running long on it, by waiting for
the GIL while a worker thread computes, or by the machine giving the process no CPU. The
loop thread's own CPU time during the tick is the first (CPU work on the event loop), its
time waiting in the kernel's run queue the last (/proc/thread-self/schedstat); the rest
is mostly the GIL. Turned on by DPGATE_LOOP_WATCH=<file> (bench/event_loop.py does so);
each tick later than LATE is appended to the file as "<unix time> <seconds late> <CPU
seconds> <run-queue seconds>", the last two of the loop's thread during the tick.

The garbage collector's passes hold every thread, so the watch notes them too, in
"<file>.gc": each full pass, and each other one that took SLOW_PASS or more, as "<unix
time> <generation> <CPU seconds> <1 if on the loop's thread, else 0>".
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

INTERVAL = 0.001
# Below this a tick is on time: uvloop's timers have a resolution of one millisecond.
LATE = 0.002
SLOW_PASS = 0.0005
ENVIRONMENT = "DPGATE_LOOP_WATCH"


async def watch(path: Path) -> None:
    """Tick every INTERVAL until cancelled, noting each late tick in `path` (and the
    collector's passes in `<path>.gc`)."""
    with path.open("a", buffering=1) as out, _Schedstat() as queued, \
            _CollectorWatch(collector_file(path)):
        while True:
            due, cpu, waited = time.monotonic() + INTERVAL, time.thread_time(), queued()
            await asyncio.sleep(INTERVAL)
            late = time.monotonic() - due
            if late >= LATE:
                out.write(f"{time.time():.6f} {late:.6f} {time.thread_time() - cpu:.6f} "
                          f"{queued() - waited:.6f}\n")


class _Schedstat:
    """Seconds this thread has waited for a CPU so far (0 where Linux's schedstat is
    missing): the second field of /proc/thread-self/schedstat, in nanoseconds."""

    def __enter__(self) -> Callable[[], float]:
        try:
            self.fd: int | None = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self.fd = None
        return self.waited

    def waited(self) -> float:
        if self.fd is None:
            return 0.0
        return int(os.pread(self.fd, 128, 0).split()[1]) / 1e9

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)


class _CollectorWatch:
    """A gc callback noting the collector's full and slow passes, with the CPU time of
    the thread that ran them (gc runs on whichever thread allocated past a threshold)."""

    def __init__(self, path: Path):
        self.path = path
        self.loop_thread = threading.get_ident()
        self.started = 0.0

    def __enter__(self) -> None:
        self.out = self.path.open("a", buffering=1)
        gc.callbacks.append(self.note)

    def note(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.thread_time()
            return
        cpu = time.thread_time() - self.started
        if info["generation"] == 2 or cpu >= SLOW_PASS:
            on_loop = int(threading.get_ident() == self.loop_thread)
            self.out.write(f"{time.time():.6f} {info['generation']} {cpu:.6f} {on_loop}\n")

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self.note)
        self.out.close()


def collector_file(path: Path) -> Path:
    """Where the watch writing late ticks to `path` notes the collector's passes."""
    return path.with_name(path.name + ".gc")


@dataclass(frozen=True)
class CollectorPass:
    at: float  # unix time
    generation: int
    cpu: float  # CPU seconds of the thread that ran it
    on_loop: bool

    @classmethod
    def read(cls, path: Path) -> list[CollectorPass]:
        """Each pass a watch noted (none if the file is missing: an older dpgate)."""
        if not path.exists():
            return []
        return [cls(float(at), int(generation), float(cpu), on_loop == "1")
                for at, generation, cpu, on_loop in map(str.split,
                                                        path.read_text().splitlines())]


def watched_file() -> Path | None:
    """The file DPGATE_LOOP_WATCH names, or None when the watch is off."""
    name = os.environ.get(ENVIRONMENT, "")
    return Path(name) if name else None


@dataclass(frozen=True)
class LateTick:
    at: float  # unix time
    late: float  # seconds
    cpu: float  # CPU seconds the loop's thread spent meanwhile
    queued: float = 0.0  # seconds it waited for a CPU meanwhile

    @property
    def other(self) -> float:
        """The lateness neither the loop's work nor the machine explains: the GIL."""
        return max(self.late - self.cpu - self.queued, 0.0)


def read_late_ticks(path: Path) -> list[LateTick]:
    """Each late tick a watch wrote."""
    if not path.exists():
        return []
    return [LateTick(*map(float, line.split())) for line in path.read_text().splitlines()]
