"""PostgreSQL's own plan of a private statement against dpgate's analysis (plan_check.py).

The plans here are the shapes EXPLAIN (VERBOSE, FORMAT JSON) prints; the end-to-end tests
(test_attacks.py) run the real thing.
"""

from __future__ import annotations

from collections import Counter

import pytest

from rewriter.checks.plan_check import plan_failure, public_plan_failure
from rewriter.checks.plan_joins import JoinKeys, catalog_sql, join_failure, renaming_failure
from tests.test_flex import POLICY

pytestmark = pytest.mark.unit


def scan(relation: str, schema: str = "public", **extra: object) -> dict:
    return {"Node Type": "Seq Scan", "Relation Name": relation, "Schema": schema, **extra}


def explain(*children: dict, kind: str = "Aggregate") -> list:
    return [{"Plan": {"Node Type": kind, "Plans": list(children)}}]


def test_a_plan_reading_what_the_analysis_saw_passes():
    plan = explain({"Node Type": "Hash Join", "Plans": [scan("orders"), scan("products")]})
    assert plan_failure(plan, Counter({"public.orders": 1}), POLICY) is None


def test_a_private_table_the_analysis_did_not_see_is_refused():
    plan = explain(scan("orders"))
    assert "public.orders 1 time(s) where dpgate's analysis saw 0" in \
        plan_failure(plan, Counter(), POLICY)


def test_more_scans_of_a_table_than_the_analysis_counted_are_refused():
    plan = explain({"Node Type": "Hash Join", "Plans": [scan("orders"), scan("orders")]})
    assert plan_failure(plan, Counter({"public.orders": 1}), POLICY) is not None
    assert plan_failure(plan, Counter({"public.orders": 2}), POLICY) is None


def test_row_multipliers_are_refused():
    for kind in ("ProjectSet", "WindowAgg", "Recursive Union"):
        plan = explain({"Node Type": kind, "Plans": [scan("orders")]})
        assert plan_failure(plan, Counter({"public.orders": 1}), POLICY) is not None


def test_only_the_domain_series_may_be_a_function_in_from():
    series = {"Node Type": "Function Scan", "Function Name": "generate_series"}
    other = {"Node Type": "Function Scan", "Function Name": "unnest"}
    assert plan_failure(explain(series), Counter(), POLICY) is None
    assert "unnest" in plan_failure(explain(other), Counter(), POLICY)


def test_subplans_are_refused_but_a_ctes_initplan_is_not():
    subplan = scan("products", **{"Parent Relationship": "SubPlan", "Subplan Name": "SubPlan 1"})
    initplan = scan("products", **{"Parent Relationship": "InitPlan",
                                   "Subplan Name": "InitPlan 1 (returns $0)"})
    cte = scan("orders", **{"Parent Relationship": "InitPlan", "Subplan Name": "CTE c"})
    scans = Counter({"public.orders": 1})
    assert plan_failure(explain(scan("orders"), subplan), scans, POLICY) is not None
    assert plan_failure(explain(scan("orders"), initplan), scans, POLICY) is not None
    assert plan_failure(explain(cte), scans, POLICY) is None


def test_constants_may_read_public_tables_only():
    assert public_plan_failure(explain(scan("products")), POLICY) is None
    assert "public.customers" in public_plan_failure(explain(scan("customers")), POLICY)


# -- join columns (plan_joins.py) ------------------------------------------------------

ORDERS_CUSTOMERS = JoinKeys(frozenset({("public.orders", "customer_id"),
                                       ("public.customers", "customer_id")}))


def aliased(relation: str, alias: str, **extra: object) -> dict:
    return scan(relation, Alias=alias, **extra)


def hash_join(condition: str, *children: dict) -> dict:
    return {"Node Type": "Hash Join", "Hash Cond": condition, "Plans": list(children)}


def join_verdict(plan: list, keys: JoinKeys = ORDERS_CUSTOMERS) -> str | None:
    return join_failure(plan, keys, POLICY)


def test_a_join_on_the_analysed_columns_passes():
    plan = explain(hash_join("(o.customer_id = c.customer_id)", aliased("orders", "o"),
                             aliased("customers", "c")))
    assert join_verdict(plan) is None


def test_a_private_join_on_another_column_is_refused():
    plan = explain(hash_join("(o.order_id = c.customer_id)", aliased("orders", "o"),
                             aliased("customers", "c")))
    failure = join_verdict(plan)
    assert failure is not None and "public.orders on column order_id" in failure
    assert "disagree" in failure


def test_every_condition_kind_is_read():
    """Merge Cond, Join Filter, a nested loop's Filter and an inner index scan's Index
    Cond join rows too; casts around a column are looked through."""
    wrong = "((o.order_id)::bigint = (c.customer_id)::bigint)"
    shapes = [
        {"Node Type": "Merge Join", "Merge Cond": wrong},
        {"Node Type": "Nested Loop", "Join Filter": wrong},
        {"Node Type": "Nested Loop", "Filter": f"((c.address <> 'x'::text) AND {wrong})"},
    ]
    for shape in shapes:
        plan = explain({**shape, "Plans": [aliased("orders", "o"), aliased("customers", "c")]})
        assert join_verdict(plan) is not None, shape
    index = {"Node Type": "Nested Loop", "Plans": [
        aliased("customers", "c"),
        {"Node Type": "Index Scan", "Relation Name": "orders", "Schema": "public",
         "Alias": "o", "Index Cond": "(o.order_id = c.customer_id)"}]}
    assert join_verdict(explain(index)) is not None


def test_filters_that_are_not_join_keys_pass():
    """A comparison other than =, an equality under OR, an equality with an expression
    or within one table only filter: the analysis took no frequency from them."""
    conditions = ["(o.order_id > c.customer_id)",
                  "((o.order_id = c.customer_id) OR (o.quantity > 3))",
                  "((o.order_id + 1) = c.customer_id)",
                  "(o.order_id = o.customer_id)",
                  "(o.order_id = $1)"]
    for condition in conditions:
        plan = explain({"Node Type": "Nested Loop",
                        "Join Filter": f"((o.customer_id = c.customer_id) AND {condition})",
                        "Plans": [aliased("orders", "o"), aliased("customers", "c")]})
        assert join_verdict(plan) is None, condition


def test_public_joins_and_subquery_columns_are_not_private_joins():
    """products with products, or dpgate's own d0.k0 = q.k0 over a subquery scan."""
    public = explain(hash_join("(p.category = p2.product_id)", aliased("products", "p"),
                               aliased("products", "p2")))
    assert join_verdict(public) is None
    domain = explain(hash_join("(d0.k0 = q.k0)", {"Node Type": "Function Scan",
                                                  "Function Name": "generate_series",
                                                  "Alias": "d0"},
                               {"Node Type": "Subquery Scan", "Alias": "q",
                                "Plans": [aliased("orders", "orders")]}))
    assert join_verdict(domain) is None


def test_a_public_column_joined_with_a_private_one_is_checked_too():
    """products.category has another maxFreq than products.product_id."""
    keys = JoinKeys(frozenset({("public.orders", "product_id"),
                               ("public.products", "product_id")}))
    good = explain(hash_join("(o.product_id = p.product_id)", aliased("orders", "o"),
                             aliased("products", "p")))
    bad = explain(hash_join("(o.product_id = p.category)", aliased("orders", "o"),
                            aliased("products", "p")))
    assert join_verdict(good, keys) is None
    assert "public.products on column category" in join_verdict(bad, keys)


def test_alias_list_names_are_read_as_the_tables_columns():
    """`orders AS o(a, customer_id)`: PostgreSQL prints o.a for orders.order_id."""
    renamed = (("public.orders", "o", (("a", "order_id"), ("customer_id", "customer_id"))),)
    keys = JoinKeys(frozenset({("public.orders", "order_id"),
                               ("public.customers", "customer_id")}), renamed)
    plan = explain(hash_join("(o.a = c.customer_id)", aliased("orders", "o"),
                             aliased("customers", "c")))
    assert join_verdict(plan, keys) is None
    # The same plan without the alias list would join on a column named a: refused.
    assert join_verdict(plan, JoinKeys(keys.columns)) is not None
    # EXPLAIN makes repeated aliases unique (o_1): the list written as o still applies.
    unique = explain(hash_join("(o_1.a = c.customer_id)", aliased("orders", "o_1"),
                               aliased("customers", "c")))
    assert join_verdict(unique, keys) is None


def test_plan_failure_runs_the_join_check_when_given_join_keys():
    plan = explain(hash_join("(o.order_id = c.customer_id)", aliased("orders", "o"),
                             aliased("customers", "c")))
    scans = Counter({"public.orders": 1, "public.customers": 1})
    assert plan_failure(plan, scans, POLICY) is None
    assert plan_failure(plan, scans, POLICY, join_keys=ORDERS_CUSTOMERS) is not None


def test_dpgates_own_domain_join_passes_and_only_with_its_key():
    """SELECT product_id, count(*) … GROUP BY product_id: the domain (DISTINCT products)
    LEFT JOIN the rows, which PostgreSQL flattens into a join of the two base columns."""
    keys = JoinKeys(frozenset(), domains=frozenset({(("public.orders", "product_id"),
                                                     ("public.products", "product_id"))}))
    plan = explain(hash_join("(orders.product_id = products.product_id)",
                             aliased("orders", "orders"), aliased("products", "products")))
    assert join_verdict(plan, keys) is None
    other = explain(hash_join("(orders.customer_id = products.product_id)",
                              aliased("orders", "orders"), aliased("products", "products")))
    assert "public.orders on column customer_id" in join_verdict(other, keys)


def test_an_alias_list_read_in_another_order_than_the_catalogs_is_refused():
    read = (("public.orders", "o", (("a", "order_id"), ("b", "customer_id"))),)
    keys = JoinKeys(frozenset(), read)
    assert renaming_failure(keys, {"public.orders": ["order_id", "customer_id"]}) is None
    failure = renaming_failure(keys, {"public.orders": ["customer_id", "order_id"]})
    assert failure is not None and "alias list of o" in failure
    assert "'\"public\".\"orders\"'::regclass" in catalog_sql("public.orders")


def test_a_private_group_key_the_analysis_did_not_group_on_is_refused():
    grouped = JoinKeys(frozenset(), groups=frozenset({("public.orders", "customer_id")}))
    plan = explain(aliased("orders", "orders"), kind="Aggregate")
    plan[0]["Plan"]["Group Key"] = ["orders.customer_id"]
    assert join_verdict(plan, grouped) is None
    plan[0]["Plan"]["Group Key"] = ["orders.customer_id", "orders.order_id"]
    failure = join_verdict(plan, grouped)
    assert failure is not None and "groups on public.orders.order_id" in failure
    # A public column (a domain's keys) and an expression over a column are not checked.
    plan[0]["Plan"]["Group Key"] = ["products.category", "date_trunc('MONTH'::text, g.v)"]
    plan[0]["Plan"]["Plans"].append(aliased("products", "products"))
    assert join_verdict(plan, grouped) is None
    # Without the analysis's group columns (None) group keys are not checked.
    plan[0]["Plan"]["Group Key"] = ["orders.order_id"]
    assert join_verdict(plan, JoinKeys(frozenset())) is None


@pytest.mark.parametrize("node", [
    {"Node Type": "Limit"},
    {"Node Type": "Sample Scan", "Relation Name": "products", "Schema": "public"},
    {"Node Type": "Sort", "Sort Key": ["(random())"]},
    {"Node Type": "Seq Scan", "Relation Name": "products", "Schema": "public",
     "Filter": "(pg_catalog.clock_timestamp() > '2024-01-01')"},
    {"Node Type": "Result", "Output": ["nextval('s'::regclass)"]},
])
def test_rows_read_twice_must_not_be_limited_sampled_or_drawn(node: dict):
    """A public view's body shows in the plan only: its LIMIT, TABLESAMPLE, random() or
    clock may give the two reads of a weighted sum (or a histogram by unit size) other
    rows, and a unit then weighs more than τ. One read of them is harmless."""
    plan = explain({"Node Type": "Hash Join", "Plans": [scan("orders"), node]})
    scans = Counter({"public.orders": 1})
    assert plan_failure(plan, scans, POLICY) is None
    assert "two reads" in (plan_failure(plan, scans, POLICY, reads_twice=True) or "")


def test_rows_read_twice_through_plain_nodes_pass():
    plan = explain({"Node Type": "Hash Join", "Plans": [
        scan("orders", Filter="(orders.order_date < '2025-01-01'::date)"),
        {"Node Type": "Sort", "Sort Key": ["products.product_id"],
         "Plans": [scan("products")]}]})
    assert plan_failure(plan, Counter({"public.orders": 1}), POLICY, reads_twice=True) is None
