"""Semi- and anti-joins over private tables (rewriter/analysis/semi_joins.py), and derived tables
that pass on one unit per row (rewriter/analysis/unit.py): the rewriting, FLEX's sensitivity at
row level and the unit analysis, in process. Their answers against PostgreSQL's are in
tests/test_differential.py (row level) and tests/test_unit_end_to_end.py (a unit of
1,000 rows moves them by at most their sensitivity)."""

from __future__ import annotations

import pytest

from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.analysis.semi_joins import rewrite_semi_joins
from rewriter.errors import Refusal
from tests.test_unit_golden import METRICS
from tests.unit_support import demo_policy

pytestmark = pytest.mark.unit

IN_ORDERS = ("SELECT count(*) FROM customers c WHERE c.customer_id IN "
             "(SELECT customer_id FROM orders)")
EXISTS_ORDER = ("SELECT count(*) FROM customers c WHERE EXISTS "
                "(SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id)")
NOT_EXISTS_ORDER = EXISTS_ORDER.replace("WHERE EXISTS", "WHERE NOT EXISTS")
BY_PRODUCT = ("SELECT count(*) FROM orders o WHERE o.product_id IN "
              "(SELECT product_id FROM recommendations)")


def rewritten(sql: str) -> str:
    tree = parse_query(sql)
    rewrite_semi_joins(tree, demo_policy(), 0)
    return tree.sql(dialect="postgres")


def plan_of(sql: str, unit: bool):
    return plan_private_aggregate(parse_query(sql), demo_policy(unit), 0, METRICS)


def elastic(sql: str, k: int) -> float:
    plan = plan_of(sql, unit=False)
    return plan.parts[plan.visible[0].parts[0]].elastic.at(k)


def refusal(sql: str, unit: bool) -> Refusal:
    with pytest.raises(Refusal) as caught:
        plan_of(sql, unit)
    return caught.value


# -- the rewriting ------------------------------------------------------------------------

def test_in_becomes_a_join_with_the_distinct_values():
    assert rewritten(IN_ORDERS + " AND c.address LIKE '%a%'") == (
        'SELECT COUNT(*) FROM customers AS c, (SELECT DISTINCT customer_id AS "_dp_semi1_key1" '
        'FROM orders) AS "_dp_semi1" WHERE c.customer_id = "_dp_semi1"."_dp_semi1_key1" '
        'AND c.address LIKE \'%a%\'')


def test_exists_joins_on_its_correlating_equalities_and_keeps_its_other_conditions():
    sql = ("SELECT count(*) FROM orders o WHERE EXISTS (SELECT 1 FROM recommendations r "
           "WHERE r.customer_id = o.customer_id AND o.product_id = r.product_id "
           "AND r.product_id > 3 LIMIT 1)")
    assert rewritten(sql) == (
        'SELECT COUNT(*) FROM orders AS o, (SELECT DISTINCT r.customer_id AS "_dp_semi1_key1", '
        'r.product_id AS "_dp_semi1_key2" FROM recommendations AS r WHERE r.product_id > 3) '
        'AS "_dp_semi1" WHERE o.customer_id = "_dp_semi1"."_dp_semi1_key1" AND '
        'o.product_id = "_dp_semi1"."_dp_semi1_key2"')


def test_not_exists_is_a_left_join_keeping_the_rows_without_a_match():
    assert rewritten(NOT_EXISTS_ORDER) == (
        'SELECT COUNT(*) FROM customers AS c LEFT JOIN (SELECT DISTINCT o.customer_id AS '
        '"_dp_semi1_key1" FROM orders AS o) AS "_dp_semi1" ON c.customer_id = '
        '"_dp_semi1"."_dp_semi1_key1" WHERE "_dp_semi1"."_dp_semi1_key1" IS NULL')


def test_a_grouped_subquery_is_made_distinct_as_a_derived_table():
    sql = ("SELECT count(*) FROM orders WHERE customer_id IN (SELECT customer_id FROM orders "
           "GROUP BY customer_id HAVING count(*) > 20)")
    assert '(SELECT DISTINCT "_dp_semi_rows"."v" AS "_dp_semi1_key1" FROM (SELECT ' \
        'customer_id FROM orders GROUP BY customer_id HAVING COUNT(*) > 20) AS ' \
        '"_dp_semi_rows"("v")) AS "_dp_semi1"' in rewritten(sql)


def test_subqueries_over_public_tables_are_left_to_be_computed_first():
    sql = ("SELECT count(*) FROM orders WHERE product_id IN "
           "(SELECT product_id FROM products WHERE category = 'Books')")
    assert rewritten(sql) == parse_query(sql).sql(dialect="postgres")


# -- row level: FLEX over the join with a DISTINCT table ----------------------------------

@pytest.mark.parametrize("k", [0, 1, 50])
def test_a_changed_subquery_row_flips_every_row_with_its_key(k):
    # DISTINCT doubles the subquery's stability (one value out, another in); each value
    # matches mf_k(c.customer_id) = 1 + k customers, each orders.product_id 500 + k orders.
    assert elastic(IN_ORDERS, k) == 2 * (1 + k)
    assert elastic(EXISTS_ORDER, k) == 2 * (1 + k)
    assert elastic(BY_PRODUCT, k) == 2 * (500 + k)
    # LEFT JOIN: a changed subquery row flips a matched row to padded, 2 per row
    assert elastic(NOT_EXISTS_ORDER, k) == 2 * 2 * (1 + k)


def test_not_in_is_refused_with_not_exists_as_the_hint():
    caught = refusal(IN_ORDERS.replace(" IN ", " NOT IN "), unit=False)
    assert caught.sqlstate == "0A000" and "one NULL" in caught.message
    assert caught.hint is not None and "NOT EXISTS" in caught.hint


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM customers c WHERE EXISTS (SELECT 1 FROM orders o "
    "WHERE o.quantity > c.customer_id)",
    "SELECT count(*) FROM customers c WHERE EXISTS (SELECT 1 FROM orders o)",
    "SELECT count(*) FROM customers c WHERE EXISTS (SELECT count(*) FROM orders o "
    "WHERE o.customer_id = c.customer_id)",
])
def test_exists_without_a_correlating_equality_is_refused(sql):
    assert refusal(sql, unit=False).sqlstate == "0A000"


# -- unit mode ----------------------------------------------------------------------------

@pytest.mark.parametrize("sql", [IN_ORDERS, EXISTS_ORDER, NOT_EXISTS_ORDER])
def test_a_subquery_correlated_on_the_unit_is_answered_at_tau(sql):
    plan = plan_of(sql, unit=True)
    assert plan.unit is not None and plan.unit.max_contributions == 10


def test_a_subquery_whose_values_come_from_other_units_is_refused():
    caught = refusal(BY_PRODUCT, unit=True)
    assert caught.sqlstate == "42501"
    assert "IN or EXISTS subquery" in caught.message and "_dp_" not in caught.message


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM (SELECT * FROM (SELECT * FROM orders) AS a WHERE quantity > 2) AS b",
    "SELECT count(*) FROM (SELECT customer_id, count(*) AS n FROM orders "
    "GROUP BY customer_id) s WHERE n > 3",
    "SELECT count(*) FROM (SELECT DISTINCT customer_id FROM orders) t",
    "SELECT count(*) FROM (SELECT customer_id FROM orders GROUP BY 1) AS s "
    "JOIN customers c ON s.customer_id = c.customer_id",
    "SELECT count(*) FROM (SELECT o.customer_id FROM orders o JOIN recommendations r "
    "ON o.customer_id = r.customer_id) AS s",
    "SELECT count(*) FROM (SELECT customer_id FROM orders UNION ALL "
    "SELECT customer_id FROM recommendations) u",
    "SELECT count(*) FROM (SELECT customer_id, product_id FROM orders EXCEPT "
    "SELECT customer_id, product_id FROM recommendations) u",
    "WITH a AS (SELECT customer_id, quantity FROM orders WHERE quantity > 1), "
    "b AS (SELECT * FROM a) SELECT sum(quantity) FROM b",
    "SELECT count(*) FROM (SELECT c.customer_id AS cid FROM orders o JOIN customers c "
    "ON o.customer_id = c.customer_id) s",
])
def test_derived_tables_passing_one_unit_per_row_are_answered(sql):
    assert plan_of(sql, unit=True).unit is not None


@pytest.mark.parametrize(("sql", "why"), [
    ("SELECT count(*) FROM (SELECT product_id FROM orders UNION ALL "
     "SELECT product_id FROM recommendations) u", "none of its output columns is the unit"),
    ("SELECT count(*) FROM (SELECT customer_id, product_id FROM orders UNION ALL "
     "SELECT product_id, customer_id FROM recommendations) u", "columns 1 and 2"),
    ("SELECT count(*) FROM (SELECT customer_id FROM orders LIMIT 10) s", "LIMIT"),
    ("SELECT count(*) FROM (SELECT product_id, count(*) AS n FROM orders "
     "GROUP BY product_id) s JOIN products p ON p.product_id = s.product_id",
     "groups rows of several units"),
])
def test_derived_tables_mixing_units_are_refused_saying_why(sql, why):
    caught = refusal(sql, unit=True)
    assert caught.sqlstate == "42501" and why in caught.message


def test_metabase_counting_a_questions_groups_counts_the_occupied_keys():
    # The inner histogram is released over the domain; the outer count runs over the
    # keys whose released count is above 0 (post-processing).
    plan = plan_of("SELECT count(*) FROM (SELECT quantity, count(*) AS n FROM orders "
                   "GROUP BY quantity) s", unit=True)
    assert plan.outer is not None and plan.grouping and plan.grouping.occupied_by == 1
    summed = plan_of("SELECT count(*) FROM (SELECT quantity, sum(order_cost) AS n FROM orders "
                     "GROUP BY quantity) s", unit=True)
    assert summed.grouping and summed.grouping.occupied_by == 2
    assert summed.outputs[2].hidden  # a count(*) of its own
