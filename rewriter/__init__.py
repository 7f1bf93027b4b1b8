"""The rewriter: pure functions from SQL text, a catalog snapshot, the policy and the
metrics to a Plan or a typed refusal. No I/O, no clock, no randomness.

Modules, in the order a statement meets them:

- reading the statement: `lexer` (PostgreSQL's own lexical rules, cross-checked
  against sqlglot's tokens), `lexical` (the session settings that change how text is
  read: pinned or refused), `classify` (split a query string, decide what each statement
  is), `scopes` (CTE names), `positions` (error positions in the client's text),
  `functions` (functions refused or allowed on private rows), `catalog` and `neutralise`
  (catalog reads refused, neutralised or relayed).
- the policy: `policy`, `unit_policy` (the privacy unit), `unit` (which unit a row
  belongs to), `policy_view` (SHOW dp.policy), `comments` (the policy as column comments).
- sensitivity: `relations` (FLEX stability and max frequencies), `outer_joins` (inner
  and outer equijoin bounds), `set_operations` (UNION, INTERSECT, EXCEPT), `elastic`
  (elastic and smooth sensitivity), `metrics` (what is known of the data), `calibrate`
  (noise scales).
- private aggregates: `private` (validate, sensitivity, rewrite), `aggregate_args`
  (bounds of expressions inside SUM/AVG by interval arithmetic), `bounding`
  (contribution bounding), `buckets` (computed group keys), `arithmetic` (expressions
  that cannot fail), `row_cost` (the bounded work of an expression on one row),
  `constants` (values computed first), `choice` (exponential mechanism), `computed` and
  `outer` (post-processing of released values), `probes` (refused statements asked
  with LIMIT 0 or 1, as BI tools ask for columns), `totality` (nothing may fail for some
  rows only), `rewrite` (the SQL the backend runs).
- checks against PostgreSQL's own plan: `plan_check`, `plan_joins`.
- what comes out: `plan` (the Plan), `errors` (typed refusals), `sqlstate` (every
  SQLSTATE, a leaf module), `explain` and `unit_report` (`dpgate explain`, the NOTICE),
  `error_bars` (the interval each released column states).
"""
