"""A unit-mode COUNT(*) answered from the histogram of per-unit row counts.

The backend returned rows (min(c_u, cap), number of units) (rewriter/aggregate/bounding.py,
`contribution_histogram`). With τ fixed (the session's SET dp.max_contributions, the
Gaussian mechanism, or a zero share) the count is Σ_u min(c_u, τ), noised as before.
Otherwise ε is split (sequential composition, docs/privacy-unit.md): three quarters of
`bound_choice_share` choose τ ≤ the policy's contributions_limit
(mechanisms/contribution_bound.py). For a lone count below the limit, TRUNCATION_PART of
the rest releases the rows beyond τ, Σ_u min(c_u, cap) − min(c_u, τ) (sensitivity
cap − τ), and the count gets what remains; at the limit nothing is beyond τ up to the cap,
so the count gets all of it. A histogram's quarter of the share releases the same rows
beyond τ below the cap, the rest its cells. A histogram's cells are fractional: a unit of
n > τ rows adds m·τ/n to a cell where it has m, exactly τ in all, released on a grid of
1/Q rows (`cell_resolution`) with integer noise, then rounded to whole rows.

The NOTICE's interval covers the noise at half the failure probability and the
truncation at the other half: the upper end (of the count, or of every cell) grows by the
noisy rows beyond τ plus that estimate's one-sided bound, so it holds every row up to the
cap, on any data: no cell can have lost more rows than all of them together.

A histogram whose keys are read from the rows (`spread_keys`) and whose τ would leave its
cells with much noise (`shape_pays`) is answered instead as its units' shape times its
total: the cells at τ_c = 1 (each unit weighs 1 row in all, spread over its cells in
proportion: L1 = 1) and the rows up to the cap, Σ_u min(n_u, cap) (sensitivity cap), each
with its share of the ε left; each cell is then its shape cell times the total over the
shape cells' sum (post-processing). Whether: a private question before the walk
(`shape_decision`), or failing that the walk's τ. It assumes a unit's rows fall in the
cells as all rows do; its interval allows for the noise, not for that assumption.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from mechanisms.accuracy import laplace_bound, shifted_laplace_bound
from mechanisms.contribution_bound import (
    COUNT_HEDGE,
    COUNT_UPPER_THRESHOLD_SCALES,
    BoundChoice,
    beyond,
    bound_grid,
    cell_resolution,
    choose_bound,
    histogram_hedge,
    truncated_total,
)
from mechanisms.laplace import laplace_scale, sample_discrete_laplace
from mechanisms.names import Mechanism
from mechanisms.random_source import RandomSource
from rewriter.plan import PrivateAggregate
from rewriter.sensitivity.calibrate import Calibration

from ..config import PrivacySettings
from ..pgwire.backend import Row

CHOICE_PART = 0.75  # of bound_choice_share; the rest releases a histogram's rows beyond τ
# Of a lone count's ε after the choice, when τ is below the cap: the rows beyond τ. Their
# noise, times ln(1/β), is what the interval's upper end must add to be honest.
TRUNCATION_PART = 0.1
# The shape × total estimator: the total's part of the ε left after the choice (the shape
# cells get the rest; the best split on the demo's monthly series, docs/privacy-unit.md),
# and the noise of the plain cells, in rows, below which they are kept: there the ratio's
# assumption could cost more than the noise it saves (and zero-noise answers stay exact).
SHAPE_TOTAL_PART = 0.3
SHAPE_FROM_NOISE = 10
# The question before the walk whether to answer so: its part of the query's ε, and its
# threshold's margin in noise scales above the walk's (docs/privacy-unit.md).
DECISION_PART = 0.03
DECISION_SCALES = 3


@dataclass(frozen=True)
class CountAtBound:
    """The count's true row at τ (a histogram's cells in steps of 1/`resolution` rows) and
    its calibration there; for a chosen τ, the noisy rows beyond it up to the cap, that
    estimate's epsilon and scale (sensitivity cap − τ)."""

    rows: Sequence[Row]
    calibration: Calibration
    tau: int
    chosen: bool
    choice_epsilon: float = 0.0
    beyond_epsilon: float = 0.0
    dropped: int | None = None
    dropped_scale: Fraction | float = 0.0
    resolution: int = 1
    # The shape × total estimator: `rows` are the shape cells (τ_c = 1), and `total` the
    # noisy rows up to the cap each cell is scaled to, its scale and epsilon.
    total: int | None = None
    total_scale: Fraction | float = 0.0
    total_epsilon: float = 0.0


def count_at_bound(plan: PrivateAggregate, calibration: Calibration, true_rows: Sequence[Row],
                   settings: PrivacySettings, rng: RandomSource) -> CountAtBound:
    """Choose τ (or take the fixed one) and compute the count, or each cell, at it."""
    unit = plan.unit
    assert unit is not None and unit.counts_cap is not None
    cells = _cells(true_rows, plan.keys, unit.cells_by_size) if plan.keys else None
    histogram = _unit_histogram(cells, unit.counts_cap) if cells is not None else \
        {int(count): int(units) for count, units in true_rows}  # type: ignore[arg-type]
    gaussian = calibration.mechanism == Mechanism.GAUSSIAN
    assert not (gaussian and unit.cells_by_size)  # refused before the charge (before_charge.py)
    # Under the Gaussian mechanism the cells keep ⌊m·τ/n⌋: whole rows, L2 ≤ τ exactly.
    resolution = cell_resolution(len(cells)) if cells is not None and not gaussian else 1
    epsilon = calibration.epsilon
    share = settings.bound_choice_share
    if unit.chosen_limit is None or share == 0 or gaussian:
        tau = unit.max_contributions
        return CountAtBound(_rows(histogram, cells, tau, resolution),
                            _at(calibration, tau, epsilon, cells, resolution), tau, False,
                            resolution=resolution)
    grid = bound_grid(unit.chosen_limit)
    cap = unit.counts_cap
    decision = shape_decision(grid, cap, len(cells), epsilon, share) \
        if cells and unit.spread_keys else None  # no cell (a WHERE left no key): nothing to shape
    if decision is not None:
        assert cells is not None
        if decision.passes(histogram, rng):
            return _shape_times_total(calibration, histogram, cells, cap,
                                      epsilon - decision.epsilon, decision.epsilon,
                                      resolution, rng)
        epsilon -= decision.epsilon  # the walk and what follows it get the rest
    choice = BoundChoice(epsilon * share * CHOICE_PART, grid)
    # What the NOTICE names as spent choosing τ: the walk, and the question before it.
    chosen_with = choice.epsilon + (decision.epsilon if decision is not None else 0.0)
    if cells is not None:
        choice = replace(choice, hedge=histogram_hedge(len(cells), choice, epsilon * (1 - share)))
    else:
        choice = replace(choice, hedge=COUNT_HEDGE, upper_scales=COUNT_UPPER_THRESHOLD_SCALES)
    tau = choose_bound(choice, histogram, rng)
    rest = epsilon - choice.epsilon
    if decision is not None and shape_pays(tau, cap, len(cells or ()), epsilon * (1 - share),
                                           rest):  # the question missed what the walk saw
        assert cells is not None
        return _shape_times_total(calibration, histogram, cells, cap, rest,
                                  decision.epsilon + choice.epsilon, resolution, rng)
    if tau >= cap:  # nothing is beyond τ up to the cap, whatever the data
        return CountAtBound(_rows(histogram, cells, tau, resolution),
                            _at(calibration, tau, rest, cells, resolution), tau, True,
                            chosen_with, dropped=0, resolution=resolution)
    estimate = rest * TRUNCATION_PART if cells is None else epsilon * share * (1 - CHOICE_PART)
    scale = laplace_scale(cap - tau, estimate)
    dropped = truncated_total(histogram, cap) - truncated_total(histogram, tau)
    return CountAtBound(_rows(histogram, cells, tau, resolution),
                        _at(calibration, tau, rest - estimate, cells, resolution), tau, True,
                        chosen_with, beyond_epsilon=estimate,
                        dropped=dropped + sample_discrete_laplace(scale, rng),
                        dropped_scale=scale, resolution=resolution)


@dataclass(frozen=True)
class ShapeDecision:
    """Whether to answer a histogram as shape × total: AboveThreshold on one level, i.e.
    whether n(τ) + DLap(1/ε) ≥ threshold (n(τ) = units with more than τ rows, sensitivity 1
    under adding or removing a unit). It costs `epsilon` of the query's ε either way."""

    tau: int
    threshold: int
    epsilon: float

    def passes(self, histogram: dict[int, int], rng: RandomSource) -> bool:
        noise = sample_discrete_laplace(laplace_scale(1, self.epsilon), rng)
        return beyond(histogram, self.tau) + noise >= self.threshold


def shape_decision(grid: Sequence[int], cap: int, cells: int, epsilon: float, share: float
                   ) -> ShapeDecision | None:
    """The question asked before the walk (None: plain cells, no question): τ_s is the
    least τ of the grid at which the plain cells would pay for shape × total
    (`shape_pays`); the walk would reach it only past the levels below it, so the
    question is whether the units beyond the last of those (the hedge's levels under τ_s)
    number the walk's threshold there plus DECISION_SCALES noise scales: a histogram
    with few such units goes on to the walk with probability ≥ 1 − e^{−3}/2, and the
    shape is then taken only if the walk's τ pays for it. All of it reads the policy, the
    domain's size and ε: public."""
    asked = epsilon * DECISION_PART
    rest = epsilon - asked
    walk = BoundChoice(rest * share * CHOICE_PART, tuple(grid))
    hedge = histogram_hedge(cells, walk, rest * (1 - share))
    for index, tau in enumerate(grid):
        if shape_pays(tau, cap, cells, rest * (1 - share), rest):
            level = max(index - hedge - 1, 0)
            return ShapeDecision(grid[level], walk.threshold(level) +
                                 math.ceil(DECISION_SCALES / asked), asked)
    return None


def shape_pays(tau: int, cap: int, cells: int, cells_epsilon: float, rest: float) -> bool:
    """Whether plain cells at τ (with `cells_epsilon`) would carry at least
    SHAPE_FROM_NOISE rows of noise each, and the total of shape × total (at its share of
    `rest`), spread over the cells, at most half of it."""
    noise = tau / cells_epsilon
    return noise >= SHAPE_FROM_NOISE and \
        cap / (cells * rest * SHAPE_TOTAL_PART) <= noise / 2


def _shape_times_total(calibration: Calibration, histogram: dict[int, int], cells: Cells,
                       cap: int, rest: float, spent: float, resolution: int,
                       rng: RandomSource) -> CountAtBound:
    """The shape cells at τ_c = 1 and the total up to the cap with `rest` (what the
    question, and the walk if it ran, `spent`, left): SHAPE_TOTAL_PART of it for the
    total (sensitivity cap), the rest the cells."""
    total_epsilon = rest * SHAPE_TOTAL_PART
    scale = laplace_scale(cap, total_epsilon)
    return CountAtBound(_rows(histogram, cells, 1, resolution),
                        _at(calibration, 1, rest - total_epsilon, cells, resolution), 1,
                        True, spent, resolution=resolution,
                        total=truncated_total(histogram, cap) +
                        sample_discrete_laplace(scale, rng),
                        total_scale=scale, total_epsilon=total_epsilon)


def scaled_to_total(count: CountAtBound, shape: Sequence[float]) -> list[float]:
    """Each released shape cell times the released total over the shape cells' sum:
    post-processing of the two releases. With no weight left in the shape (its noise
    took it below 0) the total is spread evenly."""
    assert count.total is not None
    total, weight = max(count.total, 0), sum(shape)
    if weight <= 0:
        return [total / len(shape)] * len(shape)
    return [cell * total / weight for cell in shape]


def shape_bound(count: CountAtBound, shape: Sequence[float], widest_shift: float,
                beta: float) -> int:
    """The widest half-width of the cells' (1 − β) intervals, the ratio's assumption
    granted: β/3 each for a shape cell's noise (and its rounding), the shape's sum (a
    Chernoff bound for a sum of Laplace noise) and the total's noise, combined by interval
    arithmetic (total ± a_t)·(cell ± a_c)/(sum ∓ a_w), plus the analyst's widest shift."""
    assert count.total is not None
    scale = float(count.calibration.parts[0].scale)
    cell = laplace_bound(scale, beta / 3) + 1
    weight = _sum_bound(scale, len(shape), beta / 3) + len(shape) / 2
    total = laplace_bound(count.total_scale, beta / 3)
    n, w = max(count.total, 0), sum(shape)
    widest = 0.0
    for answer, c in zip(scaled_to_total(count, shape), shape, strict=True):
        low = max(n - total, 0) * max(c - cell, 0) / (w + weight) if w + weight > 0 else 0
        high = (n + total) * (c + cell) / (w - weight) if w - weight > 0 else n + total
        widest = max(widest, answer - low, min(high, n + total) - answer)
    return math.ceil(widest + widest_shift)


def _sum_bound(scale: float, terms: int, beta: float) -> float:
    """|Σ of `terms` Laplace(scale) draws| ≤ this with probability ≥ 1 − β: E e^{λX} =
    1/(1 − b²λ²) ≤ e^{2b²λ²} for |λ| ≤ 1/(2b), so P(S ≥ t) ≤ e^{−t²/(8kb²)} for t ≤ 2kb
    and ≤ e^{k/2 − t/(2b)} beyond (each side at β/2). Applied to the cells' discrete
    noise, whose variance is below the continuous one's (its own tail is not bounded
    here: the interval's coverage is measured, docs/privacy-unit.md)."""
    log = math.log(2 / beta)
    near = scale * math.sqrt(8 * terms * log)
    return near if near <= 2 * terms * scale else scale * (terms + 2 * log)


Cells = dict[tuple[bytes | None, ...], list[tuple[int, int, int]]]


def _cells(true_rows: Sequence[Row], keys: int, by_size: bool = False) -> Cells:
    """Per key (in the backend's order), its (m, n, units): that many units have m rows
    in the cell and n in all (bounding.cell_contributions); none for an empty key.
    `by_size`: the backend gave per key and n the rows of units of n rows in the cell
    (bounding.weighted_rows), taken as one "unit" of that many rows and n in all: every
    use here (the units' sizes Σ m·units / n, a cell's Σ units·m·min(1, τ/n)) is linear
    in m·units, so exactly as the units themselves; not ⌊m·τ/n⌋ per unit, which the
    Gaussian's whole cells need (they are never planned so: unit_mode.chosen_count)."""
    cells: Cells = {}
    for row in true_rows:
        key, counts = tuple(row[:keys]), row[keys:]
        cells.setdefault(key, [])
        if counts[0] is not None:
            values = tuple(int(v or 0) for v in counts)
            cells[key].append((values[1], values[0], 1) if by_size else
                              values)  # type: ignore[arg-type]
    return cells


def _unit_histogram(cells: Cells, cap: int) -> dict[int, int]:
    """{min(n, cap): units} from the cells: a unit of n rows shows m rows in each of its
    cells, so the units of total n are Σ m·units / n over those cells."""
    rows: dict[int, int] = {}
    for counts in cells.values():
        for m, n, units in counts:
            rows[n] = rows.get(n, 0) + m * units
    histogram: dict[int, int] = {}
    for n, total in rows.items():
        histogram[min(n, cap)] = histogram.get(min(n, cap), 0) + total // n
    return histogram


def _rows(histogram: dict[int, int], cells: Cells | None, tau: int, resolution: int
          ) -> list[Row]:
    """The true rows at τ: the count Σ_u min(c_u, τ); or per key its cell in steps of
    1/`resolution`, where a unit of n > τ rows keeps m·τ/n of its m there (exactly τ in
    all, in proportion; ⌊m·τ/n⌋ at resolution 1)."""
    if cells is None:
        return _row(truncated_total(histogram, tau))
    if resolution == 1:
        return [(*key, str(sum(units * (m if n <= tau else m * tau // n)
                               for m, n, units in counts)).encode())
                for key, counts in cells.items()]
    return [(*key, str(round(resolution * sum(
        units * (Fraction(m) if n <= tau else Fraction(m * tau, n))
        for m, n, units in counts))).encode()) for key, counts in cells.items()]


def _row(total: int) -> list[Row]:
    return [(str(total).encode(),)]


def _at(calibration: Calibration, tau: int, epsilon: float, cells: Cells | None,
        resolution: int) -> Calibration:
    """The count's part at sensitivity τ (a histogram's: τ plus the grid's rounding,
    cells/Q) and budget `epsilon` (pure: no δ)."""
    part = calibration.parts[0]
    if calibration.mechanism == Mechanism.GAUSSIAN:
        return calibration  # calibrated at the fixed τ already
    rounding = len(cells) / resolution if cells is not None and resolution > 1 else 0
    scale = (tau + rounding) / epsilon
    return replace(calibration, parts=(replace(
        part, epsilon=epsilon, elastic_sensitivity=float(tau), smooth_sensitivity=float(tau),
        scale=scale, shift_scale=scale),))


def count_bound(count: CountAtBound, widest_shift: float, beta: float) -> int | str:
    """The NOTICE's (1 − β) interval: its half-width, and its upper end when that is
    further (count_ends)."""
    below, above = count_ends(count, widest_shift, beta)
    return below if above == below else f"{below} (upper end +{above})"


def count_ends(count: CountAtBound, widest_shift: float, beta: float) -> tuple[int, int]:
    """How far below and above the released count its (1 − β) interval reaches: the
    noise (a fractional cell's plus its rounding to whole rows); with a chosen τ below
    the cap, the noise at β/2 and the upper end's allowance for the rows beyond τ at β/2."""
    part = count.calibration.parts[0]
    rounding = 1 if count.resolution > 1 else 0
    if not count.chosen:
        noise = math.ceil(shifted_laplace_bound(part.scale, widest_shift, beta)) + rounding
        return noise, noise
    noise = math.ceil(shifted_laplace_bound(part.scale, widest_shift, beta / 2)) + rounding
    return noise, noise + truncation_allowance(count, beta / 2)


def truncation_allowance(count: CountAtBound, beta: float) -> int:
    """Rows beyond τ the interval allows for at confidence 1 − β: the noisy rows beyond τ
    up to the cap plus their one-sided bound. It holds every row up to the cap whatever
    the data, for a lone count and for every cell of a histogram (a cell cannot have lost
    more rows than all cells together)."""
    if not count.chosen or not count.dropped_scale:
        return 0
    assert count.dropped is not None
    return max(0, math.ceil(count.dropped + laplace_bound(count.dropped_scale, 2 * beta)))


def count_note(plan: PrivateAggregate, count: CountAtBound) -> str | None:
    """The NOTICE clause of the privacy model for a count at a chosen τ (None for a fixed
    τ: unit_report.mode_notice says it)."""
    unit = plan.unit
    assert unit is not None
    rows = f"{count.tau} row" + ("" if count.tau == 1 else "s")
    if not count.chosen:
        return None
    if count.total is not None:
        margin = math.ceil(laplace_bound(count.total_scale, 0.05))
        return (f"each cell is its share of the units (each {unit.unit} weighed 1 row in "
                f"all, spread over its cells; epsilon {count.calibration.parts[0].epsilon:g})"
                f" times the rows counted with at most {unit.counts_cap} per unit, about "
                f"{max(count.total, 0)} (±{margin}; epsilon {count.total_epsilon:g}), after "
                f"private checks (epsilon {count.choice_epsilon:g}) found many units with "
                "many rows: this assumes each unit's rows fall in the cells as all rows do; the "
                "interval allows for the noise, not for units whose rows fall otherwise")
    chosen = (f"each {unit.unit} counted with at most {rows}, a bound chosen privately for "
              f"this query (at most {unit.chosen_limit}; epsilon {count.choice_epsilon:g} of "
              "the charge)")
    if not count.dropped_scale:
        return (f"{chosen}; rows beyond {count.tau} per unit are never counted, nor "
                "allowed for in the interval")
    margin = math.ceil(laplace_bound(count.dropped_scale, 0.05))
    where = "upper end" if len(plan.visible) == 1 else "upper end of every cell"
    return (f"{chosen}; about {max(count.dropped or 0, 0)} rows (±{margin}) were beyond it "
            f"and not counted (epsilon {count.beyond_epsilon:g}): the interval's {where} "
            f"allows for them, up to {unit.counts_cap} rows per unit")
