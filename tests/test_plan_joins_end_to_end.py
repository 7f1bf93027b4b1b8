"""PostgreSQL's join columns against dpgate's analysis, with a real PostgreSQL (issue 12).

dpgate's engine runs in-process on the demo database, with its own ledger: a join read as
the analysis read it is answered and charged; the same statement with an analysis that took
a join key's frequency from another column is refused before the charge (plan_joins.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from accounting import Analyst, ScramVerifier, SqliteLedger
from mechanisms.random_source import SecureRandomSource
from proxy.config import Config
from proxy.engine.dispatch import Engine
from proxy.engine.errors import StatementError
from proxy.engine.knowledge import Knowledge
from proxy.engine.outcome import Answer
from proxy.engine.plan_cache import PlanCache
from proxy.engine.plan_check import PlanChecker
from proxy.engine.planning import Planner
from proxy.engine.workers import Workers
from proxy.pgwire import wire
from proxy.pgwire.backend import BackendConnection, BackendPool, Endpoint
from proxy.pgwire.running import Running
from rewriter.analysis.classify import classify
from rewriter.checks.plan_joins import JoinKeys
from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from rewriter.sensitivity.metrics import Metrics
from tests.conftest import DemoDatabase
from tests.test_flex import POLICY
from tests.unit_support import measured_metrics

pytestmark = pytest.mark.end_to_end

JOIN = ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
        "WHERE c.address <> 'nowhere'")


@pytest.fixture(scope="module")
def metrics(demo_database: DemoDatabase) -> Metrics:
    """The catalog's column order, which a column alias list is read by."""
    return measured_metrics(demo_database.admin_dsn)


def plan_of(sql: str, metrics: Metrics | None = None) -> PrivateAggregate:
    (statement,) = classify(sql, POLICY, metrics)
    assert isinstance(statement.plan, PrivateAggregate), statement.plan
    return statement.plan


def with_join_keys(plan: PrivateAggregate, keys: JoinKeys) -> PrivateAggregate:
    """The plan as if the analysis had read `keys` as its join columns."""
    return dataclasses.replace(plan, checks=dataclasses.replace(plan.checks, join_keys=keys))


def checked(database: DemoDatabase, plan: PrivateAggregate) -> str | None:
    """The plan check's refusal of `plan` on the real PostgreSQL, or None."""
    async def check() -> str | None:
        backend = await BackendConnection.connect(Endpoint.from_dsn(database.reader_dsn))
        try:
            await PlanChecker(POLICY).prepare(backend, plan, None)
            return None
        except Refusal as refusal:
            return f"{refusal.sqlstate}: {refusal.message}"
        finally:
            backend.close()
    return asyncio.run(check())


@pytest.mark.parametrize("sql", [
    JOIN,
    "SELECT count(*) FROM orders JOIN customers USING (customer_id)",
    "SELECT count(*) FROM orders o, customers c WHERE o.customer_id = c.customer_id",
    "SELECT p.category, count(*) FROM orders o JOIN products p "
    "ON o.product_id = p.product_id GROUP BY p.category",
    "SELECT count(*) FROM orders o JOIN recommendations r ON o.customer_id = r.customer_id "
    "AND o.product_id = r.product_id",
    "WITH c AS (SELECT customer_id FROM customers WHERE address <> 'x') "
    "SELECT count(*) FROM orders o JOIN c ON c.customer_id = o.customer_id",
    "SELECT count(*) FROM orders o JOIN (SELECT customer_id, count(*) AS n FROM "
    "recommendations GROUP BY customer_id) s ON s.customer_id = o.customer_id",
    "SELECT count(*) FROM orders AS o(a, b) JOIN customers c ON o.b = c.customer_id",
    "SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
    "JOIN recommendations r ON r.customer_id = c.customer_id",
    # PostgreSQL pushes the join into the branches of a UNION ALL: r.customer_id = ….
    "SELECT count(*) FROM orders o JOIN (SELECT r.customer_id, r.product_id FROM "
    "recommendations r UNION ALL SELECT c.customer_id, 1 FROM customers c) s "
    "ON s.customer_id = o.customer_id",
    "SELECT count(*) FROM orders o, customers c, recommendations r WHERE o.customer_id = "
    "c.customer_id AND r.customer_id = c.customer_id AND o.product_id = r.product_id",
    "WITH r AS (SELECT customer_id FROM recommendations) SELECT count(*) FROM orders o "
    "JOIN r r1 ON r1.customer_id = o.customer_id JOIN r r2 ON r2.customer_id = o.customer_id",
    "SELECT sum(o.quantity) FROM orders o JOIN products p ON o.product_id = p.product_id "
    "WHERE p.category = 'x'",
    # Group keys: key selection, a domain, derived GROUP BY and DISTINCT, a choice.
    "SELECT customer_id, count(*) FROM orders GROUP BY customer_id",
    "SELECT product_id, count(*) FROM orders GROUP BY product_id",
    "SELECT count(*) FROM (SELECT customer_id, count(*) AS n FROM orders GROUP BY 1) s "
    "WHERE n > 3",
    "SELECT count(*) FROM orders o JOIN (SELECT DISTINCT customer_id FROM recommendations) s "
    "ON s.customer_id = o.customer_id",
    "SELECT mode() WITHIN GROUP (ORDER BY product_id) FROM orders",
])
def test_joins_read_as_postgresql_reads_them_pass(demo_database: DemoDatabase,
                                                  metrics: Metrics, sql: str):
    plan = plan_of(sql, metrics)
    assert plan.checks.join_keys is not None
    assert plan.checks.join_keys.columns or plan.checks.join_keys.groups
    assert checked(demo_database, plan) is None


def test_the_analysis_exports_the_columns_it_joined_on(metrics: Metrics):
    keys = plan_of("SELECT count(*) FROM orders AS o(a, b) JOIN customers c "
                   "ON o.b = c.customer_id", metrics).checks.join_keys
    assert keys is not None
    assert keys.columns == {("public.orders", "customer_id"),
                            ("public.customers", "customer_id")}
    assert ("public.orders", "o", (("a", "order_id"), ("b", "customer_id"),
                                   ("product_id", "product_id"), ("quantity", "quantity"),
                                   ("order_cost", "order_cost"),
                                   ("order_date", "order_date"))) in keys.renamed


def test_a_union_all_column_joins_on_every_branchs_column(metrics: Metrics):
    keys = plan_of("SELECT count(*) FROM orders o JOIN (SELECT r.customer_id FROM "
                   "recommendations r UNION ALL SELECT c.customer_id FROM customers c) s "
                   "ON s.customer_id = o.customer_id", metrics).checks.join_keys
    assert keys is not None and keys.columns == {("public.orders", "customer_id"),
                                                 ("public.recommendations", "customer_id"),
                                                 ("public.customers", "customer_id")}


def test_an_analysis_that_took_another_join_column_is_refused(demo_database: DemoDatabase,
                                                              metrics: Metrics):
    """As if dpgate had resolved o.customer_id to orders.order_id (maxFreq 1, not 100)."""
    plan = plan_of(JOIN)
    wrong = with_join_keys(plan, JoinKeys(frozenset({
        ("public.orders", "order_id"), ("public.customers", "customer_id")})))
    refusal = checked(demo_database, wrong)
    assert refusal is not None and refusal.startswith("0A000: ")
    assert "joins public.orders on column customer_id" in refusal
    # As if an alias list had been read with stale metrics (product_id second): o.b
    # taken for orders.product_id. The catalog's order says customer_id.
    aliased = plan_of("SELECT count(*) FROM orders AS o(a, b) JOIN customers c "
                      "ON o.b = c.customer_id", metrics)
    assert aliased.checks.join_keys is not None and checked(demo_database, aliased) is None
    stale = ("order_id", "product_id", "customer_id", "quantity", "order_cost", "order_date")
    misread = with_join_keys(aliased, JoinKeys(
        frozenset({("public.orders", "product_id"), ("public.customers", "customer_id")}),
        (("public.orders", "o", tuple(zip(("a", "b", *stale[2:]), stale, strict=True))),)))
    refusal = checked(demo_database, misread)
    assert refusal is not None and "column alias list of o" in refusal


def test_an_analysis_that_grouped_on_another_column_is_refused(demo_database: DemoDatabase):
    """As if dpgate had read the group key customer_id as order_id."""
    plan = plan_of("SELECT customer_id, count(*) FROM orders GROUP BY customer_id")
    assert plan.checks.join_keys is not None
    assert plan.checks.join_keys.groups == {("public.orders", "customer_id")}
    assert checked(demo_database, plan) is None
    wrong = with_join_keys(plan, dataclasses.replace(
        plan.checks.join_keys, groups=frozenset({("public.orders", "order_id")})))
    refusal = checked(demo_database, wrong)
    assert refusal == ("0A000: PostgreSQL's plan groups on public.orders.customer_id, which "
                       "dpgate's analysis did not take as a group key: the plan and the "
                       "analysis disagree on the statement's columns")


@pytest.fixture
def engine(demo_database: DemoDatabase, tmp_path: Path):
    config = dataclasses.replace(Config(), policy=POLICY)
    ledger = SqliteLedger(tmp_path / "ledger.sqlite3")
    analyst = Analyst("ada", ScramVerifier(b"s", b"k", b"k", 4096), 2.0, 1e-6, 1.0)
    ledger.add_analyst(analyst)
    pool = BackendPool(Endpoint.from_dsn(demo_database.reader_dsn), size=1)
    workers = Workers()
    planner = Planner(config, Knowledge(ledger), PlanCache(), pool, workers)
    yield Engine(analyst, config, ledger, pool, SecureRandomSource(), planner,
                 PlanChecker(POLICY), workers, Running()), ledger
    workers.close()


def test_a_refused_join_charges_nothing_and_a_good_one_is_charged(engine):
    running, ledger = engine
    plan = plan_of(JOIN)
    wrong = with_join_keys(plan, JoinKeys(frozenset({
        ("public.orders", "order_id"), ("public.customers", "customer_id")})))

    async def both() -> tuple[StatementError, Answer | None, Any]:
        # One event loop for both: the engine's backend pool belongs to it.
        try:
            await running.execute(JOIN, wrong)
        except StatementError as error:
            refused = error
        charged_before = (ledger.charges("ada"), ledger.budget("ada").epsilon_spent)
        answer = await running.execute(JOIN, plan)
        return refused, answer if isinstance(answer, Answer) else None, charged_before

    refused, answer, (charges, spent) = asyncio.run(both())
    fields = wire.parse_error_fields(refused.to_response()[5:])
    assert fields["C"] == "0A000" and "disagree" in fields["M"]
    assert charges == [] and spent == 0
    assert isinstance(answer, Answer) and len(answer.rows) == 1
    assert len(ledger.charges("ada")) == 1 and ledger.budget("ada").epsilon_spent > 0
