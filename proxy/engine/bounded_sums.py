"""Sums whose clamping bounds are chosen from the data at release (ApproxBounds-like).

The backend returns, for such a part, one numeric[]: per bucket of the declared range the
count of values, then per bucket their sum (rewriter/aggregate/rewrite.py). A share
`privacy.bounds_share` of the part's ε buys noisy bucket counts of all the answer's rows
(groups) together, from which one [L, U] is chosen for every group; each group's sum
clamped to [L, U] is computed exactly from its buckets and released with the rest of the
ε, at a noise scale for max(|L|, |U|) (an AVG's sum of x − (L + U)/2: for (U − L)/2). The
argument is in mechanisms/approx_bounds.py and docs/privacy-unit.md.

Why shared bounds: the groups' bucket counts have one L1 sensitivity together (a unit's
rows fall in one (group, bucket) cell each), so their sum over the groups costs the same
ε as one group's and holds all of their rows: per group, at ε 0.1, no bucket of a
category's weighted order costs passed the threshold and 9 cells in 10 fell back to the
declared bounds (docs/privacy-unit.md, "Clamping bounds chosen per query").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from mechanisms.approx_bounds import ChosenBounds, choose_bounds, clamped_sum
from mechanisms.names import Mechanism
from mechanisms.random_source import RandomSource
from mechanisms.reals import RealNoise, calibrate_real_laplace, noisy_real
from rewriter.plan import NoisyPart
from rewriter.release.error_bars import real_noise
from rewriter.sensitivity.calibrate import Calibration, PartCalibration


@dataclass(frozen=True)
class Drawn:
    """One part of one row, noised."""

    plain: int | float  # before the analyst's shift: key selection decides on it
    released: int | float
    chosen: ChosenBounds | None = None  # a sum with bounds chosen at release
    grid: RealNoise | None = None  # that sum's noise in this row (None: no noise)


Noiser = Callable[[bytes | None], Drawn]


def bounded_sum_noiser(part: NoisyPart, calibrated: PartCalibration, calibration: Calibration,
                       shift: float, share: float, beta: float, rng: RandomSource,
                       raws: Sequence[bytes | None], groups: int = 1) -> Noiser:
    """The noiser of a bucketed sum whose rows hold `raws`; `share` of its ε chooses one
    [L, U] for all of them from their bucket counts together (0: the declared bounds, as
    with the Gaussian mechanism, whose σ is not linear in 1/ε): the bounds with the least
    error over the rows, `groups` (public: the domain's size, else 1) times one row's
    noise plus the expected bias of all rows' values cut off (mechanisms/approx_bounds.py)."""
    assert part.edges is not None
    edges = part.edges
    buckets = len(edges) - 1
    declared = ChosenBounds(edges[0], edges[-1], Fraction(0), Fraction(0))
    choosing = share > 0 and calibrated.scale > 0 and \
        calibration.mechanism != Mechanism.GAUSSIAN
    # The bucket counts' sensitivity in rows: the part's, per unit of its magnitude.
    rows = Fraction(calibrated.elastic_sensitivity) / Fraction(part.magnitude)
    selection_scale = rows / (Fraction(share) * Fraction(calibrated.epsilon)) \
        if choosing else Fraction(0)
    # The Laplace tail at β/2 of the sum's noise for bounds [L, U], in every group, to
    # compare them.
    per_magnitude = groups * float(calibrated.scale) / part.magnitude / (1 - share) * \
        math.log(2 / beta) if choosing else 0.0

    def noise_for(low: Fraction, high: Fraction) -> float:
        return per_magnitude * float(_magnitude(part, low, high))

    parsed = {raw: _buckets(raw, buckets) for raw in raws}
    chosen = declared
    if choosing:
        # Over the rows as listed (identical rows each count), read once above.
        pooled = [sum(counts, Fraction(0)) for counts in
                  zip(*(parsed[raw][0] for raw in raws), strict=True)] \
            if raws else [Fraction(0)] * buckets
        # Weighted counts are real: noised on a grid for their L1 sensitivity (rows).
        chosen = choose_bounds(pooled, edges, selection_scale, rng, noise_for,
                               rows if part.weighted else None)
    # The same for every row: one grid for the answer, as release._real_noiser's.
    grid = _grid(part, calibrated, calibration, _magnitude(part, chosen.low, chosen.high),
                 share if choosing else 0.0)

    def noise(raw: bytes | None) -> Drawn:
        counts, sums = parsed[raw] if raw in parsed else _buckets(raw, buckets)
        value = clamped_sum(counts, sums, edges, chosen)
        if part.centred:
            value -= sum(counts) * chosen.centre
        released = float(value) if grid is None else noisy_real(value, grid, shift, rng)
        return Drawn(released, released, chosen, grid)
    return noise


def _magnitude(part: NoisyPart, low: Fraction, high: Fraction) -> Fraction:
    """One row's largest effect on the sum clamped to [low, high]."""
    return (high - low) / 2 if part.centred else max(abs(low), abs(high))


def _grid(part: NoisyPart, calibrated: PartCalibration, calibration: Calibration,
          magnitude: Fraction, share: float) -> RealNoise | None:
    """The grid noise for the chosen bounds with the ε left after choosing them."""
    if calibrated.scale == 0 or magnitude == 0:
        return None  # public rows, or a sum that is 0 whatever the data (centred, L = U)
    if share == 0:
        return real_noise(calibrated, calibration)
    ratio = magnitude / Fraction(part.magnitude)
    return calibrate_real_laplace(Fraction(calibrated.elastic_sensitivity) * ratio,
                                  Fraction(calibrated.scale) * ratio / (1 - Fraction(share)))


def _buckets(raw: bytes | None, buckets: int) -> tuple[list[Fraction], list[Fraction]]:
    """counts and sums from the numeric[] text ({c0,…,s0,…}); counts are whole numbers
    but for weighted parts (proxy/engine/weighted_sums.py)."""
    if raw is None:  # an aggregate over no row (the filled histogram's empty key)
        return [Fraction(0)] * buckets, [Fraction(0)] * buckets
    values = raw.decode().strip("{}").split(",")
    assert len(values) == 2 * buckets, "one count and one sum per bucket"
    return ([Fraction(Decimal(v)) for v in values[:buckets]],
            [Fraction(Decimal(v)) for v in values[buckets:]])
