"""Group keys that are functions of one column, evaluated on the public domain only.

`quantity % 3`, `CAST(date_trunc('month', order_date) AS date)`, `to_char(order_date,
'YYYY-MM')`, `floor(extract(epoch FROM order_date) / 86400) * 86400`, `quantity::text`:
what BI tools group by. Evaluated on private rows, an expression that can fail would fail
for some rows only (an exact answer for any ε). So dpgate never evaluates it there: the
private rows give the raw column, and a mapping (raw value → bucket) computed from the
column's declared domain alone turns it into the bucket (rewrite.py, KeySpec). Whether the
expression fails then depends on the public domain only, and dpgate has PostgreSQL compute
that mapping once before the private query and before any charge (a computed constant,
constants.py): an error there is PostgreSQL's own, the same whatever the rows hold, and
free. The expression need not be total, only deterministic, cheap and free of reads:
the allow list below. docs/totality.md §2 states the rule.
"""

from __future__ import annotations

from sqlglot import exp

from ..sql.functions import FOLDED_NODES, ROW_SAFE_NODES, row_failure

# Marks a node of the statement evaluated on the domain only (totality.py skips it).
DOMAIN_ONLY = "dpgate_domain_only"

# Deterministic, cheap scalar functions of a value (beside the total nodes of functions.py
# and the arithmetic and casts it allows on literals): they may fail on some values, which
# is harmless on a public domain. No function that reads tables, settings that may change
# within a statement, or random draws; no user-defined function (exp.Anonymous).
_BUCKET_FUNCTIONS: tuple[type[exp.Expression], ...] = (
    exp.TimeToStr, exp.Floor, exp.Ceil, exp.Round, exp.Trunc, exp.Abs, exp.Sign,
    exp.WidthBucket, exp.Substring, exp.Left, exp.Right, exp.Mod, exp.DataTypeParam,
    exp.TimestampTrunc, exp.DateTrunc,
)
_ALLOWED = ROW_SAFE_NODES + FOLDED_NODES + _BUCKET_FUNCTIONS
# Placeholders and parameters have no value when the mapping is computed first.
_REFUSED = (exp.Placeholder, exp.Parameter, exp.Star)


def bucket_failure(expression: exp.Expression) -> str | None:
    """Why `expression` cannot be a group key computed on the domain only, or None."""
    for node in expression.walk():
        if isinstance(node, _REFUSED):
            return ("a computed GROUP BY key takes constants written in the statement, not "
                    "parameters or computed values")
        if not isinstance(node, _ALLOWED):
            name = node.sql_name() if isinstance(node, exp.Func) else node.key.upper()
            return f"{name} is not allowed in a computed GROUP BY key"
        if isinstance(node, (exp.Like, exp.ILike, exp.Identifier)):
            failure = row_failure(node)
            if failure is not None:
                return failure
    return None


def mark_domain_only(node: exp.Expression) -> None:
    """Mark `node` as evaluated on the domain only: totality.py does not walk into it."""
    node.meta[DOMAIN_ONLY] = True
