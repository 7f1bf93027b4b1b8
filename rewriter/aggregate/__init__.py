"""Private aggregates: validated, bounded and rewritten into the SQL the backend runs.

`private` is the entry point of one release; `composite` that of a statement answered by
several under one charge (a quantile beside noisy aggregates, a set operation of private
aggregates, a LIMIT or OFFSET by a private aggregate), each part planned by `private`;
`pipeline` lists the passes (PASSES) that run the modules below in order, each with one
job, reading the `scope` (the statement and its relations) and returning its part:

- `unit_mode`: whose rows are bounded (a unit's, or one row's), and each noisy part's
  sensitivity under those bounds.
- `keys`: the GROUP BY keys, resolved, as the rewrite takes them.
- `released`: the released columns and the noisy parts they share; `bounds` (the bounds
  of the values summed) and `aggregate_args` (of expressions, by interval arithmetic).
- `post`: HAVING, ORDER BY and LIMIT on noisy values; `computed_sql`: those and outputs
  that are expressions over released values.
- `groups`: which groups are released (declared domains, or key selection).
- `chosen`: plans of the exponential mechanism; `choice`: which aggregates ask for one.
- `bounding`: contribution bounding (τ, κ, τ_g) in the rewritten SQL.
- `weighted`: SUM, AVG and the variance family bounded by weights per unit, no sort.
- `rewrite`: the SQL the backend runs.
- `record`: the PrivateAggregate every plan ends in.
"""
