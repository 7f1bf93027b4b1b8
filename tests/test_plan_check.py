"""PostgreSQL's own plan of a private statement against dpgate's analysis (plan_check.py).

The plans here are the shapes EXPLAIN (VERBOSE, FORMAT JSON) prints; the end-to-end tests
(test_attacks.py) run the real thing.
"""

from __future__ import annotations

from collections import Counter

from rewriter.plan_check import plan_failure, public_plan_failure
from tests.test_flex import POLICY


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
