"""Literals lifted as parameters (proxy/engine/literals.py): what is lifted, how it is typed,
and that the lifted plan is the plan of the text as written with the values put back."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from proxy.config import load_policy_file
from proxy.demo.demo import DEMO_POLICY_FILE
from proxy.engine.literals import (
    INT4_OID,
    INT8_OID,
    NUMERIC_OID,
    lift,
    relayed_as_written,
    usable,
)
from rewriter.analysis.classify import classify
from rewriter.errors import Refusal
from rewriter.plan import Composite, PrivateAggregate
from rewriter.sensitivity.metrics import MissingMetrics
from tests.sql_corpus import corpus

pytestmark = pytest.mark.unit

POLICY = load_policy_file(DEMO_POLICY_FILE)  # privacy unit: the customer
# Row-level FLEX (no privacy unit), with declared metrics.
ROW_LEVEL = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")


@pytest.mark.parametrize(("sql", "lifted", "values"), [
    ("SELECT count(*) FROM orders WHERE product_id = 17 AND quantity >= 2.5",
     "SELECT count(*) FROM orders WHERE product_id = $1 AND quantity >= $2", [b"17", b"2.5"]),
    ("select count(*) from orders o where o.product_id <> 3;",
     "select count(*) from orders o where o.product_id <> $1;", [b"3"]),
    ('SELECT count(*) FROM orders WHERE ("quantity" > 2 OR quantity < 1) GROUP BY quantity',
     'SELECT count(*) FROM orders WHERE ("quantity" > $1 OR quantity < $2) GROUP BY quantity',
     [b"2", b"1"]),
    ("SELECT quantity, count(*) FROM orders WHERE quantity > 3 GROUP BY 1 ORDER BY 1 LIMIT 5",
     "SELECT quantity, count(*) FROM orders WHERE quantity > $1 GROUP BY 1 ORDER BY 1 LIMIT 5",
     [b"3"]),
    ("SELECT count(*) FROM orders WHERE quantity BETWEEN 2 AND 5 AND product_id IN (1, 20)",
     "SELECT count(*) FROM orders WHERE quantity BETWEEN $1 AND $2 AND product_id IN ($3, $4)",
     [b"2", b"5", b"1", b"20"]),
])
def test_numbers_compared_with_columns_in_where_are_lifted(sql, lifted, values):
    result = lift(sql)
    assert result is not None and result.text == lifted and result.original == sql
    assert list(result.parameters.values) == values
    assert set(result.parameters.formats) == {0}


@pytest.mark.parametrize("sql", [
    "SELECT count(*) * 2 FROM orders",                                  # select list
    "SELECT count(*) FROM orders HAVING count(*) > 5",                  # HAVING
    "SELECT count(*) FROM orders WHERE customer_id % 2 = 0",            # operand of %
    "SELECT count(*) FROM orders WHERE quantity = -3",                  # a sign
    "SELECT count(*) FROM orders WHERE quantity = 3::int",              # a cast
    "SELECT count(*) FROM orders WHERE quantity = 3 + 1",               # arithmetic
    "SELECT count(*) FROM orders WHERE quantity = 1_000",               # not a plain number
    "SELECT count(*) FROM orders WHERE quantity = 1e3",                 # exponent
    "SELECT count(*) FROM orders WHERE lower(x) = 3",                   # a function's value
    "SELECT count(*) FROM orders WHERE 3 < quantity",                   # left operand
    "SELECT count(*) FROM orders WHERE quantity NOT BETWEEN 2 AND 5",   # NOT BETWEEN
    "SELECT count(*) FROM orders WHERE quantity BETWEEN 2 AND 5 + 1",   # arithmetic
    "SELECT count(*) FROM orders WHERE product_id NOT IN (1, 2)",       # NOT IN
    "SELECT count(*) FROM orders WHERE product_id IN (1, 2 + 3)",       # not all plain
    "SELECT count(*) FROM orders WHERE product_id IN (1, 2)::int[] IS NULL",
    "SELECT count(*) FROM orders WHERE order_date >= '2025-01-01'",     # a string
    "SELECT count(*) FILTER (WHERE quantity > 3) FROM orders",          # FILTER's WHERE
    "SELECT count(*) FROM orders WHERE quantity > $1",                  # parameters already
    "SELECT count(*) FROM orders WHERE quantity > 3; SELECT 1",         # two statements
    "WITH o AS (SELECT * FROM orders WHERE quantity > 3) SELECT count(*) FROM o",
    "SELECT count(*) FROM (SELECT * FROM orders WHERE quantity > 3) o",  # a subquery
    "SELECT count(*) FROM orders WHERE quantity > 3 UNION ALL SELECT 1",
    "SELECT count(*) FROM orders o JOIN products p ON p.price > 3",      # ON, not WHERE
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY quantity) FROM orders",
    "SHOW dp.budget",
])
def test_other_literals_stay_in_the_text(sql):
    assert lift(sql) is None


def test_values_are_typed_as_postgresql_types_the_literal():
    result = lift("SELECT count(*) FROM t WHERE a = 5 AND b = 3000000000 AND c = 2.50 "
                  "AND d = 99999999999999999999 AND e = 2147483647 AND f = 2147483648")
    assert result.parameters.types == (INT4_OID, INT8_OID, NUMERIC_OID, NUMERIC_OID,
                                       INT4_OID, INT8_OID)
    assert result.parameters.values[2] == b"2.50"  # the scale as written


def _without_sql(plan: PrivateAggregate) -> dict:
    fields = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)}
    for name in ("sql", "fingerprint_text"):
        fields.pop(name)
    # The SQL of each read of the rows (PlanChecks.reads) holds the values as the SQL does.
    fields["checks"] = dataclasses.replace(plan.checks, reads=tuple(
        "" for _ in plan.checks.reads))
    return fields


def _releases(lifted: object, written: object, sql: str
              ) -> list[tuple[PrivateAggregate, PrivateAggregate]]:
    """The lifted and the written plan's releases, pair by pair (a Composite's each)."""
    if isinstance(lifted, Composite):
        assert isinstance(written, Composite) and lifted.combine == written.combine, sql
        return [(a.plan, b.plan) for a, b in zip(lifted.branches, written.branches,
                                                 strict=True)]
    assert isinstance(lifted, PrivateAggregate) and isinstance(written, PrivateAggregate), sql
    return [(lifted, written)]


def _put_back(sql: str, values: tuple[bytes | None, ...]) -> str:
    return re.sub(r"\$(\d+)", lambda m: values[int(m.group(1)) - 1].decode(), sql)


@pytest.mark.parametrize("policy", [POLICY, ROW_LEVEL], ids=["unit", "row-level"])
def test_the_lifted_plan_is_the_plan_as_written_with_its_values(policy):
    """Over the differential corpus and BI-style variants: wherever a lifted text is used,
    its plan equals the plan of the text as written in everything but the SQL, and its SQL
    with the values put back is the SQL as written."""
    statements = [sql for _, sql in corpus()] + [
        f"SELECT {key}, count(*) FROM orders WHERE quantity >= {n} AND product_id < {n * 7} "
        f"GROUP BY 1" for key in ("quantity", "order_date", "customer_id") for n in (1, 4)]
    used = 0
    for sql in statements:
        lifted = lift(sql)
        if lifted is None:
            continue
        try:
            planned = classify(lifted.text, policy)
        except (Refusal, MissingMetrics):
            continue
        if not usable(planned):
            continue
        used += 1
        (written,) = classify(sql, policy)
        for plan, as_written in _releases(planned[0].plan, written.plan, sql):
            assert _without_sql(plan) == _without_sql(as_written), sql
            assert _put_back(plan.sql, lifted.parameters.values) == as_written.sql, sql
    assert used >= 40  # the corpus's filtered counts, sums, averages and histograms


@pytest.mark.parametrize(("sql", "relayed"), [
    ("SELECT name, price FROM products WHERE product_id = 12", True),
    ("SELECT * FROM products WHERE price > 10.5 ORDER BY 1 LIMIT 3", True),
    # pgbench's scripts end statements with a semicolon; psql users add comments.
    ("SELECT name, price FROM products WHERE product_id = 12;", True),
    ("  SELECT name FROM products WHERE product_id = 12 ; -- the 12th\n", True),
    # Relayed rewritten (row counts hidden): the shape is not taken for the original.
    ("SELECT relname, n_live_tup FROM pg_stat_user_tables WHERE relid > 5", False),
    ("SELECT count(*) FROM orders WHERE product_id = 12", False),  # private
])
def test_a_shape_relayed_unchanged_relays_the_original(sql, relayed):
    lifted = lift(sql)
    shape = relayed_as_written(classify(lifted.text, POLICY), lifted)
    assert (shape is not None) is relayed
    if relayed:  # the same statement, text and plan, as the original's own analysis
        assert shape == classify(sql, POLICY)[0]
