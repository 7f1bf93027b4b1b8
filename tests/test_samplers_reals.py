"""Real answers on a power-of-two grid: calibration, exact distribution, accuracy bound."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from mechanisms.accuracy import real_noise_bound
from mechanisms.gaussian_sigma import analytic_gaussian_sigma, discrete_gaussian_delta
from mechanisms.reals import (
    GRID_BITS,
    RealGaussian,
    RealLaplace,
    calibrate_real_gaussian,
    calibrate_real_laplace,
    grid_step,
    noisy_real,
    power_of_two_at_least,
    steps_sensitivity,
    to_grid,
)
from mechanisms.seeded_source import SeededRandomSource

pytestmark = pytest.mark.statistical

N_DRAWS = 100_000


def dlap_pmf(x: np.ndarray, scale: float) -> np.ndarray:
    p = math.exp(-1 / scale)
    return (1 - p) / (1 + p) * p ** np.abs(x)


# --- the grid ---------------------------------------------------------------------

@pytest.mark.parametrize("x", [Fraction(1), Fraction(3), Fraction(1, 3), Fraction(1, 1024),
                               Fraction(10**20 + 1, 7), Fraction(2**60), Fraction(2**60 + 1)])
def test_power_of_two_at_least(x: Fraction) -> None:
    p = power_of_two_at_least(x)
    assert p >= x > p / 2
    assert p.numerator & (p.numerator - 1) == 0 and p.denominator & (p.denominator - 1) == 0
    with pytest.raises(ValueError):
        power_of_two_at_least(Fraction(0))


@pytest.mark.parametrize("sensitivity,scale", [(1, 10), (1, Fraction(1, 3)), (250, 5409.18),
                                               (Fraction(1, 1000), 1), (7, 7)])
def test_grid_step_is_fine_relative_to_noise_and_sensitivity(sensitivity, scale) -> None:
    delta, b = Fraction(sensitivity), Fraction(scale)
    step = grid_step(delta, b)
    # Λ = 2^⌈log2(min(Δ, b)/2^k)⌉: the first power of two at or above min(Δ, b)/2^k.
    assert min(delta, b) / 2**GRID_BITS <= step < 2 * min(delta, b) / 2**GRID_BITS
    k = steps_sensitivity(delta, step)
    # Rounding inflates the sensitivity by at most 2^(1-k).
    assert delta <= k * step <= delta * (1 + Fraction(2, 2**GRID_BITS))


def test_steps_sensitivity_covers_every_pair_and_is_attained() -> None:
    rng = random.Random(1)
    step = Fraction(1, 4)
    for delta in (Fraction(1), Fraction(3, 5), Fraction(7, 4)):
        k = steps_sensitivity(delta, step)
        worst = 0
        for _ in range(5000):
            x = Fraction(rng.randrange(-4000, 4000), 64)
            y = x + delta * Fraction(rng.randrange(0, 65), 64)
            worst = max(worst, abs(to_grid(x, step) - to_grid(y, step)))
        assert worst <= k
    # Ties rounded apart reach ⌊Δ/Λ⌋ + 1: 1/8 -> 0 and 3/8 -> 2 (ties to even), Δ = 1/4.
    assert to_grid(Fraction(1, 8), step) == 0 and to_grid(Fraction(3, 8), step) == 2
    assert steps_sensitivity(Fraction(1, 4), step) == 2


def test_calibrate_real_laplace_keeps_the_privacy_ratio() -> None:
    for sensitivity, scale in [(1, 10), (3.5, 0.7), (250, 5409.181856298167)]:
        noise = calibrate_real_laplace(sensitivity, scale)
        delta, b = Fraction(repr(float(sensitivity))), Fraction(repr(float(scale)))
        # Loss per answer = (sensitivity in steps)/(scale in steps) = Δ/b: unchanged.
        assert Fraction(noise.sensitivity) / noise.scale == delta / b
        assert noise.sensitivity == steps_sensitivity(delta, noise.step)
    for bad in [(0, 1), (1, 0), (-1, 1), (math.nan, 1)]:
        with pytest.raises(ValueError):
            calibrate_real_laplace(*bad)


def test_calibrate_real_gaussian_is_private_for_the_rounded_sensitivity() -> None:
    for sensitivity, epsilon, delta in [(1, 0.5, 1e-6), (1000, 5.0, 1e-6), (3.5, 0.05, 1e-9)]:
        noise = calibrate_real_gaussian(sensitivity, epsilon, delta)
        assert discrete_gaussian_delta(noise.variance, epsilon, noise.sensitivity) <= delta
        # In answer units the noise is within a fraction of a per cent of the analytic σ.
        sigma = math.sqrt(noise.variance) * float(noise.step)
        assert sigma == pytest.approx(analytic_gaussian_sigma(epsilon, delta, sensitivity),
                                      rel=0.01)


# --- distributions ------------------------------------------------------------------

def test_real_laplace_exact_distribution_on_a_coarse_grid() -> None:
    # bits=2 makes the scale in steps small, so the integer noise can be binned exactly.
    noise = calibrate_real_laplace(1, 1, bits=2)
    assert noise == RealLaplace(Fraction(1, 4), 5, Fraction(5))
    rng = SeededRandomSource(10)
    value, shift = Decimal("3.14159"), 0.3
    base = to_grid(Fraction(value), noise.step) + to_grid(Fraction(shift), noise.step)
    steps = np.array([Fraction(noisy_real(value, noise, shift, rng)) / noise.step
                      for _ in range(N_DRAWS)])
    assert all(s.denominator == 1 for s in steps[:1000])
    n = (steps - base).astype(int)
    k = 20
    support = np.arange(-k, k + 1)
    observed = [np.sum(n < -k)] + [np.sum(n == x) for x in support] + [np.sum(n > k)]
    pmf = dlap_pmf(support, 5.0)
    tail = (1 - pmf.sum()) / 2
    expected = N_DRAWS * np.concatenate([[tail], pmf, [tail]])
    _, pvalue = stats.chisquare(observed, expected)
    assert pvalue > 1e-3


@pytest.fixture(scope="module")
def laplace_draws() -> tuple[RealLaplace, float, float, np.ndarray]:
    noise = calibrate_real_laplace(2.5, 25.0)
    rng = SeededRandomSource(11)
    value, shift = 1234.5678, -12.3
    draws = np.array([noisy_real(value, noise, shift, rng) for _ in range(N_DRAWS)])
    return noise, value, shift, draws


def test_real_laplace_default_grid_ks_and_scale(laplace_draws) -> None:
    noise, value, shift, draws = laplace_draws
    step = float(noise.step)
    centre = (to_grid(Fraction(value), noise.step) + to_grid(Fraction(shift), noise.step)) * step
    scale = float(noise.scale) * step  # within 2^-19 of 25
    assert scale == pytest.approx(25.0, rel=2**-18)
    # Steps of ~2e-5 against a scale of 25: the lattice is invisible to KS at this n.
    _, pvalue = stats.kstest(draws - centre, stats.laplace(scale=scale).cdf)
    assert pvalue > 1e-3
    assert abs(np.mean(draws) - (value + shift)) < 5 * math.sqrt(2) * 25 / math.sqrt(N_DRAWS)
    # Every output is a multiple of Λ.
    assert all((Fraction(x) / noise.step).denominator == 1 for x in draws[:2000])


def test_real_gaussian_default_grid_ks() -> None:
    noise = calibrate_real_gaussian(1.0, 0.5, 1e-6)
    rng = SeededRandomSource(12)
    value, shift = -77.125, 4.0
    draws = np.array([noisy_real(value, noise, shift, rng) for _ in range(N_DRAWS)])
    sigma = math.sqrt(noise.variance) * float(noise.step)
    _, pvalue = stats.kstest(draws - (value + shift), stats.norm(scale=sigma).cdf)
    assert pvalue > 1e-3
    assert np.std(draws) == pytest.approx(sigma, rel=0.01)


def test_noisy_real_snaps_shift_and_value() -> None:
    zero = RealGaussian(Fraction(1, 4), 5, Fraction(0))
    rng = SeededRandomSource(1)
    assert noisy_real(Fraction(1, 3), zero, 0.3, rng) == 0.25 + 0.25
    assert noisy_real(10, zero, -0.125, rng) == 10.0  # tie rounds to even (0 steps)
    with pytest.raises(ValueError):
        noisy_real(math.nan, zero, 0.0, rng)
    with pytest.raises(ValueError):
        noisy_real(Decimal("Infinity"), zero, 0.0, rng)
    with pytest.raises(ValueError):
        noisy_real(1.0, zero, math.inf, rng)


# --- accuracy -------------------------------------------------------------------------

def test_real_laplace_bound_covers_and_is_tight(laplace_draws) -> None:
    noise, value, shift, draws = laplace_draws
    # The analyst's shift is −12.3; the configured interval allows |μ| up to 25.
    alpha = real_noise_bound(noise, 25.0, 0.05)
    assert np.mean(np.abs(draws - value) > alpha) <= 0.05
    # Continuous Theorem 2 at the widest shift (b = 25, μ = 25), plus at most a few steps.
    continuous = 25 * math.log(math.cosh(1.0) / 0.05)
    assert continuous <= alpha <= continuous * (1 + 1e-4)


def test_real_gaussian_bound_covers() -> None:
    noise = calibrate_real_gaussian(1.0, 0.5, 1e-6)
    sigma = math.sqrt(noise.variance) * float(noise.step)
    alpha = real_noise_bound(noise, 0.0, 0.05)
    assert alpha == pytest.approx(1.959964 * sigma, rel=1e-3)
    assert real_noise_bound(noise, 3 * sigma, 0.05) > alpha
