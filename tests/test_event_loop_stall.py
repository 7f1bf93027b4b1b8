"""A heavy private answer never holds up another session (issue 16).

dpgate serves the real demo PostgreSQL in-process, with a random source that holds the
heavy answer's first draw until the test lets it go: the answer is then provably in the
middle of being computed (its rows read, its noise or choice being drawn). Meanwhile
another analyst's session, a real psycopg client, must be answered: a relayed `SELECT 1`
and a stored private answer. Had the draw run on the event loop, the loop would be stuck
in it and the second session would get nothing until the heavy answer was let go.

Nothing here measures time; `HOLD_LIMIT` only keeps a broken proxy from hanging the test
(the held draw then goes on by itself, and the ordering assertions fail).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from accounting import SqliteLedger
from mechanisms.random_source import SecureRandomSource
from proxy.config import Config, load_config
from proxy.demo.analysts import create_analyst
from proxy.engine.private_query import INLINE_RELEASE_ROWS
from proxy.server.event_loop import loop_factory
from proxy.server.server import Proxy
from tests.conftest import DemoDatabase, free_port, wait_for_port, write_config

pytestmark = pytest.mark.end_to_end

HOLD_LIMIT = 60.0  # seconds; a guard against hanging, never an assertion
STORED = "SELECT count(*) FROM orders WHERE product_id = 3"
# Each heavy answer draws from the source: the exponential mechanism over the grid cells
# of order_cost, discrete Gaussian noise, and noise for every product of the domain.
HEAVY = {
    "median": ([], "SELECT median(order_cost) FROM orders"),
    "gaussian": (["SET dp.mechanism = gaussian"],
                 "SELECT count(*) FROM orders WHERE quantity > 2"),
    "histogram": ([], "SELECT product_id, count(*) FROM orders GROUP BY product_id"),
}


class HeldSource:
    """The secure source; once `armed`, its next draw waits until `go` (or HOLD_LIMIT),
    saying so with `holding` and, once it goes on, `went_on`."""

    def __init__(self) -> None:
        self.secure = SecureRandomSource()
        self.armed = threading.Event()
        self.holding = threading.Event()
        self.go = threading.Event()
        self.went_on = threading.Event()
        self.held_on: str | None = None  # the thread the held draw ran on

    def randbelow(self, n: int) -> int:
        if self.armed.is_set():
            self.armed.clear()
            self.held_on = threading.current_thread().name
            self.holding.set()
            self.go.wait(HOLD_LIMIT)
            self.went_on.set()
        return self.secure.randbelow(n)


@dataclass
class Served:
    port: int
    source: HeldSource

    def dsn(self, user: str) -> str:
        return f"postgresql://{user}:{user}-pw@127.0.0.1:{self.port}/dpgate_e2e"


def _serve(config: Config, ledger: SqliteLedger, source: HeldSource,
           stop: threading.Event) -> None:
    """dpgate's server on a loop of this thread (uvloop if installed, as `dpgate serve`)."""
    async def serve() -> None:
        proxy = Proxy(config, ledger, rng=source)
        server = await proxy.start()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        server.close()
        await proxy.close()
        await server.wait_closed()
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(serve())


@pytest.fixture
def served(tmp_path: Path, demo_database: DemoDatabase) -> Iterator[Served]:
    port = free_port()
    path = tmp_path / "dpgate.toml"
    write_config(path, port, tmp_path / "ledger.sqlite3", demo_database)
    config = load_config(path)
    ledger = SqliteLedger(config.ledger.path)
    for name in ("alice", "bob"):
        create_analyst(ledger, name, f"{name}-pw", 100.0, 1e-3, config.privacy)
    source, stop = HeldSource(), threading.Event()
    thread = threading.Thread(target=_serve, args=(config, ledger, source, stop),
                              name="dpgate-loop")
    thread.start()
    try:
        wait_for_port(port, _Alive(thread))
        yield Served(port, source)
    finally:
        source.go.set()
        stop.set()
        thread.join(HOLD_LIMIT)


class _Alive:
    """What wait_for_port asks of a process, for the server's thread."""

    def __init__(self, thread: threading.Thread):
        self.thread = thread

    def poll(self) -> int | None:
        return None if self.thread.is_alive() else 1


@pytest.mark.parametrize("heavy", sorted(HEAVY))
def test_another_session_is_served_while_a_heavy_answer_is_computed(served: Served,
                                                                    heavy: str) -> None:
    settings, statement = HEAVY[heavy]
    events: list[str] = []
    with psycopg.connect(served.dsn("bob"), autocommit=True) as other, \
            psycopg.connect(served.dsn("alice"), autocommit=True) as asker:
        first = other.execute(STORED).fetchone()  # charged now, stored from now on
        for setting in settings:
            asker.execute(setting)
        answers: list[object] = []

        def ask_heavy() -> None:
            answers.extend(asker.execute(statement).fetchall())
            events.append("heavy answered")

        served.source.armed.set()
        heavy_session = threading.Thread(target=ask_heavy)
        heavy_session.start()
        assert served.source.holding.wait(HOLD_LIMIT), "the heavy answer never drew noise"
        # The heavy answer is being computed (its draw is held). The other session:
        assert other.execute("SELECT 1").fetchone() == (1,)
        assert other.execute(STORED).fetchone() == first  # the stored answer, again
        assert not served.source.went_on.is_set(), "answered only once the draw went on"
        events.append("other session answered")
        served.source.go.set()
        heavy_session.join(HOLD_LIMIT)
    assert events == ["other session answered", "heavy answered"]
    assert served.source.held_on is not None and served.source.held_on != "dpgate-loop"
    assert answers and all(value is not None for row in answers for value in row)


def test_a_long_answer_is_the_same_in_text_and_in_binary(served: Served) -> None:
    """A long answer's DataRows are made on a worker (text) or by PostgreSQL in turns
    (binary, extended protocol): the stored answer reads the same either way."""
    _, histogram = HEAVY["histogram"]
    with psycopg.connect(served.dsn("alice"), autocommit=True) as connection:
        text = connection.execute(histogram).fetchall()
        binary = connection.cursor(binary=True).execute(histogram).fetchall()
    assert len(text) > INLINE_RELEASE_ROWS
    assert binary == text
