"""Private aggregates: validated, bounded and rewritten into the SQL the backend runs.

- `private`: the plan of an aggregate over private tables (validate, sensitivity, rewrite).
- `aggregate_args`: bounds of expressions inside SUM/AVG by interval arithmetic.
- `choice`: aggregates answered by the exponential mechanism.
- `bounding`: contribution bounding (τ, κ, τ_g) in the rewritten SQL.
- `rewrite`: the SQL the backend runs.
"""
