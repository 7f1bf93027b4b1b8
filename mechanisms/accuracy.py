"""(α, β) accuracy bounds: P(error > α) <= β, for the NOTICE after every noisy answer.

Every bound depends on public parameters only (ε, δ, the sensitivity, the configured
shift interval), never on the data or on the analyst's own shift μ_u.
"""

from __future__ import annotations

import math
from fractions import Fraction

from mechanisms.exponential import (
    ExponentialBase,
    QuantileGrid,
    exponential_base,
    quantile_level,
)
from mechanisms.numbers import Real, parameter
from mechanisms.reals import RealLaplace, RealNoise

# Covers the few ulps lost in exp/log so the float we return never undershoots the bound.
_REL_MARGIN = 1e-9


def _widest_rounded_shift(max_abs_shift: float, beta: float) -> int:
    """m = ⌊M + 1/2⌋ after checking the arguments every bound shares.

    |round(μ) − μ| <= 1/2 and round(μ) is an integer, so |round(μ)| <= ⌊M + 1/2⌋ whatever
    the tie-breaking rule.
    """
    if not (math.isfinite(max_abs_shift) and max_abs_shift >= 0):
        raise ValueError(f"max_abs_shift must be finite and non-negative, got {max_abs_shift!r}")
    if not 0 < beta < 1:
        raise ValueError(f"beta must be in (0, 1), got {beta!r}")
    return math.floor(max_abs_shift + 0.5)


def shifted_laplace_bound(
    scale: float | Fraction, max_abs_shift: float, beta: float = 0.05
) -> float:
    """Return α with P(|round(μ) + DLap(scale)| > α) <= β for every |μ| <= max_abs_shift.

    Theorem 2 of the multi-user shifted Laplace paper gives α = b·ln(cosh(μ/b)/β) for
    continuous Lap(μ, b). For the integer noise, let m = ⌊M + 1/2⌋ (the largest |round(μ)|
    when |μ| <= M) and p = e^(−1/b). With P(X >= k) = p^k/(1+p) for X ~ DLap(b), k >= 1,
    a shift j with |j| <= m and any real α >= m give P(|j + X| > α) = 2·p^(⌊α⌋+1)·cosh(j/b)/(1+p)
    <= 2·e^(−α/b)·cosh(m/b)/(1+p): Theorem 2's tail times 2/(1+p), maximised at the
    worst shift. Solving for β gives

        α = max(m, b·ln(2·cosh(m/b)/((1+p)·β)))
          = m + b·max(0, ln((1 + e^(−2m/b)) / ((1+p)·β))),

    the second form being overflow-free. It depends on the public interval bound M only,
    never on the analyst's own μ. It exceeds the continuous bound at μ = m by at most 1/2
    (b·ln(2/(1+p)) < 1/2) and is within 1 of the smallest valid α at the worst
    shift (α − 1 already fails there when β < 1/2). Scale 0 returns m: the noise is
    then exactly round(μ).
    """
    b = float(scale)
    if not (math.isfinite(b) and b >= 0):
        raise ValueError(f"scale must be finite and non-negative, got {scale!r}")
    m = _widest_rounded_shift(max_abs_shift, beta)
    if b == 0:
        return float(m)
    log_term = math.log1p(math.exp(-2.0 * m / b)) - math.log1p(math.exp(-1.0 / b)) - math.log(beta)
    if log_term <= 0:
        # The tail beyond m is already below β: nothing to add to the shift itself.
        return float(m)
    alpha = m + b * log_term * (1.0 + _REL_MARGIN)
    return math.nextafter(alpha, math.inf)


def laplace_bound(scale: float | Fraction, beta: float = 0.05) -> float:
    """Return α with P(|DLap(scale)| > α) <= β (the unshifted case of the bound above)."""
    return shifted_laplace_bound(scale, 0.0, beta)


def _discrete_gaussian_tail(k: int, sigma: float) -> float:
    """An upper bound of P(X >= k) for X ~ N_Z(0, σ²) and an integer k >= 1.

    Σ_{x>=k} f(x) <= f(k) + ∫_k^∞ f for the decreasing f(x) = e^(−x²/2σ²), and the
    normaliser is >= sqrt(2π)·σ (Poisson summation), so P(X >= k) <= φ(k/σ)/σ + Q(k/σ).
    """
    z = k / sigma
    return math.exp(-z * z / 2) / (math.sqrt(2 * math.pi) * sigma) + 0.5 * math.erfc(
        z / math.sqrt(2))


def discrete_gaussian_bound(variance: Real, max_abs_shift: float, beta: float = 0.05) -> float:
    """Return α with P(|round(μ) + N_Z(0, σ²)| > α) <= β for every |μ| <= max_abs_shift.

    With j = round(μ), m = ⌊M + 1/2⌋ >= |j| and an integer α >= m,
    P(|j + X| > α) = P(X >= α + 1 − j) + P(X >= α + 1 + j); for a symmetric unimodal X
    it grows with |j|, so the worst shift is m, and each term is bounded by
    :func:`_discrete_gaussian_tail`. The smallest such integer α is returned: it depends
    on the interval bound M only, never on the analyst's own μ.
    """
    var = parameter(variance, "variance")
    if var < 0:
        raise ValueError(f"variance must be non-negative, got {variance!r}")
    m = _widest_rounded_shift(max_abs_shift, beta)
    if var == 0:
        return float(m)
    sigma = math.sqrt(var)

    def covered(alpha: int) -> bool:
        tails = (_discrete_gaussian_tail(alpha + 1 - m, sigma)
                 + _discrete_gaussian_tail(alpha + 1 + m, sigma))
        return tails * (1 + _REL_MARGIN) <= beta

    low, high = m - 1, m + math.ceil(sigma)
    while not covered(high):
        low, high = high, high + 2 * (high - m)
    # Invariant: covered(high), and low < m or not covered(low).
    while high - low > 1:
        middle = (low + high) // 2
        if covered(middle):
            high = middle
        else:
            low = middle
    return float(high)


def real_noise_bound(noise: RealNoise, max_abs_shift: float, beta: float = 0.05) -> float:
    """Return α with P(|released − x| > α) <= β for every |μ| <= max_abs_shift.

    The release is Λ·(round(x/Λ) + round(μ/Λ) + N) (:func:`mechanisms.reals.noisy_real`):
    the input rounding costs at most Λ/2, the rest is the integer bound in steps.
    """
    step = float(noise.step)  # a power of two: the divisions below are exact
    if isinstance(noise, RealLaplace):
        in_steps = shifted_laplace_bound(noise.scale, max_abs_shift / step, beta)
    else:
        in_steps = discrete_gaussian_bound(noise.variance, max_abs_shift / step, beta)
    return math.nextafter((in_steps + 0.5) * step, math.inf)


def _gap_bound(base: ExponentialBase, outputs: int, beta: float) -> float:
    """g with P(u* − u(chosen) > g) <= β, in units of Δu.

    With weights ρ^d over N outputs and weight 1 for the best, P(d >= t) <= N·ρ^t
    (the clamp at T never lowers a weight below ρ^t for t <= T, and t <= T whenever
    β >= 2^−64). The smallest such integer t gives d <= t − 1 with probability >= 1 − β.
    """
    if not 2.0**-60 < beta < 1:
        raise ValueError(f"beta must be in (2^-60, 1), got {beta!r}")
    if outputs < 1:
        raise ValueError(f"need at least one possible output, got {outputs!r}")
    # The relative margin absorbs float error, so the bound never undershoots.
    t = math.ceil(math.log(outputs / beta) / base.log_inverse * (1 + 1e-9))
    return max(t - 1, 0) / base.resolution


def mode_bound(epsilon: Real, categories: int, beta: float = 0.05) -> float:
    """α: the category :func:`~mechanisms.exponential.private_mode` returns has a count
    >= (largest count) − α with probability >= 1 − β. Depends on ε and the domain size.
    """
    return _gap_bound(exponential_base(epsilon), categories, beta)


def quantile_rank_bound(epsilon: Real, p: Real, grid: QuantileGrid, beta: float = 0.05) -> float:
    """α: the point :func:`~mechanisms.exponential.quantile_from_counts` returns has a rank
    error |#{x <= y} − p·n| at most α above the best grid point's, with probability
    >= 1 − β. It speaks of ranks, not values: the value error depends on the data.
    """
    return _gap_bound(exponential_base(epsilon, quantile_level(p).denominator), grid.points,
                      beta)
