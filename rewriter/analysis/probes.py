"""Column probes: a statement dpgate would refuse, asked with LIMIT 0 or LIMIT 1, the way
BI tools learn a query's columns (Superset runs a virtual dataset's SQL with LIMIT 1
before saving it), is answered with its columns and no row, the refusal in a NOTICE.

Sound (docs/bi-tools.md): the answer is PostgreSQL's Describe of the statement, names and
types read from the catalog, nothing run and no row read, so it is the same whatever the
private tables hold: it releases nothing and is not charged. A statement dpgate answers
is answered as usual; refusals made before the analysis (writes, side effects, catalogs
beside private tables) stay refusals.
"""

from __future__ import annotations

from sqlglot import exp

# The limits BI tools use to learn a statement's columns (LIMIT 0 returns no row in
# PostgreSQL too).
PROBE_LIMITS = frozenset({0, 1})


def probe_limit(tree: exp.Expression) -> int | None:
    """The LIMIT of a statement asked as a column probe (a constant 0 or 1 on the outermost
    SELECT, no OFFSET); None for any other statement."""
    if not isinstance(tree, exp.Select) or tree.args.get("offset") is not None:
        return None
    limit = tree.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    if not (isinstance(value, exp.Literal) and value.is_int) or \
            int(value.this) not in PROBE_LIMITS:
        return None
    return int(value.this)
