"""Computed group keys (`quantity % 3`, `to_char(order_date, 'YYYY-MM')`, casts of
date_trunc…) are evaluated on the public domain only, never on a private row.

The rewritten SQL reads the raw column from the private rows and its bucket from a mapping
(raw → bucket) over the declared domain; the same mapping is a computed constant, so
PostgreSQL evaluates it before the private query and before any charge. Zero-noise
answers are compared with PostgreSQL's in tests/test_differential.py; error oracles are in
tests/test_attack_variants.py.
"""

from __future__ import annotations

import datetime as dt
import re

import psycopg
import pytest

from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from tests.conftest import DemoDatabase, RunningProxy
from tests.test_differential import exact_dsn  # noqa: F401 (a fixture)
from tests.test_end_to_end import admin_scalar
from tests.test_exact_answer_attacks import oracle_outcomes
from tests.test_unit_end_to_end import on_postgres, through_proxy, unit_proxy  # noqa: F401
from tests.test_unit_golden import METRICS
from tests.unit_support import demo_policy

pytestmark = pytest.mark.end_to_end


def _plan(statement: str, unit: bool = False) -> PrivateAggregate:
    return plan_private_aggregate(parse_query(statement), demo_policy(unit=unit), 0, METRICS)


def _private_part(sql: str) -> str:
    """The rewritten SQL without the mapping subqueries (what reads private rows)."""
    return re.sub(r"\(SELECT r\._dp_raw, .*? AS r\)", "(mapping)", sql)


@pytest.mark.unit
@pytest.mark.parametrize("key", [
    "quantity % 3", "CAST(date_trunc('month', order_date) AS date)",
    "to_char(order_date, 'YYYY-MM')", "floor(extract(epoch FROM order_date) / 86400) * 86400",
    "quantity::text", "100 / (quantity - 1)",
])
def test_the_key_is_computed_on_the_domain_only(key: str) -> None:
    plan = _plan(f"SELECT {key} AS k, count(*) FROM orders GROUP BY 1 ORDER BY 1")
    private = _private_part(plan.sql)
    assert '"_dp_map0"."_dp_raw" = quantity' in private or \
        '"_dp_map0"."_dp_raw" = order_date' in private
    assert "(mapping)" in private
    # Outside the mapping, no function or operator is applied to the private column.
    assert re.search(r"\((quantity|order_date)\b", private) is None, private
    # The bucket check, and the whole SQL: tests/golden/rewritten/buckets.sql.
    assert len(plan.constants) == 1


@pytest.mark.unit
@pytest.mark.parametrize("key, words", [
    ("my_bucket(quantity)", "not allowed in a computed GROUP BY key"),
    ("quantity + random()", "not allowed in a computed GROUP BY key"),
    ("quantity % $1", "not parameters"),
    ("quantity % (SELECT 3)", "computed"),
    ("quantity + (SELECT max(product_id) FROM products)", "computed"),
    ("pg_read_file('x') || quantity", "not allowed"),
])
def test_keys_that_could_read_or_vary_are_refused(key: str, words: str) -> None:
    with pytest.raises(Refusal) as refused:
        _plan(f"SELECT {key} AS k, count(*) FROM orders GROUP BY 1")
    assert words in refused.value.message, refused.value.message


@pytest.mark.unit
def test_an_aggregate_of_the_key_expression_is_still_checked_on_rows() -> None:
    """Only the key itself is read from the mapping: the same expression inside an
    aggregate is evaluated on every row, so totality applies to it as before."""
    with pytest.raises(Refusal) as refused:
        _plan("SELECT 100 / (quantity - 1) AS k, count(DISTINCT 100 / (quantity - 1)) "
              "FROM orders GROUP BY 1")
    assert refused.value.sqlstate == "0A000"


@pytest.mark.unit
def test_unit_mode_bounds_groups_by_bucket() -> None:
    """κ counts the buckets a customer contributes to, not the raw values: the rows
    carry the bucket (from the mapping) before the bounding partitions by it."""
    plan = _plan("SELECT quantity % 3 AS r, customer_id, count(*) FROM orders GROUP BY 1, 2",
                 unit=True)
    assert plan.unit is not None and plan.unit.max_groups == 5  # the SQL: golden/rewritten


@pytest.mark.unit
def test_the_most_frequent_bucket_is_chosen_among_buckets() -> None:
    plan = _plan("SELECT to_char(order_date, 'YYYY-MM') AS m FROM orders GROUP BY 1 "
                 "ORDER BY count(*) DESC LIMIT 1")
    assert len(plan.constants) == 1  # the SQL: tests/golden/rewritten/buckets.sql


@pytest.mark.parametrize("key, state", [
    ("CASE WHEN quantity = 7 THEN 1 / (quantity - 7) ELSE 0 END", "22012"),
    ("(quantity * 3)::text::numeric(1, 0)", "22003"),
])
def test_a_key_failing_on_some_domain_value_fails_before_the_query(
        proxy: RunningProxy, key: str, state: str) -> None:
    """Whether or not a row holds the failing value (order 4242's quantity is what it
    is), the mapping over the whole domain fails first: PostgreSQL's own error, whatever
    the rows hold, and never the generic 22000 of a failed private query."""
    template = (f"SELECT {key} AS k, count(*) FROM orders WHERE order_id = 4242 "
                "AND order_cost > {x} GROUP BY 1")
    cost = float(admin_scalar(proxy, "SELECT order_cost FROM orders WHERE order_id = 4242"))
    assert oracle_outcomes(proxy, template, cost) == {("error", state)}


METABASE_MONTHS = (
    "SELECT CAST(date_trunc('month', \"public\".\"orders\".\"order_date\") AS date) AS "
    "\"order_date\", count(*) AS \"count\" FROM \"public\".\"orders\" WHERE product_id = 7 "
    "GROUP BY CAST(date_trunc('month', \"public\".\"orders\".\"order_date\") AS date) "
    "ORDER BY CAST(date_trunc('month', \"public\".\"orders\".\"order_date\") AS date) ASC")


def test_unit_mode_answers_metabases_months_as_postgresql_does(
        unit_proxy: tuple[str, str], demo_database: DemoDatabase) -> None:  # noqa: F811
    """With zero noise and no customer above τ rows of product 7, the bounded histogram
    is PostgreSQL's: ordered, its empty months (count 0 released) are dropped."""
    dsn, _ = unit_proxy
    (most,) = on_postgres(demo_database, "SELECT max(n) FROM (SELECT count(*) AS n FROM "
                          "orders WHERE product_id = 7 GROUP BY customer_id) AS s")[0]
    assert most <= 10
    rows, _ = through_proxy(dsn, METABASE_MONTHS)
    truth = on_postgres(demo_database, METABASE_MONTHS)
    assert 0 < len(truth) < 24  # the 24-month domain is wider than the data
    assert [tuple(row) for row in rows] == [tuple(row) for row in truth]


@pytest.mark.end_to_end
def test_with_parameters_the_bucket_histogram_is_postgresqls(exact_dsn: str,  # noqa: F811
                                                             demo_database: DemoDatabase
                                                             ) -> None:
    """Parameters in WHERE restrict the listed buckets; the mapping's check is computed
    first without them."""
    sql = ("SELECT to_char(order_date, 'YYYY-MM') AS month, count(*) FROM orders "
           "WHERE order_date >= %s AND order_date < %s GROUP BY 1 ORDER BY 1")
    values = (dt.date(2025, 3, 1), dt.date(2025, 6, 1))
    rows = {}
    for name, dsn in (("direct", demo_database.admin_dsn), ("dpgate", exact_dsn)):
        with psycopg.connect(dsn, autocommit=True) as connection:  # server-side binding
            rows[name] = connection.execute(sql, values).fetchall()
    assert rows["dpgate"] == rows["direct"]
    assert [month for month, _ in rows["dpgate"]] == ["2025-03", "2025-04", "2025-05"]
