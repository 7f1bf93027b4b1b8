"""The `dpgate` command line: serve, demo, users, budgets, the ledger, metrics, explain
and experiments (`cli` and its `cli_*` parts). The top layer.

May import: every other part of `proxy` and the pure packages.
"""
