"""UNION, INTERSECT and EXCEPT (with or without ALL) inside a FROM over private tables:
S = S1 + S2 for all six (rewriter/sensitivity/set_operations.py, argued in docs/queries.md)."""

from __future__ import annotations

import pytest

from rewriter.errors import Refusal
from tests.test_flex import elastic_at
from tests.test_unit_mode import plan_of as unit_plan_of

pytestmark = pytest.mark.unit

OPERATIONS = ["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_count_over_two_private_branches_has_stability_s1_plus_s2(operation):
    sql = (f"SELECT count(*) FROM (SELECT customer_id FROM orders {operation} "
           "SELECT customer_id FROM recommendations) AS s")
    assert elastic_at(sql, 0) == elastic_at(sql, 9) == 2


@pytest.mark.parametrize("operation", ["INTERSECT", "EXCEPT"])
def test_a_public_branch_adds_nothing_but_still_bounds_nothing_away(operation):
    # min(S1, S2) would be 0 here, and unsound: the private side alone moves the result.
    sql = (f"SELECT count(*) FROM (SELECT product_id FROM orders {operation} "
           "SELECT product_id FROM products) AS s")
    assert elastic_at(sql, 0) == 1


@pytest.mark.parametrize(("operation", "frequency"), [
    ("UNION", lambda k: (100 + k) + (250 + k)),   # on both sides together
    ("INTERSECT", lambda k: 100 + k),             # on the rarer side
    ("EXCEPT", lambda k: 100 + k),                # on the left side only
])
def test_the_result_column_frequency_bounds_a_join_on_it(operation, frequency):
    sql = (f"SELECT count(*) FROM (SELECT customer_id FROM orders {operation} "
           "SELECT customer_id FROM recommendations) AS s "
           "JOIN customers c ON c.customer_id = s.customer_id")
    for k in (0, 3):
        assert elastic_at(sql, k) == max(2 * (1 + k), frequency(k))


def test_limit_on_a_set_operation_is_refused():
    with pytest.raises(Refusal, match="LIMIT"):
        elastic_at("SELECT count(*) FROM (SELECT customer_id FROM orders INTERSECT "
                   "SELECT customer_id FROM customers LIMIT 5) AS s", 0)


@pytest.mark.parametrize("operation", OPERATIONS)
def test_unit_mode_answers_set_operations_that_carry_the_unit(operation):
    # A row value includes its unit: its multiplicity depends on that unit's rows only.
    plan = unit_plan_of(f"SELECT count(*) FROM (SELECT customer_id FROM orders {operation} "
                        "SELECT customer_id FROM recommendations) AS s")
    assert plan.unit is not None and plan.unit.max_contributions == 10


@pytest.mark.parametrize("operation", OPERATIONS)
def test_unit_mode_refuses_set_operations_without_the_unit(operation):
    with pytest.raises(Refusal, match="none of its output columns is the unit"):
        unit_plan_of(f"SELECT count(*) FROM (SELECT product_id FROM orders {operation} "
                     "SELECT product_id FROM recommendations) AS s")


@pytest.mark.parametrize("operator", [">", "<>", "<="])
def test_all_over_a_public_subquery_is_a_filter_that_cannot_fail(operator):
    # PostgreSQL computes the subquery first (constants.py); `x op ALL (array)` compares
    # with each element: total, like `= ANY`. The filter leaves the stability at 1.
    assert elastic_at(f"SELECT count(*) FROM orders WHERE quantity {operator} ALL "
                      "(SELECT product_id FROM products WHERE product_id < 4)", 0) == 1


def test_all_over_a_private_subquery_is_still_refused():
    with pytest.raises(Refusal, match="subqueries over private tables"):
        elastic_at("SELECT count(*) FROM orders WHERE quantity > ALL "
                   "(SELECT customer_id FROM customers)", 0)
