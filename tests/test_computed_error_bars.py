"""The error bars of columns computed from released values (a standard deviation, a
variance, a ratio, a count times 2) cover the truth at the stated confidence.

A synthetic table's exact aggregates stand in for the backend's rows; release() noises them
from a seeded source many times, each released column is computed from the released values
as PostgreSQL computes the statement's post_sql, and the NOTICE's interval around it must
hold the exact answer of the data in ≥ 95% of the draws. An interval too narrow — a union
bound dropped, one part's noise forgotten, the variance's cancellation ignored — fails.
"""

from __future__ import annotations

import math
import random
import statistics
from fractions import Fraction
from pathlib import Path

import pytest

from bench.accuracy_kinds import ends
from mechanisms.seeded_source import SeededRandomSource
from proxy.config import PrivacySettings, load_policy_file
from proxy.engine.release import release
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.sensitivity.calibrate import calibrate

pytestmark = pytest.mark.statistical

POLICY = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")
SQL = ("SELECT stddev(order_cost), var_pop(quantity), "
       "count(*) FILTER (WHERE quantity > 3) * 100.0 / count(*) AS pct, count(*) * 2 AS twice "
       "FROM orders WHERE product_id = 1")
DRAWS = 200
# What the released outputs o4… are, as _computed reads them.
POST_SQL = (
    'SELECT SQRT(CASE WHEN "r"."o4" > 1 THEN GREATEST("r"."o5" - "r"."o6" * "r"."o7" / '
    '"r"."o8", 0) / ("r"."o9" - 1) END) AS "stddev", CASE WHEN "r"."o10" > 0 THEN '
    'GREATEST("r"."o11" - "r"."o12" * "r"."o13" / "r"."o14", 0) / ("r"."o15") END AS '
    '"variance_pop", "r"."o16" * 100.0 / "r"."o17" AS "pct", "r"."o18" * 2 AS "twice" '
    'FROM __dpgate_released__ AS r')


def _data(rows: int) -> tuple[list[float], list[int]]:
    generator = random.Random(29)
    costs = [round(min(max(generator.lognormvariate(5.5, 0.6), 0), 5000), 2)
             for _ in range(rows)]
    return costs, [generator.randint(1, 10) for _ in range(rows)]


def _true_row(costs: list[float], quantities: list[int]) -> list[bytes]:
    """The rewritten query's row: per part, count(cost), Σ(cost − 2500)², Σ(cost − 2500),
    count(quantity), Σ(q − 5.5)², Σ(q − 5.5), count(q > 3), count(*)."""
    cost = [Fraction(str(c)) - 2500 for c in costs]
    quantity = [Fraction(q) - Fraction(11, 2) for q in quantities]
    values = [len(costs), sum(c * c for c in cost), sum(cost), len(quantities),
              sum(q * q for q in quantity), sum(quantity), sum(q > 3 for q in quantities),
              len(costs)]
    return [str(float(v) if isinstance(v, Fraction) else v).encode() for v in values]


def _computed(row: list[str | None]) -> dict[str, float | None]:
    """POST_SQL's columns from the released outputs o0…, as PostgreSQL computes them."""
    o = [None if v is None else float(v) for v in row]
    stddev = None if o[4] is None or o[4] <= 1 or o[5] is None or o[6] is None else \
        math.sqrt(max(o[5] - o[6] * o[7] / o[8], 0) / (o[9] - 1))
    variance = None if o[10] is None or o[10] <= 0 or o[11] is None or o[12] is None else \
        max(o[11] - o[12] * o[13] / o[14], 0) / o[15]
    return {"stddev": stddev, "variance_pop": variance,
            "pct": o[16] * 100.0 / o[17] if o[17] else None, "twice": o[18] * 2}


@pytest.mark.parametrize("rows, epsilon", [(3000, 0.1), (400, 1.0)])
def test_the_intervals_of_computed_columns_cover_the_truth(rows, epsilon):
    plan = plan_private_aggregate(parse_query(SQL), POLICY, 0)
    assert [p.aggregate for p in plan.parts] == ["count", "sum", "sum", "count", "sum", "sum",
                                                 "count", "count"]
    assert plan.post_sql == POST_SQL
    costs, quantities = _data(rows)
    truth = {"stddev": statistics.stdev(costs), "variance_pop": statistics.pvariance(quantities),
             "pct": sum(q > 3 for q in quantities) * 100.0 / rows, "twice": 2 * rows}
    calibration = calibrate(plan, epsilon, 1e-8)
    columns = [(o.name, 20 if o.aggregate == "count" else 1700) for o in plan.outputs]
    rng = SeededRandomSource(int(epsilon * 1000) + rows)
    covered = {name: 0 for name in truth}
    stated = {name: 0 for name in truth}
    finite = {name: 0 for name in truth}
    for _ in range(DRAWS):
        answer = release(plan, calibration, [], [_true_row(costs, quantities)], 0.0,
                         PrivacySettings(), rng, columns)
        values = _computed(answer.rows[0])
        for name, exact in truth.items():
            if values[name] is None:
                continue
            interval = ends(answer.bounds.get(name))
            assert interval is not None, (name, answer.bounds)
            below, above = interval
            stated[name] += 1
            finite[name] += math.isfinite(above)
            covered[name] += values[name] - below <= exact <= values[name] + above
    for name in truth:
        assert stated[name] >= DRAWS * 0.9, (name, stated)
        assert covered[name] / stated[name] >= 0.95, (name, covered, stated)
    # a bound of "anything" covers by saying nothing: the ratio and the count*2 are finite
    # at these sizes, and the spread's bounded by its column's bounds at worst
    assert finite["twice"] == stated["twice"] and finite["stddev"] == stated["stddev"]


def test_a_sum_released_null_by_its_noisy_count_is_not_known_to_be_null():
    # 5 rows of quantity 10: the SUM's noisy count is often below ½ at ε 0.1, and the SUM
    # then released NULL, but its truth is 50, which COALESCE(…, 0) = 0 must not claim
    plan = plan_private_aggregate(parse_query(
        "SELECT coalesce(sum(quantity), 0) AS s FROM orders WHERE product_id = 1"), POLICY, 0)
    assert plan.post_sql is not None and "COALESCE" in plan.post_sql
    calibration = calibrate(plan, 0.1, 1e-8)
    columns = [(o.name, 20 if o.aggregate == "count" else 1700) for o in plan.outputs]
    rng = SeededRandomSource(11)
    covered = nulls = 0
    for _ in range(DRAWS):
        answer = release(plan, calibration, [], [[b"{0,0,0,5,0,0,0,50}", b"5"]], 0.0,
                         PrivacySettings(), rng, columns)
        released = answer.rows[0][1]
        nulls += released is None
        interval = ends(answer.bounds.get("s"))
        assert interval is not None
        value = 0.0 if released is None else float(released)
        covered += value - interval[0] <= 50 <= value + interval[1]
    assert nulls >= DRAWS * 0.2  # the case at hand happens
    assert covered / DRAWS >= 0.95, covered
