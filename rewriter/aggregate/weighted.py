"""Unit-mode SUM, AVG and the variance family bounded by weights, not by a sort.

A unit with n rows among the statement's rows (after joins and WHERE) has each of them
weigh w = min(1, τ/n): a count becomes Σ w, a sum Σ w·x (x clamped as before), so a unit
adds at most n·w = min(n, τ) ≤ τ weight in all, over every group: L1 = τ per unit (in
units of one row's value), whatever κ and τ_g. It is the expectation of the `row_number()`
sample of τ rows (each row kept with probability τ/n) without that sample's variance, and
the backend needs only hash aggregates: per (group, n) the aggregates of the rows whose
unit has n rows (bounding.weighted_rows). τ is chosen at release from the same rows, as a
lone count's is (proxy/engine/weighted_sums.py; the proof is in docs/privacy-unit.md).

Shapes that keep the `row_number()` sort: COUNT(DISTINCT) (a weight cannot be spread over
distinct values), key selection (its threshold counts κ groups per unit), a histogram at a
fixed τ whose κ·τ_g is below τ (there the sort's L1 is smaller), and the lone COUNT(*),
which the contribution histogram answers (unit_mode.py, `chosen_count`); and a statement
whose rows could differ between two reads (a random draw or a clock read on its rows,
which the analysis refuses today: sql.functions.reads_alike), since weights read the rows
twice (bounding.weighted_rows).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ..plan import PrivateAggregate, UnitBounds
from ..policy.model import Policy
from ..policy.privacy_unit import PrivacyUnit
from ..sensitivity.elastic import constant
from ..sql.functions import reads_alike
from .bounding import Bounding
from .rewrite import KeySpec, PartSpec, rewrite_weighted


def weighted_plan(plan: PrivateAggregate, tree: exp.Select, policy: Policy,
                  keys: list[KeySpec], parts: list[PartSpec], bounding: Bounding,
                  bounds: UnitBounds, declared: PrivacyUnit) -> PrivateAggregate | None:
    """`plan` answered by weights, or None where its shape keeps the sort."""
    if not any(part.aggregate == "sum" for part in parts) or any(
            part.aggregate not in ("count", "sum") or isinstance(part.node.this, exp.Distinct)
            for part in parts) or (plan.grouping is not None and plan.grouping.key_selection) \
            or not reads_alike(tree):
        return None
    limit = declared.contributions_limit if declared.choose_contributions else None
    tau = bounds.max_contributions
    if keys:
        # The policy's κ·τ_g bounds a histogram's L1, so it bounds τ too (as a chosen
        # count histogram's); at a fixed τ above it the sort's L1 is the smaller one.
        groups = declared.max_groups * declared.max_group_contributions
        if limit is None and bounds.max_groups * bounds.group_rows < tau:
            return None
        limit, tau = (None if limit is None else min(limit, groups)), \
            (tau if limit is None else min(tau, groups))
    cap = max(tau, limit or 0)
    unit = replace(bounds, max_contributions=tau, max_groups=tau,
                   max_group_contributions=tau, chosen_limit=limit, weights_cap=cap)
    fingerprint = plan.fingerprint_text + (f" /* weights, tau chosen <= {limit} */"
                                           if limit else " /* weights */")
    sql, reads = rewrite_weighted(tree, policy, keys, parts, bounding)
    return replace(plan, sql=sql,
                   parts=tuple(replace(part, elastic=constant(cap), l2=float(cap),
                                       weighted=True) for part in plan.parts),
                   unit=unit, checks=replace(plan.checks, windows=0, reads=reads),
                   fingerprint_text=fingerprint)
