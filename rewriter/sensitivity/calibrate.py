"""Noise scales for a planned query at given ε, δ and mechanism (FLEX's elastic and smooth
sensitivity; Laplace, Gaussian and exponential mechanisms).

ε and δ are split evenly across the noisy parts (sequential composition), except that a
SUM's own hidden count of its values (NoisyPart.presence_of) takes `sum_count_share` of
that SUM's share. When no part's
ES(k) depends on k, ES is a global sensitivity: scale ES/ε, δ = 0. Otherwise the smooth
sensitivity S* gives the scale 2S*/ε and the part costs δ. Key selection (τ-thresholding)
costs δ too. The Gaussian mechanism (pure path only) calibrates σ to the L2 sensitivity
with the exact discrete Gaussian condition, and every part costs δ. A choice (mode,
quantile) takes its share of ε like a noisy part; the exponential mechanism is ε-DP with
Δu = ES whatever dp.mechanism says, so it costs no δ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from mechanisms.exponential import exponential_base
from mechanisms.gaussian_sigma import (
    GaussianParameterError,
    analytic_gaussian_sigma,
    discrete_gaussian_variance,
)
from mechanisms.key_selection import key_selection_threshold as unit_threshold
from mechanisms.names import Mechanism
from mechanisms.numbers import parameter

from ..errors import FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE, PROGRAM_LIMIT_EXCEEDED, Refusal
from ..plan import NoisyPart, PrivateAggregate
from .elastic import SmoothScanTooLong, smooth_sensitivity

MECHANISMS = tuple(Mechanism)
# The share of a SUM's ε its own count of values takes (privacy.sum_count_share).
SUM_COUNT_SHARE = 0.1
# Slots of the even split an AVG's sum of x − m takes (its count: one). The sum's noise
# carries the bound M per row, the count's only |average − m| per row, so the average's
# error is least with more of ε on the sum (measured: docs/privacy-unit.md).
AVERAGE_SUM_WEIGHT = 1.5


@dataclass(frozen=True)
class PartCalibration:
    epsilon: float
    delta: float
    elastic_sensitivity: float  # ES(K)·magnitude
    smooth_sensitivity: float  # S*·magnitude
    k_star: int
    scale: float  # the Laplace scale b actually used (Gaussian: σ)
    flex_scale: float  # FLEX's 2S*/ε, for comparison
    l2_sensitivity: float = 0.0  # Gaussian only
    variance: Fraction | None = None  # Gaussian counts: the discrete Gaussian's σ²
    # The unit of the analyst's shift μ_u when shift_unit = "scale". It must not depend on
    # the data (else the shift itself would be a release): the scale on the pure path,
    # magnitude/ε — one row's weight — on the smooth path, where S* is measured.
    shift_scale: float = 0.0


@dataclass(frozen=True)
class Calibration:
    epsilon: float
    delta: float  # what the query is charged
    pure: bool
    parts: tuple[PartCalibration, ...]
    threshold: float | None  # τ of key selection, on the selection part's noisy count
    mechanism: Mechanism = Mechanism.SHIFTED_LAPLACE


def calibrate(plan: PrivateAggregate, epsilon: float, delta: float, k: int = 0,
              mechanism: str = Mechanism.SHIFTED_LAPLACE,
              sum_count_share: float = SUM_COUNT_SHARE) -> Calibration:
    """Scales for every part; `k` only changes the reported ES(k).

    A composition over the parts: the budget is split (sequential composition,
    part_epsilons), then each part is calibrated alone from its own sensitivity
    (NoisyPart: ES(k) or a unit's L1/L2) by its own mechanism (exponential for a choice,
    else the session's). A plan without parts (the keys of declared domains, no
    aggregate) releases only public values: it costs nothing.
    """
    chosen = Mechanism(mechanism)
    if not plan.parts:
        return Calibration(0.0, 0.0, True, (), None, chosen)
    budget = _budget(plan, delta, chosen)
    epsilons = part_epsilons(plan.parts, epsilon, sum_count_share, _averages(plan))
    parts = tuple(_choice(part, share, k) if part.choice else
                  _additive(part, share, budget, plan, k)
                  for part, share in zip(plan.parts, epsilons, strict=True))
    threshold = None
    if budget.selecting:
        assert plan.grouping is not None and plan.grouping.selection_part is not None
        selection = parts[plan.grouping.selection_part]
        if plan.unit is not None:  # κ' groups of ≤ τ_g' rows per unit
            threshold = unit_threshold(plan.unit.group_rows, plan.unit.groups,
                                       selection.scale, budget.delta)
        else:
            threshold = key_selection_threshold(selection.elastic_sensitivity / 2,
                                                selection.scale, budget.delta)
    return Calibration(epsilon, delta if budget.delta_users else 0.0, budget.pure, parts,
                       threshold, chosen)


def _averages(plan: PrivateAggregate) -> frozenset[int]:
    """The indexes of the parts that are an AVG's sum."""
    return frozenset(output.parts[0] for output in plan.outputs if output.aggregate == "avg")


def _slots(parts: tuple[NoisyPart, ...], averages: frozenset[int]) -> list[float]:
    """Each part's slots of the even split: an AVG's sum AVERAGE_SUM_WEIGHT, a SUM's count
    of its own values (presence_of) none (it takes a share of its SUM's), the rest one."""
    return [0.0 if part.presence_of is not None else
            AVERAGE_SUM_WEIGHT if index in averages else 1.0
            for index, part in enumerate(parts)]


def part_epsilons(parts: tuple[NoisyPart, ...], epsilon: float, sum_count_share: float,
                  averages: frozenset[int] = frozenset()) -> tuple[float, ...]:
    """Each part's ε: an even split over the slots of the parts the statement asks for
    (_slots), of which a SUM with a count of its own values (presence_of) gives that count
    `sum_count_share`."""
    shared = {part.presence_of for part in parts if part.presence_of is not None}
    weights = _slots(parts, averages)
    slot = epsilon / sum(weights)
    return tuple(slot * sum_count_share if part.presence_of is not None else
                 slot * weight * (1 - sum_count_share) if index in shared else slot * weight
                 for index, (part, weight) in enumerate(zip(parts, weights, strict=True)))


@dataclass(frozen=True)
class _Budget:
    """Each part's share of δ, and what decides how additive parts are noised."""
    delta: float
    reported_delta: float  # for a pure part the smooth bound is only reported
    delta_users: int  # how many parts (and key selection) spend δ
    pure: bool  # no part's ES(k) depends on k: a global sensitivity
    gaussian: bool
    selecting: bool  # key selection


def _budget(plan: PrivateAggregate, delta: float, chosen: Mechanism) -> _Budget:
    pure = not any(part.elastic.depends_on_k for part in plan.parts)
    selecting = plan.grouping is not None and plan.grouping.key_selection
    gaussian = chosen == Mechanism.GAUSSIAN
    if gaussian and (not pure or selecting):
        raise Refusal(FEATURE_NOT_SUPPORTED,
                      "the Gaussian mechanism is available only for queries without joins of "
                      "private tables and without key selection",
                      hint="SET dp.mechanism = 'shifted_laplace' (the default) for this one.")
    delta_users = _delta_users(plan, chosen)
    if delta_users and not 0 < delta < 1:
        raise Refusal(INVALID_PARAMETER_VALUE,
                      "this query needs a delta between 0 and 1 (joins of private tables and "
                      "key selection are (epsilon, delta)-private)",
                      hint="SET dp.delta = 1e-8, for example.")
    part_delta = delta / delta_users if delta_users else 0.0
    # For a pure part the smooth bound is only reported, so any valid δ will do.
    reported_delta = part_delta if part_delta else (delta if 0 < delta < 1 else 1e-9)
    return _Budget(part_delta, reported_delta, delta_users, pure, gaussian, selecting)


def _delta_users(plan: PrivateAggregate, chosen: Mechanism) -> int:
    """How many parts (and key selection) of the plan spend a share of δ."""
    pure = not any(part.elastic.depends_on_k for part in plan.parts)
    selecting = plan.grouping is not None and plan.grouping.key_selection
    additive = [part for part in plan.parts if not part.choice]
    return (0 if pure and chosen != Mechanism.GAUSSIAN else len(additive)) + \
        (1 if selecting else 0)


def branch_budgets(plans: tuple[PrivateAggregate, ...], epsilon: float, delta: float,
                   mechanism: str = Mechanism.SHIFTED_LAPLACE
                   ) -> tuple[tuple[float, float], ...]:
    """Each release's (ε, δ) in a statement answered by several (plan.Composite): ε in
    proportion to the slots of the aggregates each asks for (_slots), so every part gets
    what it would in one plan holding them all; δ evenly over the releases that spend
    one. The charge, the sum of the releases', is then at most (ε, δ) (sequential
    composition)."""
    asked = [sum(_slots(plan.parts, _averages(plan))) for plan in plans]
    spending = [_delta_users(plan, Mechanism(mechanism)) > 0 for plan in plans]
    total, users = sum(asked), sum(spending)
    return tuple((epsilon * count / total if total else 0.0,
                  delta / users if spends else delta)
                 for count, spends in zip(asked, spending, strict=True))


def composed(calibrations: tuple[Calibration, ...], epsilon: float) -> Calibration:
    """A statement answered by several releases at their branch_budgets shares of
    `epsilon`: charged the sum of their ε (never above `epsilon`: the float sum of the
    shares can exceed it by an ulp) and δ; its parts are theirs, in order."""
    return Calibration(min(sum(c.epsilon for c in calibrations), epsilon),
                       sum(c.delta for c in calibrations),
                       all(c.pure for c in calibrations),
                       tuple(part for c in calibrations for part in c.parts), None,
                       calibrations[0].mechanism)


def _additive(part: NoisyPart, epsilon: float, budget: _Budget, plan: PrivateAggregate,
              k: int) -> PartCalibration:
    """An additive part (Laplace or Gaussian noise) at its `epsilon`: its scale from its
    own sensitivity, global (ES/ε) when pure, else smooth (2S*/ε)."""
    try:
        smooth = smooth_sensitivity(part.elastic, epsilon, budget.reported_delta,
                                    plan.private_tables)
    except SmoothScanTooLong as error:
        raise Refusal(PROGRAM_LIMIT_EXCEEDED, str(error),
                      hint="Raise dp.epsilon or dp.delta, or join fewer private "
                      "tables.") from None
    flex_scale = 2 * smooth.sensitivity * part.magnitude / epsilon
    if part.row_elastic is not None:  # unit mode: FLEX's row-level scale, for comparison
        flex_scale = _row_level_scale(part, epsilon, budget.reported_delta,
                                      plan.private_tables)
    elastic_k = part.elastic.at(k) * part.magnitude
    pure = budget.pure
    scale = part.elastic.at(0) * part.magnitude / epsilon if pure else flex_scale
    calibrated = PartCalibration(
        epsilon=epsilon, delta=0.0 if pure else budget.delta,
        elastic_sensitivity=float(elastic_k),
        smooth_sensitivity=smooth.sensitivity * part.magnitude, k_star=smooth.k_star,
        scale=scale, flex_scale=flex_scale,
        shift_scale=scale if pure else part.magnitude / epsilon)
    if budget.gaussian:
        calibrated = _gaussian(calibrated, part.elastic.at(0), part.magnitude,
                               part.integer, plan.keys > 0, budget.delta, part.l2)
    return calibrated


def _choice(part: NoisyPart, epsilon: float, k: int) -> PartCalibration:
    """The exponential mechanism's share: Δu = ES (the planner refuses joins of private
    tables, so ES is a global sensitivity); `scale` reports 2Δu/ε, the utility gap that
    costs a factor e in probability."""
    sensitivity = part.elastic.at(0)
    try:  # refused before any charge, not after: the base must exist for ε/Δu
        exponential_base(choice_epsilon(epsilon, part),
                         part.level.denominator if part.level is not None else 1)
    except ValueError:
        raise Refusal(INVALID_PARAMETER_VALUE,
                      f"epsilon {epsilon:g} is too small for the exponential mechanism "
                      f"(utility sensitivity {sensitivity})",
                      hint="Raise dp.epsilon or ask fewer columns.") from None
    scale = 2 * sensitivity / epsilon
    return PartCalibration(epsilon=epsilon, delta=0.0,
                           elastic_sensitivity=float(part.elastic.at(k)),
                           smooth_sensitivity=float(sensitivity), k_star=0, scale=scale,
                           flex_scale=scale, shift_scale=scale)


def choice_epsilon(epsilon: float, part: NoisyPart) -> Fraction:
    """ε/Δu exactly: the exponential mechanism at ε with utility sensitivity Δu is the one
    at ε/Δu with Δu = 1, which is what mechanisms/exponential.py samples."""
    return parameter(epsilon, "epsilon") / part.elastic.at(0)


def _row_level_scale(part: NoisyPart, epsilon: float, delta: float, private_tables: int
                     ) -> float:
    """FLEX's 2S*/ε for the row-level reading of a unit-mode part (reported only)."""
    assert part.row_elastic is not None
    if part.row_elastic.unmeasured_columns():
        return math.nan
    try:
        smooth = smooth_sensitivity(part.row_elastic, epsilon, delta, private_tables)
    except SmoothScanTooLong:
        return math.inf
    return 2 * smooth.sensitivity * part.magnitude / epsilon


def _gaussian(part: PartCalibration, elastic: int, magnitude: float, integer: bool,
              histogram: bool, delta: float, unit_l2: float | None = None) -> PartCalibration:
    """σ for the part's L2 sensitivity: a changed row moves a histogram's mass by S out of
    one cell and into another, so Δ₂ = √2·S = ES/√2 there, and ES for a single value. In
    unit mode the planner gives the unit's L2 (`unit_l2`)."""
    l2 = elastic * magnitude / (math.sqrt(2) if histogram else 1) if unit_l2 is None else \
        unit_l2 * magnitude
    if l2 == 0:
        return replace(part, delta=delta, scale=0.0, l2_sensitivity=0.0)
    try:
        variance = discrete_gaussian_variance(part.epsilon, delta, math.ceil(l2)) \
            if integer else None
        sigma = math.sqrt(variance) if variance is not None else \
            analytic_gaussian_sigma(part.epsilon, delta, l2)
    except GaussianParameterError as error:
        raise Refusal(INVALID_PARAMETER_VALUE, f"Gaussian mechanism: {error}") from None
    return replace(part, delta=delta, scale=sigma, l2_sensitivity=l2, variance=variance)


def key_selection_threshold(stability: float, scale: float, delta: float) -> float:
    """τ such that a group absent from a neighbouring database is released w.p. ≤ δ.

    One changed row alters at most S rows, so at most S groups exist on one side only, each
    with a true count ≤ S. Discrete Laplace noise of scale b has P(X ≥ x) ≤ e^(−x/b), so
    with τ = S + b·ln(S/δ) the union bound gives S·e^(−(τ−S)/b) = δ: the unit-level
    threshold of mechanisms/key_selection.py with κ = τ_g = S.
    """
    stability = max(stability, 1.0)
    return unit_threshold(stability, stability, scale, delta)
