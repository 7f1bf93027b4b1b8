"""Checks of a private statement against the plan PostgreSQL itself builds for it.

- `plan_check`: scans, per-row subplans and window nodes as the analysis expects.
- `plan_joins`: join and group-key columns resolved as the analysis resolved them.
"""
