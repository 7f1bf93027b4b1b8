"""(α, β) accuracy bounds for the integer noise released by :mod:`mechanisms.laplace`."""

from __future__ import annotations

import math
from fractions import Fraction

# Covers the few ulps lost in exp/log so the float we return never undershoots the bound.
_REL_MARGIN = 1e-9


def shifted_laplace_bound(
    scale: float | Fraction, max_abs_shift: float, beta: float = 0.05
) -> float:
    """Return α with P(|round(μ) + DLap(scale)| > α) <= β for every |μ| <= max_abs_shift.

    Seed 000, Theorem 2, gives α = b·ln(cosh(μ/b)/β) for continuous Lap(μ, b). For the
    integer noise, let m = ⌊M + 1/2⌋ (the largest |round(μ)| when |μ| <= M) and
    p = e^(−1/b). With P(X >= k) = p^k/(1+p) for X ~ DLap(b), k >= 1, a shift j with
    |j| <= m and any real α >= m give P(|j + X| > α) = 2·p^(⌊α⌋+1)·cosh(j/b)/(1+p)
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
    if not (math.isfinite(max_abs_shift) and max_abs_shift >= 0):
        raise ValueError(f"max_abs_shift must be finite and non-negative, got {max_abs_shift!r}")
    if not 0 < beta < 1:
        raise ValueError(f"beta must be in (0, 1), got {beta!r}")
    # |round(μ) − μ| <= 1/2 and round(μ) is an integer, so |round(μ)| <= ⌊M + 1/2⌋
    # whatever the tie-breaking rule.
    m = math.floor(max_abs_shift + 0.5)
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
