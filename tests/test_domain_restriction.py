"""A filled histogram lists only the domain keys that the statement's own WHERE admits.

`WHERE order_date >= '2024-03-01' AND order_date < '2024-06-01'` can hold no row of
another month, so PostgreSQL never returns one; listing the whole two-year domain (as
Superset's time-range charts showed) released 21 noisy zeros around the three months
asked for. The restriction is read from the statement's text and the public domain only,
so which keys come back still depends on no private row.
"""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.sensitivity.metrics import Metrics
from tests.test_differential import exact_dsn, run  # noqa: F401 (exact_dsn is a fixture)
from tests.test_unit_golden import METRICS
from tests.unit_support import demo_policy

pytestmark = pytest.mark.end_to_end


def _rewritten(statement: str, metrics: Metrics = METRICS) -> str:
    return plan_private_aggregate(parse_query(statement), demo_policy(unit=False), 0,
                                  metrics).sql


@pytest.mark.unit
def test_where_conditions_on_the_key_alone_restrict_the_listed_domain() -> None:
    sql = _rewritten("SELECT date_trunc('month', order_date) AS m, count(*) FROM orders "
                     "WHERE order_date >= '2024-03-01' AND quantity > 1 "
                     "AND order_date < '2024-06-01' GROUP BY 1")
    domain = sql.split("LEFT JOIN")[0]
    # The bucket's domain: the raw values the conditions admit, mapped (buckets.py), as
    # tests/golden/rewritten/domain_restriction.sql writes it.
    assert "kept" in domain
    assert "quantity" not in domain  # another column's condition stays in the data's WHERE


@pytest.mark.unit
@pytest.mark.parametrize("condition", [
    "quantity > product_id",  # reads another column too
    "quantity > 2 OR product_id = 1",  # not a conjunct of the key alone
    "NOT (quantity = 3 AND product_id = 2)",
    # computed first as a constant, which is placed once: in the data's WHERE
    "quantity IN (SELECT product_id FROM products WHERE product_id <= 3)",
])
def test_conditions_that_read_more_than_the_key_leave_the_domain_whole(condition: str) -> None:
    sql = _rewritten(f"SELECT quantity, count(*) FROM orders WHERE {condition} "
                     "GROUP BY quantity")
    assert "kept" not in sql.split("LEFT JOIN")[0]


# A parameter compared with the domain value read as the column ($1's type is deduced from
# `quantity` in the data's WHERE, the same in both places) and a qualified key with an
# unqualified condition: tests/golden/rewritten/domain_restriction.sql.


@pytest.mark.unit
def test_without_the_column_type_the_domain_stays_whole() -> None:
    untyped = dataclasses.replace(METRICS, column_types={})
    sql = _rewritten("SELECT quantity, count(*) FROM orders WHERE quantity > 3 "
                     "GROUP BY quantity", untyped)
    assert "kept" not in sql.split("LEFT JOIN")[0]


SUPERSET_RANGE = ("SELECT date_trunc('month', order_date) AS m, count(*) FROM orders "
                  "WHERE order_date >= {} AND order_date < {} GROUP BY 1")


@pytest.mark.unit
@pytest.mark.parametrize(("low", "high"), [
    ("TO_DATE('2024-01-01', 'YYYY-MM-DD')", "TO_DATE('2025-01-01', 'YYYY-MM-DD')"),
    ("DATE '2024-01-01'", "DATE '2025-01-01'"),
])
def test_a_computed_constant_on_the_key_narrows_the_domain_as_a_literal_does(low, high):
    """Superset writes its time range with TO_DATE, computed before the query
    (constants.py): its one literal is written into the data's WHERE and the domain's
    (the SQL of both: tests/golden/rewritten/domain_restriction.sql)."""
    plan = plan_private_aggregate(parse_query(SUPERSET_RANGE.format(low, high)),
                                  demo_policy(unit=False), 0, METRICS)
    assert "kept" in plan.sql.split("LEFT JOIN")[0]


@pytest.mark.unit
def test_a_public_subquery_on_the_key_is_reported_as_not_narrowing_the_domain():
    """Its values are computed before the query (constants.py) and placed once, in the
    data's WHERE: the plan says the domain is whole, for the NOTICE."""
    plan = plan_private_aggregate(parse_query(
        "SELECT quantity, count(*) FROM orders WHERE quantity IN "
        "(SELECT product_id FROM products WHERE product_id <= 3) GROUP BY quantity"),
        demo_policy(unit=False), 0, METRICS)
    assert plan.grouping and plan.grouping.domain_unnarrowed
    assert "kept" not in plan.sql.split("LEFT JOIN")[0]


@pytest.mark.end_to_end
def test_superset_s_to_date_range_lists_the_months_postgresql_does(
        exact_dsn: str, demo_database) -> None:  # noqa: F811
    sql = SUPERSET_RANGE.format("TO_DATE('2024-01-01', 'YYYY-MM-DD')",
                                "TO_DATE('2025-01-01', 'YYYY-MM-DD')") + " ORDER BY 1"
    direct, proxied = run(demo_database.admin_dsn, sql), run(exact_dsn, sql)
    assert proxied.sqlstate is None, proxied.message
    notice = " ".join(proxied.notices)
    assert "of the declared domain's keys that the WHERE admits" in notice
    assert len(direct.rows) == 12 and proxied.rows == direct.rows


@pytest.mark.end_to_end
@pytest.mark.parametrize("sql", [
    "SELECT date_trunc('month', order_date) AS m, count(*) FROM orders "
    "WHERE order_date >= '2024-03-01' AND order_date < '2024-06-01' GROUP BY 1 ORDER BY 1",
    "SELECT extract(year FROM order_date) AS y, count(*) FROM orders "
    "WHERE order_date BETWEEN '2025-01-01' AND '2025-12-31' GROUP BY 1 ORDER BY 1",
    "SELECT quantity, count(*), sum(quantity) FROM orders WHERE quantity BETWEEN 2 AND 4 "
    "AND product_id < 50 GROUP BY quantity ORDER BY quantity",
    "SELECT quantity FROM orders WHERE quantity > 7 GROUP BY quantity ORDER BY 1",
])
def test_with_zero_noise_the_range_histogram_is_postgresqls(exact_dsn: str,  # noqa: F811
                                                            demo_database, sql: str) -> None:
    direct, proxied = run(demo_database.admin_dsn, sql), run(exact_dsn, sql)
    assert direct.sqlstate is None and proxied.sqlstate is None, proxied.message
    assert proxied.columns == direct.columns
    assert proxied.rows == direct.rows


@pytest.mark.end_to_end
def test_with_parameters_the_range_histogram_is_postgresqls(exact_dsn: str,  # noqa: F811
                                                            demo_database) -> None:
    sql = ("SELECT quantity, count(*) FROM orders WHERE quantity BETWEEN %s AND %s "
           "AND order_date >= %s GROUP BY quantity ORDER BY quantity")
    values = (3, 5, "2025-01-01")
    rows = {}
    for name, dsn in (("direct", demo_database.admin_dsn), ("dpgate", exact_dsn)):
        with psycopg.connect(dsn, autocommit=True) as connection:  # server-side binding
            rows[name] = connection.execute(sql, values).fetchall()
    assert rows["dpgate"] == rows["direct"]
    assert [quantity for quantity, _ in rows["dpgate"]] == [3, 4, 5]
