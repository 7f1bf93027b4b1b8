"""Names resolved as PostgreSQL resolves them: quoted identifiers, CTE scopes, alias lists.

Each case was an exact-answer leak (issue 12): the analysis read a different relation or
column than PostgreSQL, so the sensitivity was that of the wrong query. `scans` lists the
private tables the analysis saw; PostgreSQL's plan is checked against it at run time.
"""

from __future__ import annotations

import pytest

from rewriter.errors import Refusal
from rewriter.sensitivity.metrics import Metrics
from tests.test_flex import plan_of, refusal_of

pytestmark = pytest.mark.unit

COLUMNS = Metrics(columns={
    "public.orders": ("order_id", "customer_id", "product_id", "order_date", "quantity",
                      "order_cost"),
    "public.products": ("product_id", "category", "price"),
    "public.customers": ("customer_id", "name", "address"),
})


def sensitivity(sql: str, metrics: Metrics | None = None) -> int:
    plan = plan_of(sql, metrics)
    return plan.parts[plan.visible[0].parts[0]].elastic.at(0)


def test_a_quoted_cte_name_does_not_shadow_an_unquoted_table():
    plan = plan_of('WITH "ORDERS" AS (SELECT * FROM products) SELECT count(*) FROM orders')
    assert plan.checks.scans == ("public.orders",)
    assert plan.parts[0].elastic.at(0) == 1


def test_an_unquoted_cte_name_shadows_whatever_its_case():
    plan = plan_of("WITH Orders AS (SELECT * FROM products) SELECT count(*) FROM ORDERS")
    assert plan.checks.scans == ()
    assert plan.parts[0].elastic.at(0) == 0


def test_a_cte_does_not_see_a_sibling_declared_after_it():
    plan = plan_of("WITH x AS (SELECT * FROM orders), orders AS (SELECT * FROM products) "
                   "SELECT count(*) FROM x")
    assert "public.orders" in plan.checks.scans
    assert plan.parts[0].elastic.at(0) == 1


def test_a_cte_body_resolves_names_where_it_is_defined():
    # Inside the derived table, `orders` is the public CTE; the body of `a` was written
    # outside it, where `orders` is the private table.
    plan = plan_of("WITH a AS (SELECT * FROM orders) SELECT count(*) FROM "
                   "(WITH orders AS (SELECT * FROM products) SELECT * FROM a) d")
    assert "public.orders" in plan.checks.scans
    assert plan.parts[0].elastic.at(0) == 1


def test_a_cte_named_like_its_table_reads_the_table():
    plan = plan_of("WITH orders AS (SELECT * FROM orders) SELECT count(*) FROM orders")
    assert plan.checks.scans.count("public.orders") >= 1
    assert plan.parts[0].elastic.at(0) == 1


def test_a_cte_name_twice_in_one_with_is_postgresqls_error():
    refusal = refusal_of("WITH a AS (SELECT 1), a AS (SELECT 2) SELECT count(*) FROM orders")
    assert refusal.sqlstate == "42712"


def test_an_alias_list_renames_base_table_columns_by_position():
    # o(product_id, customer_id): the first column, order_id, is now called product_id.
    sql = ("SELECT count(*) FROM orders AS o(product_id, customer_id) "
           "JOIN customers c ON o.customer_id = c.customer_id")
    renamed = sensitivity(sql, COLUMNS)
    plain = sensitivity("SELECT count(*) FROM orders o JOIN customers c "
                        "ON o.customer_id = c.customer_id", COLUMNS)
    assert plain == 100  # maxFreq of orders.customer_id
    assert renamed == 100  # customer_id is still the second column: the same key


def test_an_alias_list_that_moves_a_join_key_uses_the_real_column():
    # o(customer_id, cid): the first column, order_id (maxFreq 1), is now called
    # customer_id, and the real customer_id (maxFreq 100) is called cid.
    sql = ("SELECT count(*) FROM orders AS o(customer_id, cid) JOIN recommendations r "
           "ON o.customer_id = r.customer_id")
    plan = plan_of(sql, COLUMNS)
    key = plan.parts[0].elastic
    # the join key is order_id: mf 1 + k on the orders side
    assert key.at(0) == 250  # max(mf(r.customer_id)·1, mf(o.order_id)·1)
    assert key.at(10) == 260


def test_a_name_two_columns_share_after_renaming_is_ambiguous():
    refusal = refusal_of_metrics("SELECT count(*) FROM orders AS o(customer_id) "
                                 "WHERE o.customer_id = 1")
    assert refusal.sqlstate == "42702"


def test_a_renamed_column_cannot_be_named_by_its_old_name():
    refusal = refusal_of_metrics("SELECT count(*) FROM orders AS o(a) WHERE o.order_id = 1")
    assert refusal.sqlstate in ("42703", "0A000")


def test_too_many_column_aliases_is_postgresqls_error():
    refusal = refusal_of_metrics("SELECT count(*) FROM orders AS o(a, b, c, d, e, f, g)")
    assert refusal.sqlstate == "42P10"
    assert "6 columns available but 7 columns specified" in refusal.message


def test_an_alias_list_without_known_columns_is_refused():
    refusal = refusal_of("SELECT count(*) FROM orders AS o(a, b)")
    assert refusal.sqlstate == "0A000"


def test_a_cte_alias_list_renames_its_columns():
    sql = ("WITH a(customer_id, x) AS (SELECT order_id, customer_id FROM orders) "
           "SELECT count(*) FROM a JOIN recommendations r ON a.customer_id = r.customer_id")
    key = plan_of(sql).parts[0].elastic
    assert key.at(0) == 250 and key.at(10) == 260  # the join key is order_id (mf 1 + k)


def test_a_derived_table_alias_list_renames_its_columns():
    sql = ("SELECT count(*) FROM (SELECT order_id, customer_id FROM orders) AS d(customer_id,"
           " y) JOIN recommendations r ON d.customer_id = r.customer_id")
    key = plan_of(sql).parts[0].elastic
    assert key.at(0) == 250 and key.at(10) == 260


def test_a_name_twice_in_a_derived_table_is_ambiguous():
    refusal = refusal_of("SELECT count(*) FROM (SELECT order_id AS a, customer_id AS a "
                         "FROM orders) d WHERE d.a = 1")
    assert refusal.sqlstate == "42702"


def test_an_alias_list_over_select_star_is_refused():
    refusal = refusal_of("SELECT count(*) FROM (SELECT * FROM orders) AS d(a, b)")
    assert refusal.sqlstate == "0A000"


def test_limit_in_a_derived_table_doubles_its_stability():
    assert sensitivity("SELECT count(*) FROM (SELECT order_id FROM orders LIMIT 10) t") == 2


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM (SELECT generate_series(1, 10) FROM orders) s",
    "SELECT count(*) FROM (SELECT unnest(ARRAY[1, 2]) FROM orders) s",
    "SELECT count(*) FROM (SELECT count(*) OVER () AS c FROM orders) s WHERE c > 5",
    "SELECT count(*) FROM (SELECT row_number() OVER (ORDER BY order_id) AS r FROM orders) s",
    "SELECT count(*) FROM (SELECT DISTINCT ON (1 / (quantity - 1)) order_id FROM orders) s",
    "SELECT count(*) FROM orders WHERE date_trunc('day', order_date, 'Europe/Paris') "
    "> '2024-01-01'",
    "SELECT count(*) FROM orders WHERE random() < 0.5",
    "SELECT count(*) FROM (SELECT quantity FROM orders GROUP BY ROLLUP (quantity)) s",
    "SELECT count(*) FROM orders WHERE order_id + 1 > 5",
    "SELECT count(*) FROM orders WHERE CASE WHEN quantity > 5 THEN 1 / (quantity - 6) END = 1",
])
def test_row_multipliers_and_failing_expressions_are_refused_or_computed_first(sql):
    try:
        plan = plan_of(sql)
    except Refusal as refusal:
        assert refusal.sqlstate in ("0A000", "42501")
        return
    # Otherwise what could fail or multiply rows was taken out as a constant, which
    # PostgreSQL computes once before the query (and a second row is refused).
    assert plan.constants, sql


def refusal_of_metrics(sql: str) -> Refusal:
    with pytest.raises(Refusal) as caught:
        plan_of(sql, COLUMNS)
    return caught.value


TYPED = Metrics(columns=COLUMNS.columns, column_types={
    ("public.orders", "order_id"): "integer", ("public.orders", "customer_id"): "integer",
    ("public.orders", "product_id"): "integer", ("public.orders", "quantity"): "integer",
    ("public.orders", "order_cost"): "numeric", ("public.orders", "order_date"): "date",
    ("public.customers", "name"): "text",
})


# Arithmetic and casts on private rows rewritten total (MOD / DIV / NULLIF, DECIMAL, the
# casts written out): tests/golden/rewritten/name_resolution.sql.


@pytest.mark.parametrize("condition", [
    "order_date + 1 > '2024-01-01'",  # not a number
    "customer_id::smallint = 1",  # narrowing can overflow
    "order_cost::integer = 1",
])
def test_arithmetic_without_a_total_form_is_refused(condition):
    with pytest.raises(Refusal) as caught:
        plan_of(f"SELECT count(*) FROM orders WHERE {condition}", TYPED)
    assert caught.value.sqlstate == "0A000"


def test_arithmetic_needs_known_column_types():
    refusal = refusal_of("SELECT count(*) FROM orders WHERE order_id % 2 = 0")
    assert "known type" in refusal.message


TYPES_WITH_TIME = Metrics(columns=COLUMNS.columns, column_types={
    **TYPED.column_types, ("public.orders", "quantity"): "interval",
    ("public.orders", "order_id"): "time without time zone",
    ("public.customers", "address"): "ARRAY",
})


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM orders WHERE extract(day FROM order_id) = 1",  # a time
    "SELECT count(*) FROM orders WHERE date_trunc('day', quantity) IS NULL",  # an interval
    "SELECT count(*) FROM customers WHERE address || address IS NULL",  # arrays
])
def test_functions_total_only_for_some_types_check_the_column_type(sql):
    with pytest.raises(Refusal) as caught:
        plan_of(sql, TYPES_WITH_TIME)
    assert caught.value.sqlstate == "0A000"
    plan_of(sql.replace("order_id)", "order_date)").replace("quantity)", "order_date)")
            .replace("address || address",
                                                                  "name || name"), TYPED)
