"""Column probes: a statement that would return private rows, asked with LIMIT 0 or
LIMIT 1, the way BI tools learn a query's columns (Superset runs a virtual dataset's SQL
with LIMIT 1 before saving it), is answered with its columns and no row.

Sound (docs/bi-tools.md): the answer is PostgreSQL's Describe of the statement, names and
types read from the catalog, nothing run and no row read, so it is the same whatever the
private tables hold: it releases nothing and is not charged. Only statements with no
aggregate anywhere qualify, which dpgate refuses in any case; a refused aggregate keeps
its refusal, so no answerable question comes back empty.
"""

from __future__ import annotations

from sqlglot import exp

# The limits BI tools use to learn a statement's columns (LIMIT 0 returns no row in
# PostgreSQL too).
PROBE_LIMITS = frozenset({0, 1})
# Clauses that make a statement an aggregate, or order rows by one.
_AGGREGATING = ("group", "having", "distinct", "qualify", "windows")


def probe_limit(tree: exp.Expression) -> int | None:
    """The LIMIT of a statement that would return one row per private row asked as a
    column probe (a constant 0 or 1, no OFFSET); None for any other statement."""
    if not isinstance(tree, exp.Select) or tree.args.get("offset") is not None:
        return None
    limit = tree.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    if not (isinstance(value, exp.Literal) and value.is_int):
        return None
    if int(value.this) not in PROBE_LIMITS or any(tree.args.get(key) for key in _AGGREGATING):
        return None
    if tree.find(exp.AggFunc, exp.WithinGroup, exp.Window) is not None:
        return None
    return int(value.this)
