"""Estimators that do not collapse to a bound, and the error bars of their answers.

Seeded: each test draws its noise from a fixed SeededRandomSource, so it either always
passes or always fails; the tolerances are set from the mechanisms' own tails.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from accounting import Budget
from mechanisms.seeded_source import SeededRandomSource
from proxy.config import PrivacySettings
from proxy.engine.notice import answer_notice
from proxy.engine.release import release
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.plan import PrivateAggregate
from rewriter.policy.model import Policy
from rewriter.release.error_bars import average_interval
from rewriter.sensitivity.calibrate import calibrate
from rewriter.sensitivity.metrics import Metrics

pytestmark = pytest.mark.unit

# A clinic: birth years declared within [1930, 2020] (issue 29's example).
CLINIC = Policy.from_dict({"tables": {"patients": {"private": True, "columns": {
    "birth_year": {"bounds": [1930, 2020]},
    "ward": {"key_selection": True}}}}})
CLINIC_METRICS = Metrics({("public.patients", "birth_year"): 5,
                          ("public.patients", "ward"): 50},
                         {"public.patients": ("id", "birth_year", "ward")},
                         {("public.patients", "birth_year"): "integer",
                          ("public.patients", "ward"): "text"})
NO_SHIFT = PrivacySettings(shift_interval=(0.0, 0.0))
SHIFTED = PrivacySettings(shift_interval=(-1.0, 1.0))


def clinic_plan(sql: str) -> PrivateAggregate:
    return plan_private_aggregate(parse_query(sql), CLINIC, 0, CLINIC_METRICS)


def _centred_row(years: list[int]) -> list[bytes | None]:
    """What the backend returns for avg(birth_year): Σ(year − 1975) and the count."""
    return [str(sum(y - 1975 for y in years)).encode(), str(len(years)).encode()]


def test_an_average_is_a_sum_centred_on_the_bounds_midpoint_over_a_count():
    plan = clinic_plan("SELECT avg(birth_year) FROM patients")
    total, count = plan.parts
    assert (total.aggregate, total.magnitude) == ("sum", 45.0)  # (2020 − 1930) / 2
    assert count.aggregate == "count"  # the SQL: tests/golden/rewritten/estimators.sql


def test_the_average_of_years_does_not_collapse_to_the_lower_bound():
    """200 patients born around 1976 at ε = 0.1: uncentred, the sum's noise (scale
    2020/0.05 = 40,400) over a count of 200 pushed the answer to a bound most of the time
    (1930.0 in the issue); centred it is 45/0.05 = 900, ±4.5 years per draw."""
    years = [1950 + (i * 7) % 53 for i in range(200)]
    truth = sum(years) / len(years)
    plan = clinic_plan("SELECT avg(birth_year) FROM patients")
    calibration = calibrate(plan, 0.1, 1e-8)
    rng = SeededRandomSource(29)
    answers = [float(release(plan, calibration, [], [_centred_row(years)], 0.0, NO_SHIFT,
                             rng).rows[0][0]) for _ in range(400)]
    at_a_bound = sum(a in (1930.0, 2020.0) for a in answers)
    assert at_a_bound == 0
    errors = sorted(abs(a - truth) for a in answers)
    assert errors[len(errors) // 2] < 10


def test_with_negligible_noise_the_average_is_the_exact_mean():
    years = [1931, 1999, 2019, 1976]
    plan = clinic_plan("SELECT avg(birth_year) FROM patients")
    answer = release(plan, calibrate(plan, 1e12, 1e-8), [], [_centred_row(years)], 0.0,
                     NO_SHIFT, SeededRandomSource(1))
    assert abs(Decimal(answer.rows[0][0]) - Decimal(sum(years)) / 4) < Decimal("1e-6")


def test_the_average_interval_covers_the_truth_at_the_stated_confidence():
    """Coverage of the NOTICE's ± for AVG, with the widest analyst shift the
    configuration allows (the bound must hold whatever the analyst's own shift)."""
    years = [1940 + (i * 11) % 71 for i in range(60)]
    truth = sum(years) / len(years)
    plan = clinic_plan("SELECT avg(birth_year) FROM patients")
    calibration = calibrate(plan, 0.5, 1e-8)
    rng = SeededRandomSource(7)
    trials, covered = 2000, 0
    for trial in range(trials):
        draw = -1.0 + 2.0 * (trial % 101) / 100  # shifts across the whole interval
        answer = release(plan, calibration, [], [_centred_row(years)], draw, SHIFTED, rng)
        released = float(answer.rows[0][0])
        covered += abs(released - truth) <= float(answer.bounds["avg"])
    assert covered / trials >= 0.95


def test_the_interval_of_a_mean_is_computed_from_released_values_only():
    # ŝ = 100 ± 50 over n̂ = 10 ± 5: the mean of x − m lies in [50/15, 150/5] = [3.3, 30].
    low, high = average_interval(100.0, 10.0, 50.0, 5.0, (0.0, 100.0))
    assert (low, high) == (50 + 50 / 15, 50 + 30)
    # The true count is at least one (an average of rows): n in [1, 7], s in [50, 150].
    assert average_interval(100.0, 2.0, 50.0, 5.0, (0.0, 100.0)) == (50 + 50 / 7, 100.0)


def test_a_count_is_never_released_below_zero():
    plan = clinic_plan("SELECT count(*) FROM patients WHERE birth_year > 2000")
    calibration = calibrate(plan, 0.05, 1e-8)  # scale 20: half the draws fall below 0
    rng = SeededRandomSource(3)
    released = [int(release(plan, calibration, [], [[b"0"]], 0.0, NO_SHIFT, rng).rows[0][0])
                for _ in range(300)]
    assert min(released) == 0
    assert sum(r == 0 for r in released) > 100  # the negative half, released as 0


def test_a_group_by_that_released_no_group_says_so():
    plan = clinic_plan("SELECT ward, count(*) FROM patients GROUP BY ward")
    calibration = calibrate(plan, 1.0, 1e-6)
    answer = release(plan, calibration, [25], [[b"east", b"1"]], 0.0, NO_SHIFT,
                     SeededRandomSource(5))
    assert answer.rows == []  # one patient is far below the threshold
    notice = answer_notice(plan, calibration, answer, _budget(), 0.95)
    assert "no group was released (no group's noisy count passed the key-selection " \
        "threshold)" in notice


def test_variances_are_computed_from_centred_sums():
    plan = clinic_plan("SELECT stddev(birth_year) FROM patients")
    sums = [p for p in plan.parts if p.aggregate == "sum"]
    assert sorted(p.magnitude for p in sums) == [45.0, 45.0 ** 2]
    assert plan.post_sql is not None


def _budget() -> Budget:
    return Budget(epsilon_total=10.0, epsilon_spent=1.0, delta_total=1e-5,
                  delta_spent=0.0, queries=1)

