"""Unit mode in process: policy checks, sensitivities, the key-selection
threshold against its exact probability, and the released distribution's scale."""

from __future__ import annotations

import dataclasses
import math
import statistics

import pytest

from mechanisms.key_selection import key_selection_threshold, release_probability
from mechanisms.seeded_source import SeededRandomSource
from proxy.config import PrivacySettings
from proxy.engine.release import release
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.aggregate.unit_mode import unit_sensitivities
from rewriter.analysis.classify import parse_query
from rewriter.checks.plan_check import plan_failure
from rewriter.errors import Refusal
from rewriter.plan import UnitBounds
from rewriter.policy.model import Policy
from rewriter.policy.session import with_session_bounds
from rewriter.release.explain import explain
from rewriter.sensitivity.calibrate import calibrate
from tests.test_unit_golden import METRICS
from tests.unit_support import demo_policy

pytestmark = pytest.mark.unit

NO_SHIFT = PrivacySettings(shift_interval=(0.0, 0.0))
UNIT = {"privacy_unit": {"table": "customers", "column": "customer_id"}}


def _tight(choose: bool = True) -> Policy:
    """The demo policy with τ = 10, at most 2 groups and 3 rows per group per unit."""
    policy = demo_policy()
    assert policy.unit is not None
    return dataclasses.replace(policy, unit=dataclasses.replace(
        policy.unit, max_contributions=10, max_groups=2, max_group_contributions=3,
        choose_contributions=choose))


# τ fixed at 10, above κ·τ_g: tests/golden/rewritten/unit_mode.sql `[unit fixed tau]`.
FIXED_TAU = _tight(choose=False)
# recommendations reach the unit through orders, private (CHAIN) or public (ALIAS_CHAIN):
# tests/golden/rewritten/unit_mode.sql `[unit chain]`, `[unit alias chain]`.
CHAIN = Policy.from_dict({**UNIT, "tables": {
    "customers": {"private": True}, "orders": {"private": True, "unit": "customer_id"},
    "recommendations": {"private": True,
                        "unit": "product_id -> orders.order_id -> orders.customer_id"}}})
ALIAS_CHAIN = Policy.from_dict({**UNIT, "tables": {
    "customers": {"private": True}, "orders": {"private": False},
    "recommendations": {"private": True,
                        "unit": "product_id -> orders.order_id -> orders.customer_id"}}})


def plan_of(sql: str, policy: Policy | None = None):
    return plan_private_aggregate(parse_query(sql), policy or demo_policy(), 0, METRICS)


# -- policy -------------------------------------------------------------------------

@pytest.mark.parametrize(("settings", "message"), [
    ({"privacy_unit": {"table": "customers"}}, "privacy_unit must be"),
    ({**UNIT, "max_contributions": 0}, "max_contributions must be a whole number >= 1"),
    ({**UNIT, "max_groups": 2.5}, "max_groups must be a whole number >= 1"),
    ({**UNIT, "row_level_fallback": "yes"}, "row_level_fallback must be true or false"),
    ({"max_contributions": 3}, "need privacy_unit"),
    ({**UNIT, "tables": {"customers": {"private": False}}}, "the unit must be a private table"),
    ({**UNIT, "tables": {"items": {"private": True, "unit": "a -> orders.b"}}},
     "[tables.items] unit"),
    ({**UNIT, "tables": {"items": {"private": True, "unit": "a -> orders.b -> x.c"}}},
     "must name two columns of one table"),
    ({"tables": {"orders": {"private": True, "unit": "customer_id"}}}, "needs privacy_unit"),
])
def test_bad_unit_settings_are_refused_at_start_naming_the_setting(settings, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        Policy.from_dict(settings)


def test_defaults_and_the_group_bound_capped_by_tau():
    policy = Policy.from_dict({**UNIT, "max_contributions": 4, "max_group_contributions": 9})
    assert policy.unit is not None
    assert (policy.unit.max_contributions, policy.unit.max_groups,
            policy.unit.max_group_contributions, policy.unit.row_level_fallback) == \
        (4, 5, 4, False)
    assert str(policy.unit_path("public.customers")) == "customer_id"


def test_without_a_unit_the_plan_is_flex_exactly():
    row_level = demo_policy(unit=False)
    plan = plan_of("SELECT count(*) FROM orders o JOIN customers c "
                   "ON o.customer_id = c.customer_id", row_level)
    assert plan.unit is None and plan.checks.windows == 0  # the SQL: golden/rewritten
    assert str(plan.parts[0].elastic) == "100 + 1k"  # FLEX's reference ES


# -- sensitivities ------------------------------------------------------------------

@pytest.mark.parametrize(("tau", "kappa", "tau_g", "l1", "l2"), [
    (10, 5, 10, 10, 10.0),        # the total bound τ binds
    (10, 3, 2, 6, math.sqrt(3) * 2),  # κ·τ_g < τ: L1 = κ·τ_g, L2 = √κ·τ_g
    (1, 5, 1, 1, 1.0),            # one row per unit: a histogram like FLEX's rows
    (12, 4, 3, 12, 6.0),          # κ·τ_g = τ
])
def test_histogram_sensitivities(tau, kappa, tau_g, l1, l2):
    bounds = UnitBounds("public.customers.customer_id", tau, kappa, tau_g)
    assert unit_sensitivities(bounds, histogram=True) == (l1, pytest.approx(l2))
    assert unit_sensitivities(bounds, histogram=False) == (tau, tau)


def test_a_unit_histogram_part_is_not_doubled_and_is_pure():
    tight = _tight()
    plan = plan_of("SELECT quantity, count(*), sum(order_cost) FROM orders GROUP BY 1", tight)
    calibration = calibrate(plan, 1.0, 1e-6)
    assert calibration.pure and calibration.delta == 0
    # The SUM's own count of its values (COUNT(*) counts rows whose value is NULL too)
    # takes a tenth of the SUM's ε.
    count, total, values = calibration.parts
    # τ chosen per query, at most κ·τ_g = 6; weighed per unit, no sort.
    assert count.elastic_sensitivity == 6 and count.scale == 6 / 0.5
    assert total.elastic_sensitivity == 6 * 5000
    assert total.scale == pytest.approx(6 * 5000 / 0.45)
    assert values.elastic_sensitivity == 6 and values.scale == pytest.approx(6 / 0.05)
    assert '"_dp_n"' in plan.sql and "row_number" not in plan.sql
    # At a fixed τ = 10 above κ·τ_g the sort's L1 of 6 is the smaller: it stays (its
    # limits 3, 2 and 10: tests/golden/rewritten/unit_mode.sql).
    plan = plan_of("SELECT quantity, count(*), sum(order_cost) FROM orders GROUP BY 1",
                   FIXED_TAU)
    count, total, values = calibrate(plan, 1.0, 1e-6).parts
    assert count.elastic_sensitivity == 6 and total.elastic_sensitivity == 6 * 5000
    assert values.elastic_sensitivity == 6


def test_gaussian_uses_the_units_l2():
    policy = demo_policy()
    assert policy.unit is not None
    # τ fixed (as SET dp.max_contributions does): the histogram keeps row_number()
    # bounding with κ and τ_g; a chosen τ's cells have L2 up to τ.
    tight = dataclasses.replace(policy, unit=dataclasses.replace(
        policy.unit, max_contributions=100, max_groups=4, max_group_contributions=5,
        choose_contributions=False))
    plan = plan_of("SELECT quantity, count(*) FROM orders GROUP BY 1", tight)
    calibration = calibrate(plan, 0.5, 1e-6, mechanism="gaussian")
    assert calibration.parts[0].l2_sensitivity == pytest.approx(math.sqrt(4) * 5)


def test_the_shift_unit_is_public_in_unit_mode():
    # μ_u's unit depends on ε, bounds and τ only, never on measured data.
    plan = plan_of("SELECT sum(o.order_cost) FROM orders o JOIN recommendations r "
                   "ON o.customer_id = r.customer_id")
    calibration = calibrate(plan, 0.5, 1e-6)
    # At the limit of the τ it may choose (at release: the chosen τ, which is released).
    # (0.45: a tenth of the SUM's ε goes to its count of values)
    assert calibration.parts[0].shift_scale == pytest.approx(100 * 5000 / 0.45)


def test_explain_reports_mode_tau_kappa_and_both_scales():
    fixed = with_session_bounds(demo_policy(), {"dp.max_contributions": "10"})
    report = explain("SELECT count(*) FROM orders JOIN customers USING (customer_id) "
                     "WHERE product_id = 1", fixed, METRICS, 0.1, 1e-8)
    assert report["mode"] == "unit" and report["max_contributions"] == 10
    assert "not counted" in report["truncation"] and "not released" in report["truncation"]
    (column,) = report["columns"]
    assert column["noise_scale"] == pytest.approx(100)
    assert column["flex_noise_scale"] > 30 * column["noise_scale"]
    selection = explain("SELECT customer_id, count(*) FROM orders GROUP BY 1", demo_policy(),
                        METRICS, 0.1, 1e-8)
    assert selection["max_groups"] == 5 and selection["max_group_contributions"] == 10
    # Over a declared domain κ·τ_g ≥ τ: a group bound would not lower the noise, so none.
    histogram = explain("SELECT quantity, count(*) FROM orders GROUP BY 1", demo_policy(),
                        METRICS, 0.1, 1e-8)
    assert histogram["max_groups"] == 10 and "_dp_group" not in histogram["rewritten_sql"]


def test_explain_of_a_count_with_a_chosen_bound_names_the_limit():
    report = explain("SELECT count(*) FROM orders WHERE product_id = 1", demo_policy(),
                     METRICS, 0.1, 1e-8)
    assert report["max_contributions"] == "chosen per query"
    assert report["contributions_limit"] == 100 and "AboveThreshold" in report["truncation"]
    (column,) = report["columns"]
    assert column["noise_scale"] == pytest.approx(1000)  # at the limit, the whole ε
    assert "row_number" not in report["rewritten_sql"]
    assert "rows beyond τ" in column["upper_end"]  # the interval's allowance, told


def test_explain_of_chosen_bounds_tells_every_part_of_the_error():
    """A histogram at a chosen τ releases its cells on a grid of 1/Q rows: its noise scale
    is (limit + cells/Q)/ε, as released. A sum with chosen clamping bounds names the rows
    beyond τ its interval allows for, beside the clamping bias."""
    histogram = explain("SELECT quantity, count(*) FROM orders GROUP BY 1", demo_policy(),
                        METRICS, 0.1, 1e-8)
    column = histogram["columns"][1]
    cap = histogram["contributions_limit"]
    assert column["noise_scale"] == pytest.approx((cap + 10 / 1024) / 0.1)
    assert column["noise_scale"] > cap / 0.1
    total = explain("SELECT sum(order_cost) FROM orders", demo_policy(), METRICS, 0.1, 1e-8)
    error = total["columns"][0]["error"]
    assert "far edge" in error and "rows beyond τ" in error


def test_a_private_table_without_a_path_is_refused_naming_the_setting():
    policy = Policy.from_dict({**UNIT, "tables": {"customers": {"private": True},
                                                  "orders": {"private": True}}})
    with pytest.raises(Refusal, match="public.orders has no path to the privacy unit") as raised:
        plan_of("SELECT count(*) FROM orders", policy)
    # The operator reads the setting; the analyst is told what they can do.
    assert raised.value.reason == "rows of no single privacy unit: policy setting " \
        "[tables.orders] unit"
    assert "ask the data owner to say how orders reaches it" in (raised.value.hint or "")


def test_a_foreign_key_chain_reaches_the_unit_through_a_joined_table():
    """The unit column each plan reads: tests/golden/rewritten/unit_mode.sql."""
    plan = plan_of("SELECT count(*) FROM recommendations r JOIN orders o "
                   "ON r.product_id = o.order_id", CHAIN)
    assert plan.unit is not None
    # Without the join, dpgate joins orders itself, and the plan check expects its scan.
    alone = plan_of("SELECT count(*) FROM recommendations WHERE product_id = 1 OR "
                    "product_id = 2", CHAIN)
    assert alone.checks.scans.count("public.orders") == 1


def test_a_chain_never_reads_the_unit_through_a_column_alias_list():
    """`orders AS o(order_id, product_id, customer_id)` names the base product_id
    customer_id: the unit `o.customer_id` would be the product, and a customer's rows
    spread over many partitions. dpgate joins the hop table itself instead."""
    plan = plan_of("SELECT count(*) FROM recommendations r JOIN orders AS "
                   "o(order_id, product_id, customer_id) ON r.product_id = o.order_id",
                   ALIAS_CHAIN)
    # The unit read through the hop dpgate joins: tests/golden/rewritten/unit_mode.sql.
    assert '"o"."customer_id" AS "_dp_unit"' not in plan.sql


def test_a_chain_through_a_key_that_is_not_unique_is_refused():
    policy = Policy.from_dict({**UNIT, "tables": {
        "customers": {"private": True}, "orders": {"private": True, "unit": "customer_id"},
        "recommendations": {"private": True,
                            "unit": "product_id -> orders.product_id -> orders.customer_id"}}})
    with pytest.raises(Refusal, match="orders.product_id is not unique"):
        plan_of("SELECT count(*) FROM recommendations", policy)


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM (SELECT * FROM orders WHERE quantity > 2) AS s",
    "SELECT count(*) FROM (SELECT * FROM orders)",  # no alias: valid in PostgreSQL 16
    "WITH big AS (SELECT customer_id AS who, quantity FROM orders WHERE quantity > 5) "
    "SELECT b.quantity, count(*) FROM big b JOIN customers c ON b.who = c.customer_id "
    "GROUP BY 1",
])
def test_a_plain_derived_table_passes_its_unit_on(sql):
    plan = plan_of(sql)
    assert plan.unit is not None  # the SQL: tests/golden/rewritten/unit_mode.sql


@pytest.mark.parametrize("sql", [
    "SELECT sum(s.q) FROM (SELECT quantity AS q FROM orders) AS s",  # unit not selected
    "SELECT count(*) FROM (SELECT * FROM orders LIMIT 10) AS s",
    "SELECT count(*) FROM (SELECT customer_id FROM orders) AS s JOIN recommendations r "
    "ON s.customer_id = r.product_id",  # joined off the unit
])
def test_other_derived_tables_are_refused_in_unit_mode(sql):
    with pytest.raises(Refusal, match="derived table|mixes rows"):
        plan_of(sql)


# -- key selection ------------------------------------------------------------------

@pytest.mark.parametrize(("group_rows", "groups", "scale", "delta"), [
    (1, 1, 1.0, 1e-6), (10, 5, 10.0, 1e-6), (3, 2, 2.5, 1e-3), (10, 5, 100.0, 1e-8),
    (5, 10, 0.7, 1e-5),
])
def test_the_threshold_keeps_a_units_groups_below_delta(group_rows, groups, scale, delta):
    threshold = key_selection_threshold(group_rows, groups, scale, delta)
    # The unit's κ groups, each with its τ_g rows (the worst case), exact probability.
    exact = release_probability(group_rows, groups, scale, threshold)
    assert exact <= delta
    assert exact >= delta / 4  # and not wastefully high: the union bound is near tight
    # Fewer rows in a group pass even less often.
    assert release_probability(1, groups, scale, threshold) <= exact


def test_release_probability_matches_a_brute_force_sum():
    scale, threshold = 2.0, 7.5
    p = math.exp(-1 / scale)
    pmf = {x: (1 - p) / (1 + p) * p ** abs(x) for x in range(-400, 401)}
    one = sum(v for x, v in pmf.items() if 3 + x > threshold)
    assert release_probability(3, 4, scale, threshold) == pytest.approx(1 - (1 - one) ** 4)


def test_key_selection_in_unit_mode_charges_delta_and_uses_the_unit_threshold():
    plan = plan_of("SELECT customer_id, count(*) FROM orders GROUP BY customer_id")
    calibration = calibrate(plan, 1.0, 1e-6)
    assert calibration.delta == 1e-6
    assert calibration.threshold == key_selection_threshold(10, 5, 10.0, 1e-6)


def test_a_unit_alone_in_its_groups_is_released_with_probability_at_most_delta():
    plan = plan_of("SELECT customer_id, count(*) FROM orders GROUP BY customer_id")
    calibration = calibrate(plan, 1.0, 0.05)
    rng = SeededRandomSource(15)
    trials = 4_000
    # the unit's κ' = 5 groups with τ_g' = 10 rows each: the worst case
    rows = [[str(k).encode(), b"10"] for k in range(5)]
    released = sum(bool(release(plan, calibration, [23], rows, 0.0, NO_SHIFT, rng).rows)
                   for _ in range(trials))
    assert released / trials <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)
    assert released > 0


# -- the released distribution --------------------------------------------------------

def test_a_bounded_count_is_released_at_scale_tau_over_epsilon():
    # τ fixed by the session: the count is Σ_u min(c_u, τ) of the per-unit counts.
    plan = plan_of("SELECT count(*) FROM orders o JOIN customers c "
                   "ON o.customer_id = c.customer_id WHERE o.product_id = 1",
                   with_session_bounds(demo_policy(), {"dp.max_contributions": "10"}))
    calibration = calibrate(plan, 0.5, 1e-8)
    scale = calibration.parts[0].scale
    assert scale == 10 / 0.5
    rng = SeededRandomSource(20261125)
    # 25 units with 12 rows (10 counted each) and 50 with one: 300
    histogram = [[b"1", b"50"], [b"12", b"25"]]
    noise = [int(release(plan, calibration, [], histogram, 0.0, NO_SHIFT, rng).rows[0][0])
             - 300 for _ in range(6_000)]
    # Discrete Laplace of scale b: mean 0, E|X| ≈ b, Var = 2p/(1−p)² ≈ 2b² (p = e^(−1/b)).
    p = math.exp(-1 / scale)
    variance = 2 * p / (1 - p) ** 2
    assert abs(statistics.fmean(noise)) < 4 * math.sqrt(variance / len(noise))
    assert statistics.pvariance(noise) == pytest.approx(variance, rel=0.08)
    assert statistics.fmean(abs(x) for x in noise) == pytest.approx(scale, rel=0.06)


# -- plan check -----------------------------------------------------------------------

def _explain_with_windows(count: int) -> list[dict]:
    node: dict = {"Node Type": "Seq Scan", "Relation Name": "orders", "Schema": "public"}
    for _ in range(count):
        node = {"Node Type": "WindowAgg", "Plans": [node]}
    return [{"Plan": {"Node Type": "Aggregate", "Plans": [node]}}]


def test_the_plan_check_allows_dpgates_own_windows_and_no_more():
    from collections import Counter
    scans = Counter({"public.orders": 1})
    policy = demo_policy()
    assert plan_failure(_explain_with_windows(1), scans, policy, own_windows=1) is None
    assert plan_failure(_explain_with_windows(4), scans, policy, own_windows=4) is None
    assert "window function" in (plan_failure(_explain_with_windows(2), scans, policy,
                                              own_windows=1) or "")
    assert "window function" in (plan_failure(_explain_with_windows(1), scans, policy) or "")


def test_the_notice_tells_the_mode_and_never_how_many_rows_were_left_out():
    from rewriter.release.unit_report import mode_notice
    from tests.test_unit_golden import policies

    unit = plan_of("SELECT count(*) FROM orders WHERE product_id = 1")
    assert mode_notice(unit) == ("each public.customers.customer_id counted with at most 10 "
                                 "rows; rows beyond are not counted (how many is not released)")
    selection = plan_of("SELECT customer_id, count(*) FROM orders GROUP BY 1")
    assert "in at most 5 groups" in (mode_notice(selection) or "")
    mixed = "SELECT count(*) FROM orders o JOIN recommendations r ON o.product_id = r.product_id"
    fallback = plan_of(mixed, policies()["fallback"])  # type: ignore[arg-type]
    assert fallback.unit is None and "answered with row-level privacy, not per unit" in \
        (mode_notice(fallback) or "")
    assert mode_notice(plan_of("SELECT count(*) FROM orders", demo_policy(unit=False))) is None


def test_an_expression_inside_sum_is_bounded_by_interval_arithmetic_in_unit_mode():
    plan = plan_of("SELECT sum(quantity * order_cost) FROM orders")
    assert plan.unit is not None
    (output,) = plan.outputs
    assert output.bounds == (0.0, 50000.0)  # quantity in [1, 10], order_cost in [0, 5000]
    assert plan.parts[0].magnitude == 50000.0  # the clamps: tests/golden/rewritten/unit_mode.sql
