"""Choosing a count's contribution bound τ from the data, privately.

A unit-mode count keeps at most τ rows per unit: its error is the truncation bias
Σ_u max(0, c_u − τ) plus noise of scale τ/ε. Amin, Kulesza, Muñoz Medina & Vassilvitskii
(ICML 2019) show the best τ is about where the number of units with more than τ rows,
n(τ) = #{u : c_u > τ}, falls to 1/ε. Each n(τ) has sensitivity 1 under adding or
removing a unit, and adding a unit can only raise every n(τ) (the queries are monotone).

The mechanism is the sparse vector technique's AboveThreshold (Dwork & Roth, Algorithm 1;
Lyu, Su & Li, "Understanding the Sparse Vector Technique", VLDB 2017, Algorithm 7 with
monotone queries) walking up a geometric grid of candidates τ_0 = 1 < τ_1 < … < τ_L =
τ_max: level j is "heavy" when n(τ_j) + ν_j ≥ T_j + ρ, and the walk stops at the first
level that is not. With ρ ~ DLap(1/ε₁) and ν_j ~ DLap(1/ε₂) (discrete Laplace; monotone
queries need no factor 2 on ν), the index where it stops is (ε₁ + ε₂)-DP whatever the
number of levels. Its output m (the number of heavy levels) is then mapped, as post-
processing, to τ = τ_{min(m+HEDGE, L)} (τ_0 when m = 0).

Why thresholds of a few noise scales, and a hedge: at ε ≈ 0.01 the noise is hundreds of
units, so the walk can only find where n(τ) falls below a few hundred, not to 1/ε. T_0 is
high enough that a query over a few hundred units (one product) stops at τ = 1 with
probability ≥ 99%, where a larger τ would only add noise; above τ = 1 the threshold is
lower (UPPER_THRESHOLD_SCALES). Where the walk stops, the units beyond τ may still number a
few hundred: those drop rows, and truncation bias grows much faster below the best τ than
noise does above it. So the answer's τ is HEDGE levels (×3–4) above the level where the
walk stopped (fewer for a histogram: histogram_hedge); a lone count's walk goes further
at a lower threshold and hedges COUNT_HEDGE levels (×2–2.7). Every threshold is a
constant of the shape, never of the data: the proof above holds for each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from mechanisms.laplace import sample_discrete_laplace
from mechanisms.numbers import parameter
from mechanisms.random_source import RandomSource

# Levels above the one where the walk stopped at which τ is set (ratio ~1.5: ×3–4).
HEDGE = 3
# T in noise scales at τ = 1: a level with no unit beyond it looks heavy with probability
# ~3%, so a small question stays at τ = 1. Above it (only questions with ~T units of two
# rows or more get there) the threshold is halved: the walk then stops where a few hundred
# units are beyond τ, not ~T, which a heavy tail needs.
THRESHOLD_SCALES = 3.0
UPPER_THRESHOLD_SCALES = 1.5
# A lone count's walk above τ = 1: a lower threshold and one hedge level less. The walk
# then goes on to where ~T units are beyond τ at T of one noise scale, not 1.5, so it
# sees more of the tail itself and need not guess it with the hedge: on the demo's light
# tail (at most 50 rows a customer) τ lands on 48 more often than 64, and on the second
# schema's Pareto tail no lower than before (docs/privacy-unit.md, "Choosing τ").
COUNT_UPPER_THRESHOLD_SCALES = 1.0
COUNT_HEDGE = 2


def bound_grid(tau_max: int) -> tuple[int, ...]:
    """Candidates 1, 2, 3, 4, 6, 8, 12, 16, 24, … (2^k and 3·2^k) below τ_max, then τ_max."""
    grid = sorted({base << k for base in (1, 3) for k in range(tau_max.bit_length())
                   if base << k < tau_max})
    return tuple(grid + [tau_max])


@dataclass(frozen=True)
class BoundChoice:
    """The walk's parameters at selection budget `epsilon` (split evenly: ε₁ = ε₂)."""

    epsilon: float
    grid: tuple[int, ...]
    hedge: int = HEDGE
    upper_scales: float = UPPER_THRESHOLD_SCALES

    @property
    def scale(self) -> Fraction:
        """b of both ρ and ν: 1/(ε/2)."""
        return 2 / parameter(self.epsilon, "epsilon")

    def threshold(self, level: int) -> int:
        """T_j: data-independent, so AboveThreshold's proof holds per query as written."""
        scales = THRESHOLD_SCALES if level == 0 else self.upper_scales
        return math.ceil(scales * 2 * float(self.scale))

    def bound(self, heavy: int) -> int:
        """τ from the number of heavy levels (post-processing of the walk's output)."""
        last = len(self.grid) - 1
        return self.grid[0] if heavy == 0 else \
            self.grid[min(max(heavy + self.hedge, 0), last)]


def histogram_hedge(cells: int, choice: BoundChoice, epsilon: float) -> int:
    """Levels above the walk's stop for a histogram of `cells` cells (public: the domain's
    size) whose cells get `epsilon`. The cells share one L1 = τ, so the noise of all
    cells together grows as cells·τ/ε and the best τ leaves about cells/ε units beyond it
    (Amin et al.), where a lone count's leaves 1/ε. The walk stops near T_1 units beyond
    τ; HEDGE levels bridge the factor T_1·ε to a lone count's target, so a histogram's
    hedge bridges T_1·ε/cells in proportion on a log scale (none once cells ≥ T_1·ε: 32
    at the default share)."""
    reach = choice.threshold(1) * epsilon
    if reach <= max(cells, 1):
        return 0
    return round(HEDGE * math.log(reach / max(cells, 1)) / math.log(reach))


def cell_resolution(cells: int) -> int:
    """Q: a histogram's cells are released in steps of 1/Q rows, Q a power of two at least
    64 times the number of cells (public: the domain's size). Rounding each cell to the
    grid moves it by at most half a step, so a unit moves the cells by at most Q·τ +
    cells steps: the noise's sensitivity, at most 1/64 of a row above τ."""
    return 1 << math.ceil(math.log2(64 * max(cells, 1)))


def privacy_map(choice: BoundChoice, units: int = 1) -> float:
    """ε of the choice between databases `units` units apart (add/remove one unit each):
    ε₁ + ε₂ per unit, by group privacy beyond one."""
    return units * choice.epsilon


def beyond(histogram: dict[int, int], tau: int) -> int:
    """n(τ): units with more than τ rows, from {c_u (capped): number of units}."""
    return sum(units for count, units in histogram.items() if count > tau)


def truncated_total(histogram: dict[int, int], tau: int) -> int:
    """Σ_u min(c_u, τ): the count with τ rows per unit at most."""
    return sum(min(count, tau) * units for count, units in histogram.items())


def heavy_levels(choice: BoundChoice, histogram: dict[int, int], rng: RandomSource) -> int:
    """AboveThreshold up the grid: the number of levels j < L where n(τ_j) + ν_j ≥ T_j + ρ
    before the first that is not (L when every tested level is heavy)."""
    scale = choice.scale
    rho = sample_discrete_laplace(scale, rng)
    for level, tau in enumerate(choice.grid[:-1]):
        if beyond(histogram, tau) + sample_discrete_laplace(scale, rng) < \
                choice.threshold(level) + rho:
            return level
    return len(choice.grid) - 1


def choose_bound(choice: BoundChoice, histogram: dict[int, int], rng: RandomSource) -> int:
    """τ for this query's per-unit counts, ε = choice.epsilon."""
    return choice.bound(heavy_levels(choice, histogram, rng))


def _tail(k: int, p: float) -> float:
    """P(X ≥ k) for X discrete Laplace with P(X = x) ∝ p^|x|."""
    return p ** k / (1 + p) if k >= 1 else 1 - p ** (1 - k) / (1 + p)


def heavy_distribution(choice: BoundChoice, tails: Sequence[int], width: int = 0
                       ) -> list[float]:
    """P(heavy_levels = m) for m = 0…L exactly (up to ρ's tail beyond ±`width`), for
    tests: tails[j] = n(τ_j). Sums over every value of ρ."""
    p = math.exp(-1 / float(choice.scale))
    width = width or math.ceil(40 * float(choice.scale))
    levels = len(choice.grid) - 1
    result = [0.0] * (levels + 1)
    for rho in range(-width, width + 1):
        weight = (1 - p) / (1 + p) * p ** abs(rho)
        carried = weight
        for level in range(levels):
            heavy = _tail(choice.threshold(level) + rho - tails[level], p)
            result[level] += carried * (1 - heavy)
            carried *= heavy
        result[levels] += carried
    return result
