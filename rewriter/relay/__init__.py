"""Statements relayed as they are, once checked: catalog reads.

- `catalog`: catalog reads refused, or relayed as they are.
- `neutralise`: catalog columns that count rows, replaced by constants.
- `comments`: the policy shown as column comments (psql's `\\d+`).
"""
