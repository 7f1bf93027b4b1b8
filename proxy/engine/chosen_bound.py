"""A unit-mode COUNT(*) answered from the histogram of per-unit row counts.

The backend returned rows (min(c_u, cap), number of units) (rewriter/aggregate/bounding.py,
`contribution_histogram`). With τ fixed (the session's SET dp.max_contributions, the
Gaussian mechanism, or a zero share) the count is Σ_u min(c_u, τ), noised as before.
Otherwise ε is split (sequential composition, docs/privacy-unit.md): three quarters of
`bound_choice_share` choose τ ≤ the policy's contributions_limit
(mechanisms/contribution_bound.py). For a lone count below the limit, TRUNCATION_PART of
the rest releases the rows beyond τ, Σ_u min(c_u, cap) − min(c_u, τ) (sensitivity
cap − τ), and the count gets what remains; at the limit nothing is beyond τ up to the cap,
so the count gets all of it. A histogram's quarter of the share releases the number of
units beyond τ (sensitivity 1), the rest its cells.

The NOTICE's interval covers the noise at half the failure probability and the
truncation at the other half: a lone count's upper end grows by the noisy rows beyond τ
plus that estimate's one-sided bound, so it holds every row up to the cap; a histogram's
grows, when the noisy number of units beyond τ shows that some exist, by that many units
times the most rows each may have dropped (the cap minus τ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from mechanisms.accuracy import laplace_bound, shifted_laplace_bound
from mechanisms.contribution_bound import (
    BoundChoice,
    beyond,
    bound_grid,
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

CHOICE_PART = 0.75  # of bound_choice_share; the rest estimates a histogram's units beyond τ
# Of a lone count's ε after the choice, when τ is below the cap: the rows beyond τ. Their
# noise, times ln(1/β), is what the interval's upper end must add to be honest.
TRUNCATION_PART = 0.1


@dataclass(frozen=True)
class CountAtBound:
    """The count's true row at τ and its calibration there; for a chosen τ, the noisy
    number of units beyond it (a histogram) or rows beyond it up to the cap (a lone count),
    that estimate's epsilon and sensitivity (1 for units, cap − τ for rows)."""

    rows: Sequence[Row]
    calibration: Calibration
    tau: int
    chosen: bool
    choice_epsilon: float = 0.0
    beyond: int = 0
    beyond_epsilon: float = 0.0
    dropped: int | None = None
    dropped_scale: Fraction | float = 0.0


def count_at_bound(plan: PrivateAggregate, calibration: Calibration, true_rows: Sequence[Row],
                   settings: PrivacySettings, rng: RandomSource) -> CountAtBound:
    """Choose τ (or take the fixed one) and compute the count, or each cell, at it."""
    unit = plan.unit
    assert unit is not None and unit.counts_cap is not None
    cells = _cells(true_rows, plan.keys) if plan.keys else None
    histogram = _unit_histogram(cells, unit.counts_cap) if cells is not None else \
        {int(count): int(units) for count, units in true_rows}  # type: ignore[arg-type]
    epsilon = calibration.epsilon
    share = settings.bound_choice_share
    if unit.chosen_limit is None or share == 0 or \
            calibration.mechanism == Mechanism.GAUSSIAN:
        tau = unit.max_contributions
        return CountAtBound(_rows(histogram, cells, tau), _at(calibration, tau, epsilon),
                            tau, False)
    grid = bound_grid(unit.chosen_limit)
    choice = BoundChoice(epsilon * share * CHOICE_PART, grid) if cells is None else \
        BoundChoice(epsilon * share * CHOICE_PART, grid, histogram_hedge(len(cells)))
    tau = choose_bound(choice, histogram, rng)
    if cells is None:
        return _lone_count(histogram, calibration, choice, tau, unit.counts_cap, rng)
    estimate = epsilon * share * (1 - CHOICE_PART)
    noisy_beyond = beyond(histogram, tau) + sample_discrete_laplace(
        laplace_scale(1, estimate), rng)
    return CountAtBound(_rows(histogram, cells, tau),
                        _at(calibration, tau, epsilon * (1 - share)), tau, True,
                        choice.epsilon, noisy_beyond, estimate)


def _lone_count(histogram: dict[int, int], calibration: Calibration, choice: BoundChoice,
                tau: int, cap: int, rng: RandomSource) -> CountAtBound:
    """The count at τ and, below the cap, the noisy rows beyond τ: Σ_u min(c_u, cap) −
    min(c_u, τ), which one unit moves by at most cap − τ (τ is public once chosen, so the
    split of the rest is post-processing of the choice)."""
    rest = calibration.epsilon - choice.epsilon
    if tau >= cap:
        return CountAtBound(_rows(histogram, None, tau), _at(calibration, tau, rest), tau,
                            True, choice.epsilon, dropped=0)
    estimate = rest * TRUNCATION_PART
    scale = laplace_scale(cap - tau, estimate)
    dropped = truncated_total(histogram, cap) - truncated_total(histogram, tau)
    return CountAtBound(_rows(histogram, None, tau), _at(calibration, tau, rest - estimate),
                        tau, True, choice.epsilon, beyond_epsilon=estimate,
                        dropped=dropped + sample_discrete_laplace(
                            scale, rng), dropped_scale=scale)


Cells = dict[tuple[bytes | None, ...], list[tuple[int, int, int]]]


def _cells(true_rows: Sequence[Row], keys: int) -> Cells:
    """Per key (in the backend's order), its (m, n, units): that many units have m rows
    in the cell and n in all (bounding.cell_contributions); none for an empty key."""
    cells: Cells = {}
    for row in true_rows:
        key, counts = tuple(row[:keys]), row[keys:]
        cells.setdefault(key, [])
        if counts[0] is not None:
            cells[key].append(tuple(int(v or 0) for v in counts))  # type: ignore[arg-type]
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


def _rows(histogram: dict[int, int], cells: Cells | None, tau: int) -> list[Row]:
    """The true rows at τ: the count Σ_u min(c_u, τ); or per key its cell, where a unit
    of n > τ rows keeps ⌊m·τ/n⌋ of its m there (at most τ in all, in proportion)."""
    if cells is None:
        return _row(truncated_total(histogram, tau))
    return [(*key, str(sum(units * (m if n <= tau else m * tau // n)
                           for m, n, units in counts)).encode())
            for key, counts in cells.items()]


def _row(total: int) -> list[Row]:
    return [(str(total).encode(),)]


def _at(calibration: Calibration, tau: int, epsilon: float) -> Calibration:
    """The count's part at sensitivity τ and budget `epsilon` (pure: no δ)."""
    part = calibration.parts[0]
    if calibration.mechanism == Mechanism.GAUSSIAN:
        return calibration  # calibrated at the fixed τ already
    scale = tau / epsilon
    return replace(calibration, parts=(replace(
        part, epsilon=epsilon, elastic_sensitivity=float(tau), smooth_sensitivity=float(tau),
        scale=scale, shift_scale=scale),))


def count_bound(count: CountAtBound, limit: int, widest_shift: float, beta: float
                ) -> int | str:
    """The NOTICE's (1 − β) interval half-width; with a chosen τ, the noise at β/2 and,
    when the units beyond τ show at β/2, the upper end's allowance for their rows."""
    part = count.calibration.parts[0]
    if not count.chosen:
        return math.ceil(shifted_laplace_bound(part.scale, widest_shift, beta))
    noise = math.ceil(shifted_laplace_bound(part.scale, widest_shift, beta / 2))
    allowance = truncation_allowance(count, limit, beta / 2)
    return noise if allowance == 0 else f"{noise} (upper end +{noise + allowance})"


def truncation_allowance(count: CountAtBound, limit: int, beta: float) -> int:
    """Rows beyond τ the interval allows for at confidence 1 − β. A lone count: the noisy
    rows beyond τ plus their one-sided bound (every row up to the cap, whatever the data).
    A histogram: the units beyond τ that surely exist (noisy count minus its one-sided
    bound), each with up to `limit` − τ rows dropped."""
    if not count.chosen:
        return 0
    if count.dropped is not None:
        if count.dropped_scale == 0:
            return 0
        return max(0, math.ceil(count.dropped + laplace_bound(count.dropped_scale, 2 * beta)))
    sure = count.beyond - laplace_bound(1 / count.beyond_epsilon, 2 * beta)
    return max(0, math.floor(sure)) * (limit - count.tau)


def count_note(plan: PrivateAggregate, count: CountAtBound) -> str | None:
    """The NOTICE clause of the privacy model for a count at a chosen τ (None for a fixed
    τ: unit_report.mode_notice says it)."""
    unit = plan.unit
    assert unit is not None
    rows = f"{count.tau} row" + ("" if count.tau == 1 else "s")
    if not count.chosen:
        return None
    chosen = (f"each {unit.unit} counted with at most {rows}, a bound chosen privately for "
              f"this query (at most {unit.chosen_limit}; epsilon {count.choice_epsilon:g} of "
              "the charge)")
    if count.dropped is not None:
        if count.dropped_scale == 0:
            return (f"{chosen}; rows beyond {count.tau} per unit are never counted, nor "
                    "allowed for in the interval")
        margin = math.ceil(laplace_bound(count.dropped_scale, 0.05))
        return (f"{chosen}; about {max(count.dropped, 0)} rows (±{margin}) were beyond it "
                f"and not counted (epsilon {count.beyond_epsilon:g}): the interval's upper "
                f"end allows for them, up to {unit.chosen_limit} rows per unit")
    margin = math.ceil(laplace_bound(1 / count.beyond_epsilon, 0.05))
    return (f"{chosen}; about {max(count.beyond, 0)} of them (±{margin}) had more rows, "
            f"not counted beyond {count.tau} (epsilon {count.beyond_epsilon:g}): the "
            "interval allows for those rows only when that estimate shows them, so with "
            "many heavy units the truth can lie above it")
