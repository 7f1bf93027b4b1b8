"""Crash safety: SIGKILL the proxy in the middle of a burst of queries, restart it on the
same ledger, and check that every answer a client received was charged and stored."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from accounting import SqliteLedger
from tests.conftest import (
    DemoDatabase,
    add_analyst,
    free_port,
    start_proxy,
    wait_for_port,
    write_config,
)

pytestmark = pytest.mark.end_to_end

CLIENTS = 8
KILL_AFTER_ANSWERS = 20
ANALYST, PASSWORD, BUDGET = "crash", "crash-pw", 1000.0


@dataclass
class OwnProxy:
    """A proxy of this test's own, which the test may kill and start again."""

    config_path: Path
    ledger_path: Path
    port: int
    process: subprocess.Popen | None = None

    @property
    def dsn(self) -> str:
        return f"postgresql://{ANALYST}:{PASSWORD}@127.0.0.1:{self.port}/dpgate_e2e"

    def start(self) -> None:
        self.process = start_proxy(self.config_path)
        wait_for_port(self.port, self.process)


@pytest.fixture
def own_proxy(demo_database: DemoDatabase, tmp_path: Path) -> Iterator[OwnProxy]:
    port = free_port()
    config_path, ledger_path = tmp_path / "dpgate.toml", tmp_path / "ledger.sqlite3"
    write_config(config_path, port, ledger_path, demo_database)
    add_analyst(config_path, ANALYST, PASSWORD, BUDGET)
    running = OwnProxy(config_path, ledger_path, port)
    running.start()
    yield running
    if running.process.poll() is None:
        running.process.terminate()
        running.process.wait(timeout=20)


@dataclass
class Burst:
    """Answers received by the clients, by statement; `enough` is set after a few."""

    answers: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    enough: threading.Event = field(default_factory=threading.Event)

    def client(self, dsn: str, index: int) -> None:
        """Ask distinct questions until the connection dies."""
        try:
            with psycopg.connect(dsn, autocommit=True) as connection:
                for n in range(10_000):
                    statement = (f"SELECT count(*) FROM orders WHERE product_id = "
                                 f"{index * 10_000 + n}")
                    value = connection.execute(statement).fetchone()[0]
                    self.received(statement, value)
        except psycopg.OperationalError:
            pass  # the proxy was killed

    def received(self, statement: str, value: int) -> None:
        with self.lock:
            self.answers[statement] = value
            if len(self.answers) >= KILL_AFTER_ANSWERS:
                self.enough.set()


def test_sigkill_mid_burst_loses_no_charge_and_the_proxy_serves_again(own_proxy: OwnProxy):
    burst = Burst()
    clients = [threading.Thread(target=burst.client, args=(own_proxy.dsn, i))
               for i in range(CLIENTS)]
    for client in clients:
        client.start()
    assert burst.enough.wait(timeout=120)
    assert own_proxy.process.poll() is None  # killed while the clients are still asking
    own_proxy.process.send_signal(signal.SIGKILL)
    own_proxy.process.wait(timeout=20)
    for client in clients:
        client.join(timeout=60)
    with burst.lock:
        received = dict(burst.answers)

    with sqlite3.connect(own_proxy.ledger_path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    ledger = SqliteLedger(own_proxy.ledger_path)
    charges = ledger.charges(ANALYST)
    by_statement = {charge.statement.strip(): charge for charge in charges}
    assert len(by_statement) == len(charges)  # one charge per question
    # Every answer a client saw was charged, and stored, before it was sent.
    assert all(by_statement[s].outcome == "answered" for s in received)
    # Charges without a received answer were in flight: they stay charged.
    assert {c.outcome for c in charges} <= {"answered", "charged"}
    budget = ledger.budget(ANALYST)
    assert budget.epsilon_spent == pytest.approx(sum(c.epsilon for c in charges))
    assert budget.queries == len(charges) and budget.epsilon_spent <= BUDGET

    own_proxy.start()
    statement, value = next(iter(received.items()))
    with psycopg.connect(own_proxy.dsn, autocommit=True) as connection:
        shown = connection.execute("SHOW dp.budget").fetchone()
        assert shown[1] == pytest.approx(budget.epsilon_spent) and shown[5] == len(charges)
        # The stored answer survived the crash: the same value again, for free; then a
        # question no client asked is answered and charged.
        assert connection.execute(statement).fetchone()[0] == value
        fresh = connection.execute("SELECT count(*) FROM orders WHERE quantity = 3")
        assert isinstance(fresh.fetchone()[0], int)
        after = connection.execute("SHOW dp.budget").fetchone()
    assert after[1] == pytest.approx(budget.epsilon_spent + 0.1)
    assert after[5] == len(charges) + 1
