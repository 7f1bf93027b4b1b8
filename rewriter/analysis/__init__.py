"""What a statement is and what it reads.

- `classify`: split a query string, decide what each statement is (the entry point).
- `probes`: a refused statement asked with LIMIT 0 or 1, as BI tools ask for a query's
  columns (a column probe).
- `relations`: FLEX stability and max frequencies of what FROM, joins and WHERE read
  (the Analyzer: FROM items, derived tables, CTEs, set operations); `sources` (the
  relations as data), `joins` (equijoins, and public tables cross-joined), `aliases`
  (column alias lists), `resolver` (column references), `row_checks` (expressions on
  private rows), `findings` (missing metrics, and what PostgreSQL's plan may show).
- `unit`: which privacy unit a row belongs to (derived tables included).
- `semi_joins`: IN and EXISTS over private tables, written as joins with a DISTINCT
  table before the analysis.
- `constants`: values that read no private row, computed first.
- `buckets`: computed group keys, evaluated on the public domain only.
- `arithmetic`: arithmetic and casts rewritten so that no row can make them fail.
- `row_cost`: the bounded work of an expression on one row.
- `totality`: the last check, nothing may fail for some rows only.
"""
