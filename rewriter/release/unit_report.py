"""How `dpgate explain` and the NOTICE describe the privacy model of an answer.

With a fixed τ, truncation is told, never measured: the words say that rows beyond τ per
unit are left out, and nothing says how many were. A count whose τ is chosen per query
also releases a noisy number of units beyond τ; its NOTICE clause is written at release
(proxy/engine/chosen_bound.py), since τ is known only then.
"""

from __future__ import annotations

from typing import Any

from ..plan import PrivateAggregate

TRUNCATION = ("rows beyond max_contributions per unit are not counted (how many is not "
              "released), so answers can be lower than the data's")


CHOSEN = ("τ is chosen per query from how many units have more than τ rows "
          "(AboveThreshold, a share of epsilon: privacy.bound_choice_share); the answer's "
          "noise scale is τ/ε of the rest (noise_scale shows the limit at the whole ε); a "
          "noisy number of rows beyond τ is released with it, in the NOTICE, and the "
          "interval's upper end allows for them")

WEIGHED = ("τ is chosen per query from how many units have more than τ rows "
           "(AboveThreshold, a share of epsilon: privacy.bound_choice_share); a unit of n > τ "
           "rows has each weigh τ/n, so it adds at most τ rows' weight; the noise scale is "
           "τ/ε of the rest (noise_scale shows the limit at the whole ε); a noisy number of "
           "rows beyond τ is released with it, and the intervals allow for them")


def mode_report(plan: PrivateAggregate) -> dict[str, Any]:
    """The `explain` fields of the privacy model: mode, unit, τ, κ, τ_g."""
    if plan.unit is None:
        report: dict[str, Any] = {"mode": "row-level"}
        if plan.row_level_reason is not None:
            report.update(mode="row-level fallback", fallback_reason=plan.row_level_reason)
        return report
    unit = plan.unit
    report = {"mode": "unit", "privacy_unit": unit.unit,
              "max_contributions": unit.max_contributions, "truncation": TRUNCATION}
    if unit.chosen_limit is not None:
        report.update(max_contributions="chosen per query",
                      contributions_limit=unit.chosen_limit,
                      truncation=WEIGHED if unit.weights_cap is not None else CHOSEN)
    if plan.keys:
        report.update(max_groups=unit.max_groups,
                      max_group_contributions=unit.max_group_contributions)
    return report


def mode_notice(plan: PrivateAggregate) -> str | None:
    """The NOTICE clause of the privacy model, or None for a plain row-level answer."""
    if plan.unit is not None and plan.unit.weights_cap is not None:
        tau = plan.unit.max_contributions
        return (f"each {plan.unit.unit} weighs at most {_plural(tau, 'row')} in all: a unit "
                f"of n > {tau} rows has each weigh {tau}/n; the weight beyond is not counted "
                "(how much is not released)")
    if plan.unit is not None:
        unit = plan.unit
        groups = (f", in at most {_plural(unit.max_groups, 'group')}"
                  if plan.keys and unit.max_groups < unit.max_contributions else "")
        return (f"each {unit.unit} counted with at most "
                f"{_plural(unit.max_contributions, 'row')}{groups}; rows beyond are not "
                "counted (how many is not released)")
    if plan.row_level_reason is not None:
        return ("answered with row-level privacy, not per unit: "
                f"{plan.row_level_reason} (policy row_level_fallback)")
    return None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
