"""Bounds of an expression inside SUM/AVG, by interval arithmetic over its columns'
declared bounds: `sum(quantity * order_cost)`, `avg(quantity::numeric)`,
`sum(price * (1 - discount))`, `sum(CASE WHEN … THEN a * b ELSE 0 END)`.

Each column is clamped to its own bounds first (as exact NUMERIC, NULL kept NULL), so every
operation sees in-bounds inputs and the derived interval contains every value the
expression can take: clamping the expression to it then changes nothing for such rows,
and one row changes the sum by at most the interval's magnitude. Computed in NUMERIC, the
expression cannot fail on any row (no integer overflow; division and modulo by a nonzero
constant only; casts only to types whose range holds the interval, and a cast to double
precision computed as the NUMERIC it widens), so it stays total (docs/totality.md).

An integer divided by an integer constant (`quantity / 2`) is PostgreSQL's integer
division, which truncates toward zero: computed as `div(…)` of the NUMERIC value, which
truncates the same way, and bounded by the truncated quotients of the dividend's bounds
(truncation is monotone). PostgreSQL's own integer division fails on one value only, the
type's least divided by -1 (`integer out of range`); the rewrite never fails, but a
quotient the dividend's type cannot hold within the declared bounds is refused, so that
on in-bounds data the answer is PostgreSQL's. Telling integer from numeric division
needs the dividend's type: from the catalog (column types), else the division is refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sqlglot import exp

from ..analysis.arithmetic import TOTAL
from ..sql.nodes import unparen

Interval = tuple[float, float]
ColumnBounds = Callable[[exp.Column], Interval]
ColumnTypes = Callable[[exp.Column], str | None]  # information_schema's data_type

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
# PostgreSQL's integer types, narrowest first, with their greatest value (the least is
# one more in magnitude): an integer operation's type is its widest operand's.
_INTEGER_RANGES = {"smallint": 2 ** 15 - 1, "integer": 2 ** 31 - 1, "bigint": 2 ** 63 - 1}
_CAST_TYPES = {"decimal": "numeric", "bigint": "bigint", "int": "integer",
               "smallint": "smallint", "double": "double precision"}


def _no_types(_: exp.Column) -> str | None:
    return None


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


def interval(node: exp.Expression, columns: ColumnBounds,
             types: ColumnTypes = _no_types) -> Interval:
    """Bounds that contain every value of `node` when each column lies within its bounds
    (a NULL adds no value). Raises NoBounds for anything else, and for bounds beyond a
    double's range (whose NUMERIC value could also pass NUMERIC's 131,072 digits).
    `types` tells integer from numeric division (an integer divisor needs them)."""
    lo, hi = _span(unparen(node), columns, types)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise NoBounds("its bounds overflow")
    return lo, hi


def _span(node: exp.Expression, columns: ColumnBounds, types: ColumnTypes) -> Interval:
    if isinstance(node, exp.Column):
        return columns(node)
    if isinstance(node, exp.Literal) and not node.is_string:
        value = float(node.this)
        return value, value
    if isinstance(node, exp.Neg):
        lo, hi = interval(node.this, columns, types)
        return -hi, -lo
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        left = interval(node.this, columns, types)
        right = interval(node.expression, columns, types)
        if isinstance(node, exp.Add):
            return left[0] + right[0], left[1] + right[1]
        if isinstance(node, exp.Sub):
            return left[0] - right[1], left[1] - right[0]
        products = [a * b for a in left for b in right]
        return min(products), max(products)
    if isinstance(node, exp.Div):
        return _quotient(node, columns, types)
    if isinstance(node, exp.Mod):
        return _remainder(node, columns, types)
    if isinstance(node, exp.Cast):
        return _cast(node, columns, types)
    if isinstance(node, exp.Abs):
        lo, hi = interval(node.this, columns, types)
        return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
    if isinstance(node, (exp.Greatest, exp.Least, exp.Coalesce)):
        # Any one of them: COALESCE takes the first that is not NULL, and GREATEST and
        # LEAST ignore NULL arguments, so a NULL column leaves any other's value.
        spans = [interval(e, columns, types) for e in [node.this, *node.expressions]]
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)
    if isinstance(node, exp.Case) and node.this is None:
        branches = [i.args["true"] for i in node.args.get("ifs", [])]
        branches.append(node.args.get("default") or exp.Null())
        spans = [interval(b, columns, types) for b in branches
                 if not isinstance(unparen(b), exp.Null)]
        if not spans:
            raise NoBounds("the CASE has no value to sum")
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)
    raise NoBounds(f"{node.sql(dialect='postgres')[:40]} has no bounds dpgate can derive")


def _cast(node: exp.Cast, columns: ColumnBounds, types: ColumnTypes) -> Interval:
    to = node.args["to"]
    name = to.this.value.lower()
    if name not in _CASTS or to.expressions:  # numeric(10, 2) can overflow
        raise NoBounds(f"a cast to {to.sql(dialect='postgres')} inside the aggregate")
    lo, hi = interval(node.this, columns, types)
    if name in _INTEGERS:  # NUMERIC to an integer rounds half away from zero
        lo, hi = _round(lo), _round(hi)
    limit = _CASTS[name]
    if limit is not None and max(abs(lo), abs(hi)) > limit:
        raise NoBounds(f"the bounds do not fit {to.sql(dialect='postgres')}")
    return lo, hi


def _quotient(node: exp.Div, columns: ColumnBounds, types: ColumnTypes) -> Interval:
    divisor = _constant(node.expression)
    if divisor is None or divisor == 0:
        raise NoBounds("a division inside the aggregate takes a nonzero constant")
    lo, hi = interval(node.this, columns, types)
    kind = integer_division(node, types)
    if kind is None:
        quotients = (lo / divisor, hi / divisor)
        return min(quotients), max(quotients)
    low, high = sorted((math.trunc(lo / divisor), math.trunc(hi / divisor)))
    if max(-low - 1, high) > _INTEGER_RANGES[kind]:  # INT_MIN / -1, within the bounds
        raise NoBounds(f"{node.sql(dialect='postgres')[:40]} can overflow {kind} within "
                       "the declared bounds")
    return float(low), float(high)


def _remainder(node: exp.Mod, columns: ColumnBounds, types: ColumnTypes) -> Interval:
    """x % c has the sign of x and a magnitude below |c| (at most |c| - 1 for integers)
    and at most |x| (integers and NUMERIC alike; PostgreSQL's INT_MIN % -1 is 0)."""
    divisor = _constant(node.expression)
    if divisor is None or divisor == 0:
        raise NoBounds("a modulo inside the aggregate takes a nonzero constant")
    lo, hi = interval(node.this, columns, types)
    kinds = [_number_type(node.this, types), _number_type(node.expression, types)]
    largest = abs(divisor) - (1 if _common_type(kinds) in _INTEGER_RANGES else 0)
    return max(lo, -largest) if lo < 0 else 0.0, min(hi, largest) if hi > 0 else 0.0


def integer_division(node: exp.Div, types: ColumnTypes) -> str | None:
    """The integer type of PostgreSQL's integer division `node`, or None for a numeric
    or float one; NoBounds when an integer divisor meets a dividend of unknown type."""
    divisor = _number_type(node.expression, types)
    if divisor not in _INTEGER_RANGES:
        return None
    dividend = _number_type(node.this, types)
    if dividend is None:
        raise NoBounds(f"the type of {node.this.sql(dialect='postgres')[:40]} is not known, "
                       "and an integer divisor truncates an integer one; divide by a "
                       "decimal constant such as 2.0")
    kind = _common_type([dividend, divisor])
    return kind if kind in _INTEGER_RANGES else None


def _number_type(node: exp.Expression, types: ColumnTypes) -> str | None:
    """PostgreSQL's type of a number expression of the forms above (integer types by
    name, "numeric", "double precision"), None when unknown."""
    node = unparen(node)
    if isinstance(node, exp.Column):
        return types(node)
    if isinstance(node, exp.Literal) and not node.is_string:
        if not node.this.isdigit():
            return "numeric"
        value = int(node.this)
        return next((kind for kind, top in _INTEGER_RANGES.items()
                     if kind != "smallint" and value <= top), "numeric")
    if isinstance(node, (exp.Neg, exp.Abs)):
        return _number_type(node.this, types)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        return _common_type([_number_type(node.this, types),
                             _number_type(node.expression, types)])
    if isinstance(node, exp.Cast):
        return _CAST_TYPES.get(node.args["to"].this.value.lower())
    if isinstance(node, (exp.Greatest, exp.Least, exp.Coalesce)):
        return _common_type([_number_type(e, types) for e in [node.this, *node.expressions]])
    if isinstance(node, exp.Case) and node.this is None:
        branches = [i.args["true"] for i in node.args.get("ifs", [])]
        branches.append(node.args.get("default") or exp.Null())
        return _common_type([_number_type(b, types) for b in branches
                             if not isinstance(unparen(b), exp.Null)])
    return None


def _common_type(kinds: list[str | None]) -> str | None:
    """The type PostgreSQL computes operands of these types in: the widest integer,
    numeric beside integers, double precision beside any number."""
    if not kinds or None in kinds:
        return None
    if any(kind in ("double precision", "real") for kind in kinds):
        return "double precision"
    order = list(_INTEGER_RANGES)
    if all(kind in order for kind in kinds):
        return max(kinds, key=lambda kind: order.index(kind or ""))
    return "numeric" if all(kind in (*order, "numeric") for kind in kinds) else None


def _constant(node: exp.Expression) -> float | None:
    """A number constant (2, 2.0, -0.5, 1e3)."""
    node = unparen(node)
    sign = 1.0
    if isinstance(node, exp.Neg):
        node, sign = unparen(node.this), -1.0
    if isinstance(node, exp.Literal) and not node.is_string:
        return sign * float(node.this)
    return None


def _round(value: float) -> float:
    return math.copysign(math.floor(abs(value) + 0.5), value)


def with_clamped_columns(node: exp.Expression, columns: ColumnBounds,
                         types: ColumnTypes = _no_types) -> exp.Expression:
    """`node` computed in NUMERIC from each column clamped to its bounds; CASE conditions
    read the columns as written (they choose a branch, they are not summed); an integer
    division truncated as PostgreSQL's (`div`)."""
    node = node.copy()

    def clamp(sub: exp.Expression) -> exp.Expression:
        if isinstance(sub, exp.Column):
            return clamped(sub, columns(sub))
        if isinstance(sub, exp.Cast) and sub.args["to"].this.value.lower() in _FLOATS:
            return clamp(sub.this)  # in NUMERIC, exactly (see _CASTS)
        if isinstance(sub, exp.Case):
            for branch in sub.args.get("ifs", []):
                branch.set("true", with_clamped_columns(branch.args["true"], columns, types))
            default = sub.args.get("default")
            if default is not None:
                sub.set("default", with_clamped_columns(default, columns, types))
            return sub
        truncated = isinstance(sub, exp.Div) and integer_division(sub, types) is not None
        for key, value in list(sub.args.items()):
            if isinstance(value, exp.Expression):
                sub.set(key, clamp(value))
            elif isinstance(value, list):
                sub.set(key, [clamp(v) if isinstance(v, exp.Expression) else v
                              for v in value])
        if truncated:
            return exp.Anonymous(this="div", expressions=[sub.this, sub.expression])
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
