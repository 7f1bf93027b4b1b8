"""Three `dpgate serve` processes on one PostgreSQL ledger: one analyst's sessions racing
through all of them never overspend, a proxy killed mid-load loses no charge of an answer
it sent, an outdated ledger keeps a proxy from starting, and an unreachable ledger fails
private statements (nothing released) while catalog traffic goes on."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from accounting import Charged, ChargeRequest
from accounting.postgres_schema import MIGRATIONS
from tests.conftest import DemoDatabase, Postgres, start_proxy
from tests.fleet import Fleet, write_fleet

pytestmark = pytest.mark.end_to_end

PROXIES = 3
SESSIONS = 30
FITTING = 15  # the budget holds exactly this many answers of epsilon 0.1


@pytest.fixture
def fleet(demo_database: DemoDatabase, ledger_database: str, tmp_path: Path
          ) -> Iterator[Fleet]:
    running = write_fleet(tmp_path, demo_database, ledger_database, PROXIES, health=True)
    for index in range(PROXIES):
        running.start(index)
    yield running
    running.stop()


async def ask_once(dsn: str, index: int, connected: asyncio.Barrier
                   ) -> tuple[str, int | None, str | None]:
    statement = f"SELECT count(*) FROM orders WHERE product_id = {200 + index}"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
        await connection.execute("SET dp.epsilon = 0.1")
        await connected.wait()  # every session is connected before any asks
        try:
            row = await (await connection.execute(statement)).fetchone()
            return statement, row[0], None
        except psycopg.Error as error:
            return statement, None, error.sqlstate


def test_thirty_sessions_on_three_proxies_get_exactly_the_answers_that_fit(fleet: Fleet):
    name, password = fleet.add_analyst(FITTING * 0.1)

    async def race() -> list[tuple[str, int | None, str | None]]:
        connected = asyncio.Barrier(SESSIONS)
        return await asyncio.wait_for(asyncio.gather(*(
            ask_once(fleet.dsn(i % PROXIES, name, password), i, connected)
            for i in range(SESSIONS))), timeout=180)

    outcomes = asyncio.run(race())
    answered = [statement for statement, value, _ in outcomes if value is not None]
    assert len(answered) == FITTING
    assert Counter(code for _, value, code in outcomes if value is None) == {
        "53400": SESSIONS - FITTING}
    charges = fleet.ledger().charges(name)
    assert sorted(c.statement.strip() for c in charges) == sorted(answered)
    assert {c.outcome for c in charges} == {"answered"}
    budget = fleet.ledger().budget(name)
    assert budget.queries == FITTING and budget.epsilon_left == 0.0
    # Each proxy answered some of them: the race really went through all three.
    with psycopg.connect(fleet.ledger_url) as connection:
        proxies = connection.execute(
            f"SELECT count(DISTINCT proxy) FROM {fleet.schema}.charges WHERE analyst = %s",
            (name,)).fetchone()[0]
    assert proxies >= 2


class Load:
    """Clients asking distinct questions in a loop until told to stop or disconnected."""

    def __init__(self) -> None:
        self.received: dict[str, tuple[int, int]] = {}  # statement -> (proxy, value)
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def client(self, dsn: str, proxy: int, index: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as connection:
                for n in range(100_000):
                    if self.stop.is_set():
                        return
                    statement = (f"SELECT count(*) FROM orders WHERE product_id = "
                                 f"{index * 100_000 + n}")
                    value = connection.execute(statement).fetchone()[0]
                    with self.lock:
                        self.received[statement] = (proxy, value)
        except psycopg.OperationalError:
            pass  # this client's proxy was killed

    def count(self, proxy: int | None = None) -> int:
        with self.lock:
            return sum(1 for p, _ in self.received.values() if proxy in (None, p))


def wait_until(condition, seconds: float = 120) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_proxy_killed_mid_load_loses_no_charge_and_the_others_go_on(fleet: Fleet):
    name, password = fleet.add_analyst(10_000.0)
    load = Load()
    clients = [threading.Thread(target=load.client,
                                args=(fleet.dsn(i % PROXIES, name, password), i % PROXIES, i))
               for i in range(3 * PROXIES)]
    for client in clients:
        client.start()
    try:
        assert wait_until(lambda: load.count(0) >= 10 and load.count() >= 30)
        victim = fleet.processes[0]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=20)
        at_kill = load.count()
        # The two others keep answering the same analyst.
        assert wait_until(lambda: load.count(1) + load.count(2) >= at_kill + 30 - load.count(0))
    finally:
        load.stop.set()
        for client in clients:
            client.join(timeout=60)

    ledger = fleet.ledger()
    charges = ledger.charges(name)
    by_statement = {c.statement.strip(): c for c in charges}
    assert len(by_statement) == len(charges)  # one charge per question
    with load.lock:
        received = dict(load.received)
    # Every answer a client received was charged and stored before it was sent.
    assert all(by_statement[s].outcome == "answered" for s in received)
    # Charges still `charged` were in flight on the killed proxy, and only there.
    with psycopg.connect(fleet.ledger_url) as connection:
        in_flight = connection.execute(
            f"SELECT DISTINCT proxy FROM {fleet.schema}.charges WHERE analyst = %s"
            " AND outcome = 'charged'", (name,)).fetchall()
    assert all(proxy.endswith(f":{victim.pid}") for (proxy,) in in_flight)
    budget = ledger.budget(name)
    assert budget.queries == len(charges)
    assert budget.epsilon_spent == pytest.approx(sum(c.epsilon for c in charges))
    # A repeat through a surviving proxy of a question the dead one answered: free.
    statement = next(s for s, (proxy, _) in received.items() if proxy == 0)
    with psycopg.connect(fleet.dsn(1, name, password), autocommit=True) as connection:
        assert connection.execute(statement).fetchone()[0] == received[statement][1]
        assert connection.execute("SHOW dp.budget").fetchone()[5] == len(charges)


def test_a_proxy_refuses_to_start_on_an_outdated_ledger(fleet: Fleet):
    fleet.stop()
    with psycopg.connect(fleet.ledger_url, autocommit=True) as connection:
        connection.execute(f"UPDATE {fleet.schema}.version SET version = 1")
        connection.execute(f"ALTER TABLE {fleet.schema}.charges DROP COLUMN proxy")
    process = start_proxy(fleet.configs[0])
    assert process.wait(timeout=60) == 1
    log = process.log_path.read_text()  # type: ignore[attr-defined]
    assert "is at version 1 of" in log and "dpgate ledger upgrade --config" in log
    upgraded = fleet.cli("ledger", "upgrade")
    assert upgraded.returncode == 0 and f"version {len(MIGRATIONS)}" in upgraded.stdout
    fleet.start(0)  # starts now


def test_an_unreachable_ledger_fails_private_statements_but_not_catalog_traffic(
        fleet: Fleet, postgres: Postgres):
    name, password = fleet.add_analyst(10.0)
    database = fleet.ledger_url.split("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(fleet.dsn(0, name, password), autocommit=True) as analyst, \
            psycopg.connect(postgres.admin_dsn, autocommit=True) as admin:
        assert analyst.execute("SELECT count(*) FROM orders WHERE quantity = 1").fetchone()
        assert health(fleet, 0) == (200, {"proxy": "ok", "ledger": "ok", "backend": "ok"})
        # The ledger's database stops taking connections and drops those it has.
        admin.execute(f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
        try:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = %s AND pid <> pg_backend_pid()", (database,))
            with pytest.raises(psycopg.OperationalError) as failed:
                analyst.execute("SELECT count(*) FROM orders WHERE quantity = 2").fetchone()
            assert failed.value.sqlstate == "08006"
            assert "privacy ledger" in str(failed.value)
            # The session stays usable, and relayed catalog traffic still works.
            tables = analyst.execute("SELECT count(*) FROM pg_catalog.pg_class"
                                     " WHERE relname = 'orders'").fetchone()
            assert tables == (1,)
            with pytest.raises(psycopg.OperationalError) as refused:
                psycopg.connect(fleet.dsn(1, name, password))
            assert "privacy ledger" in str(refused.value)
            # The load balancer is told, so it can drain this proxy.
            status, body = health(fleet, 1)
            assert status == 503 and body["ledger"] == "LedgerUnavailable"
            assert body["backend"] == "ok"
        finally:
            admin.execute(f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
        # Back: the same question is charged and answered; the failed one cost nothing.
        assert analyst.execute("SELECT count(*) FROM orders WHERE quantity = 2").fetchone()
        assert analyst.execute("SHOW dp.budget").fetchone()[5] == 2
    assert health(fleet, 1)[0] == 200


def health(fleet: Fleet, index: int) -> tuple[int, dict[str, str]]:
    """GET /health of proxy `index`: the status and the JSON body."""
    url = f"http://127.0.0.1:{fleet.health_ports[index]}/health"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_spend_budgets_and_rotations_apply_on_every_proxy_at_once(fleet: Fleet):
    """Nothing of the ledger is cached in a proxy: a charge on one, `budget apply` or
    `user rotate-shift` by the CLI show on the others' next statement."""
    name, password = fleet.add_analyst(1.0)
    outcome = fleet.ledger().charge_or_repeat(
        ChargeRequest(name, "elsewhere", "f", 0.7, 0.0, "laplace", 1.0))
    assert isinstance(outcome, Charged)
    sessions = [psycopg.connect(fleet.dsn(i, name, password), autocommit=True)
                for i in range(PROXIES)]
    try:
        assert [c.execute("SHOW dp.budget").fetchone()[1] for c in sessions] == \
            pytest.approx([0.7] * PROXIES)
        question = "SELECT count(*) FROM orders WHERE product_id = 5"
        first = sessions[0].execute(question).fetchone()[0]
        assert sessions[1].execute(question).fetchone()[0] == first  # a free repeat
        rotated = fleet.cli("user", "rotate-shift", name)
        assert rotated.returncode == 0, rotated.stderr
        sessions[2].execute(question).fetchone()  # stored answer dropped: charged again
        assert sessions[1].execute("SHOW dp.budget").fetchone()[1] == pytest.approx(0.9)
        plan = fleet.configs[0].parent / "plan.json"
        plan.write_text(json.dumps({"alpha": {"kind": "exponential", "epsilon": 5.0},
                                    "analysts": [{"name": name, "p": 1, "epsilon": 5.0}]}))
        applied = fleet.cli("budget", "apply", str(plan))
        assert applied.returncode == 0, applied.stderr
        assert [c.execute("SHOW dp.budget").fetchone()[0] for c in sessions] == \
            pytest.approx([5.0] * PROXIES)
    finally:
        for connection in sessions:
            connection.close()

