"""The answering engine: what a planned statement turns into.

- `dispatch`: the one table from plan kind to action, shared by both protocols (Engine)
- `planning`: query string to plans (plan cache, limits, measuring missing metrics)
- `private`: private aggregates answered: the ledger's look-up, budget and one-commit
  charge around `before_charge` (what may fail for free: calibration, PostgreSQL's parse,
  constants, the plan check, the answer's shape) and `private_query` (the rewritten SQL
  run on private rows, noised, post-processed); `notice`: what the analyst is told after
  a fresh answer
- `dp_settings`: SET/SHOW of dp.* settings, SHOW dp.budget and dp.policy
- `errors`: the one conversion of refusals and PostgreSQL errors into a client's error
- `outcome`: what the engine returns (rows, or one message)
- `binary`: answers in binary result format encoded without asking PostgreSQL
- `release`, `choices`: noise, key selection, HAVING/ORDER BY/LIMIT on noisy rows; the
  exponential mechanism's answers; `computed_errors`: the error bars of the statement's
  own expressions over released values
- `plan_cache`, `plan_check`, `knowledge`, `limits`, `workers`: the plan cache,
  PostgreSQL's check of a rewritten plan before the charge, metrics and column names
  measured on the backend, the work limits of one statement, worker threads.
- `chosen_bound`, `bounded_sums`, `weighted_sums`: τ chosen per query from per-unit
  counts, clamping bounds chosen from bucketed sums, sums and averages weighed per unit
  at τ, all at release.
- `column_probes`: a statement dpgate refuses, asked with LIMIT 0 or 1 as BI tools ask
  for a query's columns: its columns (PostgreSQL's Describe), no row.
- `recent`: each analyst's recent answers with their error bars (SHOW dp.last_answers);
  `first_rows`: the same question with a smaller LIMIT, answered free from a stored answer.
- `fair`: each analyst's fair share of the pools all analysts use (workers, readers).
- `reader_time`: each analyst's reader-seconds, so a slow statement is not repeated for free.
- `literals`, `shapes`, `generic_plan`: literals lifted out as parameters so that
  statements differing in constants share a plan, what PostgreSQL said of a lifted
  shape, and the one generic-plan check for all values.
- `charge_batches`: concurrent sessions' charges taken to the ledger together;
  `connection_loss`: a private statement whose connection fails before the charge.

May import: `proxy.pgwire`, `proxy.config`, rewriter/, accounting/, mechanisms/. Never
`proxy.server`, `proxy.demo` or `proxy.admin`.
"""
