"""The rewriter: pure functions from SQL text, a catalog snapshot, the policy and the
metrics to a Plan or a typed refusal. No I/O, no clock, no randomness.

Sub-packages, in the order a statement meets them:

- `sql`: reading the text as PostgreSQL reads it (lexer, lexical settings, positions,
  CTE scopes, functions refused or allowed on private rows).
- `policy`: the data owner's policy and its privacy unit (an input of every pass).
- `analysis`: what a statement is and what it reads (classify, relations and their
  stability, the unit of a row, totality, the cost of a row, values computed first).
- `relay`: statements relayed as they are (catalog reads refused, neutralised or
  annotated with the policy).
- `sensitivity`: FLEX elastic and smooth sensitivity, joins and set operations, the
  metrics known of the data, and the calibration of noise.
- `aggregate`: private aggregates planned, bounded and rewritten into the SQL the
  backend runs; `aggregate.pipeline.PASSES` lists its passes in order.
- `release`: post-processing of released values, error bars, `dpgate explain`.
- `checks`: the plan PostgreSQL builds, checked against the analysis.

Modules of this package itself, what every pass shares: `plan` (the Plan, what comes
out), `errors` (typed refusals), `sqlstate` (every SQLSTATE, a leaf module).
"""
