"""The privacy unit's part in a plan: whose rows are bounded (a unit's, or one row's when
the policy falls back to FLEX), the bounds τ, κ, τ_g as this statement takes them, and
each noisy part's sensitivity under them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sqlglot import exp

from ..analysis.sources import Relation
from ..analysis.unit import NotOneUnit, UnitOfRows, unit_of_rows
from ..errors import policy_refusal
from ..plan import NoisyPart, PrivateAggregate, UnitBounds
from ..sensitivity.elastic import Elastic, constant, multiply
from ..sql.functions import reads_alike
from .bounding import Bounding
from .rewrite import KeySpec, PartSpec, rewrite_chosen_count
from .scope import Scope


@dataclass(frozen=True)
class UnitMode:
    """The unit of every row (unit mode), or None: row-level FLEX, and then why a policy
    that names a unit fell back to rows (`row_level_reason`), if it does."""
    unit: UnitOfRows | None = None
    row_level_reason: str | None = None

    @property
    def bounds(self) -> UnitBounds | None:
        return self.unit.bounds if self.unit is not None else None

    def bounding(self) -> Bounding | None:
        if self.unit is None:
            return None
        bounds = self.unit.bounds
        return Bounding(self.unit.expression, bounds.max_contributions, bounds.max_groups,
                        bounds.max_group_contributions, self.unit.tables,
                        self.unit.conditions)

    def settled(self, key_selection: bool) -> UnitMode:
        """κ as it applies to this statement: where κ·τ_g ≥ τ a group bound would not
        lower a histogram's L1 (min(τ, κ·τ_g) = τ) and would only drop rows, so κ = τ
        (no bound) then, except for key selection, whose threshold counts κ' groups."""
        if self.unit is None or key_selection:
            return self
        bounds = self.unit.bounds
        if bounds.max_groups * bounds.max_group_contributions < bounds.max_contributions:
            return self
        return replace(self, unit=replace(self.unit, bounds=replace(
            bounds, max_groups=bounds.max_contributions)))

    def noisy_part(self, part: PartSpec, relation: Relation, histogram: bool) -> NoisyPart:
        """A part with its sensitivity: one row's ES(k) (FLEX), or one unit's L1 and L2."""
        stability = relation.stability
        if histogram:  # one changed row leaves one bin and enters another
            stability = multiply(constant(2), stability)
        if self.unit is None:
            return NoisyPart(part.aggregate, stability, part.magnitude, edges=part.edges,
                             centred=part.centred, presence_of=part.presence_of)
        l1, l2 = unit_sensitivities(self.unit.bounds, histogram)
        return NoisyPart(part.aggregate, constant(l1), part.magnitude, row_elastic=stability,
                         l2=l2, edges=part.edges, centred=part.centred,
                         presence_of=part.presence_of)

    def choice_sensitivity(self, kind: str, relation: Relation) -> Elastic:
        """Δu of the exponential mechanism: one row's (FLEX), or one unit's: a unit moves
        a mode candidate's count by at most min(τ, τ_g), a quantile's ranks by τ."""
        if self.unit is None:
            return relation.stability
        bounds = self.unit.bounds
        return constant(bounds.group_rows if kind == "mode" else bounds.max_contributions)

    def row_elastic(self, relation: Relation) -> Elastic | None:
        return relation.stability if self.unit is not None else None


def unit_mode(scope: Scope) -> UnitMode:
    """Unit mode when the policy names a unit and every row belongs to one unit; else
    row-level FLEX when the policy allows it (row_level_fallback), else a refusal."""
    unit = scope.policy.unit
    if unit is None or not any(s.private or (s.derived and s.derived.private_tables)
                               for s in scope.relation.sources):
        return UnitMode()
    try:
        return UnitMode(unit_of_rows(scope.tree, scope.analyzer, scope.relation))
    except NotOneUnit as refusal:
        if not unit.row_level_fallback:
            raise policy_refusal(
                f"{refusal.reason}, so dpgate cannot protect each {unit.label} here "
                "(policy setting privacy_unit; row_level_fallback = false)",
                hint=refusal.hint or None, position=scope.position(scope.tree),
                reason="rows of no single privacy unit: policy setting "
                f"{refusal.setting or 'privacy_unit (row_level_fallback = false)'}"
            ) from None
        return UnitMode(row_level_reason=refusal.reason)


def chosen_count(scope: Scope, mode: UnitMode, parts: list[PartSpec], plan: PrivateAggregate,
                 keys: list[KeySpec]) -> PrivateAggregate:
    """A count(*) alone, or a histogram of it over declared domains, is bounded in unit
    mode by aggregation, not a sort of its rows: the backend returns per-unit row counts
    (a histogram's with one window over them, its units' n), from which the proxy
    answers at τ, after choosing τ per query, privately (docs/privacy-unit.md,
    proxy/engine/chosen_bound.py). A lone count at the session's fixed τ uses them too.
    A histogram's cells then take no κ or τ_g bound: their L1 is τ. Other shapes keep
    row_number()."""
    unit, declared = mode.unit, scope.policy.unit
    if unit is None or declared is None or unit.columns is None or \
            len(parts) != 1 or parts[0].aggregate != "count" or \
            not isinstance(parts[0].node.this, exp.Star) or \
            (plan.grouping is not None and plan.grouping.key_selection):
        return plan
    limit = declared.contributions_limit if declared.choose_contributions else None
    if keys and limit is None:
        # At a fixed τ a unit's kept rows stay a uniform sample (row_number()): the
        # proportional ⌊m·τ/n⌋ would drop a heavy unit's thin cells altogether.
        return plan
    tau = unit.bounds.max_contributions
    if keys:  # a histogram's L1 is at most κ·τ_g (the policy's), so τ is too
        groups = declared.max_groups * declared.max_group_contributions
        limit, tau = min(limit or groups, groups), min(tau, groups)
    bounding = mode.bounding()
    assert bounding is not None
    cap = max(tau, limit or 0)
    scope.findings.group_columns |= unit.columns  # the units' counts group on them
    # A histogram's fractional cells need only the rows per (key, unit size): read twice
    # and joined, half the cost of the units' rows per cell, which the Gaussian
    # mechanism's whole rows need (docs/privacy-unit.md, "Cost"). The two reads must give
    # the same rows, as weighted sums' (sql.functions.reads_alike).
    by_size = bool(keys) and not declared.whole_cells and reads_alike(scope.tree)
    bounds = replace(unit.bounds, max_groups=tau, max_group_contributions=tau,
                     counts_cap=cap, chosen_limit=limit, cells_by_size=by_size,
                     spread_keys=declared.shape_times_total and bool(keys)
                     and _spread(scope, keys, unit.columns))
    fingerprint = plan.fingerprint_text + (f" /* tau chosen <= {limit} */" if limit else "")
    sql, reads = rewrite_chosen_count(scope.tree, scope.policy, keys, bounding, cap, by_size)
    return replace(plan, sql=sql,
                   parts=(replace(plan.parts[0], elastic=constant(cap), l2=float(cap)),),
                   unit=bounds, checks=replace(plan.checks, windows=int(bool(keys) and not by_size),
                                               reads=reads),
                   fingerprint_text=fingerprint)


def _spread(scope: Scope, keys: list[KeySpec], units: frozenset[tuple[str, str]]) -> bool:
    """Whether every key is read from the rows, not from the unit: none is a column of the
    privacy unit's table or a unit column (such a key puts all of a unit's rows in one
    group, where a ratio of the units' shape to the rows' cannot hold). The statement's
    text decides, never the data."""
    declared = scope.policy.unit
    assert declared is not None
    for key in keys:
        origin = scope.resolve(key.column).origin
        if origin is None or origin in units or origin[0] == declared.table:
            return False
    return True


def unit_sensitivities(bounds: UnitBounds, histogram: bool) -> tuple[int, float]:
    """L1 and L2 sensitivity of one unit's rows, in units of one row's value.

    Without GROUP BY a unit adds at most τ rows: L1 = L2 = τ. In a histogram it adds at most
    τ_g' = min(τ_g, τ) rows to each of at most κ groups, τ in all: L1 = min(τ, κ·τ_g'),
    L2 = min(√κ·τ_g', √(τ·τ_g')) (Σx² ≤ max x · Σx).
    """
    tau = bounds.max_contributions
    if not histogram:
        return tau, float(tau)
    per_group = bounds.group_rows
    l1 = min(tau, bounds.max_groups * per_group)
    return l1, min(math.sqrt(bounds.max_groups) * per_group, math.sqrt(tau * per_group))
