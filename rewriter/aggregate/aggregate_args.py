"""Bounds of an expression inside SUM/AVG, by interval arithmetic over its columns'
declared bounds: `sum(quantity * order_cost)`, `avg(quantity::numeric)`,
`sum(price * (1 - discount))`, `sum(CASE WHEN … THEN a * b ELSE 0 END)`.

Each column is clamped to its own bounds first (as exact NUMERIC, NULL kept NULL), so every
operation sees in-bounds inputs and the derived interval contains every value the
expression can take: clamping the expression to it then changes nothing for such rows,
and one row changes the sum by at most the interval's magnitude. Computed in NUMERIC, the
expression cannot fail on any row (no integer overflow; division by a nonzero constant
only; casts only to types whose range holds the interval, and a cast to double precision
computed as the NUMERIC it widens), so it stays total (docs/totality.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sqlglot import exp

from ..analysis.arithmetic import TOTAL
from ..sql.nodes import unparen

Interval = tuple[float, float]
ColumnBounds = Callable[[exp.Column], Interval]

# Casts that keep the value's meaning, with the range of the target type (None:
# unbounded). Double precision (Tableau's `AVG(CAST(x AS DOUBLE PRECISION))`) is summed
# as the NUMERIC it widens (its cast left out): a tiny NUMERIC (1e-50) fails to cast, and
# float products of tiny values underflow, on such rows only. The exact sum differs from
# PostgreSQL's float8 sum by that sum's own rounding (which already depends on the order
# PostgreSQL adds in, e.g. across parallel workers); the answer keeps its type.
# Not real: PostgreSQL sums reals in single precision, far from the exact sum.
_CASTS: dict[str, float | None] = {
    "decimal": None, "bigint": 2.0 ** 63 - 1, "int": 2.0 ** 31 - 1, "smallint": 2.0 ** 15 - 1,
    "double": None,
}
_INTEGERS = frozenset({"bigint", "int", "smallint"})
_FLOATS = frozenset({"double"})


class NoBounds(Exception):
    """The expression has a part whose bounds dpgate cannot derive."""


def clamped(argument: exp.Expression, bounds: Interval) -> exp.Expression:
    """The value clamped to its bounds as exact NUMERIC, NULL kept NULL.

    PostgreSQL's GREATEST ignores NULLs, so a bare clamp would turn NULL into lo.
    """
    lo, hi = (exp.Literal.number(repr(b)) for b in bounds)
    value = exp.Cast(this=argument.copy(), to=exp.DataType.build("numeric"))
    clamp = exp.func("LEAST", exp.func("GREATEST", value, lo), hi)
    return exp.Case(ifs=[exp.If(this=exp.Is(this=argument.copy(), expression=exp.Null()),
                                true=exp.Null())], default=clamp)


def interval(node: exp.Expression, columns: ColumnBounds) -> Interval:
    """Bounds that contain every value of `node` when each column lies within its bounds
    (a NULL adds no value). Raises NoBounds for anything else, and for bounds beyond a
    double's range (whose NUMERIC value could also pass NUMERIC's 131,072 digits)."""
    lo, hi = _span(unparen(node), columns)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise NoBounds("its bounds overflow")
    return lo, hi


def _span(node: exp.Expression, columns: ColumnBounds) -> Interval:
    if isinstance(node, exp.Column):
        return columns(node)
    if isinstance(node, exp.Literal) and not node.is_string:
        value = float(node.this)
        return value, value
    if isinstance(node, exp.Neg):
        lo, hi = interval(node.this, columns)
        return -hi, -lo
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        left, right = interval(node.this, columns), interval(node.expression, columns)
        if isinstance(node, exp.Add):
            return left[0] + right[0], left[1] + right[1]
        if isinstance(node, exp.Sub):
            return left[0] - right[1], left[1] - right[0]
        products = [a * b for a in left for b in right]
        return min(products), max(products)
    if isinstance(node, exp.Div):
        divisor = _decimal(node.expression)
        if divisor is None or divisor == 0:
            raise NoBounds("a division inside the aggregate takes a nonzero decimal constant")
        lo, hi = interval(node.this, columns)
        quotients = (lo / divisor, hi / divisor)
        return min(quotients), max(quotients)
    if isinstance(node, exp.Cast):
        return _cast(node, columns)
    if isinstance(node, exp.Abs):
        lo, hi = interval(node.this, columns)
        return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
    if isinstance(node, (exp.Greatest, exp.Least, exp.Coalesce)):
        # Any one of them: COALESCE takes the first that is not NULL, and GREATEST and
        # LEAST ignore NULL arguments, so a NULL column leaves any other's value.
        spans = [interval(e, columns) for e in [node.this, *node.expressions]]
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)
    if isinstance(node, exp.Case) and node.this is None:
        branches = [i.args["true"] for i in node.args.get("ifs", [])]
        branches.append(node.args.get("default") or exp.Null())
        spans = [interval(b, columns) for b in branches if not isinstance(unparen(b), exp.Null)]
        if not spans:
            raise NoBounds("the CASE has no value to sum")
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)
    raise NoBounds(f"{node.sql(dialect='postgres')[:40]} has no bounds dpgate can derive")


def _cast(node: exp.Cast, columns: ColumnBounds) -> Interval:
    to = node.args["to"]
    name = to.this.value.lower()
    if name not in _CASTS or to.expressions:  # numeric(10, 2) can overflow
        raise NoBounds(f"a cast to {to.sql(dialect='postgres')} inside the aggregate")
    lo, hi = interval(node.this, columns)
    if name in _INTEGERS:  # NUMERIC to an integer rounds half away from zero
        lo, hi = _round(lo), _round(hi)
    limit = _CASTS[name]
    if limit is not None and max(abs(lo), abs(hi)) > limit:
        raise NoBounds(f"the bounds do not fit {to.sql(dialect='postgres')}")
    return lo, hi


def _decimal(node: exp.Expression) -> float | None:
    """A decimal constant (2.0, -0.5, 1e3): PostgreSQL divides by it in NUMERIC, as the
    rewrite does; an integer divisor would truncate an integer column in PostgreSQL only."""
    node = unparen(node)
    sign = 1.0
    if isinstance(node, exp.Neg):
        node, sign = unparen(node.this), -1.0
    if isinstance(node, exp.Literal) and not node.is_string and \
            any(c in node.this for c in ".eE"):
        return sign * float(node.this)
    return None


def _round(value: float) -> float:
    return math.copysign(math.floor(abs(value) + 0.5), value)


def with_clamped_columns(node: exp.Expression, columns: ColumnBounds) -> exp.Expression:
    """`node` computed in NUMERIC from each column clamped to its bounds; CASE conditions
    read the columns as written (they choose a branch, they are not summed)."""
    node = node.copy()

    def clamp(sub: exp.Expression) -> exp.Expression:
        if isinstance(sub, exp.Column):
            return clamped(sub, columns(sub))
        if isinstance(sub, exp.Cast) and sub.args["to"].this.value.lower() in _FLOATS:
            return clamp(sub.this)  # in NUMERIC, exactly (see _CASTS)
        if isinstance(sub, exp.Case):
            for branch in sub.args.get("ifs", []):
                branch.set("true", with_clamped_columns(branch.args["true"], columns))
            default = sub.args.get("default")
            if default is not None:
                sub.set("default", with_clamped_columns(default, columns))
            return sub
        for key, value in list(sub.args.items()):
            if isinstance(value, exp.Expression):
                sub.set(key, clamp(value))
            elif isinstance(value, list):
                sub.set(key, [clamp(v) if isinstance(v, exp.Expression) else v
                              for v in value])
        if isinstance(sub, exp.Cast) and sub.args["to"].this.value.lower() in _INTEGERS:
            # The cast rounds as PostgreSQL's does; what follows runs in NUMERIC, where
            # `smallint * smallint` cannot overflow on some rows only.
            wider = exp.Cast(this=sub, to=exp.DataType.build("numeric"))
            wider.meta[TOTAL] = True
            return wider
        return sub
    return clamp(node)


def mark_total(node: exp.Expression) -> None:
    """Mark the written argument's value nodes as total for totality.py: the backend
    computes them from clamped NUMERIC columns (`with_clamped_columns`). A CASE's
    conditions stay unmarked and are checked as any condition; arithmetic around a CASE
    too (and is then refused there)."""
    if isinstance(node, exp.Case):
        for branch in node.args.get("ifs", []):
            mark_total(branch.args["true"])
        if node.args.get("default") is not None:
            mark_total(node.args["default"])
    elif node.find(exp.Case) is None:
        node.meta[TOTAL] = True
