"""Issue 12's attack families against the running proxy: none may recover an exact value.

Each attack is asked the way a determined analyst would, and must be either refused before
any charge or answered with noise. Where the attack is an error or timing oracle, it is
asked twice — once with the hidden condition true and once false, thresholds just below and
above a private value read directly from PostgreSQL — and dpgate's outcome must be the same
both times: the analyst cannot tell which one held.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace

import psycopg
import pytest

from proxy.engine.plan_check import PlanChecker
from proxy.pgwire.backend import BackendConnection, Endpoint
from rewriter.analysis.classify import classify
from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from tests.conftest import DemoDatabase, RunningProxy
from tests.test_end_to_end import admin_scalar, connect
from tests.test_flex import POLICY
from tests.test_ledger_proxy import fresh_analyst

pytestmark = pytest.mark.end_to_end

SMALL_EPSILONS = ("0.001", "0.0011", "0.0012", "0.0013")
_distinct = itertools.count()


def outcome(connection: psycopg.Connection, sql: str) -> tuple[str, object]:
    """("answered", first value) or ("error", SQLSTATE); the session must stay usable."""
    try:
        row = connection.execute(sql).fetchone()
        result: tuple[str, object] = ("answered", row[0] if row else None)
    except psycopg.Error as error:
        result = ("error", error.sqlstate)
    assert result != ("error", "XX000"), sql
    assert connection.execute("SELECT 1").fetchone() == (1,)
    return result


def answers(proxy: RunningProxy, sql: str) -> list[tuple[str, object]]:
    """The attack asked at several tiny ε (distinct ε, so no free repeat)."""
    name = fresh_analyst(proxy, 1)
    results = []
    with connect(proxy.dsn(name, name)) as connection:
        for epsilon in SMALL_EPSILONS:
            connection.execute(f"SET dp.epsilon = {epsilon}")
            # A distinct comment would be normalized away; a distinct ε is a new question.
            results.append(outcome(connection, sql))
    return results


def assert_not_exact(proxy: RunningProxy, sql: str, exact: object) -> None:
    """Refused, or answered with noise: not every answer is the exact value."""
    results = answers(proxy, sql)
    if all(kind == "error" for kind, _ in results):
        return
    assert [value for _, value in results] != [exact] * len(results), (sql, results)


@pytest.fixture(scope="module")
def target(proxy: RunningProxy) -> tuple[int, float, int]:
    """A private fact to go after: an order's id, its exact cost and its customer."""
    order_id = 4242
    cost = float(admin_scalar(proxy, f"SELECT order_cost FROM orders WHERE order_id = {order_id}"))
    customer = admin_scalar(proxy, f"SELECT customer_id FROM orders WHERE order_id = {order_id}")
    return order_id, cost, int(customer)


def oracle_outcomes(proxy: RunningProxy, template: str, cost: float) -> set[tuple[str, object]]:
    """The attack's outcome class with the hidden condition false and true."""
    name = fresh_analyst(proxy, 1)
    classes = set()
    with connect(proxy.dsn(name, name)) as connection:
        for threshold in (cost + 0.005, cost - 0.005):  # cost > threshold: false, then true
            kind, value = outcome(connection, template.format(x=threshold))
            classes.add((kind, value if kind == "error" else None))
    return classes


# -- 1. names: quoted, sibling and nested CTEs, schema-qualified names -----------------

@pytest.mark.parametrize("sql", [
    'WITH "ORDERS" AS (SELECT product_id AS customer_id FROM products) '
    "SELECT count(*) FROM orders WHERE customer_id = {customer}",
    'WITH "Orders" AS (SELECT product_id AS customer_id FROM products) '
    "SELECT count(*) FROM Orders WHERE customer_id = {customer}",
    "WITH x AS (SELECT * FROM orders WHERE customer_id = {customer}), "
    "orders AS (SELECT * FROM products) SELECT count(*) FROM x",
    "WITH orders AS (SELECT * FROM orders WHERE customer_id = {customer}) "
    "SELECT count(*) FROM orders",
    "WITH a AS (SELECT * FROM orders WHERE customer_id = {customer}) SELECT count(*) FROM "
    "(WITH orders AS (SELECT * FROM products) SELECT * FROM a) d",
    "WITH orders AS (SELECT product_id AS customer_id FROM products) "
    "SELECT count(*) FROM public.orders WHERE customer_id = {customer}",
])
def test_cte_names_resolve_as_postgresql_does(proxy: RunningProxy, target, sql: str):
    _, _, customer = target
    exact = admin_scalar(proxy, f"SELECT count(*) FROM orders WHERE customer_id = {customer}")
    assert_not_exact(proxy, sql.format(customer=customer), exact)


# -- 2. column alias lists --------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM orders AS o(customer_id, product_id) WHERE o.customer_id = {order}",
    "WITH a(customer_id) AS (SELECT order_id FROM orders) "
    "SELECT count(*) FROM a WHERE customer_id = {order}",
    "SELECT count(*) FROM (SELECT order_id, customer_id FROM orders) AS d(customer_id, x) "
    "WHERE d.customer_id = {order}",
])
def test_alias_lists_rename_as_postgresql_does(proxy: RunningProxy, target, sql: str):
    order_id, _, _ = target
    assert_not_exact(proxy, sql.format(order=order_id), 1)


def test_an_alias_list_cannot_retype_a_summed_column(proxy: RunningProxy):
    name = fresh_analyst(proxy)
    with connect(proxy.dsn(name, name)) as connection:
        kind, state = outcome(connection, "SELECT sum(order_cost) FROM customers "
                                          "AS c(customer_id, order_cost)")
        # c.order_cost is customers.name: PostgreSQL has no sum(text) (42883), and it
        # has no bounds in the policy either (42501). Refused either way, for free.
        assert kind == "error" and state in ("42883", "42501")
        assert connection.execute("SHOW dp.budget").fetchone()[1] == 0


# -- 3. set-returning and window functions ----------------------------------------------

@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM (SELECT generate_series(1, 1000000) FROM orders "
    "WHERE customer_id = {customer}) s",
    "SELECT count(*) FROM (SELECT unnest(ARRAY[1, 2, 3]) FROM orders "
    "WHERE customer_id = {customer}) s",
    "SELECT count(*) FROM (SELECT order_id, count(*) OVER () AS n FROM orders "
    "WHERE customer_id = {customer}) s WHERE n > 3",
    "WITH w AS (SELECT row_number() OVER (ORDER BY order_id) AS r FROM orders "
    "WHERE customer_id = {customer}) SELECT count(*) FROM w",
    "SELECT count(*) FROM orders WHERE customer_id = {customer} AND "
    "order_id IN (SELECT generate_series(1, 100000))",
])
def test_row_multipliers_are_refused(proxy: RunningProxy, target, sql: str):
    _, _, customer = target
    name = fresh_analyst(proxy)
    with connect(proxy.dsn(name, name)) as connection:
        kind, _ = outcome(connection, sql.format(customer=customer))
        if kind == "error":
            assert connection.execute("SHOW dp.budget").fetchone()[1] == 0
            return
    # The IN over a public series is a legitimate filter: answered with noise.
    exact = admin_scalar(proxy, sql.format(customer=customer))
    assert_not_exact(proxy, sql.format(customer=customer), exact)


# -- 4. errors: the same outcome whatever the private condition -------------------------

ORACLES = [
    # a lazily evaluated public subquery that fails
    "SELECT count(*) FROM orders WHERE order_id = {id} AND order_cost > {{x}} AND "
    "quantity NOT IN (SELECT 1 / (p.product_id - p.product_id) FROM products p)",
    # a public subquery inside a CASE branch
    "SELECT count(*) FROM orders WHERE CASE WHEN order_id = {id} AND order_cost > {{x}} "
    "THEN quantity IN (SELECT 1 / (product_id - product_id) FROM products) ELSE TRUE END",
    # a setting that does not exist, read only in a branch
    "SELECT count(*) FROM orders WHERE CASE WHEN order_id = {id} AND order_cost > {{x}} "
    "THEN current_setting('no.such') = 'x' ELSE TRUE END",
    # a constant that overflows when computed
    "SELECT count(*) FROM orders WHERE CASE WHEN order_id = {id} AND order_cost > {{x}} "
    "THEN order_date < current_date + 2147483647 ELSE TRUE END",
    # a time zone PostgreSQL rejects when it first meets a row
    "SELECT count(*) FROM orders WHERE order_id = {id} AND order_cost > {{x}} AND "
    "date_trunc('day', order_date::timestamptz, 'No/Such_Zone') IS NOT NULL",
    # a DISTINCT ON key that divides by zero for the matching row only
    "SELECT count(*) FROM (SELECT DISTINCT ON (1 / (CASE WHEN order_cost > {{x}} THEN 0 "
    "ELSE 1 END)) order_id FROM orders WHERE order_id = {id}) s",
    # division by a private difference
    "SELECT count(*) FROM orders WHERE order_id = {id} AND "
    "100 / (CASE WHEN order_cost > {{x}} THEN 0 ELSE 1 END) > 0",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND order_cost / (order_cost - {{x}}) "
    "> 0",
    # a cast of text that fails for some rows only
    "SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
    "WHERE o.order_id = {id} AND CASE WHEN o.order_cost > {{x}} THEN c.name::int = 1 END",
    # integer overflow on a private value
    "SELECT count(*) FROM orders WHERE order_id = {id} AND "
    "(CASE WHEN order_cost > {{x}} THEN 2147483647 ELSE 0 END) + quantity > 0",
    # an error in a CTE the query never reads
    "WITH unused AS (SELECT 1 / (CASE WHEN order_cost > {{x}} THEN 0 ELSE 1 END) FROM orders "
    "WHERE order_id = {id}) SELECT count(*) FROM orders",
    # a scalar subquery with more than one row
    "SELECT count(*) FROM orders WHERE CASE WHEN order_id = {id} AND order_cost > {{x}} "
    "THEN quantity = (SELECT product_id FROM products) ELSE TRUE END",
    # a heavy public join in a branch: its time would tell
    "SELECT count(*) FROM orders WHERE CASE WHEN order_id = {id} AND order_cost > {{x}} "
    "THEN (SELECT count(*) FROM products a, products b, products c WHERE a.product_id + "
    "b.product_id = c.product_id) > 0 ELSE TRUE END",
]


@pytest.mark.parametrize("template", ORACLES)
def test_errors_and_timing_do_not_depend_on_private_rows(proxy: RunningProxy, target,
                                                         template: str):
    order_id, cost, _ = target
    classes = oracle_outcomes(proxy, template.format(id=order_id), cost)
    assert len(classes) == 1, classes  # the same outcome whichever way the condition goes
    (kind, state), = classes
    assert state != "22000", "a failure after the charge is the last resort, not the rule"


# -- 5. the plan check catches an analysis that misread the statement ------------------

async def _plan_check(database: DemoDatabase, policy, plan: PrivateAggregate) -> str | None:
    """Why the proxy's plan check refuses `plan` on the demo database, or None."""
    backend = await BackendConnection.connect(Endpoint.from_dsn(database.reader_dsn))
    try:
        await PlanChecker(policy).prepare(backend, plan, None)
        return None
    except Refusal as refusal:
        return refusal.message
    finally:
        backend.close()


def test_postgresqls_plan_catches_a_private_scan_the_analysis_missed(
        demo_database: DemoDatabase):
    (statement,) = classify("SELECT count(*) FROM orders WHERE quantity > 3", POLICY)
    plan = statement.plan
    assert isinstance(plan, PrivateAggregate) and plan.checks.scans == ("public.orders",)

    def check(plan: PrivateAggregate) -> str | None:
        return asyncio.run(_plan_check(demo_database, POLICY, plan))

    assert check(plan) is None
    # As if the analysis had resolved `orders` to a public CTE: it would have counted no scan.
    missed = check(replace(plan, checks=replace(plan.checks, scans=())))
    assert missed is not None and "public.orders 1 time(s)" in missed
    # As if it had missed a set-returning function in the rewritten SQL.
    multiplied = replace(plan, sql=plan.sql.replace('COUNT(*) AS "c0"',
                                                    'COUNT(*) AS "c0", generate_series(1, 2)'))
    assert "set-returning" in str(check(multiplied))


def test_each_read_of_a_weighted_sum_is_checked_on_its_own(demo_database: DemoDatabase):
    """A weighted sum reads its rows twice (PlanChecks.reads), so the statement may scan
    orders twice; pooled over the reads, one read scanning it twice would pass where the
    other scans it not at all (as when PostgreSQL removes a join unused there)."""
    from tests.unit_support import demo_policy

    policy = demo_policy()
    (statement,) = classify("SELECT sum(order_cost) FROM orders", policy)
    plan = statement.plan
    assert isinstance(plan, PrivateAggregate) and len(plan.checks.reads) == 2

    def check(plan: PrivateAggregate) -> str | None:
        return asyncio.run(_plan_check(demo_database, policy, plan))

    assert check(plan) is None
    # As if the analysis had missed a second scan in one read, the other reading none.
    twice = ('SELECT customer_id AS "_dp_unit" FROM public.orders UNION ALL '
             'SELECT customer_id FROM public.orders')
    none = 'SELECT 1 AS "_dp_unit"'
    skewed = replace(plan, sql=f"SELECT count(*) FROM ({twice}) AS q, ({none}) AS u",
                     checks=replace(plan.checks, reads=(twice, none)))
    refused = check(skewed)
    assert refused is not None and "reads public.orders 2 time(s) where dpgate's analysis " \
        "saw 1" in refused


def test_a_histogram_over_a_public_domain_is_capped_before_the_charge(
        demo_database: DemoDatabase):
    """orders.product_id takes its keys from products (1,000 of them): counted by the proxy
    before anything runs, against max_cells (issue 14: every domain kind is capped)."""
    sql = "SELECT product_id, count(*) FROM orders GROUP BY product_id"

    async def check(max_cells: int) -> str | None:
        policy = replace(POLICY, max_cells=max_cells)
        (statement,) = classify(sql, policy)
        plan = statement.plan
        assert isinstance(plan, PrivateAggregate) and plan.checks.cells_sql is not None
        backend = await BackendConnection.connect(Endpoint.from_dsn(demo_database.reader_dsn))
        try:
            await PlanChecker(policy).prepare(backend, plan, None)
            return None
        except Refusal as refusal:
            return f"{refusal.sqlstate}: {refusal.message}"
        finally:
            backend.close()

    assert asyncio.run(check(1000)) is None
    assert asyncio.run(check(999)) == ("42501: the histogram's public domain has more keys "
                                       "than the 999 cells the policy allows")
