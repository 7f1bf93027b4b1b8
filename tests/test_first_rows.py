"""The same question with a smaller LIMIT is answered free with the first rows of the
stored answer (proxy/engine/first_rows.py): what Superset sends when it saves an aggregate
virtual dataset (its SQL with LIMIT 1, after SQL Lab ran it with LIMIT 1001)."""

from __future__ import annotations

import secrets

import psycopg
import psycopg2
import pytest

from proxy.engine.first_rows import FirstRows, split_limit
from tests.conftest import RunningProxy

pytestmark = pytest.mark.end_to_end


def _spent(connection: psycopg.Connection) -> tuple[float, int]:
    row = connection.execute("SHOW dp.budget").fetchone()
    return float(row[1]), int(row[5])


def _ask(connection: psycopg.Connection, sql: str) -> tuple[list[tuple], list[str]]:
    notices: list[str] = []

    def handler(diagnostic: psycopg.errors.Diagnostic) -> None:
        notices.append(diagnostic.message_primary or "")

    connection.add_notice_handler(handler)
    try:
        return connection.execute(sql).fetchall(), notices
    finally:
        connection.remove_notice_handler(handler)


def test_a_smaller_limit_gets_the_first_rows_of_the_stored_answer_free(proxy: RunningProxy):
    question = ("SELECT quantity, count(*) AS n FROM orders WHERE order_cost < "
                f"{1000 + secrets.randbelow(10**6)} GROUP BY quantity ORDER BY n DESC")
    with psycopg.connect(proxy.dsn("bob"), autocommit=True) as connection:
        answer, _ = _ask(connection, question + " LIMIT 1001")
        spent = _spent(connection)
        top, notices = _ask(connection, question + " LIMIT 1")
        top_three, _ = _ask(connection, question + " LIMIT 3")
        assert _spent(connection)[0] == spent[0]  # nothing charged
        # An OFFSET makes another question: charged.
        _ask(connection, question + " LIMIT 1 OFFSET 1")
        assert _spent(connection)[0] > spent[0]
    assert len(answer) == 10  # every quantity: the stored answer holds all the rows
    assert top == answer[:1] and top_three == answer[:3]
    assert any("the first 1 rows of your answer to the same question with LIMIT 1001" in notice
               for notice in notices)


def test_superset_saving_an_aggregate_dataset_costs_nothing_after_sql_lab(
        proxy: RunningProxy):
    # SQL Lab runs the analyst's SQL with LIMIT 1001; saving it as a dataset runs it twice
    # with LIMIT 1 (superset/connectors/sqla/utils.py, get_columns_description), both as
    # sqlglot formats them, through psycopg2.
    bound = 1000 + secrets.randbelow(10**6)
    body = ("SELECT\n  p.category,\n  COUNT(*)\nFROM orders AS o\nJOIN products AS p\n"
            f"  ON o.product_id = p.product_id\nWHERE\n  o.order_cost < {bound}\nGROUP BY\n"
            "  p.category\nLIMIT ")
    connection = psycopg2.connect(proxy.dsn("bob"))
    connection.autocommit = True
    try:
        cursor = connection.cursor()
        cursor.execute(body + "1001")
        answer = cursor.fetchall()
        cursor.execute("SHOW dp.budget")
        spent = cursor.fetchone()[1]
        probes = []
        for _ in range(2):
            cursor.execute(body + "1")
            probes.append(cursor.fetchall())
        cursor.execute("SHOW dp.budget")
        assert cursor.fetchone()[1] == spent
    finally:
        connection.close()
    assert probes == [answer[:1], answer[:1]]


def test_a_larger_limit_than_the_stored_answer_held_is_a_new_question(proxy: RunningProxy):
    question = ("SELECT product_id, count(*) AS n FROM orders WHERE order_cost < "
                f"{1000 + secrets.randbelow(10**6)} GROUP BY product_id ORDER BY n DESC")
    with psycopg.connect(proxy.dsn("bob"), autocommit=True) as connection:
        _ask(connection, question + " LIMIT 5")
        spent = _spent(connection)
        more, _ = _ask(connection, question + " LIMIT 20")
        assert _spent(connection)[0] > spent[0]
    assert len(more) == 20


@pytest.mark.unit
@pytest.mark.parametrize(("text", "split"), [
    ("SELECT a, COUNT(*) FROM t GROUP BY a LIMIT 1001", ("SELECT a, COUNT(*) FROM t GROUP BY a",
                                                        1001)),
    ("SELECT COUNT(*) FROM t LIMIT 5 /* unit 10 5 10 */ /* tau chosen <= 100 */",
     ("SELECT COUNT(*) FROM t /* unit 10 5 10 */ /* tau chosen <= 100 */", 5)),
    ("SELECT COUNT(*) FROM t LIMIT 5 OFFSET 2", None),
    ("SELECT COUNT(*) FROM (SELECT a FROM t LIMIT 5) AS s", None),
    ("SELECT COUNT(*) FROM t LIMIT $1", None),
    ("SELECT COUNT(*) FROM t", None),
])
def test_the_outermost_limit_is_split_off(text: str, split: tuple[str, int] | None):
    assert split_limit(text) == split


@pytest.mark.unit
def test_only_a_limit_within_the_stored_rows_is_answered_from_them():
    remembered = FirstRows()
    remembered.remember("bob", "q", 10, "fp10", rows=10, fresh=True)
    assert remembered.first("bob", "q", 3) is not None
    assert remembered.first("bob", "q", 11) is None  # more rows may exist
    assert remembered.first("alice", "q", 3) is None
    remembered.remember("bob", "q", 1, "fp1", rows=1, fresh=False)  # a repeat keeps 10
    assert remembered.first("bob", "q", 5).fingerprint == "fp10"
    remembered.remember("bob", "all", 100, "fp", rows=8, fresh=True)
    assert remembered.first("bob", "all", 500) is not None  # it held every row
