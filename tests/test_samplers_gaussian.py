"""Gaussian mechanism: calibrations (classical, analytic, discrete) and the exact sampler.

Statistical tests use 100,000 seeded draws and tolerances of several standard errors:
deterministic, and a change of seed would not make them fail either.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import brentq

from mechanisms.accuracy import discrete_gaussian_bound
from mechanisms.gaussian import gaussian_count, sample_discrete_gaussian
from mechanisms.gaussian_sigma import (
    GaussianParameterError,
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    discrete_gaussian_delta,
    discrete_gaussian_variance,
    gaussian_delta,
    variance_at_least,
)
from mechanisms.seeded_source import SeededRandomSource

pytestmark = pytest.mark.statistical

N_DRAWS = 100_000


def dgauss_pmf(variance: float, width: float = 40.0) -> tuple[np.ndarray, np.ndarray]:
    """Support and exact probabilities of N_Z(0, σ²), truncated where terms are < e^-800."""
    k = int(width * math.sqrt(variance)) + 10
    xs = np.arange(-k, k + 1)
    weights = np.exp(-(xs.astype(float) ** 2) / (2 * variance))
    return xs, weights / weights.sum()


def exact_discrete_delta(variance: float, epsilon: float, sensitivity: int) -> float:
    """δ(ε) of N_Z(0, σ²) vs N_Z(Δ, σ²) straight from the definition (hockey stick)."""
    xs, p = dgauss_pmf(variance)
    shifted = np.concatenate([np.zeros(sensitivity), p[:-sensitivity]])
    return float(np.maximum(p - math.exp(epsilon) * shifted, 0).sum())


def scipy_gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """Balle & Wang's Theorem 8, evaluated independently with scipy."""
    return (stats.norm.sf(epsilon * sigma / sensitivity - sensitivity / (2 * sigma))
            - math.exp(epsilon) * stats.norm.sf(epsilon * sigma / sensitivity
                                                + sensitivity / (2 * sigma)))


# --- calibration ------------------------------------------------------------------

# (ε, δ, Δ₂, analytic σ) — σ found by scipy's brentq on the exact condition.
ANALYTIC_REFERENCE = [
    (0.5, 1e-5, 1.0, 7.031826675582498),
    (1.0, 1e-6, 1.0, 4.224678889326839),
    (0.1, 1e-8, 1.0, 45.93736018498727),
    (5.0, 1e-6, 1.0, 0.9800490003092102),
    (0.9, 1e-5, 3.5, 14.373185161033474),
    (20.0, 1e-10, 1.0, 0.3751454261717901),
]


def test_classical_sigma_formula_and_range() -> None:
    assert classical_gaussian_sigma(0.5, 1e-5, 1.0) == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)) / 0.5, rel=1e-15)
    assert classical_gaussian_sigma(0.1, 1e-8, 2.0) == pytest.approx(
        2 * 10 * math.sqrt(2 * math.log(1.25e8)), rel=1e-15)
    for epsilon in (1.0, 1.5, 10.0):
        with pytest.raises(GaussianParameterError, match="epsilon < 1"):
            classical_gaussian_sigma(epsilon, 1e-5, 1.0)
    assert issubclass(GaussianParameterError, ValueError)
    for bad in [(0.0, 1e-5, 1.0), (0.5, 0.0, 1.0), (0.5, 1.0, 1.0), (0.5, 1e-5, 0.0),
                (math.nan, 1e-5, 1.0), (0.5, 1e-5, math.inf)]:
        with pytest.raises(GaussianParameterError):
            classical_gaussian_sigma(*bad)
        with pytest.raises(GaussianParameterError):
            analytic_gaussian_sigma(*bad)


@pytest.mark.parametrize("epsilon,delta,sensitivity,reference", ANALYTIC_REFERENCE)
def test_analytic_sigma_reference_values(epsilon: float, delta: float, sensitivity: float,
                                         reference: float) -> None:
    sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    # Never below the exact solution (it must satisfy the condition), and within 1e-9.
    assert reference * (1 - 1e-12) <= sigma <= reference * (1 + 1e-9)
    # The privacy profile condition holds at σ, by our formula and by scipy's.
    assert gaussian_delta(sigma, epsilon, sensitivity) <= delta
    assert scipy_gaussian_delta(sigma, epsilon, sensitivity) <= delta * (1 + 1e-7)
    # ... and σ is the smallest: a slightly smaller σ violates it.
    assert gaussian_delta(sigma * (1 - 1e-6), epsilon, sensitivity) > delta
    # Fresh independent solve, for the record.
    solved = brentq(lambda s: scipy_gaussian_delta(s, epsilon, sensitivity) - delta,
                    1e-6, 1e6, xtol=1e-14, rtol=1e-14)
    assert sigma == pytest.approx(solved, rel=1e-8)


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_analytic_sigma_smaller_than_classical(epsilon: float, delta: float) -> None:
    analytic = analytic_gaussian_sigma(epsilon, delta, 2.0)
    classical = classical_gaussian_sigma(epsilon, delta, 2.0)
    assert analytic < classical
    # The classical σ is valid too (the analytic condition holds there).
    assert gaussian_delta(classical, epsilon, 2.0) <= delta


def test_gaussian_delta_matches_scipy_and_is_monotone() -> None:
    sigmas = np.geomspace(0.1, 100, 40)
    for epsilon in (0.1, 1.0, 8.0):
        ours = [gaussian_delta(s, epsilon, 1.0) for s in sigmas]
        theirs = [scipy_gaussian_delta(s, epsilon, 1.0) for s in sigmas]
        for a, b in zip(ours, theirs, strict=True):
            assert a == pytest.approx(b, rel=1e-9, abs=1e-300)
        assert all(x >= y for x, y in zip(ours, ours[1:], strict=False))
    # No overflow for a huge ε.
    assert 0 <= gaussian_delta(0.05, 800.0, 1.0) < 1


@pytest.mark.parametrize("variance", [Fraction(1, 4), Fraction(2), Fraction(17, 3),
                                      Fraction(40), Fraction(1000)])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("sensitivity", [1, 2, 5])
def test_discrete_delta_bounds_the_exact_delta_tightly(variance: Fraction, epsilon: float,
                                                       sensitivity: int) -> None:
    exact = exact_discrete_delta(float(variance), epsilon, sensitivity)
    bound = discrete_gaussian_delta(variance, epsilon, sensitivity)
    assert bound >= exact * (1 - 1e-9) - 1e-300
    assert bound <= exact * (1 + 1e-3) + 1e-15


def test_discrete_delta_large_sensitivity_uses_integrals_validly() -> None:
    # Thousands of steps: the midpoint and trapezoid bounds take over.
    variance = Fraction(10_000_000)
    for sensitivity in (3000, 20_000):
        exact = exact_discrete_delta(float(variance), 0.5, sensitivity)
        bound = discrete_gaussian_delta(variance, 0.5, sensitivity)
        assert exact <= bound <= exact * (1 + 1e-3) + 1e-15


@pytest.mark.parametrize("epsilon,delta,sensitivity",
                         [(1.0, 1e-6, 1), (0.5, 1e-5, 1), (5.0, 1e-6, 1), (1.0, 1e-6, 3),
                          (0.1, 1e-8, 1), (2.0, 1e-3, 2)])
def test_discrete_variance_is_private_and_close_to_analytic(epsilon: float, delta: float,
                                                            sensitivity: int) -> None:
    variance = discrete_gaussian_variance(epsilon, delta, sensitivity)
    assert variance.denominator <= 2**32
    assert exact_discrete_delta(float(variance), epsilon, sensitivity) <= delta
    analytic = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    assert math.sqrt(variance) == pytest.approx(analytic, rel=0.05)


def test_discrete_sigma_at_continuous_sigma_can_fail() -> None:
    # Why the discrete calibration exists: at ε = 1, δ = 1e-6 the continuous σ gives the
    # integer noise a δ above the target (CKS 2020, Theorem 7).
    sigma = analytic_gaussian_sigma(1.0, 1e-6, 1.0)
    assert exact_discrete_delta(sigma**2, 1.0, 1) > 1e-6
    assert math.sqrt(discrete_gaussian_variance(1.0, 1e-6, 1)) > sigma


def test_variance_at_least() -> None:
    for sigma in (0.3, 1.0, 4.224678889533399, 1e6 / 3):
        v = variance_at_least(sigma)
        assert Fraction(sigma) ** 2 <= v <= Fraction(sigma) ** 2 + Fraction(1, 2**32)


# --- the discrete Gaussian sampler ------------------------------------------------

VARIANCES = [Fraction(3, 2), Fraction(40)]


@pytest.fixture(scope="module")
def dgauss_draws() -> dict[Fraction, np.ndarray]:
    out = {}
    for i, variance in enumerate(VARIANCES):
        rng = SeededRandomSource(3000 + i)
        out[variance] = np.array([sample_discrete_gaussian(variance, rng)
                                  for _ in range(N_DRAWS)])
    return out


@pytest.mark.parametrize("variance", VARIANCES)
def test_discrete_gaussian_chi_square(variance: Fraction, dgauss_draws) -> None:
    draws = dgauss_draws[variance]
    xs, p = dgauss_pmf(float(variance))
    expected = N_DRAWS * p
    keep = expected >= 5
    low, high = xs[keep].min(), xs[keep].max()
    observed = [int(np.sum(draws < low))]
    observed += [int(np.sum(draws == x)) for x in range(low, high + 1)]
    observed += [int(np.sum(draws > high))]
    probs = [p[xs < low].sum()] + [p[xs == x][0] for x in range(low, high + 1)]
    probs += [p[xs > high].sum()]
    _, pvalue = stats.chisquare(observed, N_DRAWS * np.array(probs) / sum(probs))
    assert pvalue > 1e-3


@pytest.mark.parametrize("variance", VARIANCES)
def test_discrete_gaussian_mean_and_variance(variance: Fraction, dgauss_draws) -> None:
    draws = dgauss_draws[variance].astype(float)
    xs, p = dgauss_pmf(float(variance))
    true_var = float((xs.astype(float) ** 2 * p).sum())
    assert true_var <= float(variance)  # the discrete Gaussian's variance is at most σ²
    assert abs(draws.mean()) < 5 * math.sqrt(true_var / N_DRAWS)
    assert draws.var() == pytest.approx(true_var, rel=0.03)
    assert np.mean(draws > 0) == pytest.approx(np.mean(draws < 0), abs=0.01)


def test_discrete_gaussian_ks_large_variance() -> None:
    # σ = 300: against the continuous N(0, σ²) discretised, via KS on the CDF at integers.
    rng = SeededRandomSource(77)
    variance = Fraction(90_000)
    draws = np.array([sample_discrete_gaussian(variance, rng) for _ in range(20_000)])
    # P(X <= x) of N_Z is Φ((x + 1/2)/σ) to within e^(-2π²σ²); compare on the continuity-
    # corrected values, where KS applies.
    _, pvalue = stats.kstest(draws + 0.5, stats.norm(scale=300).cdf)
    assert pvalue > 1e-3


def test_discrete_gaussian_edge_cases() -> None:
    rng = SeededRandomSource(5)
    assert all(sample_discrete_gaussian(0, rng) == 0 for _ in range(50))
    with pytest.raises(ValueError):
        sample_discrete_gaussian(Fraction(-1), rng)
    # A huge irrational-looking variance still samples (big integers, exact).
    draws = [sample_discrete_gaussian(variance_at_least(12345.678), rng) for _ in range(2000)]
    assert np.std(draws) == pytest.approx(12345.678, rel=0.1)


@pytest.mark.parametrize("shift", [0.0, 2.6, -7.5])
def test_gaussian_count_shift(shift: float) -> None:
    rng = SeededRandomSource(int(shift * 10) + 400)
    variance = Fraction(25)
    xs = np.array([gaussian_count(1000, variance, shift, rng) for _ in range(20_000)])
    assert xs.dtype.kind == "i"
    assert abs(xs.mean() - (1000 + round(shift))) < 5 * math.sqrt(25 / len(xs))
    with pytest.raises(ValueError):
        gaussian_count(1, variance, math.inf, rng)


# --- accuracy bound ---------------------------------------------------------------

def exact_shifted_tail(variance: float, shift: int, alpha: float) -> float:
    xs, p = dgauss_pmf(variance)
    return float(p[np.abs(xs + shift) > alpha].sum())


@pytest.mark.parametrize("variance", [Fraction(1, 2), Fraction(9), Fraction(400),
                                      Fraction(250_000)])
@pytest.mark.parametrize("max_shift", [0.0, 0.5, 3.0, 20.4])
@pytest.mark.parametrize("beta", [0.05, 0.01])
def test_discrete_gaussian_bound_coverage_and_tightness(variance: Fraction, max_shift: float,
                                                        beta: float) -> None:
    alpha = discrete_gaussian_bound(variance, max_shift, beta)
    m = math.floor(max_shift + 0.5)
    worst = max(exact_shifted_tail(float(variance), j, alpha) for j in range(-m, m + 1))
    assert worst <= beta
    if alpha > m:
        # Not loose: two less already fails at the worst shift (the tail bound adds < 1
        # step for the σ used in practice).
        assert exact_shifted_tail(float(variance), m, alpha - 2) > beta
    sigma = math.sqrt(variance)
    z = stats.norm.isf(beta / 2)
    assert alpha <= m + z * sigma + 2


def test_discrete_gaussian_bound_special_cases() -> None:
    assert discrete_gaussian_bound(0, 2.6) == 3.0
    assert discrete_gaussian_bound(Fraction(100), 0) >= discrete_gaussian_bound(Fraction(100),
                                                                                0, 0.5)
    for bad in [(-1, 0.0, 0.05), (1, -1.0, 0.05), (1, 0.0, 0.0), (1, math.nan, 0.05)]:
        with pytest.raises(ValueError):
            discrete_gaussian_bound(*bad)
