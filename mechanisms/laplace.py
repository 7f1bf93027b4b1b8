"""Exact discrete Laplace noise for integer answers.

Why no floating point: the textbook sampler ``μ − b·sgn(u)·ln(1 − 2|u|)`` on doubles
leaves gaps in the set of reachable outputs whose positions depend on the true answer, so
one released value can reveal which neighbouring database produced it (Mironov, "On
Significance of the Least Significant Bits for Differential Privacy", CCS 2012). The
samplers below use only exact integer and rational arithmetic on uniform integers from a
:class:`~mechanisms.random_source.RandomSource`, so the output distribution is exactly the
intended one and the privacy proof applies as written.
"""

from __future__ import annotations

import math
from fractions import Fraction

from mechanisms.numbers import Real, parameter
from mechanisms.random_source import RandomSource


def laplace_scale(sensitivity: Real, epsilon: Real) -> Fraction:
    """Return the Laplace scale b = Δ/ε as an exact Fraction.

    Floats are read through their repr, so ``laplace_scale(1, 0.1) == Fraction(10)``.
    Raises ValueError when ε <= 0 or Δ < 0.
    """
    eps = parameter(epsilon, "epsilon")
    delta = parameter(sensitivity, "sensitivity")
    if eps <= 0:
        raise ValueError(f"epsilon must be positive, got {epsilon!r}")
    if delta < 0:
        raise ValueError(f"sensitivity must be non-negative, got {sensitivity!r}")
    return delta / eps


def _bernoulli(num: int, den: int, rng: RandomSource) -> bool:
    """Exact Bernoulli(num/den) for 0 <= num <= den."""
    return rng.randbelow(den) < num


def _bernoulli_exp_unit(num: int, den: int, rng: RandomSource) -> bool:
    """Exact Bernoulli(exp(−num/den)) for 0 <= num/den <= 1."""
    # With A_k ~ Bernoulli(γ/k), the first K with A_K = 0 is odd with probability
    # exactly exp(−γ) (the alternating series 1 − γ + γ²/2! − ...).
    k = 1
    while _bernoulli(num, den * k, rng):
        k += 1
    return k % 2 == 1


def _bernoulli_exp(num: int, den: int, rng: RandomSource) -> bool:
    """Exact Bernoulli(exp(−num/den)); integers only, so the hot loop avoids Fraction."""
    if num <= den:
        return _bernoulli_exp_unit(num, den, rng)
    # γ > 1: exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋)), one independent coin per factor,
    # stopping at the first failure.
    whole, rest = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_unit(1, 1, rng):
            return False
    return _bernoulli_exp_unit(rest, den, rng)


def sample_bernoulli_exp(gamma: Real, rng: RandomSource) -> bool:
    """Return True with probability exactly exp(−γ), for rational γ >= 0.

    Algorithm 1 of Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
    Privacy" (NeurIPS 2020), using only ``rng.randbelow``.
    """
    g = parameter(gamma, "gamma")
    if g < 0:
        raise ValueError(f"gamma must be non-negative, got {gamma!r}")
    return _bernoulli_exp(g.numerator, g.denominator, rng)


def sample_discrete_laplace(scale: Real, rng: RandomSource) -> int:
    """Return an integer X with P[X = x] ∝ exp(−|x|/scale) (two-sided geometric).

    Algorithm 2 of Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
    Privacy" (NeurIPS 2020): exact, using only ``rng.randbelow``. Scale 0 returns 0.
    """
    b = parameter(scale, "scale")
    if b < 0:
        raise ValueError(f"scale must be non-negative, got {scale!r}")
    if b == 0:
        return 0
    # scale = t/s in lowest terms; we sample a geometric with parameter exp(−1/t), then
    # divide by s, which yields a geometric with parameter exp(−s/t) = exp(−1/scale).
    t, s = b.numerator, b.denominator
    while True:
        # X = U + t·V: U is the low part (weighted by exp(−U/t) through rejection) and V
        # the number of whole blocks of t, itself geometric with parameter exp(−1).
        u = rng.randbelow(t)
        if not _bernoulli_exp_unit(u, t, rng):
            continue
        v = 0
        while _bernoulli_exp_unit(1, 1, rng):
            v += 1
        y = (u + t * v) // s
        negative = rng.randbelow(2) == 1
        # Zero would otherwise be produced by both signs; rejecting −0 gives the
        # symmetric two-sided distribution with the right mass at 0.
        if negative and y == 0:
            continue
        return -y if negative else y


def shifted_laplace_count(true_value: int, scale: Fraction, shift: float, rng: RandomSource) -> int:
    """Release ``true_value + round(shift) + DLap(scale)`` (per-analyst shifted Laplace).

    The mechanism of the multi-user shifted Laplace paper, for integer answers. The shift
    μ_u is a data-independent constant fixed per analyst, so the privacy guarantee is
    exactly that of the discrete Laplace with this scale; only accuracy depends on the shift.
    """
    if not math.isfinite(shift):
        raise ValueError(f"shift must be finite, got {shift!r}")
    return int(true_value) + round(shift) + sample_discrete_laplace(scale, rng)
