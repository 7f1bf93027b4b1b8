"""The stated bias of clamping bounds chosen from the data (mechanisms/approx_bounds.py)
covers the true one on a heavy tail: rows far beyond the chosen upper bound, too few for
their bucket to pass the threshold. Before, each row beyond was counted one bucket away
from the bound, and on this case the stated error covered the truth 9 times in 200."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from mechanisms.accuracy import laplace_bound
from mechanisms.approx_bounds import bucket_edges, choose_bounds, clamped_sum
from mechanisms.laplace import sample_discrete_laplace
from mechanisms.seeded_source import SeededRandomSource

pytestmark = pytest.mark.statistical

BETA = 0.05
SCALE = Fraction(100)  # the bucket counts' noise, in rows
SUM_SCALE = 25  # the sum's noise per unit of max(|L|, |U|): ε_s = 4·ε_b, as a share of 0.2


def _buckets(values: dict[int, int], edges: tuple[Fraction, ...]
             ) -> tuple[list[int], list[Fraction]]:
    counts, sums = [0] * (len(edges) - 1), [Fraction(0)] * (len(edges) - 1)
    for value, rows in values.items():
        i = max(i for i in range(len(edges) - 1) if edges[i] <= value)
        counts[i] += rows
        sums[i] += value * rows
    return counts, sums


@pytest.mark.parametrize("values", [
    {10: 10_000, 5000: 300},  # the heavy tail of the last review
    {10: 10_000, 3000: 150, 5000: 150},
    {300: 5_000, 20: 200, 5000: 200},  # and a light one below
])
def test_the_stated_error_of_a_cut_covers_a_heavy_tail(values: dict[int, int]):
    edges = bucket_edges(0, 5000)
    counts, sums = _buckets(values, edges)
    truth = sum(value * rows for value, rows in values.items())
    log = math.log(2 / BETA)

    def noise(low: Fraction, high: Fraction) -> float:  # as proxy/engine/bounded_sums.py
        return SUM_SCALE * float(max(abs(low), abs(high))) * log

    rng = SeededRandomSource(29)
    trials, covered, bias_covered, cut = 400, 0, 0, 0
    for _ in range(trials):
        chosen = choose_bounds(counts, edges, SCALE, rng, noise)
        magnitude = max(abs(chosen.low), abs(chosen.high))
        clamped = clamped_sum(counts, sums, edges, chosen)
        released = clamped + sample_discrete_laplace(SUM_SCALE * magnitude, rng)
        # The release's error bar: the sum's noise at β/2, plus the bias its counts state.
        stated = laplace_bound(SUM_SCALE * magnitude, BETA / 2) + \
            float(max(chosen.bias_low, chosen.bias_high))
        covered += abs(float(released) - truth) <= stated
        bias_covered += truth - clamped <= chosen.bias_high and \
            clamped - truth <= chosen.bias_low
        cut += chosen.high < edges[-1]
    assert cut / trials >= 0.9  # the cut is still taken: the bounds stay useful
    assert bias_covered / trials >= 1 - BETA / 2
    assert covered / trials >= 1 - BETA
