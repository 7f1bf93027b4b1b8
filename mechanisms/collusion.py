"""The collusion analysis of the multi-user shifted Laplace paper, reproduced with the real
samplers.

i colluding analysts ask the same count and average their answers. With plain Laplace
noise the average converges to the true answer r; the paper's Section III.B (Lemma 2, the
central limit theorem with σ² = 2b²) says i = max(30, 18Δ²/(m²ε²)) colluders get within
±m of r with 99% confidence. With per-analyst shifts μ_u (Theorem 3) the average
converges to r + mean(μ) instead: the error plateaus near |E[μ]|, which is why the
shift interval must not be centred on 0. A third curve shows colluders who know the
interval, hence E[μ], and subtract it: they converge again, which is why the shift only
helps while its distribution is secret.

Each trial draws one coalition of ``max_colluders`` analysts, each with its own shift
drawn exactly as ``dpgate user add`` draws it, and one answer per analyst from
:func:`~mechanisms.laplace.shifted_laplace_count`, the sampler the proxy uses; the
coalitions of size i are the first i analysts of each trial.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from mechanisms.laplace import laplace_scale, shifted_laplace_count
from mechanisms.random_source import RandomSource, uniform

# The true answer; the errors do not depend on it.
_TRUE_COUNT = 1000


@dataclass(frozen=True)
class CollusionSetup:
    """What the experiment simulates (the shift as configured in dpgate.toml)."""

    epsilon: float
    sensitivity: float
    margin: float
    max_colluders: int
    trials: int
    shift_interval: tuple[float, float]
    shift_unit: str  # "scale": μ = draw·b; "absolute": μ = draw


@dataclass(frozen=True)
class CollusionCurve:
    """Per coalition size i = 1 … max_colluders (index i − 1), over all trials."""

    mean_error: list[float]  # mean |average of i answers − r|
    within_margin: list[float]  # fraction of trials with that error <= m


@dataclass(frozen=True)
class CollusionResult:
    """The three curves, and what to compare them with."""

    setup: CollusionSetup
    scale: Fraction  # b = Δ/ε
    formula_colluders: int  # i = max(30, 18Δ²/(m²ε²))
    mean_shift: float  # E[μ] in answer units: where the shifted error plateaus
    plain: CollusionCurve
    shifted: CollusionCurve
    informed: CollusionCurve  # shifted answers, E[μ] subtracted by colluders who know it


def colluders_needed(epsilon: float, sensitivity: float, margin: float) -> int:
    """The multi-user shifted Laplace paper: i = max(30, 18Δ²/(m²ε²)) colluders reach ±m
    with 99% confidence."""
    if epsilon <= 0 or sensitivity < 0 or margin <= 0:
        raise ValueError("need epsilon > 0, sensitivity >= 0 and margin > 0")
    return max(30, math.ceil(18 * sensitivity**2 / (margin**2 * epsilon**2)))


def _validate(setup: CollusionSetup) -> None:
    low, high = setup.shift_interval
    if not low <= high:
        raise ValueError(f"the shift interval needs low <= high, got [{low}, {high}]")
    if setup.shift_unit not in ("scale", "absolute"):
        raise ValueError(f"shift unit must be 'scale' or 'absolute', got {setup.shift_unit!r}")
    if setup.max_colluders < 1 or setup.trials < 1:
        raise ValueError("need at least one colluder and one trial")


class _Tally:
    """Running sums of the error of every coalition size over the trials."""

    def __init__(self, sizes: int, margin: float) -> None:
        self.errors = [0.0] * sizes
        self.within = [0] * sizes
        self.trials = 0
        self.margin = margin

    def add(self, answers: list[int], known_shift: float = 0.0) -> None:
        total = 0.0
        for i, answer in enumerate(answers):
            total += answer - _TRUE_COUNT - known_shift
            error = abs(total / (i + 1))
            self.errors[i] += error
            self.within[i] += error <= self.margin
        self.trials += 1

    def curve(self) -> CollusionCurve:
        return CollusionCurve([e / self.trials for e in self.errors],
                              [w / self.trials for w in self.within])


def run_collusion(setup: CollusionSetup, rng: RandomSource,
                  progress: Callable[[int, int], None] | None = None) -> CollusionResult:
    """Simulate ``setup.trials`` coalitions; ``progress(done, total)`` after each trial."""
    _validate(setup)
    scale = laplace_scale(setup.sensitivity, setup.epsilon)
    unit = float(scale) if setup.shift_unit == "scale" else 1.0
    low, high = setup.shift_interval
    mean_shift = (low + high) / 2 * unit
    plain, shifted, informed = (_Tally(setup.max_colluders, setup.margin) for _ in range(3))
    for trial in range(setup.trials):
        shifts = [uniform(low, high, rng) * unit for _ in range(setup.max_colluders)]
        plain.add([shifted_laplace_count(_TRUE_COUNT, scale, 0.0, rng) for _ in shifts])
        answers = [shifted_laplace_count(_TRUE_COUNT, scale, mu, rng) for mu in shifts]
        shifted.add(answers)
        informed.add(answers, known_shift=mean_shift)
        if progress is not None:
            progress(trial + 1, setup.trials)
    return CollusionResult(
        setup=setup, scale=scale,
        formula_colluders=colluders_needed(setup.epsilon, setup.sensitivity, setup.margin),
        mean_shift=mean_shift, plain=plain.curve(), shifted=shifted.curve(),
        informed=informed.curve())
