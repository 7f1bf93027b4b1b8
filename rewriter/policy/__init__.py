"""The data owner's policy: an input of every pass, never changed by one.

- `model`: private tables, column domains and bounds, the parsed policy.
- `privacy_unit`: the privacy unit, its paths and its bounds τ, κ, τ_g.
- `session`: the session's τ and κ (SET dp.max_contributions) in place of the policy's.
- `view`: `SHOW dp.policy`, the policy as rows.
"""
