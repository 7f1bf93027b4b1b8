"""A SUM over no value is NULL in PostgreSQL: dpgate releases NULL when a noisy count of
the SUM's values, released beside it, is below 0.5 (decided from released values only,
never from the data). The count is the statement's own COUNT or AVG of the same values
where there is one (no extra spend), else a hidden count that takes
privacy.sum_count_share of the SUM's ε."""

from __future__ import annotations

from pathlib import Path

import pytest

from mechanisms.seeded_source import SeededRandomSource
from proxy.config import PrivacySettings, load_policy_file
from proxy.engine.release import release
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.plan import PrivateAggregate
from rewriter.release.explain import explain
from rewriter.sensitivity.calibrate import AVERAGE_SUM_WEIGHT, calibrate
from rewriter.sensitivity.metrics import Metrics

pytestmark = pytest.mark.unit

POLICY = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")
NO_SHIFT = PrivacySettings(shift_interval=(0.0, 0.0))


def plan_of(sql: str) -> PrivateAggregate:
    return plan_private_aggregate(parse_query(sql), POLICY, 0)


def test_a_lone_sum_gets_a_count_of_its_values_at_a_share_of_its_epsilon():
    plan = plan_of("SELECT sum(order_cost) FROM orders")
    total, count = plan.parts
    assert (total.aggregate, count.aggregate, count.presence_of) == ("sum", "count", 0)
    assert plan.outputs[0].present == 1 and len(plan.visible) == 1
    calibration = calibrate(plan, 1.0, 1e-8, sum_count_share=0.25)
    assert [part.epsilon for part in calibration.parts] == [0.75, 0.25]
    assert calibration.epsilon == 1.0  # the charge is unchanged: the SUM's share is split
    # The SUM's noise follows its smaller ε: 5000 / 0.75.
    assert calibration.parts[0].scale == pytest.approx(5000 / 0.75)


def test_a_count_or_average_of_the_same_values_serves_without_extra_spend():
    for sql in ("SELECT sum(order_cost), count(order_cost) FROM orders",
                "SELECT count(order_cost), sum(order_cost) FROM orders",
                "SELECT sum(quantity), avg(quantity) FROM orders"):
        plan = plan_of(sql)
        assert all(part.presence_of is None for part in plan.parts), sql
        total = next(o for o in plan.outputs if o.aggregate == "sum")
        assert plan.parts[total.present].aggregate == "count"
        split = calibrate(plan, 1.0, 1e-8)
        # An even split, but an AVG's sum takes AVERAGE_SUM_WEIGHT slots: nothing extra
        # for the SUM's count of values either way.
        weights = [AVERAGE_SUM_WEIGHT if any(o.aggregate == "avg" and o.parts[0] == i
                                             for o in plan.outputs) else 1.0
                   for i in range(len(plan.parts))]
        assert [part.epsilon for part in split.parts] == \
            pytest.approx([w / sum(weights) for w in weights]), sql
    # COUNT(*) does not serve: it counts rows whose value is NULL, where PostgreSQL's SUM
    # of them is NULL.
    plan = plan_of("SELECT count(*), sum(order_cost) FROM orders")
    assert [part.presence_of for part in plan.parts] == [None, None, 1]


def test_the_sum_is_null_exactly_when_the_released_count_is_below_one_half():
    plan = plan_of("SELECT sum(order_cost) FROM orders WHERE quantity > 100")
    calibration = calibrate(plan, 1e9, 1e-8)  # noise far below one unit
    rng = SeededRandomSource(4)
    empty = release(plan, calibration, [], [[None, b"0"]], 0.0, NO_SHIFT, rng)
    assert empty.rows == [[None]]
    # order_cost's sum comes per bucket of its clamping bounds' grid: 250.5 is in
    # [128, 256), the 11th of 16 (counts first, then sums).
    buckets = [0] * 32
    buckets[10], buckets[26] = 1, 250.5
    raw = ("{" + ",".join(str(v) for v in buckets) + "}").encode()
    some = release(plan, calibration, [], [[raw, b"1"]], 0.0, NO_SHIFT, rng)
    assert float(some.rows[0][0]) == pytest.approx(250.5, abs=1e-3)


def test_with_noise_the_decision_follows_the_noisy_count_not_the_data():
    """Over no row at ε 0.1 the count's noise (scale 100) is ≥ 0.5 about half the time:
    then a noisy number is released, as over rows. Nothing in the data decides it."""
    plan = plan_of("SELECT sum(order_cost) FROM orders WHERE quantity > 100")
    calibration = calibrate(plan, 0.1, 1e-8)
    rng = SeededRandomSource(7)
    answers = [release(plan, calibration, [], [[None, b"0"]], 0.0, NO_SHIFT, rng).rows[0][0]
               for _ in range(400)]
    nulls = sum(answer is None for answer in answers)
    assert 120 < nulls < 280


def test_grouped_sums_are_null_per_group():
    plan = plan_of("SELECT quantity, sum(order_cost) FROM orders GROUP BY quantity")
    calibration = calibrate(plan, 1e9, 1e-8)
    buckets = [0] * 32
    buckets[4], buckets[20] = 1, 7  # one value 7, in [4, 8)
    seven = ("{" + ",".join(str(v) for v in buckets) + "}").encode()
    rows = [[str(q).encode(), None if q % 2 else seven, b"0" if q % 2 else b"1"]
            for q in range(1, 11)]
    answer = release(plan, calibration, [23], rows, 0.0, NO_SHIFT, SeededRandomSource(2))
    assert [row[1] is None for row in answer.rows] == [q % 2 == 1 for q in range(1, 11)]


def test_explain_states_the_sums_smaller_epsilon_and_its_count():
    report = explain("SELECT sum(order_cost) FROM orders", POLICY, Metrics(), 1.0, 1e-8,
                     sum_count_share=0.1)
    column = report["columns"][0]
    assert column["epsilon"] == pytest.approx(1.0)
    assert column["null_when"]["own_count"] is True
    assert column["null_when"]["count_epsilon"] == pytest.approx(0.1)
    assert column["noise_scale"] == pytest.approx(5000 / 0.9)
    shared = explain("SELECT sum(order_cost), count(order_cost) FROM orders", POLICY,
                     Metrics(), 1.0, 1e-8)["columns"][0]
    assert shared["null_when"] == {"count_of_values_below": 0.5, "own_count": False,
                                   "count_epsilon": 0.0, "count_noise_scale": 2.0}
