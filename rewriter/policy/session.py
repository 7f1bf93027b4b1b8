"""The session's τ and κ (SET dp.max_contributions, dp.max_groups) in place of the
policy's, and what its noise (dp.mechanism) asks of the SQL: a policy in, a policy out."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mechanisms.names import Mechanism

from .model import Policy

# Session settings an analyst may change (SET dp.max_contributions = 3): any value is as
# private as another, since the noise follows it; a smaller τ trades bias for less noise.
SESSION_BOUNDS = {"dp.max_contributions": "max_contributions", "dp.max_groups": "max_groups"}
MAX_SESSION_BOUND = 10_000


def with_session_bounds(policy: Policy, settings: Mapping[str, str]) -> Policy:
    """The policy with the session's τ and κ in place of the policy's defaults."""
    given: dict[str, Any] = {field: int(settings[name]) for name, field in SESSION_BOUNDS.items()
             if name in settings}
    if policy.unit is None or not given:
        return policy
    # A τ the analyst fixes is used as it is: no share of ε goes to choosing one.
    unit = dataclasses.replace(policy.unit, **given, choose_contributions=False) \
        if "max_contributions" in given else dataclasses.replace(policy.unit, **given)
    # τ_g stays the policy's, but never above τ.
    unit = dataclasses.replace(unit, max_group_contributions=min(
        policy.unit.max_group_contributions, unit.max_contributions))
    return dataclasses.replace(policy, unit=unit)


def with_session_noise(policy: Policy, mechanism: str) -> Policy:
    """The policy as a session with this noise plans it: under the Gaussian mechanism a
    count histogram's cells keep whole rows of each unit, which only the cells by unit
    give (PrivacyUnit.whole_cells); the other mechanisms' fractional cells need only the
    rows per unit size, a cheaper read (rewriter/aggregate/unit_mode.py)."""
    whole = mechanism == Mechanism.GAUSSIAN
    if policy.unit is None or policy.unit.whole_cells == whole:
        return policy
    return dataclasses.replace(policy, unit=dataclasses.replace(policy.unit, whole_cells=whole))
