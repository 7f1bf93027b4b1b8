"""SHOW dp.last_answers: error bars a BI tool can show, answered by the proxy from its own
memory, free, through psql (simple protocol) and psycopg (simple and extended, text and
binary)."""

from __future__ import annotations

import secrets
import subprocess

import psycopg
import pytest

from proxy.engine.recent import LAST_ANSWERS_COLUMNS, RecentAnswers, recent_answer
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from tests.conftest import RunningProxy
from tests.unit_support import demo_policy

pytestmark = pytest.mark.end_to_end


def _unique(template: str) -> str:
    """A statement no other test asks (a repeated one would be answered free)."""
    return template.format(n=1000 + secrets.randbelow(10**6))


def _budget_spent(connection: psycopg.Connection) -> float:
    return float(connection.execute("SHOW dp.budget").fetchone()[1])


@pytest.mark.parametrize("cursor", ["simple", "extended", "binary"])
def test_psycopg_lists_the_last_answer_with_each_columns_error(proxy: RunningProxy,
                                                               cursor: str):
    statement = _unique("SELECT count(*), avg(quantity), sum(order_cost) FROM orders "
                        "WHERE order_cost < {n}")
    factory = psycopg.ClientCursor if cursor == "simple" else psycopg.Cursor
    with psycopg.connect(proxy.dsn("bob"), autocommit=True,
                         cursor_factory=factory) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        connection.execute(statement)
        spent = _budget_spent(connection)
        shown = connection.cursor(binary=cursor == "binary")
        rows = shown.execute("SHOW dp.last_answers").fetchall()
        assert [d.name for d in shown.description] == [n for n, _ in LAST_ANSWERS_COLUMNS]
        assert _budget_spent(connection) == spent  # free
    newest = [row for row in rows if row[1] == statement]
    assert [row[2] for row in newest] == ["count", "avg", "sum"]
    errors = {row[2]: row[3] for row in newest}
    # The same error bars as the NOTICE's, which BI tools never show.
    accuracy = notices[0].split("accuracy: ")[1].split(";")[0]
    assert sorted(accuracy.split(", ")) == sorted(f"{name} {errors[name]}"
                                                  for name in ("count", "sum", "avg"))
    confidence, epsilon, delta = newest[0][4:]
    assert (confidence, epsilon, delta) == (0.95, 0.1, 0.0)
    assert rows[0][1] == statement  # the newest first


def test_psql_shows_the_last_answers(proxy: RunningProxy):
    statement = _unique("SELECT quantity, count(*) FROM orders WHERE order_cost < {n} "
                        "GROUP BY quantity")
    result = subprocess.run(
        ["psql", proxy.dsn("alice"), "-X", "-A", "-F", "|", "-v", "ON_ERROR_STOP=1",
         "-c", statement, "-c", "SHOW dp.last_answers"],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    lines = [line.split("|") for line in result.stdout.splitlines() if statement in line]
    assert [(line[2], line[3].startswith("±") or line[3]) for line in lines] == [
        ("quantity", "a group key: no noise"), ("count", True)]


def test_only_the_analysts_own_answers_are_listed(proxy: RunningProxy):
    statement = _unique("SELECT count(*) FROM orders WHERE order_cost > {n}")
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as alice:
        alice.execute(statement)
    with psycopg.connect(proxy.dsn("bob"), autocommit=True) as bob:
        rows = bob.execute("SHOW dp.last_answers").fetchall()
    assert all(row[1] != statement for row in rows)


def test_memory_is_bounded_per_analyst():
    recent = RecentAnswers()
    plan = plan_private_aggregate(parse_query("SELECT count(*) FROM orders"), demo_policy(), 0)
    for n in range(50):
        recent.add("carol", recent_answer(f"q{n}" + "x" * 5000, plan, {"count": 3}, 0.95,
                                          0.1, 0.0, True))
    rows = recent.rows("carol")
    assert len(rows) == 20 and rows[0][1].startswith("q49")
    assert len(rows[0][1]) == 2000 and rows[0][3] == "±3"
    assert recent.rows("dave") == []


def test_columns_computed_from_released_values_carry_their_interval(proxy: RunningProxy):
    """A ratio, a standard deviation and a count times 2: each column's interval in the
    NOTICE and SHOW dp.last_answers, carried from the noisy values it reads; a text built
    from them has none, and says why."""
    statement = _unique("SELECT count(*) * 2 AS twice, sum(order_cost) / count(*) AS ratio, "
                        "stddev(order_cost) AS spread, count(*)::text AS label FROM orders "
                        "WHERE order_cost < {n}")
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        released = connection.execute(statement).fetchone()
        rows = connection.execute("SHOW dp.last_answers").fetchall()
    errors = {row[2]: row[3] for row in rows if row[1] == statement}
    for name in ("twice", "ratio", "spread"):
        assert errors[name].startswith("±"), errors
        assert f"{name} {errors[name]}" in notices[0]
    assert errors["label"].startswith("computed from the noisy values: no interval")
    assert "their intervals from the intervals of the values each reads" in notices[0]
    # a standard deviation is never below 0: nor is its interval's lower end (the width
    # rounded up to a whole number)
    spread = errors["spread"]
    if "(lower end −" in spread:
        assert float(spread.split("(lower end −")[1].rstrip(")")) <= float(released[2]) + 1
