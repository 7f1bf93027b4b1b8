"""Exponential mechanism: exact base, exact sampling, mode and quantiles, accuracy bounds."""

from __future__ import annotations

import math
import random
from collections import Counter
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from mechanisms import exponential as em
from mechanisms.accuracy import mode_bound, quantile_rank_bound
from mechanisms.exponential import (
    exponential_base,
    exponential_mechanism,
    private_mode,
    private_quantile,
    quantile_from_counts,
    quantile_grid,
    quantile_level,
)
from mechanisms.seeded_source import SeededRandomSource

pytestmark = pytest.mark.statistical

N_DRAWS = 100_000


def rho(epsilon: float, resolution: int = 1) -> float:
    return exponential_base(epsilon, resolution).numerator / 2**48


def expected_probabilities(levels: list[int], counts: list[int], base_rho: float) -> np.ndarray:
    best = max(level for level, m in zip(levels, counts, strict=True) if m)
    weights = np.array([m * base_rho ** (best - level) for level, m in
                        zip(levels, counts, strict=True)])
    return weights / weights.sum()


def chi_square_pvalue(indices: list[int], probabilities: np.ndarray) -> float:
    observed = np.bincount(indices, minlength=len(probabilities))
    keep = probabilities > 0
    assert observed[~keep].sum() == 0  # impossible outputs never appear
    _, pvalue = stats.chisquare(observed[keep], len(indices) * probabilities[keep])
    return pvalue


# --- the base ρ -----------------------------------------------------------------------

@pytest.mark.parametrize("epsilon", [1e-3, 0.1, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("resolution", [1, 2, 20, 1000])
def test_base_is_an_upper_dyadic_of_the_exact_weight(epsilon: float, resolution: int) -> None:
    base = exponential_base(epsilon, resolution)
    with localcontext() as context:
        context.prec = 60
        exact = (-Decimal(repr(epsilon)) / (2 * resolution)).exp()
        assert Decimal(base.numerator) / Decimal(2**48) >= exact
        assert Decimal(base.numerator - 2) / Decimal(2**48) < exact
    # The guarantee delivered is ε' <= ε, and the difference is negligible.
    assert base.epsilon <= epsilon
    assert base.epsilon == pytest.approx(epsilon, rel=1e-7)


def test_base_rejects_meaningless_parameters() -> None:
    for bad in [(0, 1), (-1, 1), (1e-16, 1), (0.1, 0), (0.1, 1.5)]:
        with pytest.raises(ValueError):
            exponential_base(*bad)


@pytest.mark.parametrize("gap", [0, 1, 2, 3, 17, 1000, 5001])
@pytest.mark.parametrize("precision", [128, 300])
def test_power_bounds_tightly(gap: int, precision: int) -> None:
    numerator = exponential_base(0.37).numerator
    upper = em._ratio(em._power(numerator, gap, precision, up=True), (1, 0))
    lower = em._ratio(em._power(numerator, gap, precision, up=False), (1, 0))
    exact = Fraction(numerator, 2**48) ** gap
    slack = Fraction(4 * gap + 128, 2 ** (precision - 1))
    assert exact * (1 - slack) <= lower <= exact <= upper <= exact * (1 + slack)


def test_chained_powers_stay_tight() -> None:
    numerator = exponential_base(0.05, 7).numerator
    gaps = sorted(random.Random(3).sample(range(0, 4000), 300))
    bounds = em._upper_powers(numerator, gaps)
    for gap in gaps[::37]:
        exact = Fraction(numerator, 2**48) ** gap
        assert exact <= em._ratio(bounds[gap], (1, 0)) <= exact * (1 + Fraction(1, 2**100))


class ForcedSlowPath:
    """Returns the largest 64-bit value for the first 2^64 draw: the rare exact branch."""

    def __init__(self, seed: int) -> None:
        self.inner = SeededRandomSource(seed)
        self.forced = False

    def randbelow(self, n: int) -> int:
        if n == 2**64 and not self.forced:
            self.forced = True
            return n - 1
        return self.inner.randbelow(n)


def test_accept_rounding_exact_branch() -> None:
    base = exponential_base(0.8)
    # Up to a gap far too large for ρ^gap to be computed whole (10^15·48 bits).
    for gap in (0, 1, 25, 10**15):
        bound = em._upper_powers(base.numerator, [gap])[gap]
        accepted = sum(em._accept_rounding(base, gap, bound, ForcedSlowPath(s))
                       for s in range(300))
        # In the exact branch the acceptance probability is 2^64·ratio − (2^64 − 1), and
        # the ratio is within 2^-70 of 1 here.
        assert accepted >= 280
        if gap == 0:
            assert accepted == 300


class Constant:
    def __init__(self, value: int) -> None:
        self.value = value

    def randbelow(self, n: int) -> int:
        return min(self.value, n - 1)


def test_accept_rounding_exact_comparison_at_the_top_of_the_range() -> None:
    base = exponential_base(0.8)
    # V as close to 1 as the draws allow: it exceeds the ratio ρ^gap/q < 1 of a rounded
    # bound (rejected), and never an exact ratio 1 (accepted: gap 0, or gap 1 whose 48-bit
    # power needs no rounding).
    for gap in (25, 10**15):
        bound = em._upper_powers(base.numerator, [gap])[gap]
        assert not em._accept_rounding(base, gap, bound, Constant(2**64))
    for gap in (0, 1):
        bound = em._upper_powers(base.numerator, [gap])[gap]
        assert em._accept_rounding(base, gap, bound, Constant(2**64))


# --- the general mechanism ----------------------------------------------------------

def test_exponential_mechanism_exact_distribution() -> None:
    utilities = [0, 1, 3, 7, 7, -2, 5]
    counts = [1, 2, 1, 3, 1, 5, 0]
    rng = SeededRandomSource(20)
    draws = [exponential_mechanism(utilities, 1.0, rng, multiplicities=counts)
             for _ in range(N_DRAWS)]
    expected = expected_probabilities(utilities, counts, rho(1.0))
    assert chi_square_pvalue(draws, expected) > 1e-3
    # ... which is the textbook exp(ε·u/2) up to ε − ε' < 1e-7·ε.
    textbook = np.array([m * math.exp(u / 2) for u, m in zip(utilities, counts, strict=True)])
    np.testing.assert_allclose(expected, textbook / textbook.sum(), rtol=1e-6)


def test_exponential_mechanism_fractional_utilities_and_sensitivity() -> None:
    utilities = [Fraction(1, 2), 0, Fraction(3, 2), Fraction(-1, 2), 3.5]
    rng = SeededRandomSource(21)
    draws = [exponential_mechanism(utilities, 2.0, rng, sensitivity=Fraction(1, 2),
                                   resolution=1) for _ in range(20_000)]
    # Levels u/Δu = 1, 0, 3, -1, 7 with base exp(-ε/2) per level.
    expected = expected_probabilities([1, 0, 3, -1, 7], [1] * 5, rho(2.0))
    assert chi_square_pvalue(draws, expected) > 1e-3
    draws = [exponential_mechanism(utilities, 2.0, rng, resolution=2) for _ in range(20_000)]
    expected = expected_probabilities([1, 0, 3, -1, 7], [1] * 5, rho(2.0, 2))
    assert chi_square_pvalue(draws, expected) > 1e-3


def test_exponential_mechanism_validation_and_clamp() -> None:
    rng = SeededRandomSource(22)
    with pytest.raises(ValueError):
        exponential_mechanism([Fraction(1, 3), 0], 1.0, rng)  # not a multiple of 1/R
    with pytest.raises(ValueError):
        exponential_mechanism([1, 2], 1.0, rng, multiplicities=[0, 0])
    with pytest.raises(ValueError):
        exponential_mechanism([1, 2], 1.0, rng, multiplicities=[1])
    with pytest.raises(ValueError):
        exponential_mechanism([1, 2], 1.0, rng, multiplicities=[1, -1])
    with pytest.raises(ValueError):
        exponential_mechanism([1, 2], 1.0, rng, sensitivity=0)
    assert exponential_mechanism([42], 1.0, rng) == 0
    # Gaps far beyond the clamp: fast, and the far candidates are (practically) never chosen.
    far = [0, -10**12, -10**9, -5]
    assert Counter(exponential_mechanism(far, 1.0, rng) for _ in range(2000)).keys() <= {0, 3}


def test_private_mode() -> None:
    counts = {"red": 120, "green": 118, "blue": 60, "absent": 0}
    rng = SeededRandomSource(23)
    seen = Counter(private_mode(counts, 0.5, rng) for _ in range(20_000))
    expected = expected_probabilities(list(counts.values()), [1] * 4, rho(0.5))
    for category, p in zip(counts, expected, strict=True):
        assert seen[category] / 20_000 == pytest.approx(p, abs=5 * math.sqrt(p / 20_000) + 1e-9)
    with pytest.raises(ValueError):
        private_mode({}, 1.0, rng)


def test_mode_bound_covers() -> None:
    counts = {f"c{i}": 100 - 3 * i for i in range(30)}
    rng = SeededRandomSource(24)
    alpha = mode_bound(0.5, len(counts), 0.05)
    misses = sum(counts[private_mode(counts, 0.5, rng)] < 100 - alpha for _ in range(5000))
    assert misses / 5000 <= 0.05
    # α = ⌈ln(K/β)·2/ε⌉ − 1 with K = 30, β = 0.05, ε = 0.5.
    assert alpha == math.ceil(math.log(30 / 0.05) * 4) - 1
    assert mode_bound(0.5, 30, 0.01) > alpha


# --- quantiles ------------------------------------------------------------------------

def test_quantile_grid() -> None:
    grid = quantile_grid(0, 10, 1)
    assert grid.points == 11
    assert [grid.index(v) for v in (-5, 0, 0.4, 0.5, 0.6, 9.99, 10, 1e9)] == [
        0, 0, 0, 0, 1, 10, 10, 10]
    assert grid.value(3) == 3
    default = quantile_grid(-1, 1)
    assert default.points == 2**20 + 1 and default.value(default.points - 1) == 1
    assert quantile_grid(0, 10, 3).points == 4  # 0, 3, 6, 9
    for bad in [(1, 1, None), (2, 1, None), (0, 1, 0), (0, 1, 2)]:
        with pytest.raises(ValueError):
            quantile_grid(*bad)


def test_quantile_level() -> None:
    assert quantile_level(0.5) == Fraction(1, 2)
    assert quantile_level(0.95) == Fraction(19, 20)
    assert quantile_level(0.123456) == Fraction(10, 81)  # nearest with denominator <= 1000
    assert quantile_level(Fraction(1, 3)) == Fraction(1, 3)
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError):
            quantile_level(bad)


def exact_quantile_probabilities(values: list[int], p: Fraction, points: int,
                                 epsilon: float) -> np.ndarray:
    """Per grid point y: ∝ exp(ε'·u(y)/2), u(y) = −dist(p·n, [#{x < y}, #{x <= y}])."""
    base = exponential_base(epsilon, p.denominator)
    target = p * len(values)
    levels = []
    for y in range(points):
        below, upto = sum(x < y for x in values), sum(x <= y for x in values)
        levels.append(-max(below - target, 0, target - upto) * p.denominator)
    return expected_probabilities([int(v) for v in levels], [1] * points,
                                  base.numerator / 2**48)


@pytest.mark.parametrize("p", [Fraction(1, 2), Fraction(1, 10), Fraction(1)])
def test_quantile_exact_distribution(p: Fraction) -> None:
    values = [2, 3, 3, 7, 7, 7, 9]
    grid = quantile_grid(0, 10, 1)
    counts = Counter(grid.index(v) for v in values)
    rng = SeededRandomSource(30 + p.denominator)
    n = N_DRAWS if p == Fraction(1, 2) else 20_000
    draws = [int(quantile_from_counts(counts, p, grid, 1.0, rng)) for _ in range(n)]
    assert chi_square_pvalue(draws, exact_quantile_probabilities(values, p, 11, 1.0)) > 1e-3


def test_private_quantile_end_to_end() -> None:
    rng = SeededRandomSource(31)
    data_rng = random.Random(5)
    values = [data_rng.gauss(50, 10) for _ in range(2000)]
    true = np.quantile(values, [0.1, 0.5, 0.9])
    for p, target in zip((0.1, 0.5, 0.9), true, strict=True):
        estimate = private_quantile(values, p, 0, 100, 1.0, rng)
        assert abs(estimate - target) < 2.0
    # Clamping: values beyond the domain count at its edge, and ties point at the tied
    # value (utility 0 there, −25 everywhere else).
    assert private_quantile([-1e9] * 50, 0.5, 0, 100, 1.0, rng, step=1) == 0
    assert private_quantile([7] * 500, 0.3, 0, 100, 1.0, rng, step=1) == 7
    # p = 1: every point from the largest value to hi is equally good.
    highs = [private_quantile([10, 20, 30] * 100, 1, 0, 100, 1.0, rng) for _ in range(200)]
    assert min(highs) >= 29 and max(highs) > 90
    with pytest.raises(ValueError):
        quantile_from_counts({11: 1}, 0.5, quantile_grid(0, 10, 1), 1.0, rng)
    with pytest.raises(ValueError):
        quantile_from_counts({1: -1}, 0.5, quantile_grid(0, 10, 1), 1.0, rng)


def test_quantile_rank_bound_covers() -> None:
    data_rng = random.Random(6)
    values = [data_rng.randrange(0, 1000) for _ in range(500)]
    grid = quantile_grid(0, 1000, 1)
    counts = Counter(grid.index(v) for v in values)
    sorted_values = sorted(values)
    n = len(values)

    def rank_error(y: float) -> float:
        below = sum(1 for x in sorted_values if x < y)
        upto = sum(1 for x in sorted_values if x <= y)
        return max(below - n / 2, 0, n / 2 - upto)

    best = min(rank_error(y) for y in range(grid.points))
    alpha = quantile_rank_bound(0.5, 0.5, grid, 0.05)
    rng = SeededRandomSource(32)
    misses = sum(rank_error(quantile_from_counts(counts, 0.5, grid, 0.5, rng)) > best + alpha
                 for _ in range(2000))
    assert misses / 2000 <= 0.05
    # Level 1/2 has resolution 2: α = (⌈ln(N/β)/(ε'/4)⌉ − 1)/2 with N = 1001 points.
    assert alpha == pytest.approx((math.ceil(math.log(1001 / 0.05) * 8) - 1) / 2, abs=0.5)
