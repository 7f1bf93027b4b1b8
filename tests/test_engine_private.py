"""The engine's private answers in-process, against the real PostgreSQL and a real SQLite
ledger: no backend connection is held while the ledger commits, and the answer and its
charge are recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path

from accounting import Analyst, ChargeRequest, ScramVerifier, SqliteLedger
from mechanisms.random_source import SecureRandomSource
from proxy.config import Config
from proxy.engine.dispatch import Engine
from proxy.engine.knowledge import Knowledge
from proxy.engine.outcome import Answer
from proxy.engine.plan_cache import PlanCache
from proxy.engine.plan_check import PlanChecker
from proxy.engine.planning import Planner
from proxy.engine.workers import Workers
from proxy.pgwire.backend import BackendPool, Endpoint
from proxy.pgwire.running import Running
from tests.conftest import DemoDatabase
from tests.test_flex import POLICY


class WatchedLedger(SqliteLedger):
    """Notes how many backend connections were lent while each write transaction ran."""

    def __init__(self, path: Path, pool: BackendPool):
        super().__init__(path)
        self.pool = pool
        self.lent_during: dict[str, int] = {}

    def charge_or_repeat(self, request: ChargeRequest):  # type: ignore[override]
        self.lent_during["charge"] = self.pool.lent
        return super().charge_or_repeat(request)

    def record_answer(self, charge_id: int, rows: list[list[object]]) -> None:
        self.lent_during["answer"] = self.pool.lent
        super().record_answer(charge_id, rows)


def test_no_backend_connection_is_held_while_the_ledger_commits(
        demo_database: DemoDatabase, tmp_path: Path) -> None:
    async def ask() -> tuple[WatchedLedger, Answer]:
        config = Config(policy=POLICY)
        pool = BackendPool(Endpoint.from_dsn(demo_database.reader_dsn), size=1)
        ledger = WatchedLedger(tmp_path / "ledger.sqlite3", pool)
        analyst = Analyst("watched", ScramVerifier(b"s", b"k", b"k", 4096), 10.0, 1e-6, 1.0)
        ledger.add_analyst(analyst)
        workers = Workers()
        planner = Planner(config, Knowledge(ledger), PlanCache(), pool, workers)
        engine = Engine(analyst, config, ledger, pool, SecureRandomSource(), planner,
                        PlanChecker(POLICY), workers, Running())
        try:
            sql = ("SELECT count(*) * 100.0 / 7 AS share FROM orders "
                   "WHERE product_id = 3 HAVING count(*) >= 0")
            (statement,) = await engine.statements(sql)
            answer = await engine.execute(statement.text, statement.plan)
            assert isinstance(answer, Answer)
            return ledger, answer
        finally:
            pool.close()
            workers.close()

    ledger, answer = asyncio.run(ask())
    # With a pool of one, a connection held across the commit would show as 1 here.
    assert ledger.lent_during == {"charge": 0, "answer": 0}
    assert [name for name, _ in answer.columns] == ["share"]
    assert len(answer.rows) == 1 and answer.notice and "charged epsilon" in answer.notice
    (charge,) = ledger.charges("watched")
    assert charge.outcome == "answered"
