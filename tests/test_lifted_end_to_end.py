"""Statements answered through their lifted shape (proxy/engine/literals.py), end to end:
each literal value is its own question, charged once, stored and repeated for free; errors
are PostgreSQL's for the text as written; the ledger keeps the text as written."""

from __future__ import annotations

import psycopg
import pytest

from accounting import SqliteLedger
from tests.conftest import RunningProxy
from tests.test_ledger_proxy import fresh_analyst

pytestmark = pytest.mark.end_to_end

SHAPE = "SELECT count(*) FROM orders WHERE product_id = {} AND quantity >= {}"


def queries_charged(connection: psycopg.Connection) -> int:
    return int(connection.execute("SHOW dp.budget").fetchone()[5])


def test_each_value_is_its_own_question_and_a_repeat_is_free(proxy: RunningProxy):
    name = fresh_analyst(proxy, 10)
    with psycopg.connect(proxy.dsn(name, name), autocommit=True) as connection:
        first = connection.execute(SHAPE.format(5, 2)).fetchone()
        connection.execute(SHAPE.format(6, 2)).fetchone()
        connection.execute(SHAPE.format(5, 3)).fetchone()
        assert queries_charged(connection) == 3
        # The same values again, written the same: the stored answer, nothing charged.
        assert connection.execute(SHAPE.format(5, 2)).fetchone() == first
        assert queries_charged(connection) == 3
    statements = [c.statement for c in SqliteLedger(proxy.ledger_path).charges(name)]
    assert statements == [SHAPE.format(5, 2), SHAPE.format(6, 2), SHAPE.format(5, 3)]


def test_the_answer_has_the_columns_postgresql_gives(proxy: RunningProxy):
    name = fresh_analyst(proxy, 10)
    sql = "SELECT count(*) AS n, sum(quantity) FROM orders WHERE order_cost > 100.5"
    with psycopg.connect(proxy.database.admin_dsn) as direct, \
            psycopg.connect(proxy.dsn(name, name), autocommit=True) as through:
        expected = direct.execute(sql).description
        got = through.execute(sql).description
    assert [(c.name, c.type_code) for c in got] == [(c.name, c.type_code) for c in expected]


@pytest.mark.parametrize("sql", [
    # PostgreSQL refuses date = integer; the literal before it moves the position if lifted.
    "SELECT count(*) FROM orders WHERE quantity = 12345678 AND order_date = 5",
    "SELECT count(*) FROM orders WHERE product_id = 3 AND nosuchcolumn = 4",
])
def test_errors_are_those_of_the_text_as_written_and_free(proxy: RunningProxy, sql: str):
    name = fresh_analyst(proxy, 10)
    with psycopg.connect(proxy.database.admin_dsn) as direct, \
            pytest.raises(psycopg.Error) as expected:
        direct.execute(sql)
    with psycopg.connect(proxy.dsn(name, name), autocommit=True) as connection:
        with pytest.raises(psycopg.Error) as got:
            connection.execute(sql)
        assert queries_charged(connection) == 0
    assert got.value.sqlstate == expected.value.sqlstate
    assert got.value.diag.statement_position == expected.value.diag.statement_position
