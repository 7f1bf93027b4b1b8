"""Noise level of the Gaussian mechanism for a given (ε, δ) and L2 sensitivity Δ₂.

Three calibrations, from the loosest to the one the samplers use:

* classical (Dwork & Roth 2014, Theorem A.1): σ = sqrt(2·ln(1.25/δ))·Δ₂/ε,
  proved only for ε < 1;
* analytic (Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy",
  ICML 2018, Theorem 8): the smallest σ whose exact privacy profile
  δ(ε) = Φ(Δ/2σ − εσ/Δ) − e^ε·Φ(−Δ/2σ − εσ/Δ) is at most δ, valid for every ε > 0;
* discrete (Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy",
  NeurIPS 2020, Theorem 7): the same exact condition for the integer noise that is
  actually sampled, evaluated through a rigorous upper bound (see
  :func:`discrete_gaussian_delta`).

Φ comes from ``math.erfc``, accurate in the far tails where δ lives.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

from mechanisms.numbers import Real, parameter

_SQRT2 = math.sqrt(2.0)
_SQRT2PI = math.sqrt(2.0 * math.pi)
# Relative width at which the bisection on σ stops.
_TOLERANCE = 1e-12
# Relative slack on the float evaluation of δ, so a rounding error can only overstate it.
_SLACK = 1e-9
# Extra bits of σ² kept when a float σ becomes the exact variance the sampler uses.
_VARIANCE_BITS = 32
# Terms of the discrete Gaussian sums added one by one before an integral bound takes over.
_EXACT_TERMS = 2000


class GaussianParameterError(ValueError):
    """ε, δ or the sensitivity is outside the range where a calibration is valid."""


def _check(epsilon: float, delta: float, sensitivity: float) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise GaussianParameterError(f"epsilon must be positive and finite, got {epsilon!r}")
    if not 0 < delta < 1:
        raise GaussianParameterError(f"delta must be in (0, 1), got {delta!r}")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise GaussianParameterError(
            f"sensitivity must be positive and finite, got {sensitivity!r}")


def _upper_tail(x: float) -> float:
    """Q(x) = P(N(0,1) > x) = 1 − Φ(x)."""
    return 0.5 * math.erfc(x / _SQRT2)


def _exp_times_tail(log_factor: float, x: float) -> float:
    """e^log_factor · Q(x), in log space so that a large ε cannot overflow."""
    tail = _upper_tail(x)
    return math.exp(log_factor + math.log(tail)) if tail > 0 else 0.0


def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """σ = sqrt(2·ln(1.25/δ))·Δ₂/ε (Dwork & Roth 2014, Theorem A.1).

    The proof needs ε < 1: larger ε raises :class:`GaussianParameterError` (use
    :func:`analytic_gaussian_sigma`, valid for every ε and always smaller).
    """
    _check(epsilon, delta, sensitivity)
    if epsilon >= 1:
        raise GaussianParameterError(
            f"the classical Gaussian calibration holds only for epsilon < 1, got {epsilon!r}; "
            "use the analytic Gaussian calibration")
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """Smallest δ for which N(0, σ²) noise is (ε, δ)-DP at L2 sensitivity Δ₂.

    Balle & Wang 2018, Theorem 8: δ = Q(εσ/Δ − Δ/2σ) − e^ε·Q(εσ/Δ + Δ/2σ).
    """
    if not sigma > 0:
        raise GaussianParameterError(f"sigma must be positive, got {sigma!r}")
    ratio = epsilon * sigma / sensitivity
    half = sensitivity / (2.0 * sigma)
    return max(0.0, _upper_tail(ratio - half) - _exp_times_tail(epsilon, ratio + half))


def _smallest_sigma(private_enough: Callable[[float], bool], start: float) -> float:
    """Smallest σ (to _TOLERANCE) with private_enough(σ), for a test monotone in σ.

    Every calibration here tends to δ = 1 as σ → 0 and to 0 as σ → ∞, so the doubling
    and halving below terminate. The value returned always passed the test.
    """
    high = start
    while not private_enough(high):
        high *= 2.0
    low = high / 2.0
    while private_enough(low):
        high, low = low, low / 2.0
    while high - low > _TOLERANCE * high:
        middle = (low + high) / 2.0
        if private_enough(middle):
            high = middle
        else:
            low = middle
    return high


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ with :func:`gaussian_delta` ≤ δ: the analytic Gaussian mechanism.

    Balle & Wang 2018 (Algorithm 1 solves the same condition in another variable). Valid
    for every ε > 0; below ε = 1 it is always smaller than the classical σ.
    """
    _check(epsilon, delta, sensitivity)
    start = math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon
    return _smallest_sigma(
        lambda s: gaussian_delta(s, epsilon, sensitivity) * (1 + _SLACK) <= delta, start)


def variance_at_least(sigma: float) -> Fraction:
    """σ² rounded up to a multiple of 2^−32, as the exact Fraction a sampler uses."""
    square = Fraction(sigma) ** 2
    scaled = square * (1 << _VARIANCE_BITS)
    return Fraction(-(-scaled.numerator // scaled.denominator), 1 << _VARIANCE_BITS)


def _f(x: int, two_var: float) -> float:
    return math.exp(-x * x / two_var)


def _tail_sum_lower(start: int, sigma: float, two_var: float) -> float:
    """A lower bound of Σ_{x >= start} f(x), f(x) = e^(−x²/2σ²), for start >= 0.

    The first _EXACT_TERMS terms are summed; the rest is at least ∫ f from there (f
    decreases), plus half its first term where f is convex (x >= σ, trapezoid rule).
    """
    stop = start + _EXACT_TERMS
    rest = _SQRT2PI * sigma * _upper_tail(stop / sigma)
    if stop >= sigma:
        rest += _f(stop, two_var) / 2
    return math.fsum(_f(x, two_var) for x in range(start, stop)) + rest


def _window_sum_upper(low: int, high: int, sigma: float, two_var: float) -> float:
    """An upper bound of Σ_{low <= x < high} f(x).

    Summed term by term when short or where f is not convex; otherwise the midpoint rule,
    which overestimates a convex f: f(x) <= ∫_{x−1/2}^{x+1/2} f.
    """
    if high - low <= _EXACT_TERMS or low - 0.5 < sigma:
        return math.fsum(_f(x, two_var) for x in range(low, high))
    return _SQRT2PI * sigma * (_upper_tail((low - 0.5) / sigma)
                               - _upper_tail((high - 0.5) / sigma))


def _normaliser_lower(sigma: float, two_var: float) -> float:
    """A lower bound of Z = Σ_x f(x).

    Poisson summation gives Z = sqrt(2π)·σ·(1 + 2·Σ_k e^(−2π²σ²k²)) >= sqrt(2π)·σ, short
    by less than 1e-30 once σ >= 2; below that the partial sum is the better bound.
    """
    if sigma >= 2:
        return _SQRT2PI * sigma
    return 1 + 2 * math.fsum(_f(x, two_var) for x in range(1, 100))


def discrete_gaussian_delta(variance: Real, epsilon: Real, sensitivity: int) -> float:
    """Upper bound on the smallest δ for which N_Z(0, σ²) noise is (ε, δ)-DP.

    Canonne, Kamath & Steinke 2020, Theorem 7: for an integer sensitivity Δ and
    X ~ N_Z(0, σ²), δ = P(L <= X < U) − (e^ε − 1)·P(X >= U) with
    L = ⌊εσ²/Δ − Δ/2⌋ + 1 and U = ⌊εσ²/Δ + Δ/2⌋ + 1 (computed exactly here). With
    f(x) = e^(−x²/2σ²) and Z = Σ f, the first sum is bounded above, the second and Z below
    (see the helpers), so the value returned is >= the true δ; it is within a part in
    10^3 of it (tests compare with the sum of the definition).
    """
    if not isinstance(sensitivity, int) or sensitivity < 1:
        raise GaussianParameterError(f"sensitivity must be a positive integer, got "
                                     f"{sensitivity!r}")
    var = parameter(variance, "variance")
    eps = parameter(epsilon, "epsilon")
    if var <= 0 or eps < 0:
        raise GaussianParameterError("variance must be positive and epsilon non-negative")
    centre = eps * var / sensitivity
    low = math.floor(centre - Fraction(sensitivity, 2)) + 1
    high = math.floor(centre + Fraction(sensitivity, 2)) + 1
    sigma = math.sqrt(var)
    two_var = 2.0 * float(var)
    window = _window_sum_upper(low, high, sigma, two_var)
    subtracted = 0.0
    if eps > 0:
        e = float(eps)
        tail = _tail_sum_lower(high, sigma, two_var)
        # (e^ε − 1)·tail in log space: log(e^ε − 1) = ε + log(1 − e^−ε) cannot overflow.
        if tail > 0:
            subtracted = math.exp(e + math.log1p(-math.exp(-e)) + math.log(tail))
    excess = window * (1 + _SLACK) - subtracted * (1 - _SLACK)
    return min(1.0, max(0.0, excess / _normaliser_lower(sigma, two_var)))


def discrete_gaussian_variance(epsilon: float, delta: float, sensitivity: int) -> Fraction:
    """Smallest σ² (on a 2^−32 grid) whose :func:`discrete_gaussian_delta` is ≤ δ.

    The returned Fraction is the exact variance parameter to give
    :func:`mechanisms.gaussian.sample_discrete_gaussian`: the guarantee is checked at that
    very value, not at a nearby float.
    """
    _check(epsilon, delta, float(sensitivity))
    if not isinstance(sensitivity, int):
        raise GaussianParameterError(f"sensitivity must be an integer, got {sensitivity!r}")

    def private_enough(sigma: float) -> bool:
        return discrete_gaussian_delta(variance_at_least(sigma), epsilon, sensitivity) <= delta

    sigma = _smallest_sigma(private_enough,
                            analytic_gaussian_sigma(epsilon, delta, sensitivity))
    return variance_at_least(sigma)
