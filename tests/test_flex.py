"""The FLEX analysis (elastic sensitivity, bounded aggregates, group keys) on the reference
policy, without a database."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from proxy.config import load_policy_file
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import classify, parse_query
from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from rewriter.policy.model import Policy
from rewriter.release.explain import explain
from rewriter.sensitivity.calibrate import calibrate, key_selection_threshold
from rewriter.sensitivity.elastic import (
    add,
    maximum,
    minimum,
    multiply,
    plus_k,
    poly,
    smooth_sensitivity,
)
from rewriter.sensitivity.metrics import Metrics, MissingMetrics

pytestmark = pytest.mark.unit

POLICY = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")
JOIN_RECOMMENDATIONS = ("SELECT count(*) FROM orders o JOIN recommendations r "
                        "ON o.customer_id = r.customer_id")


def plan_of(sql: str, metrics: Metrics | None = None) -> PrivateAggregate:
    return plan_private_aggregate(parse_query(sql), POLICY, 0, metrics)


def elastic_at(sql: str, k: int, column: int = 0) -> int:
    plan = plan_of(sql)
    output = plan.visible[column]
    return plan.parts[output.parts[0]].elastic.at(k)


def refusal_of(sql: str) -> Refusal:
    with pytest.raises(Refusal) as caught:
        plan_of(sql)
    return caught.value


# -- FLEX reference values ----------------------------------------------------------------

@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT count(*) FROM orders WHERE product_id = 1", lambda k: 1),
    (JOIN_RECOMMENDATIONS, lambda k: 250 + k),
    ("SELECT count(*) FROM orders o, customers c WHERE o.customer_id = c.customer_id",
     lambda k: 100 + k),
    ("SELECT count(*) FROM orders o1 JOIN orders o2 ON o1.customer_id = o2.customer_id",
     lambda k: 2 * (100 + k) + 1),
    ("SELECT count(*) FROM orders o JOIN products p ON o.product_id = p.product_id",
     lambda k: 300),
])
@pytest.mark.parametrize("k", [0, 1, 7, 132, 1000])
def test_reference_elastic_sensitivities(sql, expected, k):
    assert elastic_at(sql, k) == expected(k)


def test_histogram_reference_is_twice_the_stability_and_the_key_costs_nothing():
    report = explain("SELECT order_date, count(*) FROM orders GROUP BY 1", POLICY, Metrics(),
                     0.1, 1e-8)
    key, count = report["columns"]
    assert (key["kind"], key["elastic_sensitivity"]) == ("key", 0.0)
    assert count["elastic_sensitivity"] == 2


def test_public_only_query_has_sensitivity_zero():
    report = explain("SELECT count(*) FROM products", POLICY, Metrics(), 0.1, 1e-8)
    assert report["columns"][0]["elastic_sensitivity"] == 0
    assert report["columns"][0]["noise_scale"] == 0


def test_pure_count_scales_flex_twenty_dpgate_ten():
    report = explain("SELECT count(*) FROM orders", POLICY, Metrics(), 0.1, 1e-8)
    column = report["columns"][0]
    assert report["pure"] is True and report["delta"] == 0
    assert column["flex_noise_scale"] == pytest.approx(20, rel=1e-9)
    assert column["noise_scale"] == pytest.approx(10, rel=1e-9)


def test_join_reference_smooth_sensitivity_exactly():
    report = explain(JOIN_RECOMMENDATIONS, POLICY, Metrics(), 0.1, 1e-8)
    column = report["columns"][0]
    assert report["pure"] is False and report["delta"] == 1e-8
    assert column["k_star"] == 132
    assert column["smooth_sensitivity"] == pytest.approx(270.4590928149084, rel=1e-9)
    assert column["noise_scale"] == pytest.approx(5409.181856298167, rel=1e-9)
    smooth = smooth_sensitivity(plan_of(JOIN_RECOMMENDATIONS).parts[0].elastic, 0.1, 1e-8, 1)
    assert smooth.beta == pytest.approx(0.0026159071954330025, rel=1e-12)


def test_explain_reports_es_at_the_requested_k():
    report = explain(JOIN_RECOMMENDATIONS, POLICY, Metrics(), 0.1, 1e-8, k=10)
    assert report["columns"][0]["elastic_sensitivity"] == 260


# -- the smooth-sensitivity scan -----------------------------------------------------------

def brute_force_smooth(function, beta: float, last: int) -> tuple[float, int]:
    values = [math.exp(-beta * k) * function(k) for k in range(last + 1)]
    best = max(range(len(values)), key=values.__getitem__)
    return values[best], best


@pytest.mark.parametrize("elastic", [
    plus_k(250), add(multiply(plus_k(100), plus_k(3)), poly(7)),
    maximum(plus_k(500), multiply(plus_k(2), plus_k(2))),
    minimum(multiply(plus_k(1), plus_k(1), plus_k(1)), poly(4000)),
])
def test_smooth_scan_finds_the_maximum_also_after_a_local_decrease(elastic):
    smooth = smooth_sensitivity(elastic, 0.5, 1e-6, 3)
    expected, k_star = brute_force_smooth(elastic.at, smooth.beta, 20_000)
    assert smooth.sensitivity == pytest.approx(expected, rel=1e-12)
    assert smooth.k_star == k_star


def test_max_of_dominated_polynomials_simplifies():
    assert maximum(plus_k(1), plus_k(100)) == plus_k(100)
    assert minimum(plus_k(1), plus_k(100)) == plus_k(1)
    assert multiply(poly(0), plus_k(5)) == poly(0)


# -- join shapes ---------------------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM orders o JOIN customers c USING (customer_id)",
    "SELECT count(*) FROM orders o INNER JOIN customers c ON c.customer_id = o.customer_id",
    "SELECT count(*) FROM customers c, orders o WHERE c.customer_id = o.customer_id "
    "AND o.quantity > 2",
    "WITH o AS (SELECT customer_id FROM orders WHERE quantity > 1) "
    "SELECT count(*) FROM o JOIN customers c ON o.customer_id = c.customer_id",
    "SELECT count(*) FROM (SELECT customer_id FROM orders) o "
    "JOIN customers c ON o.customer_id = c.customer_id",
])
def test_equivalent_join_spellings_have_the_same_sensitivity(sql):
    assert elastic_at(sql, 0) == 100 and elastic_at(sql, 5) == 105


def test_constant_date_arithmetic_and_date_functions_are_allowed():
    plan = plan_of("SELECT count(*) FROM orders WHERE order_date > current_date - "
                   "interval '30 days' AND date_trunc('month', order_date) = '2024-03-01'")
    assert plan.parts[0].elastic.at(0) == 1


def test_three_way_join_multiplies_frequencies():
    sql = ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
           "JOIN recommendations r ON r.customer_id = c.customer_id")
    # orders ⋈ customers: S = 100 + k, mf(c.customer_id) = (1 + k)(100 + k).
    # ⋈ recommendations: max(mf(r.cid)·S, mf(c.cid)·1) = max((250+k)(100+k), (1+k)(100+k)).
    for k in (0, 3, 50):
        assert elastic_at(sql, k) == (250 + k) * (100 + k)


def test_several_equalities_take_the_minimum():
    sql = ("SELECT count(*) FROM orders o JOIN recommendations r "
           "ON o.customer_id = r.customer_id AND o.product_id = r.product_id")
    for k in (0, 10, 2000):
        assert elastic_at(sql, k) == min(250 + k, 2000 + k)


def test_union_all_adds_stabilities():
    sql = ("SELECT count(*) FROM (SELECT customer_id FROM orders UNION ALL "
           "SELECT customer_id FROM recommendations) u")
    assert elastic_at(sql, 0) == 2


def test_nested_aggregation_doubles_the_stability():
    sql = ("SELECT count(*) FROM (SELECT customer_id, count(*) AS n FROM orders "
           "GROUP BY customer_id HAVING count(*) > 3) t")
    assert elastic_at(sql, 0) == 2
    assert elastic_at("SELECT count(DISTINCT customer_id) FROM orders", 0) == 1


def test_unmeasured_join_column_asks_for_its_metric():
    with pytest.raises(MissingMetrics) as caught:
        plan_of("SELECT count(*) FROM orders o JOIN customers c ON o.quantity = c.address")
    assert caught.value.columns == (("public.orders", "quantity"),)
    measured = Metrics(max_freq={("public.orders", "quantity"): 30000})
    plan = plan_of("SELECT count(*) FROM orders o JOIN customers c ON o.quantity = c.address",
                   measured)
    assert plan.parts[0].elastic.at(0) == max(5 * 1, 30000 * 1)


def test_measured_metric_counts_but_declared_wins():
    metrics = Metrics(max_freq={("public.recommendations", "customer_id"): 9})
    assert plan_of(JOIN_RECOMMENDATIONS, metrics).parts[0].elastic.at(0) == 250


# -- aggregates ----------------------------------------------------------------------------

def test_sum_and_avg_use_bounds_and_split_epsilon():
    plan = plan_of("SELECT sum(order_cost), avg(order_cost) FROM orders")
    # The sum, avg's sum (centred on the bounds' midpoint at release) and avg's count.
    assert [(p.aggregate, p.centred) for p in plan.parts] == \
        [("sum", False), ("sum", True), ("count", False)]
    calibration = calibrate(plan, 0.35, 1e-8)
    # Scales for the declared bounds; release.py rescales a sum to the bounds it chooses.
    # The avg's sum takes 1.5 slots of the split (AVERAGE_SUM_WEIGHT), its count one.
    assert calibration.parts[0].scale == pytest.approx(5000 / 0.1)
    assert calibration.parts[1].scale == pytest.approx(2500 / 0.15)
    assert calibration.parts[2].scale == pytest.approx(1 / 0.1)
    assert sum(part.epsilon for part in calibration.parts) == pytest.approx(0.35)
    # The clamp in the rewritten SQL: tests/golden/row/sums.sql.


def test_sum_over_a_join_scales_with_es():
    plan = plan_of("SELECT sum(o.quantity) FROM orders o JOIN recommendations r "
                   "ON o.customer_id = r.customer_id")
    assert plan.parts[0].elastic.at(0) * plan.parts[0].magnitude == 250 * 10


# -- GROUP BY ------------------------------------------------------------------------------

def test_domain_histogram_lists_the_whole_domain():
    plan = plan_of("SELECT quantity, count(*) FROM orders WHERE customer_id = 42 GROUP BY 1")
    assert plan.grouping is not None and plan.grouping.domain_size == 10
    # The SQL (every key from generate_series, LEFT JOIN the rows), keys from a public
    # table, HAVING and ORDER BY after noise: tests/golden/row/histograms.sql.


def test_too_many_cells_are_refused_with_the_size():
    refusal = refusal_of("SELECT order_date, quantity, count(*) FROM orders GROUP BY 1, 2")
    assert refusal.sqlstate == "42501" and "3660 cells" in refusal.message


def test_key_selection_threshold_and_delta():
    plan = plan_of("SELECT customer_id, count(*) FROM orders GROUP BY customer_id")
    assert plan.grouping is not None and plan.grouping.key_selection
    calibration = calibrate(plan, 1.0, 1e-6)
    assert calibration.delta == 1e-6
    assert calibration.threshold == pytest.approx(1 + 2 * math.log(1 / 1e-6))
    assert key_selection_threshold(1, 2.0, 1e-6) == calibration.threshold


def test_order_by_a_count_not_selected_adds_a_hidden_noisy_column():
    # (LIMIT 1 would be the most frequent group, answered by the exponential mechanism.)
    plan = plan_of("SELECT quantity FROM orders GROUP BY quantity ORDER BY count(*) DESC "
                   "LIMIT 2")
    assert [o.hidden for o in plan.outputs] == [False, True]
    assert plan.post.order == ((1, True),) and plan.post.limit == 2


# -- refusals ------------------------------------------------------------------------------

@pytest.mark.parametrize(("sql", "sqlstate", "words"), [
    ("SELECT count(*) FROM orders o CROSS JOIN customers c", "0A000", "cross join"),
    ("SELECT count(*) FROM orders o, customers c", "0A000", "cross join"),
    ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id < c.customer_id",
     "0A000", "cross join"),
    ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
     "OR o.order_id = c.customer_id", "0A000", "OR"),
    ("SELECT count(*) FROM orders o FULL JOIN customers c USING (customer_id) "
     "JOIN recommendations r USING (customer_id)", "0A000", "merged column of a FULL JOIN"),
    ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id + 1 = c.customer_id",
     "0A000", "cross join"),
    ("SELECT count(*) FROM orders o WHERE EXISTS (SELECT 1 FROM customers c "
     "WHERE c.customer_id > o.customer_id)", "0A000", "only in equalities"),
    ("SELECT count(*) FROM orders o WHERE o.product_id IN (SELECT p.product_id "
     "FROM products p WHERE p.product_id = o.product_id)", "0A000", "correlated"),
    ("SELECT customer_id FROM orders", "42501", "would reveal rows"),
    ("SELECT sum(customer_id) FROM orders", "42501", "bounds"),
    ("SELECT address, count(*) FROM customers GROUP BY address", "42501", "key_selection"),
    ("SELECT count(*) FROM orders GROUP BY quantity + product_id", "0A000", "computed"),
    ("SELECT min(order_id) FROM orders", "42501", "bounds"),
    ("SELECT count(*) FROM orders WHERE pg_sleep(1) IS NULL", "42501", "pg_sleep"),
    ("SELECT count(*) FROM orders WHERE quantity::date = '2024-01-01'", "0A000", "cast"),
    ("SELECT count(*) FROM orders WHERE 1 / quantity > 0", "0A000", "known type"),
    ("SELECT count(*) FROM (SELECT quantity FROM orders ORDER BY 1 / (quantity - 1)) t",
     "0A000", "known type"),
    ("WITH unused AS (SELECT 1 / (quantity - 1) FROM orders) SELECT count(*) FROM orders",
     "0A000", "known type"),
    ("SELECT count(*) OVER () FROM orders", "0A000", "window"),
    ("SELECT count(*) FROM orders WHERE (SELECT count(*) FROM customers) > 0", "0A000",
     "subqueries"),
    ("SELECT customer_id, count(*) FROM orders o JOIN recommendations r USING (customer_id) "
     "GROUP BY 1", "0A000", "key selection over joins"),
])
def test_refusals(sql, sqlstate, words):
    (statement,) = classify(sql, POLICY, Metrics())
    refusal = statement.plan
    assert isinstance(refusal, Refusal), refusal
    assert refusal.sqlstate == sqlstate
    assert words.lower() in (refusal.message + (refusal.hint or "")).lower()


def test_refusal_positions_point_at_the_construct():
    sql = "SELECT count(*) FROM orders o JOIN customers c ON o.customer_id < c.customer_id"
    (statement,) = classify(sql, POLICY, Metrics())
    assert isinstance(statement.plan, Refusal)
    assert sql[statement.plan.position - 1:].startswith("customers c ON")


def test_join_with_a_catalog_table_is_refused():
    refusal = refusal_of("SELECT count(*) FROM orders o JOIN pg_class c ON o.order_id = c.oid")
    assert refusal.sqlstate == "42501"


def test_smooth_path_needs_a_delta():
    with pytest.raises(Refusal) as caught:
        calibrate(plan_of(JOIN_RECOMMENDATIONS), 0.1, 0.0)
    assert "delta" in caught.value.message


def test_the_shift_unit_on_the_smooth_path_does_not_depend_on_measured_data():
    """μ_u depends on the analyst's draw and public quantities only. The join's
    scale follows the measured maxFreq; the shift's unit must not."""
    sql = ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id")
    policy = Policy.from_dict({"tables": {"orders": {"private": True},
                                          "customers": {"private": True}}})
    calibrations = []
    for busiest in (3, 3000):
        metrics = Metrics(max_freq={("public.orders", "customer_id"): busiest,
                                    ("public.customers", "customer_id"): 1})
        plan = plan_private_aggregate(parse_query(sql), policy, 0, metrics)
        calibrations.append(calibrate(plan, 0.1, 1e-8))
    few, many = (c.parts[0] for c in calibrations)
    assert not calibrations[0].pure and many.scale > 10 * few.scale  # the data shows here
    assert few.shift_scale == many.shift_scale == pytest.approx(1 / 0.1)  # and not here


def test_the_shift_unit_on_the_pure_path_is_the_noise_scale():
    calibration = calibrate(plan_of("SELECT count(*) FROM orders"), 0.1, 1e-8)
    assert calibration.pure
    assert calibration.parts[0].shift_scale == calibration.parts[0].scale == pytest.approx(10)


def test_explain_reports_a_post_processed_column_and_the_aggregate_it_reads():
    report = explain("SELECT count(*) * 2 FROM orders", POLICY, Metrics(), 0.1, 1e-8)
    assert report["supported"] is True, report
    column, = report["columns"]
    assert {k: column[k] for k in ("name", "kind", "aggregate", "elastic_sensitivity",
                                   "reads", "confidence")} == {
        "name": "?column?", "kind": "computed", "aggregate": None,
        "elastic_sensitivity": 0.0, "reads": ["count"], "confidence": 0.95}
    assert "interval arithmetic" in column["error"]
    assert report["hidden_aggregates"] == ["count"]
