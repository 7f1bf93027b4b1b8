"""The `dpgate` command line: serve, demo, users, budgets, the ledger, metrics, explain
and experiments: `cli` (the parser, serve, demo, users) and its parts `cli_common` (the
options every command shares), `cli_analysis` (explain, metrics) with `metrics_refresh`,
`cli_ledger` (budget, ledger) with `cli_ledger_store` (the shared ledger's schema and
migration), `cli_experiment`, `cli_policy` (policy init and check) with `catalog_read` (the
catalog, never a row), `policy_init` (a commented policy drafted from it) and
`policy_check` (every setting checked against the database before serving). The top layer.

May import: every other part of `proxy` and the pure packages.
"""
