"""Arithmetic and casts on private rows, rewritten so that no row can make them fail.

`order_id % 97 <> 1`, `price * quantity > 100`, `a / b`: PostgreSQL's integer and float
arithmetic fails on some values only (overflow, division by zero), so evaluated on private
rows its error would be an exact answer. The total form computes the same value in exact
NUMERIC, which cannot overflow for expressions of this size, and divides by NULLIF(b, 0):

- every operand is cast to numeric (from an integer, numeric or float column, a number, a
  bound parameter or a computed constant);
- `a / b` is `a / NULLIF(b, 0)`, or `div(a, NULLIF(b, 0))` when both sides are integers
  (PostgreSQL's integer division truncates toward zero, as div does);
- `a % b` is `mod(a, NULLIF(b, 0))` (the sign of the dividend, like %).

NUMERIC itself overflows beyond 131,072 digits before the decimal point, so a product
like `order_cost * 1e131071` would fail for some rows only. The analysis therefore bounds
the digits of every result from its operands (a literal's own digits; 5, 10 and 19 for
the integer types, 39 and 309 for real and double precision, and an assumed 1,000 for a
numeric column, whose typmod dpgate does not read; division adds the divisor's fractional
digits) and refuses an expression whose bound exceeds MAX_DIGITS — far below NUMERIC's
limit, because the work of a product grows with the digits of its operands. Values known only when
the statement runs (bound parameters, computed constants) are clamped to ±1e1000 first,
so their digits are bounded too: beyond that PostgreSQL's answer and dpgate's differ.

NUMERIC's cost grows with digits too: a product of 20,001-digit numbers takes PostgreSQL
milliseconds, paid only for the rows that reach it. So a number written in arithmetic on
rows has at most MAX_LITERAL_DIGITS digits (before and after the point together), and a
parameter or computed constant is clamped to ±1e40 and rounded to 40 decimals (once, when
the statement is planned: it is a constant there); bigger ones are refused (54000).

date_trunc fails on timestamps it would move before year 1 or past year 10,000 (`week`
of a year-1 date, `year` of 10001-06-01), so on rows it is guarded (`total_trunc`): values
outside years 100 to 9899 (infinity aside, which it keeps) give NULL.

Where PostgreSQL would have raised an error the total form gives NULL (or a number where
an integer would have overflowed); elsewhere it gives the same value, as numeric. Casts
are allowed only where they are total: to text, and from a narrower number to a wider one;
a number cast to numeric(p, s) is guarded instead (NULL where it would not fit).
A date is cast to a timestamp guarded like date_trunc (NULL past timestamp's last year).
Everything else is refused. The rewritten nodes are marked so that totality.py trusts them.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from sqlglot import exp

# Marks a node dpgate built in total form (totality.py does not walk into it).
TOTAL = "dpgate_total"

INTEGER_TYPES = frozenset({"smallint", "integer", "bigint"})
NUMBER_TYPES = INTEGER_TYPES | {"numeric", "real", "double precision"}
_WIDER = {  # target -> the source types it holds every value of
    "bigint": {"smallint", "integer", "bigint"},
    "int8": {"smallint", "integer", "bigint"},
    "integer": {"smallint", "integer"},
    "int": {"smallint", "integer"},
    "int4": {"smallint", "integer"},
    "numeric": NUMBER_TYPES,
    "decimal": NUMBER_TYPES,
    "double precision": {"smallint", "integer", "bigint", "real", "double precision"},
    "float8": {"smallint", "integer", "bigint", "real", "double precision"},
    "double": {"smallint", "integer", "bigint", "real", "double precision"},
}
_TEXT_TYPES = frozenset({"text", "varchar", "char", "character varying", "character",
                         "bpchar"})
# NUMERIC holds 131,072 digits before the point (SUM over up to 1e19 rows adds 19 more),
# but the work is what bounds it: four numeric columns (1,000 digits assumed each) multiply,
# a product of twelve does not.
MAX_DIGITS = 4_000
# Digits before and after the point of a value of each type (numeric: an assumption).
_TYPE_DIGITS = {"smallint": (5, 0), "integer": (10, 0), "bigint": (19, 0),
                "real": (39, 45), "double precision": (309, 324), "numeric": (1000, 1000)}
# Digits of a number written in arithmetic on rows: no real query needs more (money, rates
# and unit conversions have a few dozen), and the work of a product grows with them.
MAX_LITERAL_DIGITS = 40
# Bound parameters and computed constants are clamped to this magnitude and rounded to
# this many decimals.
_RUNTIME_DIGITS = (41, 40)
_RUNTIME_BOUND = "1e40"
# date_trunc cannot fail on timestamps of these years (it fails before year 1, after
# 10,000, and on what a week, decade or millennium moves there).
_TRUNC_RANGE = ("0100-01-01", "9899-12-31")
# A date casts to a timestamp below this day (timestamp's range ends with year 294276;
# date's, 5874897), and at ±infinity.
_TIMESTAMP_END = "294277-01-01"
_TIMESTAMP_TYPES = frozenset({"timestamp", "timestamp without time zone"})
_OPERATORS = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.Abs)
ARITHMETIC = _OPERATORS + (exp.Cast,)


class NotTotal(ValueError):
    """The expression has no total form dpgate knows."""


class TooCostly(NotTotal):
    """The expression is total but its work per row has no small bound (54000)."""


def total_form(node: exp.Expression, type_of: Callable[[exp.Column], str | None]
               ) -> exp.Expression:
    """The total form of an arithmetic expression or cast; raises NotTotal."""
    if isinstance(node, exp.Cast):
        return _total_cast(node, type_of)
    refuse_long_numbers(node)
    digits, _ = _digits(node, type_of)
    if digits > MAX_DIGITS:
        raise TooCostly(f"this arithmetic can reach about 10^{digits}: its work on a row "
                        f"would grow with it (at most 10^{MAX_DIGITS}); use fewer factors "
                        "or smaller constants")
    total, _ = _number(node, type_of)
    return _marked(total)


def refuse_long_numbers(node: exp.Expression) -> None:
    """Raise TooCostly for a number of more than MAX_LITERAL_DIGITS digits in `node`."""
    for literal in node.find_all(exp.Literal):
        if not literal.is_string and sum(_literal_digits(literal.this)) > MAX_LITERAL_DIGITS:
            raise TooCostly(f"a number in arithmetic on private rows has at most "
                            f"{MAX_LITERAL_DIGITS} digits: its work would depend on which "
                            "rows reach it")


def _digits(node: exp.Expression, type_of: Callable[[exp.Column], str | None]
            ) -> tuple[int, int]:
    """Upper bounds of the digits before and after the point of the node's value.

    Only the first can make NUMERIC fail: PostgreSQL rounds the scale of a product to its
    maximum instead of failing.
    """
    if isinstance(node, exp.Paren):
        return _digits(node.this, type_of)
    if isinstance(node, (exp.Neg, exp.Abs)):
        return _digits(node.this, type_of)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        (left, left_fraction) = _digits(node.this, type_of)
        (right, right_fraction) = _digits(node.expression, type_of)
        if isinstance(node, (exp.Add, exp.Sub)):
            return max(left, right) + 1, max(left_fraction, right_fraction)
        if isinstance(node, exp.Mul):
            return left + right, left_fraction + right_fraction
        if isinstance(node, exp.Div):  # a nonzero divisor is at least 10^-fraction
            return left + right_fraction + 1, 16383
        return min(left, right), max(left_fraction, right_fraction)
    if isinstance(node, exp.Literal) and not node.is_string:
        return _literal_digits(node.this)
    if isinstance(node, (exp.Parameter, exp.Placeholder)):
        return _RUNTIME_DIGITS
    if isinstance(node, exp.Cast):
        return _digits(node.this, type_of)
    kind = _type_of_operand(node, type_of)
    return _TYPE_DIGITS.get(kind or "", _RUNTIME_DIGITS)


def _literal_digits(text: str) -> tuple[int, int]:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return _RUNTIME_DIGITS
    if not value.is_finite():
        return _RUNTIME_DIGITS
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    return max(len(digits) + exponent, 1), max(-exponent, 0)


def _total_cast(node: exp.Cast, type_of: Callable[[exp.Column], str | None]
                ) -> exp.Expression:
    target = node.to.sql(dialect="postgres").lower()
    base = target.split("(")[0].strip()
    if base in _TEXT_TYPES:
        return _marked(node.copy())  # every value has a text form
    source = _type_of_operand(node.this, type_of)
    # A precision (numeric(3, 0)) makes a cast fail on larger values ("numeric field
    # overflow"): only the unconstrained types hold every value of the narrower ones.
    if source is not None and "(" not in target and source in _WIDER.get(base, set()):
        return _marked(node.copy())
    if source == "date" and target in _TIMESTAMP_TYPES:
        return _date_to_timestamp(node)
    if source in NUMBER_TYPES and base in ("numeric", "decimal"):
        guarded = _to_precision(node)
        if guarded is not None:
            return guarded
    raise NotTotal(f"a cast to {target} can fail on some values; only casts to text and "
                   "from a narrower number to a wider one are allowed on private rows")


def _date_to_timestamp(node: exp.Cast) -> exp.Expression:
    """CAST(d AS timestamp) where it cannot fail, NULL past timestamp's last year (Tableau
    writes it around every date). Comparisons and no function call: a WHERE condition on
    the cast still narrows the key's declared domain (keys.py reads only such ones)."""
    value = node.this
    fits = exp.or_(exp.LT(this=value.copy(), expression=exp.cast(
                       exp.Literal.string(_TIMESTAMP_END), "date")),
                   exp.EQ(this=value.copy(), expression=exp.cast(
                       exp.Literal.string("infinity"), "date")))
    return _marked(exp.Case(ifs=[exp.If(this=fits, true=node.copy())]))


def _to_precision(node: exp.Cast) -> exp.Expression | None:
    """CAST(x AS numeric(p, s)) where it cannot fail, NULL where PostgreSQL's fails
    ("numeric field overflow": x rounded to s decimals has more than p − s digits before
    the point, or is infinite); NaN fits any precision. None for a typmod not of that
    form (a negative scale)."""
    try:
        precision, *rest = (int(param.this.this) for param in node.to.expressions)
        scale = rest[0] if rest else 0
    except (AttributeError, ValueError):
        return None
    if len(rest) > 1 or scale < 0 or not 1 <= precision <= 1000:
        return None
    value = _numeric(node.this)
    rounded = exp.Anonymous(this="round", expressions=[value, exp.Literal.number(scale)])
    fits = exp.or_(
        exp.LT(this=exp.Abs(this=rounded),
               expression=exp.Literal.number(f"1e{precision - scale}")),
        exp.EQ(this=value.copy(), expression=exp.cast(exp.Literal.string("NaN"), "numeric")))
    return _marked(exp.Case(ifs=[exp.If(this=fits, true=node.copy())]))


def _number(node: exp.Expression, type_of: Callable[[exp.Column], str | None]
            ) -> tuple[exp.Expression, bool]:
    """(numeric form, whether PostgreSQL would compute it as an integer)."""
    if isinstance(node, exp.Paren):
        inner, integer = _number(node.this, type_of)
        return exp.Paren(this=inner), integer
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        left, left_integer = _number(node.this, type_of)
        right, right_integer = _number(node.expression, type_of)
        integer = left_integer and right_integer
        if isinstance(node, exp.Div):
            divisor = exp.Nullif(this=right, expression=exp.Literal.number(0))
            if integer:
                return exp.Anonymous(this="div", expressions=[left, divisor]), True
            return exp.Div(this=left, expression=divisor), False
        if isinstance(node, exp.Mod):
            divisor = exp.Nullif(this=right, expression=exp.Literal.number(0))
            return exp.Anonymous(this="mod", expressions=[left, divisor]), integer
        return type(node)(this=left, expression=right), integer
    if isinstance(node, exp.Neg):
        inner, integer = _number(node.this, type_of)
        return exp.Neg(this=inner), integer
    if isinstance(node, exp.Abs):
        inner, integer = _number(node.this, type_of)
        return exp.Abs(this=inner), integer
    return _operand(node, type_of)


def _operand(node: exp.Expression, type_of: Callable[[exp.Column], str | None]
             ) -> tuple[exp.Expression, bool]:
    if isinstance(node, exp.Literal) and not node.is_string:
        integer = "." not in node.this and "e" not in node.this.lower()
        return _numeric(node), integer
    if isinstance(node, (exp.Parameter, exp.Placeholder)):
        # Its type is checked when PostgreSQL plans it; its magnitude is clamped and its
        # decimals rounded so that _digits can bound what it computes and what that costs.
        # A CASE, not LEAST(GREATEST(…)): those skip NULL, and a NULL parameter must stay
        # NULL as in PostgreSQL. PostgreSQL folds it when it plans (a constant there).
        # Rounded only beyond 40 decimals: PostgreSQL's value and scale otherwise.
        decimals = exp.Literal.number(_RUNTIME_DIGITS[1])
        value = exp.Case(ifs=[exp.If(
            this=exp.GT(this=exp.Anonymous(this="scale", expressions=[_numeric(node)]),
                        expression=decimals),
            true=exp.Anonymous(this="round", expressions=[_numeric(node), decimals.copy()]))],
            default=_numeric(node))
        bound = exp.Literal.number(_RUNTIME_BOUND)
        low = exp.Neg(this=bound.copy())
        clamped = exp.Case(ifs=[
            exp.If(this=exp.LT(this=value.copy(), expression=low.copy()), true=low),
            exp.If(this=exp.GT(this=value.copy(), expression=bound.copy()), true=bound),
        ], default=value)
        return clamped, False
    kind = _type_of_operand(node, type_of)
    if kind is None or kind not in NUMBER_TYPES:
        what = node.sql(dialect="postgres")
        raise NotTotal("arithmetic on private rows is allowed only on numbers of a known type "
                       f"({what} is {kind or 'of a type dpgate does not know'})")
    return _numeric(node), kind in INTEGER_TYPES


def _type_of_operand(node: exp.Expression, type_of: Callable[[exp.Column], str | None]
                     ) -> str | None:
    if isinstance(node, exp.Column):
        return type_of(node)
    if isinstance(node, exp.Literal) and not node.is_string:
        return "integer" if node.this.isdigit() else "numeric"
    return None


def _numeric(node: exp.Expression) -> exp.Expression:
    return exp.Cast(this=node.copy(), to=exp.DataType.build("numeric"))


def _marked(node: exp.Expression) -> exp.Expression:
    node.meta[TOTAL] = True
    return node


TRUNCATIONS = (exp.TimestampTrunc, exp.DateTrunc)


def total_trunc(node: exp.Expression) -> exp.Expression:
    """date_trunc(unit, x) where it cannot fail, NULL elsewhere (see the module docstring)."""
    value = node.this
    low, high = (exp.Literal.string(day) for day in _TRUNC_RANGE)
    finite = exp.Anonymous(this="isfinite", expressions=[value.copy()])
    safe = exp.or_(exp.not_(finite),
                   exp.Between(this=value.copy(), low=low, high=high))
    return _marked(exp.Case(ifs=[exp.If(this=safe, true=node.copy())]))


# Nodes that bring their operands to one type: PostgreSQL casts a numeric operand to real
# or double precision when the other is one, and that cast fails, row by row, beyond the
# float's range ("is out of range for type real", 1e-300 as well as 1e400).
_UNIFYING = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
             exp.NullSafeNEQ, exp.Between, exp.In, exp.Greatest, exp.Least, exp.Coalesce,
             exp.Nullif, exp.Case)
_FLOAT_TYPES = frozenset({"real", "double precision", "float4", "float8", "double", "float"})
_NUMERIC_TYPES = frozenset({"numeric", "decimal"})


def mixes_numeric_and_float(node: exp.Expression,
                            type_of: Callable[[exp.Column], str | None]) -> bool:
    """Whether `node` unifies a numeric value read from a row with a float one."""
    if not isinstance(node, _UNIFYING):
        return False
    if isinstance(node, exp.Case):
        operands = [case.args.get("true") for case in node.args.get("ifs") or []]
        operands.append(node.args.get("default"))
    else:
        operands = [node.this, node.args.get("expression"), node.args.get("low"),
                    node.args.get("high"), *node.expressions]
    kinds = {kind for operand in operands if isinstance(operand, exp.Expression)
             for kind in _number_kinds(operand, type_of)}
    return kinds == {"numeric", "float"}


def _number_kinds(node: exp.Expression, type_of: Callable[[exp.Column], str | None]
                  ) -> set[str]:
    if isinstance(node, exp.Paren):
        return _number_kinds(node.this, type_of)
    if isinstance(node, exp.Column):
        kind = type_of(node)
    elif isinstance(node, exp.Cast):
        kind = node.to.sql(dialect="postgres").lower()
    elif isinstance(node, (*_OPERATORS, exp.Extract)):
        kind = "numeric" if node.find(exp.Column) is not None else None
    elif isinstance(node, (exp.Case, exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least)):
        arms = node.args.get("ifs") or []
        results = [arm.args.get("true") for arm in arms] + [
            node.args.get("default"), node.this, *node.expressions]
        return {kind for result in results if isinstance(result, exp.Expression)
                and not isinstance(result, exp.If) for kind in _number_kinds(result, type_of)}
    else:
        return set()
    if kind in _FLOAT_TYPES:
        return {"float"}
    return {"numeric"} if kind in _NUMERIC_TYPES else set()
