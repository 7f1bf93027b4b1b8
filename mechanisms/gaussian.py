"""Exact discrete Gaussian noise for integer answers (Gaussian mechanism; Canonne, Kamath
& Steinke 2020).

Like :mod:`mechanisms.laplace`, no floating point touches the noise: the sampler is
Algorithm 3 of Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
Privacy" (NeurIPS 2020), built on the exact discrete Laplace and Bernoulli(exp(−γ))
samplers. Calibrate the variance with
:func:`mechanisms.gaussian_sigma.discrete_gaussian_variance`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from mechanisms.laplace import sample_bernoulli_exp, sample_discrete_laplace
from mechanisms.numbers import Real, parameter
from mechanisms.random_source import RandomSource


def sample_discrete_gaussian(variance: Real, rng: RandomSource) -> int:
    """Return an integer X with P[X = x] ∝ exp(−x²/(2σ²)), σ² = ``variance``.

    Rejection from a discrete Laplace of scale t = ⌊σ⌋ + 1, accepting Y with probability
    exp(−(|Y| − σ²/t)²/(2σ²)), exactly (CKS 2020, Algorithm 3); the expected number of
    rounds is a small constant whatever σ. Variance 0 returns 0.
    """
    var = parameter(variance, "variance")
    if var < 0:
        raise ValueError(f"variance must be non-negative, got {variance!r}")
    if var == 0:
        return 0
    # ⌊σ⌋ = isqrt(⌊σ²⌋) for any real σ² >= 0.
    t = math.isqrt(math.floor(var)) + 1
    centre = var / t
    while True:
        y = sample_discrete_laplace(Fraction(t), rng)
        if sample_bernoulli_exp((abs(y) - centre) ** 2 / (2 * var), rng):
            return y


def gaussian_count(true_value: int, variance: Real, shift: float, rng: RandomSource) -> int:
    """Release ``true_value + round(shift) + N_Z(0, variance)`` for an integer answer.

    The per-analyst shift is a data-independent constant: the guarantee is the
    discrete Gaussian's alone.
    """
    if not math.isfinite(shift):
        raise ValueError(f"shift must be finite, got {shift!r}")
    return int(true_value) + round(shift) + sample_discrete_gaussian(variance, rng)
