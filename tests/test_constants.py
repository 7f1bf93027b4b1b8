"""Row-independent values are computed before the query (rewriter/analysis/constants.py).

A constant or a public subquery inside a private query would otherwise run only when a
private row reaches it, so its error or its cost would tell whether one did.
"""

from __future__ import annotations

import pytest

from rewriter.analysis.constants import Constant, evaluation_sql, substitute
from rewriter.errors import Refusal
from tests.test_flex import plan_of, refusal_of

pytestmark = pytest.mark.unit


def test_constant_date_arithmetic_is_computed_first():
    plan = plan_of("SELECT count(*) FROM orders WHERE order_date > current_date - "
                   "interval '30 days'")
    (constant,) = plan.constants
    assert constant.sql == "(CURRENT_DATE - INTERVAL '30 DAYS')"  # written in: golden/rewritten


def test_in_subquery_becomes_any_of_an_array():
    plan = plan_of("SELECT count(*) FROM orders WHERE product_id NOT IN "
                   "(SELECT product_id FROM products WHERE category = 'x')")
    (constant,) = plan.constants
    assert constant.sql == ('ARRAY(SELECT product_id FROM "public"."products" '
                            "WHERE category = 'x')")  # = ANY of it: golden/rewritten


def test_exists_and_scalar_subqueries_are_values():
    plan = plan_of("SELECT count(*) FROM orders WHERE EXISTS (SELECT 1 FROM products) "
                   "AND quantity < (SELECT max(product_id) FROM products)")
    assert [c.sql for c in plan.constants] == [
        'EXISTS (SELECT 1 FROM "public"."products")',
        '(SELECT MAX(product_id) FROM "public"."products")']


def test_a_failing_public_subquery_in_a_case_branch_is_computed_first():
    plan = plan_of("SELECT count(*) FROM orders WHERE CASE WHEN order_cost > 100 THEN "
                   "quantity IN (SELECT 1 / (product_id - product_id) FROM products) END")
    assert len(plan.constants) == 1  # the SQL: tests/golden/rewritten/constants.sql


def test_a_setting_read_in_a_case_branch_is_computed_first():
    plan = plan_of("SELECT count(*) FROM orders WHERE CASE WHEN order_id = 7 THEN "
                   "current_setting('no.such') = 'x' ELSE TRUE END")
    assert plan.constants[0].sql == "(CURRENT_SETTING('no.such') = 'x')"


def test_a_whole_expression_over_a_subquery_is_one_constant():
    plan = plan_of("SELECT count(*) FROM orders WHERE quantity < "
                   "(SELECT max(product_id) FROM products) * 2")
    (constant,) = plan.constants
    assert constant.sql.endswith("* 2)")


@pytest.mark.parametrize("sql, words", [
    ("SELECT count(*) FROM orders o WHERE o.product_id IN (SELECT p.product_id FROM products "
     "p WHERE p.product_id = o.product_id)", "correlated"),
    # not a conjunct: a semi-join over private tables only as one (semi_joins.py)
    ("SELECT count(*) FROM orders WHERE quantity > 3 OR customer_id IN "
     "(SELECT customer_id FROM customers)", "public tables only"),
])
def test_subqueries_that_are_not_public_are_refused(sql, words):
    refusal = refusal_of(sql)
    assert refusal.sqlstate == "0A000"
    assert words in refusal.message


def test_a_colon_placeholder_is_a_syntax_error():
    assert refusal_of("SELECT count(*) FROM orders WHERE order_id = :x").sqlstate == "42601"


def test_substitute_refuses_a_token_the_statement_itself_contains():
    constant = Constant("%(__dpgate_constant_0)s", "(1)")
    assert substitute("SELECT %(__dpgate_constant_0)s", (constant,), ["'1'::integer"]) == \
        "SELECT ('1'::integer)"
    with pytest.raises(Refusal):
        substitute("SELECT '%(__dpgate_constant_0)s', %(__dpgate_constant_0)s", (constant,),
                   ["'1'::integer"])
    # SQL that reads the statement's rows twice holds each placeholder once per read.
    twice = "SELECT %(__dpgate_constant_0)s, %(__dpgate_constant_0)s"
    assert substitute(twice, (constant,), ["1"], reads=2) == "SELECT (1), (1)"
    with pytest.raises(Refusal):
        substitute(twice, (constant,), ["1"])


def test_evaluation_sql_quotes_each_value_with_its_type_and_stops_at_two_rows():
    sql = evaluation_sql((Constant("t0", "(current_date)"), Constant("t1", "ARRAY(SELECT 1)")))
    assert sql == ("SELECT quote_nullable(v0) || '::' || pg_typeof(v0)::text, "
                   "quote_nullable(v1) || '::' || pg_typeof(v1)::text FROM (SELECT "
                   "(current_date) AS v0, ARRAY(SELECT 1) AS v1) AS dpgate_constants LIMIT 2")
