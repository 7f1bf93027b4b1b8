"""Column probes: a statement dpgate refuses, asked with LIMIT 0 or 1 as Superset asks a
virtual dataset's SQL before saving it, is answered with PostgreSQL's columns and no row,
for free, through psycopg2 (Superset's driver, simple protocol) and psycopg (extended
protocol, with a parameter); with another LIMIT it is still refused, and a question
dpgate answers is answered as usual."""

from __future__ import annotations

import psycopg
import psycopg2
import pytest

from rewriter.analysis.classify import classify, parse_query
from rewriter.analysis.probes import probe_limit
from rewriter.plan import ColumnProbe, PrivateAggregate
from rewriter.release.explain import explain
from rewriter.sensitivity.metrics import Metrics
from tests.conftest import DemoDatabase, RunningProxy
from tests.unit_support import demo_policy

pytestmark = pytest.mark.end_to_end

# What Superset 6.1 runs (twice) before saving a virtual dataset of rows from SQL Lab
# (superset/connectors/sqla/utils.py, get_columns_description: the SQL as sqlglot formats
# it, with LIMIT 1).
DATASET_OF_ROWS = ("SELECT\n  o.order_date,\n  o.quantity,\n  p.category\nFROM orders AS o\n"
                   "JOIN products AS p\n  ON o.product_id = p.product_id\nLIMIT 1")
# An aggregate dpgate refuses (no bounds for order_id), probed the same way.
REFUSED_AGGREGATE = ("SELECT\n  customer_id,\n  SUM(order_id)\nFROM orders\nGROUP BY\n"
                     "  customer_id\nLIMIT 1")


def _spent(dsn: str) -> tuple[float, int]:
    with psycopg.connect(dsn, autocommit=True) as connection:
        row = connection.execute("SHOW dp.budget").fetchone()
        return float(row[1]), int(row[5])


def _direct_columns(database: DemoDatabase, sql: str, parameters: tuple = ()
                    ) -> list[tuple[str, int]]:
    with psycopg.connect(database.admin_dsn) as connection:
        cursor = connection.execute(sql, parameters or None)
        assert cursor.description is not None
        return [(d.name, d.type_code) for d in cursor.description]


def test_superset_probe_of_a_dataset_of_rows_gets_its_columns_free(
        proxy: RunningProxy, demo_database: DemoDatabase):
    before = _spent(proxy.dsn("alice"))
    connection = psycopg2.connect(proxy.dsn("alice"))
    try:
        cursor = connection.cursor()
        cursor.execute(DATASET_OF_ROWS)
        columns = [(d.name, d.type_code) for d in cursor.description]
        assert cursor.fetchall() == []
        notices = list(connection.notices)
    finally:
        connection.close()
    assert columns == _direct_columns(demo_database, DATASET_OF_ROWS)
    assert [name for name, _ in columns] == ["order_date", "quantity", "category"]
    assert any("only the statement's columns, no row" in notice and
               "only aggregates of private tables are answered" in notice and
               "nothing is charged" in notice for notice in notices)
    assert _spent(proxy.dsn("alice")) == before


def test_a_refused_aggregate_probed_gets_its_columns_and_the_refusal_in_a_notice(
        proxy: RunningProxy, demo_database: DemoDatabase):
    before = _spent(proxy.dsn("alice"))
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        cursor = psycopg.ClientCursor(connection).execute(REFUSED_AGGREGATE)
        assert cursor.fetchall() == []
        columns = [(d.name, d.type_code) for d in cursor.description]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="needs declared bounds"):
            connection.execute(REFUSED_AGGREGATE.replace("LIMIT 1", "LIMIT 10"))
    assert columns == _direct_columns(demo_database, REFUSED_AGGREGATE)
    assert any("SUM(order_id) needs declared bounds" in notice for notice in notices)
    assert _spent(proxy.dsn("alice")) == before


def test_extended_protocol_describes_and_answers_a_probe_with_a_parameter(
        proxy: RunningProxy, demo_database: DemoDatabase):
    sql = "SELECT * FROM orders WHERE quantity > %s LIMIT 0"
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        cursor = connection.execute(sql, (3,), prepare=True)
        assert cursor.fetchall() == []
        columns = [(d.name, d.type_code) for d in cursor.description]
        binary = connection.cursor(binary=True).execute(sql, (3,))
        assert binary.fetchall() == []
    assert columns == _direct_columns(demo_database, sql, (3,))


def test_other_statements_of_rows_are_refused_and_aggregates_answered(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        for sql in ("SELECT * FROM orders LIMIT 2", "SELECT * FROM orders LIMIT 1 OFFSET 5",
                    "SELECT * FROM orders"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                connection.execute(sql)
        # PostgreSQL's own error for a probe it cannot parse, free as the probe is.
        with pytest.raises(psycopg.errors.UndefinedColumn):
            connection.execute("SELECT order_dat FROM orders LIMIT 1")
        # The top quantity is a question, not a probe: one noisy row.
        rows = connection.execute("SELECT quantity, count(*) FROM orders GROUP BY quantity "
                                  "ORDER BY 2 DESC LIMIT 1").fetchall()
        assert len(rows) == 1


@pytest.mark.unit
@pytest.mark.parametrize(("sql", "limit"), [
    ("SELECT * FROM orders LIMIT 1", 1),
    ("SELECT order_id FROM orders WHERE quantity > 2 LIMIT 0", 0),
    (DATASET_OF_ROWS, 1),
    ("SELECT * FROM orders LIMIT 2", None),
    ("SELECT * FROM orders LIMIT 1 OFFSET 1", None),
    ("SELECT * FROM orders", None),
    ("SELECT * FROM orders LIMIT ALL", None),
    ("SELECT * FROM (SELECT * FROM orders LIMIT 1) AS s", None),
    ("SELECT count(*) FROM orders LIMIT 1", 1),
])
def test_which_statements_are_probes(sql: str, limit: int | None):
    assert probe_limit(parse_query(sql)) == limit


@pytest.mark.unit
def test_a_probe_is_planned_only_where_the_statement_is_refused():
    policy = demo_policy()
    plan = classify(DATASET_OF_ROWS, policy)[0].plan
    assert isinstance(plan, ColumnProbe) and plan.limit == 1
    assert plan.refused.startswith("only aggregates of private tables are answered")
    for answerable in ("SELECT quantity FROM orders GROUP BY quantity LIMIT 1",
                       "SELECT count(*) FROM orders LIMIT 1"):
        assert isinstance(classify(answerable, policy)[0].plan, PrivateAggregate)
    # dpgate explain says what the proxy does.
    assert explain(DATASET_OF_ROWS, policy, Metrics(), 0.1, 1e-8) == {
        "supported": True, "kind": "column probe", "rows": 0, "charged": False}
    # Refused before the analysis (a catalog beside a private table): still refused.
    mixed = classify("SELECT * FROM orders, pg_class LIMIT 1", policy)[0].plan
    assert not isinstance(mixed, ColumnProbe)
