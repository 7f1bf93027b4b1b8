"""LEFT, RIGHT and FULL outer equijoins: their elastic stability
(rewriter/sensitivity/outer_joins.py, argued in docs/queries.md), through the rewriter with the FLEX
reference metrics."""

from __future__ import annotations

import pytest

from rewriter.errors import Refusal
from rewriter.sensitivity.elastic import constant, plus_k
from rewriter.sensitivity.outer_joins import join_bound
from tests.test_flex import elastic_at, refusal_of
from tests.test_unit_mode import plan_of as unit_plan_of

pytestmark = pytest.mark.unit

ORDERS_CUSTOMERS = "ON o.customer_id = c.customer_id"


@pytest.mark.parametrize(("sql", "expected"), [
    # private ⟕ public: the private side's stability, each row at most max(1, mf) times.
    ("SELECT count(*) FROM orders o LEFT JOIN products p ON o.product_id = p.product_id",
     lambda k: 300),
    ("SELECT count(*) FROM products p RIGHT JOIN orders o ON o.product_id = p.product_id",
     lambda k: 300),
    # public ⟕ private: a changed order flips up to mf(products.product_id) rows between
    # matched and padded, each costing 2.
    ("SELECT count(*) FROM products p LEFT JOIN orders o ON o.product_id = p.product_id",
     lambda k: 2 * 300),
    # private ⟕ private: the larger of the two sides' bounds.
    (f"SELECT count(*) FROM orders o LEFT JOIN customers c {ORDERS_CUSTOMERS}",
     lambda k: max(1 + k, 2 * (100 + k))),
    (f"SELECT count(*) FROM customers c LEFT JOIN orders o {ORDERS_CUSTOMERS}",
     lambda k: max(100 + k, 2 * (1 + k))),
    (f"SELECT count(*) FROM orders o RIGHT JOIN customers c {ORDERS_CUSTOMERS}",
     lambda k: max(100 + k, 2 * (1 + k))),
    (f"SELECT count(*) FROM orders o FULL JOIN customers c {ORDERS_CUSTOMERS}",
     lambda k: max((1 + k) + (1 + k), (100 + k) + (100 + k))),
    ("SELECT count(*) FROM orders o LEFT JOIN customers c USING (customer_id)",
     lambda k: max(1 + k, 2 * (100 + k))),
    # Self-join: both sides change at once, plus pairs of changed rows.
    ("SELECT count(*) FROM orders o1 LEFT JOIN orders o2 ON o1.customer_id = o2.customer_id",
     lambda k: (100 + k) + 2 * (100 + k) + 1),
    # Several conjuncts: the minimum; a non-equality ON conjunct only narrows matches.
    ("SELECT count(*) FROM orders o LEFT JOIN recommendations r ON o.customer_id = "
     "r.customer_id AND o.product_id = r.product_id AND r.customer_id > 3",
     lambda k: min(max(250 + k, 2 * (100 + k)), max(2000 + k, 2 * (500 + k)))),
])
@pytest.mark.parametrize("k", [0, 1, 132])
def test_outer_join_stability(sql, expected, k):
    assert elastic_at(sql, k) == expected(k)


def test_a_padded_column_joins_again_with_the_inner_factor():
    # o ⟕ p, then an inner join on a column of the padded side: p.product_id recurs
    # 300·mf(o.product_id) times (matched rows only: padded NULLs never join).
    sql = ("SELECT count(*) FROM orders o LEFT JOIN products p ON o.product_id = p.product_id "
           "JOIN recommendations r ON r.product_id = p.product_id")
    assert elastic_at(sql, 0) == max(300 * 2000, 300 * 500 * 1)


def test_where_equalities_never_become_an_outer_join_condition():
    refusal = refusal_of("SELECT count(*) FROM orders o LEFT JOIN customers c ON true "
                         "WHERE o.customer_id = c.customer_id")
    assert "cross join" in refusal.message


FULL_USING = "FROM orders o FULL JOIN customers c USING (customer_id)"


@pytest.mark.parametrize("k", [0, 1, 132])
@pytest.mark.parametrize("where", ["", " WHERE customer_id > 5", " WHERE c.customer_id IS NULL"])
def test_full_join_using_has_the_stability_of_full_join_on(k, where):
    on = "FROM orders o FULL JOIN customers c ON o.customer_id = c.customer_id"
    assert elastic_at(f"SELECT count(*) {FULL_USING}{where}", k) == \
        elastic_at(f"SELECT count(*) {on}", k) == 2 * (100 + k)
    assert elastic_at(f"SELECT count(customer_id) {FULL_USING}{where}", k) == 2 * (100 + k)


@pytest.mark.parametrize(("sql", "message"), [
    # The merged column is COALESCE(o.customer_id, c.customer_id): computed, so neither a
    # key with a domain, nor bounded, nor a join key.
    (f"SELECT customer_id, count(*) {FULL_USING} GROUP BY 1", "computed column"),
    (f"SELECT sum(customer_id) {FULL_USING}", "needs declared bounds"),
    (f"SELECT count(*) {FULL_USING} JOIN recommendations r USING (customer_id)",
     "merged column of a FULL JOIN"),
])
def test_the_merged_column_of_full_join_using_is_computed(sql, message):
    assert message in refusal_of(sql).message


def test_using_after_a_left_join_using_joins_the_merged_column():
    # PostgreSQL's merged o ⟕ c column is o.customer_id: the next USING joins on it.
    sql = ("SELECT count(*) FROM orders o LEFT JOIN customers c USING (customer_id) "
           "JOIN recommendations r USING (customer_id)")
    assert elastic_at(sql, 0) == 250 * 2 * 100


@pytest.mark.parametrize("side", ["", "LEFT", "RIGHT", "FULL"])
@pytest.mark.parametrize("shared", [False, True])
def test_outer_bounds_dominate_the_inner_join(side, shared):
    """An outer join has every row of the inner join and more: never a smaller bound."""
    s1, s2, mf_a, mf_b = constant(1), plus_k(0), plus_k(7), constant(0)
    inner = join_bound("", shared, s1, s2, mf_a, mf_b)
    outer = join_bound(side, shared, s1, s2, mf_a, mf_b)
    for k in range(50):
        assert outer.stability.at(k) >= inner.stability.at(k)
        assert outer.left_factor.at(k) >= inner.left_factor.at(k)
        assert outer.right_factor.at(k) >= inner.right_factor.at(k)


# -- unit mode (demo policy: customers the unit, products public) ---------------------

def test_unit_mode_bounds_a_private_table_left_joined_to_a_public_one():
    plan = unit_plan_of("SELECT p.category, count(*) FROM orders o LEFT JOIN products p "
                        "ON o.product_id = p.product_id GROUP BY 1")
    assert plan.unit is not None  # read from o: tests/golden/rewritten/outer_joins.sql


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM products p LEFT JOIN orders o ON o.product_id = p.product_id",
    "SELECT count(*) FROM orders o RIGHT JOIN products p ON o.product_id = p.product_id",
    "SELECT count(*) FROM orders o FULL JOIN products p ON o.product_id = p.product_id",
    "SELECT count(*) FROM products p LEFT JOIN orders o ON o.product_id = p.product_id "
    "LEFT JOIN customers c ON c.customer_id = o.customer_id",
])
def test_unit_mode_refuses_rows_padded_on_every_private_table(sql):
    # A product without orders is a row of no unit: one customer's order removes it.
    with pytest.raises(Refusal, match="pads rows of every private table"):
        unit_plan_of(sql)


@pytest.mark.parametrize(("sql", "unit"), [
    (f"SELECT count(*) FROM orders o LEFT JOIN customers c {ORDERS_CUSTOMERS}",
     'COALESCE("o"."customer_id", "c"."customer_id")'),
    (f"SELECT count(*) FROM customers c LEFT JOIN orders o {ORDERS_CUSTOMERS}",
     'COALESCE("c"."customer_id", "o"."customer_id")'),
    (f"SELECT count(*) FROM orders o RIGHT JOIN customers c {ORDERS_CUSTOMERS} "
     "AND o.quantity > 5", 'COALESCE("o"."customer_id", "c"."customer_id")'),
    (f"SELECT count(*) FROM orders o FULL JOIN customers c {ORDERS_CUSTOMERS}",
     'COALESCE("o"."customer_id", "c"."customer_id")'),
    (f"SELECT count(*) {FULL_USING}", 'COALESCE("o"."customer_id", "c"."customer_id")'),
    (f"SELECT sum(o.quantity) {FULL_USING} JOIN recommendations r "
     "ON r.customer_id = o.customer_id",
     'COALESCE("o"."customer_id", "c"."customer_id", "r"."customer_id")'),
])
def test_unit_mode_pads_a_private_table_whose_unit_the_join_equates(sql, unit):
    """The outer join's own equality on the unit leaves every row with equal unit columns
    or NULL ones: the row's unit is the first that is not NULL, and one unit's rows
    change only that unit's rows (tests/test_unit_end_to_end.py measures τ)."""
    plan = unit_plan_of(sql)
    # One unit's rows: τ (a count's chosen τ at most the policy's limit, 100), whatever
    # the join's row-level stability.
    elastic = plan.parts[0].elastic
    assert plan.unit is not None and elastic.at(0) == elastic.at(50) <= 100
    assert f"{unit} AS \"_dp_unit\"" in plan.sql


@pytest.mark.parametrize(("sql", "reason"), [
    # Equal within the preserved side only: a padded row of r has o's unit, r's NULL.
    ("SELECT count(*) FROM orders o LEFT JOIN recommendations r "
     "ON o.product_id = r.product_id", "mixes rows"),
    # Two earlier units made one only through a padded table's NULLs: an order and a
    # recommendation of two customers match on product, c matches neither.
    ("SELECT count(*) FROM orders o LEFT JOIN recommendations r ON o.product_id = "
     "r.product_id LEFT JOIN customers c ON c.customer_id = o.customer_id "
     "AND c.customer_id = r.customer_id", "mixes rows"),
    # The same within one table: o.customer_id and o.product_id differ where c is padded.
    ("SELECT count(*) FROM orders o LEFT JOIN customers c ON c.customer_id = o.customer_id "
     "AND c.customer_id = o.product_id JOIN recommendations r "
     "ON r.customer_id = o.product_id", "mixes rows"),
    # A derived table padded: its unit column is not read here.
    ("SELECT count(*) FROM orders o LEFT JOIN (SELECT customer_id FROM recommendations) r "
     "ON r.customer_id = o.customer_id", "derived table"),
    # Inside a derived table, the unit is no column of its own.
    ("SELECT count(*) FROM (SELECT o.customer_id FROM orders o LEFT JOIN customers c "
     "USING (customer_id)) s", "pads a private table"),
])
def test_unit_mode_refuses_other_padded_private_rows(sql, reason):
    with pytest.raises(Refusal, match=reason):
        unit_plan_of(sql)


def test_an_outer_join_condition_never_makes_units_equal():
    # o.customer_id = r.customer_id holds on matched rows only: a padded row of o keeps
    # its own unit while r's is NULL, so the ON of a LEFT JOIN links nothing.
    with pytest.raises(Refusal, match="mixes rows"):
        unit_plan_of("SELECT count(*) FROM orders o JOIN recommendations r ON o.order_id = "
                      "r.product_id LEFT JOIN products p ON p.product_id = o.product_id "
                      "AND o.customer_id = r.customer_id")
