"""From true aggregates to released rows: key selection, HAVING/ORDER BY/LIMIT after noise."""

from __future__ import annotations

from pathlib import Path

import pytest

from mechanisms.seeded_source import SeededRandomSource
from proxy.config import PrivacySettings, load_policy_file
from proxy.engine.release import release
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.plan import PrivateAggregate
from rewriter.sensitivity.calibrate import calibrate

pytestmark = pytest.mark.unit

POLICY = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")
NO_SHIFT = PrivacySettings(shift_interval=(0.0, 0.0))
INT4 = 23


def plan_of(sql: str) -> PrivateAggregate:
    return plan_private_aggregate(parse_query(sql), POLICY, 0)


def test_key_selection_releases_a_one_row_group_with_probability_at_most_delta():
    plan = plan_of("SELECT customer_id, count(*) FROM orders GROUP BY customer_id")
    calibration = calibrate(plan, 1.0, 0.05)
    rng = SeededRandomSource(2024)
    trials = 20_000
    released = sum(
        len(release(plan, calibration, [INT4], [[b"7", b"1"]], 0.0, NO_SHIFT, rng).rows)
        for _ in range(trials))
    assert released / trials <= 0.05
    assert released > 0  # the threshold is not so high that nothing ever passes


def test_key_selection_releases_large_groups():
    plan = plan_of("SELECT customer_id, count(*) FROM orders GROUP BY customer_id")
    calibration = calibrate(plan, 1.0, 1e-6)
    rows = [[str(key).encode(), b"1000"] for key in range(50)]
    answer = release(plan, calibration, [INT4], rows, 0.0, NO_SHIFT, SeededRandomSource(1))
    assert len(answer.rows) == 50


def test_having_order_by_and_limit_run_on_the_released_values():
    plan = plan_of("SELECT quantity, count(*) AS n FROM orders GROUP BY quantity "
                   "HAVING count(*) >= 20 ORDER BY n DESC, quantity LIMIT 2 OFFSET 1")
    calibration = calibrate(plan, 1e9, 1e-8)  # noise far below one unit: exact values
    true_rows = [[str(q).encode(), str(c).encode()] for q, c in
                 [(1, 50), (2, 10), (3, 40), (4, 40), (5, 20)]]
    answer = release(plan, calibration, [INT4], true_rows, 0.0, NO_SHIFT,
                     SeededRandomSource(3))
    assert answer.rows == [["3", "40"], ["4", "40"]]
    assert answer.columns == [("quantity", INT4), ("n", 20)]


def test_empty_sum_beside_an_average_is_null_from_the_averages_noisy_count():
    plan = plan_of("SELECT sum(quantity), avg(quantity) FROM orders WHERE customer_id = -1")
    calibration = calibrate(plan, 1e9, 1e-8)
    # sum(quantity), then avg's sum of quantity (centred at release) and its count, which
    # also decides whether the SUM is NULL (tests/test_sum_presence.py): no extra part
    assert len(plan.parts) == 3
    answer = release(plan, calibration, [], [[None, None, b"0"]], 0.0, NO_SHIFT,
                     SeededRandomSource(4))
    # No count to divide by, no value to sum: NULL, as PostgreSQL's avg and sum of nothing.
    assert answer.rows[0] == [None, None]


def test_average_is_clamped_to_the_declared_bounds():
    plan = plan_of("SELECT avg(quantity) FROM orders")
    calibration = calibrate(plan, 0.01, 1e-8)  # noise far larger than the data
    # Buckets of quantity's [1, 10]: [1, 2), [2, 4), [4, 8), [8, 10]; two 10s.
    rows = [[b"{0,0,0,2,0,0,0,20}", b"2"]]
    rng = SeededRandomSource(5)
    answers = [release(plan, calibration, [], rows, 0.0, NO_SHIFT, rng).rows[0][0]
               for _ in range(200)]
    numbers = [float(a) for a in answers if a is not None]
    assert numbers and min(numbers) >= 1 and max(numbers) <= 10
    assert 10.0 in numbers and 1.0 in numbers  # the noise pushed some beyond both bounds


def test_numeric_keys_sort_as_numbers_with_nan_above_them():
    from proxy.engine.release import _sort_key

    keys = ["10", "2", "NaN", "-Infinity", None, "1e3"]
    assert sorted(keys, key=lambda key: _sort_key(key, True)) == [
        "-Infinity", "2", "10", "1e3", "NaN", None]
