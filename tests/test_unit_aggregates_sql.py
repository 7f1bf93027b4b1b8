"""The per-unit aggregates of unit mode's rewritten SQL (rewriter/aggregate/bounding.py)
run on PostgreSQL and checked against a count in Python of the same rows.

A lone count's histogram of per-unit row counts, a count histogram's (key, m, n, units)
(Gaussian) or (key, n, rows), and the weighted sums' (key, n, rows, sum) are what the
proxy answers from at any τ, so they must be exact: orders with random customers,
quantities and costs, some with no customer (a row of no unit, left out of every shape
alike). The counts' plans must read
the orders once and join nothing back to them: the rows are aggregated per unit, never
copied (bounding at the cost of a scan); a count histogram's rows by unit size and the
weighted sums read them twice (the units'
sizes, then the rows joined to them), where nothing can make the two reads differ.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from mechanisms.names import Mechanism
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.checks.plan_check import expected_scans, plan_failure
from rewriter.policy.session import with_session_noise
from rewriter.sql.functions import reads_alike
from tests.conftest import Postgres
from tests.test_unit_golden import METRICS
from tests.unit_support import demo_policy, measured_metrics

pytestmark = pytest.mark.end_to_end

# (customer_id or None, quantity 1…10, order_cost)
Order = tuple[int | None, int, Decimal]


@pytest.fixture(scope="module")
def orders(postgres: Postgres) -> Iterator[tuple[str, list[Order]]]:
    dsn = postgres.create_database("dpgate_unit_aggregates")
    draw = random.Random(29)
    rows: list[Order] = []
    for customer in range(1, 60):
        for _ in range(draw.choice([1, 1, 2, 3, 7, 40])):
            rows.append((customer, draw.randint(1, 10), Decimal(draw.randint(0, 6000)) / 4))
    rows += [(None, draw.randint(1, 10), Decimal(7)) for _ in range(5)]
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE customers (customer_id int PRIMARY KEY, name text, address text); "
            "CREATE TABLE products (product_id int PRIMARY KEY, name text, category text, "
            "price numeric); CREATE TABLE orders (order_id int PRIMARY KEY, customer_id int, "
            "product_id int, quantity int, order_cost numeric, order_date date)")
        connection.execute("INSERT INTO customers SELECT g, 'c', 'x' FROM "
                           "generate_series(1, 60) AS g")
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO orders VALUES (%s, %s, 1, %s, %s, DATE '2024-01-01')",
                [(i, unit, quantity, cost) for i, (unit, quantity, cost) in enumerate(rows)])
        connection.execute("ANALYZE")
    yield dsn, rows


def _run(dsn: str, sql: str, mechanism: str = Mechanism.SHIFTED_LAPLACE
         ) -> tuple[Any, list[tuple[Any, ...]], list[dict[str, Any]]]:
    plan = plan_private_aggregate(parse_query(sql), with_session_noise(demo_policy(), mechanism),
                                  0, measured_metrics(dsn))
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(plan.sql).fetchall()
        (explain,) = connection.execute(f"EXPLAIN (FORMAT JSON) {plan.sql}").fetchone()
    return plan, rows, list(_nodes(explain[0]["Plan"]))


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _reads_once_and_joins_nothing(nodes: list[dict[str, Any]]) -> None:
    assert [n.get("Relation Name") for n in nodes
            if n.get("Relation Name") == "orders"] == ["orders"]
    # The only join a grouped shape has is the declared domain's keys with the cells.
    joins = [n for n in nodes if n["Node Type"] in ("Hash Join", "Merge Join", "Nested Loop")]
    assert all(any(c.get("Function Name") == "generate_series" for c in _nodes(j))
               for j in joins)
    assert not any(n["Node Type"] in ("CTE Scan", "Materialize") for n in nodes)


def _sizes(rows: list[Order]) -> Counter[int]:
    return Counter(unit for unit, _, _ in rows if unit is not None)


def test_a_lone_counts_units_are_counted_exactly(orders: tuple[str, list[Order]]):
    dsn, rows = orders
    plan, result, nodes = _run(dsn, "SELECT count(*) FROM orders")
    assert plan.unit is not None and plan.unit.counts_cap is not None
    cap = plan.unit.counts_cap
    expected = Counter(min(n, cap) for n in _sizes(rows).values())  # no unit: left out
    assert {int(c): int(units) for c, units in result} == dict(expected)
    _reads_once_and_joins_nothing(nodes)


def test_a_count_histograms_cells_by_unit_are_exact(orders: tuple[str, list[Order]]):
    """Under the Gaussian mechanism (whole rows per unit and cell)."""
    dsn, rows = orders
    plan, result, nodes = _run(dsn, "SELECT quantity, count(*) FROM orders GROUP BY quantity",
                               Mechanism.GAUSSIAN)
    assert plan.checks.windows == 1 and "row_number" not in plan.sql
    sizes, cells = _sizes(rows), Counter((unit, q) for unit, q, _ in rows if unit is not None)
    expected = Counter((q, m, sizes[unit]) for (unit, q), m in cells.items())
    got = {(int(k), int(m), int(n)): int(units) for k, m, n, units in result if m is not None}
    assert got == dict(expected)
    empty = {int(k) for k, m, _, _ in result if m is None}
    assert empty == set(range(1, 11)) - {q for q, _, _ in expected}  # each key listed once
    _reads_once_and_joins_nothing(nodes)


def test_a_count_histograms_rows_by_unit_size_are_exact(orders: tuple[str, list[Order]]):
    """Under any other noise: per key and unit size n, the rows of units of n rows, read
    twice (the units' sizes, then the rows joined to them) with no window."""
    dsn, rows = orders
    plan, result, nodes = _run(dsn, "SELECT quantity, count(*) FROM orders GROUP BY quantity")
    assert plan.unit.cells_by_size and plan.checks.windows == 0 and len(plan.checks.reads) == 2
    assert not any(n["Node Type"] in ("WindowAgg", "CTE Scan", "Materialize") for n in nodes)
    sizes = _sizes(rows)
    expected = Counter((q, sizes[unit]) for unit, q, _ in rows if unit is not None)
    got = {(int(k), int(n)): int(count) for k, n, count in result if n is not None}
    assert got == dict(expected)
    empty = {int(k) for k, n, _ in result if n is None}
    assert empty == set(range(1, 11)) - {q for q, _ in expected}  # each key listed once


def test_weighted_sums_by_unit_size_are_exact(orders: tuple[str, list[Order]]):
    dsn, rows = orders
    plan, result, nodes = _run(dsn, "SELECT quantity, sum(order_cost) FROM orders "
                                    "GROUP BY quantity")
    assert plan.unit is not None and plan.unit.weights_cap is not None
    # Read twice (the units' sizes, then the rows joined to them), never copied.
    assert len(plan.checks.reads) == 2
    assert sum(n.get("Relation Name") == "orders" for n in nodes) == 2
    assert not any(n["Node Type"] in ("CTE Scan", "Materialize") for n in nodes)
    sizes = _sizes(rows)
    expected: defaultdict[tuple[int, int], list[Any]] = defaultdict(lambda: [0, Decimal(0)])
    for unit, quantity, cost in rows:
        if unit is not None:
            cell = expected[(quantity, sizes[unit])]
            cell[0] += 1
            cell[1] += min(max(cost, Decimal(0)), Decimal(5000))
    got: defaultdict[tuple[int, int], list[Any]] = defaultdict(lambda: [0, Decimal(0)])
    # key, n, the row count, the clamping bucket, its count, the sum; then the lone
    # SUM's presence count (docs/queries.md).
    for key, n, count, _bucket, _values, total, _presence in result:
        if n is not None:
            got[(int(key), int(n))][0] += int(count)
            got[(int(key), int(n))][1] += Decimal(total)
    assert dict(got) == dict(expected)


def test_rows_of_no_unit_are_left_out_by_the_sort_as_by_the_aggregates(
        orders: tuple[str, list[Order]]):
    """One rule for rows whose unit is NULL: the `row_number()` sort (a lone COUNT(x) keeps
    it) leaves them out as the per-unit aggregates do, so at zero noise a count agrees
    with the sum of a histogram's cells; before, the sort kept them as one unit."""
    dsn, rows = orders
    plan, result, _ = _run(dsn, "SELECT count(order_id) FROM orders")
    assert plan.unit is not None and "row_number" in plan.sql
    tau = plan.unit.max_contributions
    assert int(result[0][0]) == sum(min(n, tau) for n in _sizes(rows).values())
    # With no unit above the caps (40 rows at most), a lone count and the sum of a
    # histogram's cells are the same rows: the rows of units, none of no unit.
    _, counts, _ = _run(dsn, "SELECT count(*) FROM orders")
    _, cells, _ = _run(dsn, "SELECT quantity, count(*) FROM orders GROUP BY quantity",
                       Mechanism.GAUSSIAN)
    total = sum(int(c) * int(units) for c, units in counts)
    assert total == sum(int(m) * int(units) for _, m, _, units in cells if m is not None)
    assert total == len(rows) - 5


def test_the_plan_check_expects_the_second_read_and_no_third(orders: tuple[str, list[Order]]):
    dsn, _ = orders
    policy = demo_policy()
    plan = plan_private_aggregate(parse_query("SELECT sum(order_cost) FROM orders"), policy,
                                  0, measured_metrics(dsn))
    with psycopg.connect(dsn) as connection:
        (explain,) = connection.execute(f"EXPLAIN (VERBOSE, FORMAT JSON) {plan.sql}").fetchone()
        reads = [connection.execute(f"EXPLAIN (VERBOSE, FORMAT JSON) {read}").fetchone()[0]
                 for read in plan.checks.reads]
    checks = plan.checks
    assert len(checks.reads) == 2
    assert plan_failure(explain, expected_scans(checks), policy, checks.windows,
                        checks.join_keys) is None
    # Each read on its own scans orders once, as the analysis saw.
    assert all(plan_failure(read, expected_scans(checks, read=True), policy, 0,
                            checks.join_keys) is None for read in reads)
    once = replace(checks, reads=())
    assert "reads public.orders 2 time(s)" in str(plan_failure(
        explain, expected_scans(once), policy, once.windows, once.join_keys))


def test_rows_are_read_twice_only_where_the_reads_agree():
    # A draw or a clock read on private rows is refused by the analysis, and one without
    # a column is computed once before the statement (so both reads see one value); were
    # one ever to reach the rows, weights would keep the sort (one read).
    assert reads_alike(parse_query("SELECT sum(order_cost) FROM orders WHERE order_date "
                                   "< now()"))
    for where in ("random() < 0.5", "order_date < clock_timestamp()", "timeofday() > ''",
                  "random_normal(0, quantity) > 0"):
        assert not reads_alike(parse_query(f"SELECT sum(order_cost) FROM orders WHERE {where}"))
    assert not reads_alike(parse_query("SELECT sum(order_cost) FROM orders TABLESAMPLE "
                                       "BERNOULLI (50)"))
    plan = plan_private_aggregate(parse_query("SELECT sum(order_cost) FROM orders WHERE "
                                              "order_date < clock_timestamp()"),
                                  demo_policy(), 0, METRICS)
    assert len(plan.checks.reads) == 2 and "clock_timestamp" not in plan.sql.lower()


@pytest.mark.parametrize("sql", [
    "SELECT sum(o.order_cost) FROM orders o JOIN (SELECT product_id FROM products LIMIT 5) p "
    "ON p.product_id = o.product_id",
    "SELECT sum(o.order_cost) FROM orders o JOIN (SELECT product_id FROM products OFFSET 5) p "
    "ON p.product_id = o.product_id",
    "SELECT sum(o.order_cost) FROM orders o JOIN (SELECT DISTINCT ON (category) product_id "
    "FROM products) p ON p.product_id = o.product_id",
    "WITH p AS MATERIALIZED (SELECT product_id FROM products LIMIT 5) "
    "SELECT sum(o.order_cost) FROM orders o JOIN p ON p.product_id = o.product_id",
    "SELECT sum(o.order_cost) FROM orders o JOIN (SELECT product_id FROM products GROUP BY "
    "product_id HAVING avg(price) > 10) p ON p.product_id = o.product_id",
])
def test_queries_whose_rows_depend_on_scan_order_are_read_once(sql: str):
    """Which rows a LIMIT, OFFSET or DISTINCT ON keeps (and a float aggregate's digits)
    depend on the order a scan meets them in, which differs between two scans of one
    statement (synchronised sequential scans, parallel workers): a unit's size read once
    and its rows read again could then disagree, and it would weigh more than τ."""
    assert not reads_alike(parse_query(sql))
    plan = plan_private_aggregate(parse_query(sql), demo_policy(), 0, METRICS)
    assert plan.checks.reads == ()
