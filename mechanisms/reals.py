"""Real answers (SUM, the parts of AVG) released with noise on a power-of-two grid.

Why a grid: adding a textbook Laplace or Gaussian double to a double leaves gaps in the
set of reachable outputs that depend on the true value, so one output can tell which of
two neighbouring databases produced it (Mironov, "On Significance of the Least
Significant Bits for Differential Privacy", CCS 2012). Mironov's snapping mechanism fixes
it by rounding the noisy result to a power of two; here the same idea is taken one step
further so that no floating point remains at all:

1. choose the grid step Λ = 2^⌈log2(min(Δ, s)/2^k)⌉, with s the noise scale (b or σ) and
   k = :data:`GRID_BITS`: Λ is far below both the noise and the sensitivity;
2. round the true value x to the grid, exactly: j = round(x/Λ);
3. release Λ·(j + round(μ/Λ) + N), N integer noise from the exact discrete Laplace or
   discrete Gaussian sampler (Canonne, Kamath & Steinke, NeurIPS 2020).

The released double is a function of the integer j + round(μ/Λ) + N alone, so its
rounding is post-processing and cannot leak.

Privacy accounting. Rounding moves each input by at most Λ/2, so two neighbouring answers
at distance <= Δ give grid indices at distance <= Δ_Λ = ⌊Δ/Λ⌋ + 1 (an integer, attained
when both inputs are ties rounded apart). The integer noise is therefore calibrated for
sensitivity Δ_Λ, not Δ/Λ: its scale in answer units is Δ_Λ·Λ <= Δ + Λ instead of Δ, at
most 2^(1−k) more in relative terms. The guarantee is then exactly the one asked for
(ε for Laplace, (ε, δ) for Gaussian). The answer's error adds the rounding, at most Λ/2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from mechanisms.gaussian import sample_discrete_gaussian
from mechanisms.gaussian_sigma import analytic_gaussian_sigma, discrete_gaussian_variance
from mechanisms.laplace import sample_discrete_laplace
from mechanisms.numbers import Real, exact_value, parameter
from mechanisms.random_source import RandomSource

# k: the grid is 2^k times finer than the noise and the sensitivity (2^-20 ~ 1e-6).
GRID_BITS = 20


@dataclass(frozen=True)
class RealLaplace:
    """Discrete Laplace noise on the grid: the ε-DP release of a real answer."""

    step: Fraction  # Λ, a power of two: every released value is a multiple of it
    sensitivity: int  # Δ_Λ, the sensitivity in steps once inputs are rounded
    scale: Fraction  # the discrete Laplace scale, in steps

    def sample(self, rng: RandomSource) -> int:
        """Integer noise, in steps."""
        return sample_discrete_laplace(self.scale, rng)


@dataclass(frozen=True)
class RealGaussian:
    """Discrete Gaussian noise on the grid: the (ε, δ)-DP release of a real answer."""

    step: Fraction  # Λ, a power of two
    sensitivity: int  # Δ_Λ, the L2 sensitivity in steps once inputs are rounded
    variance: Fraction  # σ² of the discrete Gaussian, in steps²

    def sample(self, rng: RandomSource) -> int:
        """Integer noise, in steps."""
        return sample_discrete_gaussian(self.variance, rng)


RealNoise = RealLaplace | RealGaussian


def power_of_two_at_least(x: Fraction) -> Fraction:
    """Smallest 2^e >= x for x > 0, exactly (no float log2 that could round the wrong way)."""
    if x <= 0:
        raise ValueError(f"need a positive number, got {x}")
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e < x:
        e += 1
    while Fraction(2) ** (e - 1) >= x:
        e -= 1
    return Fraction(2) ** e


def grid_step(sensitivity: Fraction, noise_scale: Fraction, bits: int = GRID_BITS) -> Fraction:
    """Λ = 2^⌈log2(min(Δ, s)/2^bits)⌉.

    Using the smaller of Δ and s keeps Λ <= 2^(1−bits)·Δ, so rounding inflates the
    sensitivity by at most that fraction even when ε is small and s ≫ Δ.
    """
    return power_of_two_at_least(min(sensitivity, noise_scale) / 2**bits)


def to_grid(value: Fraction, step: Fraction) -> int:
    """round(value/Λ), exact, ties to even."""
    return round(value / step)


def steps_sensitivity(sensitivity: Fraction, step: Fraction) -> int:
    """Δ_Λ = ⌊Δ/Λ⌋ + 1, the largest distance between the grid indices of two neighbours."""
    return math.floor(sensitivity / step) + 1


def _positive(x: Real, name: str) -> Fraction:
    value = parameter(x, name)
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {x!r} (a sensitivity of 0 needs no "
                         "noise: release the value itself)")
    return value


def calibrate_real_laplace(sensitivity: Real, scale: Real, bits: int = GRID_BITS) -> RealLaplace:
    """Grid and discrete Laplace noise protecting an answer of sensitivity Δ like Lap(b).

    ``scale`` is the b the caller would use for continuous Laplace noise (Δ/ε on the pure
    path, 2S*/ε on the smooth path with Δ = S*): the grid noise keeps the same ratio b/Δ
    per unit of (rounded) sensitivity, hence the same privacy loss.
    """
    delta = _positive(sensitivity, "sensitivity")
    b = _positive(scale, "scale")
    step = grid_step(delta, b, bits)
    grid_sensitivity = steps_sensitivity(delta, step)
    return RealLaplace(step, grid_sensitivity, grid_sensitivity * b / delta)


def calibrate_real_gaussian(sensitivity: Real, epsilon: float, delta: float,
                            bits: int = GRID_BITS) -> RealGaussian:
    """Grid and discrete Gaussian noise making an answer of L2 sensitivity Δ₂ (ε, δ)-DP.

    The grid follows the analytic Gaussian σ (Balle & Wang 2018); the variance in steps is
    then calibrated for the integer sensitivity Δ_Λ with the discrete Gaussian's own exact
    condition (CKS 2020, Theorem 7).
    """
    l2 = _positive(sensitivity, "sensitivity")
    sigma = analytic_gaussian_sigma(epsilon, delta, float(l2))
    step = grid_step(l2, Fraction(sigma), bits)
    grid_sensitivity = steps_sensitivity(l2, step)
    return RealGaussian(step, grid_sensitivity,
                        discrete_gaussian_variance(epsilon, delta, grid_sensitivity))


def noisy_real(value: Real, noise: RealNoise, shift: float, rng: RandomSource) -> float:
    """Release Λ·(round(x/Λ) + round(μ/Λ) + N) for a real answer x and shift μ.

    ``value`` is read exactly (pass PostgreSQL NUMERIC as Decimal). The per-analyst shift
    μ (the analyst's shift, in answer units) is snapped to the grid like the value: it is
    data-independent, so it leaves the guarantee unchanged.
    """
    steps = (to_grid(exact_value(value), noise.step)
             + to_grid(exact_value(shift, "shift"), noise.step) + noise.sample(rng))
    return float(steps * noise.step)
