"""The data owner's policy: an input of every pass, never changed by one.

- `model`: private tables, column domains and bounds, the parsed policy.
- `privacy_unit`: the privacy unit, its paths and its bounds τ, κ, τ_g.
- `view`: `SHOW dp.policy`, the policy as rows.
"""
