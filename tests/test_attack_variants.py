"""More attack variants of issue 12, written for the audit: none may recover an exact value.

Each statement goes after one private fact (how many orders customer 1 placed, whether an
order's cost is above a threshold) through a construct the first attack suite did not
try: schema-qualified and quoted names, search_path, nested and sibling CTEs, LATERAL,
VALUES, recursive CTEs, grouping sets, DISTINCT ON, ORDER BY/LIMIT inside derived tables,
window functions in HAVING, data-modifying CTEs, subqueries in GROUP BY, LIMIT and OFFSET,
COLLATE, array and JSON functions, NUMERIC overflow and casts with a precision.

An attack passes when every answer is refused, or when the answers at several ε are not
all the exact value; an error-oracle passes when dpgate's outcome is the same whether the
hidden condition holds or not, and is never the generic 22000 after a charge.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from rewriter.analysis.classify import classify
from rewriter.plan import PrivateAggregate
from tests.conftest import RunningProxy
from tests.test_end_to_end import admin_scalar, connect
from tests.test_exact_answer_attacks import oracle_outcomes, outcome
from tests.test_flex import POLICY
from tests.test_ledger_proxy import fresh_analyst

pytestmark = pytest.mark.end_to_end

CUSTOMER = 1
EPSILONS = ("0.001", "0.0011", "0.0012")
ORDER = 4242


@pytest.fixture(scope="module")
def analyst(proxy: RunningProxy) -> Iterator[psycopg.Connection]:
    """One analyst's session with budget for every attack of this module."""
    name = fresh_analyst(proxy, 100)
    with connect(proxy.dsn(name, name)) as connection:
        yield connection


@pytest.fixture(scope="module")
def exact_count(proxy: RunningProxy) -> int:
    return int(admin_scalar(proxy, f"SELECT count(*) FROM orders WHERE customer_id = {CUSTOMER}"))


@pytest.fixture(scope="module")
def cost(proxy: RunningProxy) -> float:
    return float(admin_scalar(proxy, f"SELECT order_cost FROM orders WHERE order_id = {ORDER}"))


def _asked(connection: psycopg.Connection, sql: str) -> list[tuple[str, object]]:
    """The statement at several ε (a new ε is a new question: no free repeat)."""
    results = []
    for epsilon in EPSILONS:
        connection.execute(f"SET dp.epsilon = {epsilon}")
        results.append(outcome(connection, sql))
    connection.execute("RESET search_path")
    return results


def _not_exact(connection: psycopg.Connection, sql: str, exact: object) -> list:
    results = _asked(connection, sql)
    answered = [value for kind, value in results if kind == "answered"]
    assert not answered or answered != [exact] * len(results), (sql, results)
    return results


# -- statements after customer 1's exact order count; refused or noisy -----------------

COUNT_ATTACKS = [
    # names
    'SELECT count(*) FROM "public"."orders" WHERE customer_id = {c}',
    "SELECT count(*) FROM dpgate_e2e.public.orders WHERE customer_id = {c}",
    "SELECT count(*) FROM ONLY orders WHERE customer_id = {c}",
    'WITH "orders" AS (SELECT * FROM orders WHERE customer_id = {c}) SELECT count(*) FROM orders',
    "WITH a AS (WITH orders AS (SELECT product_id AS customer_id FROM products) "
    "SELECT * FROM public.orders WHERE customer_id = {c}) SELECT count(*) FROM a",
    "WITH a AS (SELECT * FROM orders WHERE customer_id = {c}), "
    "b AS (WITH a AS (SELECT product_id FROM products) SELECT * FROM a) "
    "SELECT count(*) FROM a",
    "WITH b AS (SELECT * FROM a), a AS (SELECT * FROM orders WHERE customer_id = {c}) "
    "SELECT count(*) FROM b",
    "WITH RECURSIVE r(n) AS (SELECT order_id FROM orders WHERE customer_id = {c} "
    "UNION ALL SELECT n + 1 FROM r WHERE n < 10) SELECT count(*) FROM r",
    # alias lists at every level
    "SELECT count(*) FROM (SELECT * FROM orders) AS d(order_id, customer_id) "
    "WHERE customer_id = {c}",
    "WITH w(customer_id) AS (SELECT customer_id FROM orders) "
    "SELECT count(*) FROM w AS v(order_id) WHERE order_id = {c}",
    "SELECT count(*) FROM orders o JOIN customers AS c(order_id) ON o.order_id = c.order_id "
    "WHERE o.customer_id = {c}",
    # row multipliers at every level
    "SELECT count(*) FROM orders o, LATERAL generate_series(1, o.quantity) g "
    "WHERE o.customer_id = {c}",
    "SELECT count(*) FROM orders o, LATERAL (SELECT 1 FROM products p "
    "WHERE p.product_id = o.product_id) x WHERE o.customer_id = {c}",
    "SELECT count(*) FROM orders o JOIN (VALUES ({c}), ({c}), ({c})) v(c) ON o.customer_id = v.c",
    "SELECT count(*) FROM (SELECT customer_id FROM orders, generate_series(1, 3)) s "
    "WHERE customer_id = {c}",
    "SELECT count(*) FROM (SELECT customer_id, unnest(ARRAY[1, 2]) FROM orders) s "
    "WHERE customer_id = {c}",
    "SELECT count(*) FROM (SELECT customer_id, row_number() OVER () AS r FROM orders) s "
    "WHERE customer_id = {c}",
    "SELECT count(*) FROM orders WHERE customer_id = {c} GROUP BY GROUPING SETS ((), ())",
    "SELECT count(*) FROM orders WHERE customer_id = {c} GROUP BY ROLLUP (quantity)",
    "SELECT count(*) FROM orders WHERE customer_id = {c} GROUP BY CUBE (quantity)",
    "SELECT count(*) FROM (SELECT DISTINCT ON (customer_id) customer_id FROM orders "
    "WHERE customer_id = {c}) s",
    "SELECT count(*) FROM (SELECT customer_id FROM orders ORDER BY order_id NULLS FIRST "
    "LIMIT 100000) s WHERE customer_id = {c}",
    "SELECT count(*) FROM (SELECT customer_id FROM orders OFFSET 0) s WHERE customer_id = {c}",
    # subqueries over private rows where the proxy computes from released values
    "SELECT quantity, count(*) FROM orders GROUP BY quantity "
    "LIMIT (SELECT count(*) FROM orders WHERE customer_id = {c})",
    "SELECT quantity, count(*) FROM orders GROUP BY quantity "
    "OFFSET (SELECT count(*) FROM orders WHERE customer_id = {c})",
    "SELECT quantity, count(*) FROM orders GROUP BY quantity "
    "HAVING count(*) > (SELECT count(*) FROM orders WHERE customer_id = {c})",
    "SELECT quantity, count(*) FROM orders GROUP BY quantity "
    "ORDER BY (SELECT count(*) FROM orders WHERE customer_id = {c})",
    "SELECT count(*), (SELECT count(*) FROM orders WHERE customer_id = {c}) FROM orders",
    "SELECT count(*) FROM orders GROUP BY (SELECT count(*) FROM orders WHERE customer_id = {c})",
    "SELECT n FROM (SELECT count(*) AS n FROM orders) s "
    "LIMIT (SELECT count(*) FROM orders WHERE customer_id = {c})",
    "SELECT quantity, count(*) FROM orders GROUP BY quantity "
    "HAVING count(*) OVER () > (SELECT count(*) FROM orders WHERE customer_id = {c})",
    # statements that are not one SELECT
    "WITH d AS (DELETE FROM orders WHERE customer_id = {c} RETURNING *) SELECT count(*) FROM d",
    "SELECT count(*) FROM orders WHERE customer_id = {c} UNION ALL SELECT 0",
    "SELECT count(*) FROM orders WHERE customer_id = {c} INTERSECT SELECT 0",
    # functions that read other rows, arrays, JSON, collations
    "SELECT count(*) FROM orders WHERE quantity = "
    "length(query_to_xml('SELECT 1 FROM orders WHERE customer_id = {c}', true, true, '')::text)",
    "SELECT count(*) FROM orders WHERE (SELECT count(*) FROM orders o2 "
    "WHERE o2.customer_id = {c}) COLLATE \"C\" > 0",
    "SELECT count(*) FROM orders WHERE quantity = ANY(ARRAY(SELECT quantity FROM orders "
    "WHERE customer_id = {c}))",
    "SELECT count(*) FROM orders WHERE customer_id = {c} AND (ARRAY[order_id])[1] > 0",
    "SELECT count(*) FROM orders WHERE customer_id = {c} AND "
    "to_jsonb(orders) ->> 'customer_id' = '{c}'",
    "SELECT count(*) FROM orders WHERE customer_id = {c} AND "
    "row_to_json(orders)::text LIKE '%'",
]


@pytest.mark.parametrize("template", COUNT_ATTACKS)
def test_a_count_is_never_released_exactly(analyst: psycopg.Connection, exact_count: int,
                                           template: str):
    _not_exact(analyst, template.format(c=CUSTOMER), exact_count)


def test_search_path_does_not_change_what_a_name_reads(analyst: psycopg.Connection,
                                                       exact_count: int):
    """dpgate writes the table it resolved, schema-qualified, into the SQL it runs."""
    sql = f"SELECT count(*) FROM orders WHERE customer_id = {CUSTOMER}"
    for path in ("pg_catalog", "information_schema, public", "'$user', public"):
        results = []
        for epsilon in EPSILONS:
            analyst.execute(f"SET search_path = {path}")
            analyst.execute(f"SET dp.epsilon = {epsilon}")
            results.append(outcome(analyst, sql))
        analyst.execute("RESET search_path")
        answered = [value for kind, value in results if kind == "answered"]
        assert not answered or answered != [exact_count] * len(results), (path, results)


def test_the_rows_of_a_limit_are_not_a_count(analyst: psycopg.Connection, exact_count: int):
    """LIMIT (subquery) used to run over the released rows on the reader connection: the
    number of rows returned was the subquery's exact private count. The subquery is now a
    release of its own (composite.py), and the number of rows is its noisy value."""
    groups = 10  # quantity's declared domain, every key present in the data
    assert exact_count < groups  # else every LIMIT at or above it returns the same rows
    sql = ("SELECT quantity, count(*) FROM orders GROUP BY quantity LIMIT "
           f"(SELECT count(*) FROM orders WHERE customer_id = {CUSTOMER})")
    lengths = []
    for epsilon in EPSILONS:
        analyst.execute(f"SET dp.epsilon = {epsilon}")
        lengths.append(len(analyst.execute(sql).fetchall()))
    assert lengths != [exact_count] * len(EPSILONS), lengths
    rows = analyst.execute("SELECT quantity, count(*) FROM orders GROUP BY quantity "
                           "LIMIT 1 + 2").fetchall()
    assert len(rows) == 3  # a constant LIMIT still works


# -- error oracles: the outcome must not depend on a private condition ------------------

ORACLES = [
    # NUMERIC itself overflows beyond 131,072 digits
    "SELECT count(*) FROM orders WHERE order_id = {id} AND order_cost > {{x}} AND "
    "order_cost * 1e131071 > 0",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND "
    "(order_cost - {{x}}) * 1e131070 > 0",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND order_cost > {{x}} AND "
    "order_cost * (SELECT 1e131070) > 0",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND order_cost > {{x}} AND "
    "order_cost * (SELECT 10::numeric ^ 131070) > 0",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND order_cost > {{x}} AND "
    "quantity / 1e-16383 * 1e120000 > 0",
    # a cast with a precision fails on larger values
    "SELECT count(*) FROM orders WHERE order_id = {id} AND order_cost > {{x}} AND "
    "order_cost::numeric(2, 0) > 0",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND "
    "((order_cost - {{x}} + 0.005) * 1000)::numeric(1, 0) IS NOT NULL",
    # functions that fail on some arguments
    "SELECT count(*) FROM customers WHERE customer_id = {id} AND 'x' LIKE name || {{x}}::text",
    "SELECT count(*) FROM customers WHERE customer_id = {id} AND name ~ address",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND "
    "substring(order_cost::text from 1 for (order_cost - {{x}})::int) = 'x'",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND "
    "to_timestamp(order_cost * 1e15 - {{x}} * 1e15) IS NULL",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND order_cost > {{x}} AND "
    "order_date + quantity * 1000000 > current_date",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND CASE WHEN order_cost > {{x}} "
    "THEN order_date::timestamptz AT TIME ZONE 'No/Such_Zone' IS NULL ELSE TRUE END",
    "SELECT count(*) FROM orders WHERE order_id = {id} AND CASE WHEN order_cost > {{x}} "
    "THEN lower(order_date::text) COLLATE \"no_such\" > '' ELSE TRUE END",
    # errors inside aggregates and group keys
    "SELECT sum(quantity) FILTER (WHERE 1 / (order_cost - {{x}}) > 0) FROM orders "
    "WHERE order_id = {id}",
    "SELECT count(DISTINCT 1 / (order_cost - {{x}})) FROM orders WHERE order_id = {id}",
    "SELECT 100 / (quantity - 1) AS k, count(*) FROM orders WHERE order_id = {id} "
    "AND order_cost > {{x}} GROUP BY 1",
    # computed group keys that fail for some values only: evaluated on the declared
    # domain only, before the charge (rewriter/analysis/buckets.py), so they fail for every data
    "SELECT quantity * 1e131071 AS k, count(*) FROM orders WHERE order_id = {id} "
    "AND order_cost > {{x}} GROUP BY 1",
    "SELECT (quantity * 3)::text::numeric(1, 0) AS k, count(*) FROM orders "
    "WHERE order_id = {id} AND order_cost > {{x}} GROUP BY 1",
    "SELECT CASE WHEN quantity = 7 THEN 1 / (quantity - 7) ELSE 0 END AS k, count(*) "
    "FROM orders WHERE order_id = {id} AND order_cost > {{x}} GROUP BY 1",
    "SELECT to_char(order_date, 'YYYY') AS y, quantity / (quantity - 10) AS k, count(*) "
    "FROM orders WHERE order_id = {id} AND order_cost > {{x}} GROUP BY 1, 2",
    "SELECT count(*) FROM (SELECT DISTINCT ON (order_id / (order_cost - {{x}})) order_id "
    "FROM orders WHERE order_id = {id}) s",
]


@pytest.mark.parametrize("template", ORACLES)
def test_failures_do_not_depend_on_private_rows(proxy: RunningProxy, cost: float,
                                                template: str):
    classes = oracle_outcomes(proxy, template.format(id=ORDER), cost)
    assert len(classes) == 1, classes
    (kind, state), = classes
    assert state != "22000", "a failure after the charge is the last resort, not the rule"


# -- the plan check counts a private scan once per read, not per definition ------------

@pytest.mark.unit
@pytest.mark.parametrize("sql, scans", [
    ("WITH a AS (SELECT * FROM orders) SELECT count(*) FROM a", 1),
    ("WITH a AS (SELECT * FROM orders), b AS (SELECT * FROM orders) SELECT count(*) FROM a", 1),
    ("WITH a AS (SELECT * FROM orders), b AS (SELECT * FROM a) SELECT count(*) FROM b", 1),
    ("WITH unused AS (SELECT * FROM orders) SELECT count(*) FROM products", 0),
    ("WITH a AS (SELECT * FROM orders) "
     "SELECT count(*) FROM a a1 JOIN a a2 ON a1.order_id = a2.order_id", 1),
    ("SELECT count(*) FROM orders o1 JOIN orders o2 ON o1.order_id = o2.order_id", 2),
])
def test_an_unread_cte_cannot_pad_the_scans_the_plan_may_show(sql: str, scans: int):
    """PostgreSQL drops a CTE nobody reads and materializes one read twice: counting every
    definition would let an unused CTE over orders hide a scan resolved differently."""
    (statement,) = classify(sql, POLICY)
    plan = statement.plan
    if isinstance(plan, PrivateAggregate):
        assert plan.checks.scans.count("public.orders") == scans
    else:
        assert scans == 0
