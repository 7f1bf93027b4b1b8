"""Unit-mode sums, averages and variances answered at a τ chosen from their own rows.

The backend returned, per group and per unit size n, the rows of such units and each
part's aggregate (rewriter/aggregate/weighted.py, bounding.weighted_rows). Each (group, n) is
weighed by min(1, τ/n), so a unit adds at most τ rows' weight in all. τ is the session's
fixed one, or chosen as a lone count's is (chosen_bound.py, the same split of ε): three
quarters of `bound_choice_share` walk up the grid of candidates on the units' sizes;
below the limit TRUNCATION_PART of the rest releases the rows beyond τ up to the limit,
and the parts share what remains in proportion to their ε. The error bars allow for
those rows (release.py): each one's value lies within the declared bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal, localcontext
from fractions import Fraction

from mechanisms.accuracy import laplace_bound
from mechanisms.contribution_bound import (
    HEDGE,
    BoundChoice,
    bound_grid,
    choose_bound,
    histogram_hedge,
    truncated_total,
)
from mechanisms.laplace import laplace_scale, sample_discrete_laplace
from mechanisms.names import Mechanism
from mechanisms.random_source import RandomSource
from rewriter.plan import OutputKind, PrivateAggregate
from rewriter.sensitivity.calibrate import Calibration

from ..config import PrivacySettings
from ..pgwire.backend import Row
from .chosen_bound import CHOICE_PART, TRUNCATION_PART, CountAtBound

# Levels from the walk's stop to τ (a count's is +3, contribution_bound.HEDGE, one less
# for every 4× more cells of a histogram). A sum's noise per unit of τ is max(|lo|, |hi|),
# against the mean value a row beyond τ takes away, so its best τ leaves more units beyond
# it than a count's (Amin et al.): a lone sum's τ is the stop's level, a histogram's one
# less for every 4× more cells, as a count's. An average's noise falls with τ down to 1
# (τ/Σ_u min(n_u, τ) is least there) and its bias comes only from units whose values
# differ from the others': six levels below. Set on the demo (docs/privacy-unit.md): the
# constants most worth checking on other data.
SUM_HEDGE = 0
AVERAGE_HEDGE = -6
# Digits kept of a weighted value (its sensitivity is widened to cover the rounding).
DIGITS = 60
WIDEN = 1e-12
# (group key) -> [(n, rows, raw aggregates)]
Groups = dict[tuple[bytes | None, ...], list[tuple[int, int, tuple[bytes | None, ...]]]]
Layout = tuple[int | None, ...]


def sums_at_bound(plan: PrivateAggregate, calibration: Calibration, true_rows: Sequence[Row],
                  settings: PrivacySettings, rng: RandomSource) -> CountAtBound:
    """Choose τ (or take the fixed one) and weigh every part of every group at it."""
    unit = plan.unit
    assert unit is not None and unit.weights_cap is not None
    cap = unit.weights_cap
    groups, parts = _groups(true_rows, plan.keys), layout(plan)
    histogram = unit_sizes(groups, cap)
    epsilon = calibration.epsilon
    share = settings.bound_choice_share
    if unit.chosen_limit is None or share == 0 or \
            calibration.mechanism == Mechanism.GAUSSIAN:
        tau = unit.max_contributions  # Gaussian: calibrated at the cap, ≥ τ, already
        return CountAtBound(_rows(groups, tau, parts), _at(calibration, tau, cap, 1.0), tau,
                            False)
    averages = all(output.aggregate == "avg" for output in plan.outputs
                   if output.kind == OutputKind.NOISY)
    choice = BoundChoice(epsilon * share * CHOICE_PART, bound_grid(unit.chosen_limit))
    if choice.scale >= 1:  # below the stop τ trades bias for noise; without noise, none
        choice = replace(choice, hedge=AVERAGE_HEDGE if averages else SUM_HEDGE + (
            histogram_hedge(len(groups), choice, epsilon * (1 - share)) - HEDGE
            if plan.keys else 0))
    else:
        choice = replace(choice, hedge=0)
    tau = choose_bound(choice, histogram, rng)
    rest = epsilon - choice.epsilon
    if tau >= cap:
        return CountAtBound(_rows(groups, tau, parts), _at(calibration, tau, cap, rest / epsilon),
                            tau, True, choice.epsilon, dropped=0)
    estimate = rest * TRUNCATION_PART
    scale = laplace_scale(cap - tau, estimate)
    dropped = truncated_total(histogram, cap) - truncated_total(histogram, tau)
    return CountAtBound(_rows(groups, tau, parts),
                        _at(calibration, tau, cap, (rest - estimate) / epsilon), tau, True,
                        choice.epsilon, beyond_epsilon=estimate,
                        dropped=dropped + sample_discrete_laplace(scale, rng),
                        dropped_scale=scale)


def layout(plan: PrivateAggregate) -> Layout:
    """Per part, its buckets (a sum whose clamping bounds are chosen at release: the
    backend returns its bucket's index, count and sum) or None (one aggregate)."""
    return tuple(None if part.edges is None else len(part.edges) - 1 for part in plan.parts)


def rows_at(true_rows: Sequence[Row], keys: int, tau: int, parts: Layout) -> list[Row]:
    """The backend's rows (bounding.weighted_rows) weighed at τ: per key its parts."""
    return _rows(_groups(true_rows, keys), tau, parts)


def _groups(true_rows: Sequence[Row], keys: int) -> Groups:
    """Per key (in the backend's order), its (n, rows, aggregates); none for an empty key."""
    groups: Groups = {}
    for row in true_rows:
        key, size, rows, values = tuple(row[:keys]), row[keys], row[keys + 1], row[keys + 2:]
        groups.setdefault(key, [])
        if size is not None:
            groups[key].append((int(size), int(rows or 0), tuple(values)))
    return groups


def unit_sizes(groups: Groups, cap: int) -> dict[int, int]:
    """{min(n, cap): units}: the units of size n hold n rows each, so they number the rows
    of size n, over the groups, divided by n (rounded down: rows outside a declared domain
    are not listed). One unit moves one size's rows by at most n, so each count of units
    by at most one, upwards when it is added: what the choice needs."""
    rows: dict[int, int] = {}
    for sizes in groups.values():
        for n, count, _ in sizes:
            rows[n] = rows.get(n, 0) + count
    histogram: dict[int, int] = {}
    for n, total in rows.items():
        histogram[min(n, cap)] = histogram.get(min(n, cap), 0) + total // n
    return histogram


def _rows(groups: Groups, tau: int, parts: Layout) -> list[Row]:
    """Per key its parts weighed at τ: Σ_n min(1, τ/n)·aggregate; a bucketed sum as the
    numeric[] of its buckets' weighed counts then sums (bounded_sums.py reads it); NULL
    for a key without rows."""
    rows: list[Row] = []
    for key, sizes in groups.items():
        totals: list[Fraction | list[Fraction] | None] = \
            [None if buckets is None else [Fraction(0)] * (2 * buckets) for buckets in parts]
        for n, _, values in sizes:
            weight = min(Fraction(1), Fraction(tau, n))
            at = 0
            for index, buckets in enumerate(parts):
                if buckets is None:
                    if values[at] is not None:
                        value = totals[index] or Fraction(0)
                        assert isinstance(value, Fraction)
                        totals[index] = value + _fraction(values[at]) * weight
                    at += 1
                    continue
                bucket, count, total = values[at:at + 3]
                at += 3
                array = totals[index]
                assert isinstance(array, list)
                if bucket is not None:  # NULL: the rows whose value is NULL
                    array[int(bucket)] += _fraction(count) * weight
                    array[buckets + int(bucket)] += _fraction(total) * weight
        rows.append((*key, *((_text(total) if sizes else None) for total in totals)))
    return rows


def _fraction(raw: bytes | None) -> Fraction:
    return Fraction(0) if raw is None else Fraction(Decimal(raw.decode()))


def _text(total: list[Fraction] | Fraction | None) -> bytes | None:
    if total is None:
        return None
    if isinstance(total, list):
        return ("{" + ",".join(_decimal(v) for v in total) + "}").encode()
    return _decimal(total).encode()


def _decimal(value: Fraction) -> str:
    with localcontext() as context:
        context.prec = DIGITS
        return str(Decimal(value.numerator) / Decimal(value.denominator))


def _at(calibration: Calibration, tau: int, cap: int, kept: float) -> Calibration:
    """Every part at sensitivity τ·magnitude (calibrated at the cap: scaled by τ/cap) with
    the share `kept` of its ε; widened by a relative WIDEN for the rounding to DIGITS
    digits, which moves a value by far less."""
    if calibration.mechanism == Mechanism.GAUSSIAN:
        return calibration
    parts = []
    for part in calibration.parts:
        if part.scale == 0:  # public rows only
            parts.append(part)
            continue
        sensitivity = part.elastic_sensitivity * tau / cap * (1 + WIDEN)
        epsilon = part.epsilon * kept
        parts.append(replace(part, epsilon=epsilon, elastic_sensitivity=sensitivity,
                             smooth_sensitivity=sensitivity, scale=sensitivity / epsilon,
                             shift_scale=sensitivity / epsilon))
    return replace(calibration, parts=tuple(parts))


def weights_note(plan: PrivateAggregate, count: CountAtBound) -> str | None:
    """The NOTICE clause for weights at a chosen τ (None for a fixed τ:
    unit_report.mode_notice says it)."""
    unit = plan.unit
    assert unit is not None
    if not count.chosen:
        return None
    rows = f"{count.tau} row" + ("" if count.tau == 1 else "s")
    chosen = (f"each {unit.unit} weighs at most {rows} in all, a bound chosen privately for "
              f"this query (at most {unit.chosen_limit}; epsilon {count.choice_epsilon:g} of "
              f"the charge): a unit of n > {count.tau} rows has each weigh {count.tau}/n")
    if count.dropped_scale == 0:
        return (f"{chosen}; rows beyond {count.tau} per unit are never counted, nor allowed "
                "for in the intervals")
    margin = math.ceil(laplace_bound(count.dropped_scale, 0.05))
    return (f"{chosen}; about {max(count.dropped or 0, 0)} rows' weight (±{margin}) was left "
            f"out (epsilon {count.beyond_epsilon:g}): the intervals allow for that many rows "
            f"of any value within the bounds, up to {unit.chosen_limit} rows per unit")
