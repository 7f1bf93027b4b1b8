"""Clamping bounds chosen from the data, privately (in the manner of Google's ApproxBounds).

A SUM or AVG of a column with declared bounds [lo, hi] would add noise for a value as
large as max(|lo|, |hi|) (AVG: (hi − lo)/2) even when the rows hold far smaller ones. Here
the declared range is cut at 0 and at the powers of two inside it (a log scale, as
ApproxBounds) into buckets; the backend returns, per group, how many values fall in each
bucket and their sum. One pair of bounds serves all of an answer's groups (the groups'
bucket counts summed: proxy/engine/bounded_sums.py). Then:

1. every bucket count gets discrete Laplace noise of scale Δ/ε_b, Δ the L1 sensitivity of
   the query's histogram of counts (a unit's, or a row's, rows land in one bucket each,
   so the (group × bucket) histogram has the sensitivity of the group histogram);
2. the buckets whose noisy count exceeds t = scale·ln(buckets/0.05) must lie inside the
   chosen bounds [L, U] (none: the declared bounds); of the edges that allow, L and U are
   those that minimise the noise for [L, U] plus the bias the noisy counts beyond them
   lead one to expect;
3. the group's sum is computed from the bucket sums exactly as if clamped to [L, U]
   (values below L count as L, above U as U: L and U are edges), and released with noise
   for the sensitivity of that clamp.

Steps 2 and 3 use only the noisy counts of step 1 (post-processing), so step 1 is ε_b-DP
and step 3, whose scale is a function of step 1's output, is ε_s-DP for every such output:
the pair is (ε_b + ε_s)-DP by adaptive sequential composition. Per group, the noise scale
of step 3 is proportional to that group's max(|L|, |U|): with one unit moving n_g rows of
group g, Σ n_g ≤ Δ, the privacy loss is Σ_g n_g·M_g/(Δ·M_g/ε_s) ≤ ε_s.

With zero noise (a test's ε of 10¹²) t is below one row, so [L, U] covers every value and
the answer is exactly PostgreSQL's. Values cut off by [L, U] bias the answer; the stated
bias (`ChosenBounds.bias_low/high`) bounds it from the noisy counts beyond the bounds:
each bucket's rows at its far edge from the bound (no row of a bucket lies further), so
with the true counts it would be an upper bound; with the noisy ones, their weighted sum
plus two standard deviations of its noise. Rows far beyond a bound, too few to pass the
threshold (a heavy tail: 300 at 5000 among 10,000 at 10, scale 100), are thereby counted
at their distance; when they were counted one bucket away, the stated error covered the
truth 9 times in 200 there (tests/test_clamping_bias.py). The price is width: the empty
buckets' noise, at their far edges, is allowed for too, so a cut's stated error is wider
than the declared bounds' noise would be (docs/privacy-unit.md, "Error bar"). The choice
of [L, U] still weighs the rows beyond one bucket away: the stated bias would cost any
cut more than it saves in noise, and the cut is what makes the answer accurate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from mechanisms.laplace import laplace_scale, sample_discrete_laplace
from mechanisms.random_source import RandomSource
from mechanisms.reals import grid_step, to_grid

# Probability that an empty bucket's noise passes the threshold, over all buckets.
FALSE_BUCKET = 0.05


@dataclass(frozen=True)
class ChosenBounds:
    low: Fraction
    high: Fraction
    # Estimates: raising the values below `low` to it makes the clamped sum exceed the
    # truth by at most about `bias_low`; lowering those above `high` makes it fall short
    # by at most about `bias_high` (rows at each bucket's far edge plus two standard
    # deviations of the counts' noise: an estimate whose coverage is measured).
    bias_low: Fraction
    bias_high: Fraction

    @property
    def centre(self) -> Fraction:
        return (self.low + self.high) / 2


def bucket_edges(lo: float, hi: float, powers: int = 16) -> tuple[Fraction, ...]:
    """lo, then 0 and ±2^j (the `powers` largest below max(|lo|, |hi|)) inside (lo, hi),
    then hi: the edges of the buckets, public (from the declared bounds only)."""
    low, high = Fraction(repr(lo)), Fraction(repr(hi))  # as the SQL's literals read
    if not low < high:
        return (low, high)
    top = max(abs(low), abs(high))
    exponent = math.ceil(math.log2(top)) if top else 0
    inner = {Fraction(0)} | {sign * Fraction(2) ** (exponent - i)
                             for i in range(powers) for sign in (1, -1)}
    return (low, *sorted(e for e in inner if low < e < high), high)


def choose_bounds(counts: Sequence[int | Fraction], edges: tuple[Fraction, ...],
                  scale: Fraction, rng: RandomSource,
                  noise: Callable[[Fraction, Fraction], float],
                  sensitivity: Fraction | None = None) -> ChosenBounds:
    """Noisy bucket counts at Laplace `scale` (counts in units of rows), then the bounds
    [L, U] with the least noise(L, U) + estimated bias, `noise` the error the sum would
    have for them. Whole counts get discrete Laplace noise; real ones (weighted, with
    the vector's L1 `sensitivity` given) grid noise (noisy_counts)."""
    buckets = len(counts)
    assert buckets == len(edges) - 1
    if scale == 0:
        noisy = [Fraction(c) for c in counts]
    elif sensitivity is not None:
        noisy = noisy_counts(counts, sensitivity, scale, rng)
    else:
        discrete = laplace_scale(scale, 1)
        noisy = [Fraction(c) + sample_discrete_laplace(discrete, rng) for c in counts]
    threshold = float(scale) * math.log(buckets / FALSE_BUCKET)
    kept = [i for i, c in enumerate(noisy) if c > threshold]
    if not kept:
        return ChosenBounds(edges[0], edges[-1], Fraction(0), Fraction(0))
    # The stated bias with L = edges[i] (U = edges[j]): each bucket's rows at its far
    # edge from the bound (a row of bucket [e_k, e_k+1) above U lies at most e_k+1 − U
    # beyond it), so the true bias is at most Σ_k count_k·(distance_k); with the noisy
    # counts, plus two standard deviations of their weighted noise (k buckets' discrete
    # Laplace noise has variance about 2·scale² each), at least 0. A heavy tail's rows far
    # beyond a bound, too few to pass the threshold, are counted at their distance.
    def beyond(counts: Sequence[Fraction], distances: Sequence[Fraction]) -> Fraction:
        spread = math.sqrt(2 * sum(float(d) ** 2 for d in distances)) * float(scale)
        total = sum((c * d for c, d in zip(counts, distances, strict=True)), Fraction(0))
        return max(total + Fraction(2 * spread), Fraction(0))

    bias_low = [beyond(noisy[:i], [edges[i] - e for e in edges[:i]])
                for i in range(kept[0] + 1)]
    bias_high = {j: beyond(noisy[j:], [e - edges[j] for e in edges[j + 1:]])
                 for j in range(kept[-1] + 1, buckets + 1)}
    # The choice weighs the noise against the bias it expects: the rows beyond by their
    # noisy count alone, one bucket away. The stated bias's slack and far edges, sized
    # for the error bar's coverage, would cost a cut more than it saves in noise whatever
    # the data, so the top bucket would never be cut (docs/privacy-unit.md).
    expected_low = [_expected(noisy[:i], edges[i] - edges[i - 1]) if i else Fraction(0)
                    for i in range(kept[0] + 1)]
    expected_high = {j: _expected(noisy[j:], edges[j + 1] - edges[j]) if j < buckets
                     else Fraction(0) for j in bias_high}
    low, high = min(((i, j) for i in range(kept[0] + 1) for j in bias_high),
                    key=lambda ij: noise(edges[ij[0]], edges[ij[1]]) +
                    float(max(expected_low[ij[0]], expected_high[ij[1]])))
    return ChosenBounds(edges[low], edges[high], bias_low[low], bias_high[high])


def _expected(noisy: Sequence[Fraction], width: Fraction) -> Fraction:
    """The bias a cut is expected to cause: the rows beyond it (their noisy count, whose
    noise partly cancels, at least 0) each a bucket's `width` away."""
    return max(sum(noisy, Fraction(0)), Fraction(0)) * width


def noisy_counts(counts: Sequence[int | Fraction], sensitivity: Fraction, scale: Fraction,
                 rng: RandomSource) -> list[Fraction]:
    """Real counts whose vector has L1 sensitivity Δ = `sensitivity`, with noise like
    Lap(`scale`) each, on a grid (mechanisms/reals.py): rounding each of the B counts to
    the grid Λ moves their L1 distance by less than B·Λ, so the integer noise is calibrated
    for ⌊Δ/Λ⌋ + B steps, at scale (⌊Δ/Λ⌋ + B)·b/Δ steps: the same ε = Δ/b."""
    step = grid_step(sensitivity, scale)
    steps = math.floor(sensitivity / step) + len(counts)
    discrete = laplace_scale(steps * scale / sensitivity, 1)
    return [(to_grid(Fraction(c), step) + sample_discrete_laplace(discrete, rng)) * step
            for c in counts]


def clamped_sum(counts: Sequence[int | Fraction], sums: list[Fraction], edges: tuple[Fraction, ...],
                chosen: ChosenBounds) -> Fraction:
    """Σ clamp(x, L, U) from the bucket counts and sums, exactly (L and U are edges)."""
    total = Fraction(0)
    for i, (count, bucket_sum) in enumerate(zip(counts, sums, strict=True)):
        if edges[i + 1] <= chosen.low:
            total += count * chosen.low
        elif edges[i] >= chosen.high:
            total += count * chosen.high
        else:
            total += bucket_sum
    return total
