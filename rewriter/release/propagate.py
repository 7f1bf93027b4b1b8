"""Intervals of the statement's own expressions over released values (post_sql).

Each released aggregate o_i of a row comes with an interval that holds its truth at a
stated confidence (release.py); an expression over them — `count(*) * 2`,
`sum(x) / count(*)`, `round(avg(x), 1)`, a CASE, a variance from its count, sum and sum of
squares — then holds its truth in the interval its operations map those intervals to:
interval arithmetic, an enclosure of the expression's range over the box of its inputs
(never narrower, often wider). Monotone functions (ROUND, casts to integers, CEIL, FLOOR,
SQRT, GREATEST, LEAST) map the ends; a division by an interval that contains 0 can take
any value, and says so; a CASE takes the union of the branches its conditions may reach;
a product of a value with itself is a square (≥ 0), not a product of two independent
intervals. Pure, from released values and the intervals only: never from the data.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp

INFINITE = (-math.inf, math.inf)
Interval = tuple[float, float]


class NoInterval(Exception):
    """The expression is not a number dpgate can bound (text, a date, a function it does
    not know): its column gets no interval."""


@dataclass(frozen=True)
class Input:
    """A released output as an input: its interval (None: NULL; a str: a non-numeric key,
    never compared in Python, as PostgreSQL's types and collations decide) and what it
    denotes (outputs of the same noisy part are one value); `integer` when its truth is a
    whole number (a count of rows)."""

    interval: Interval | str | None
    identity: object
    integer: bool = False
    # Whether its PostgreSQL type is an integer type (bigint / bigint truncates); None:
    # not known, and a division is then bounded either way.
    whole_type: bool | None = None
    # Whether its truth may be NULL whatever was released (a SUM or an AVG of no row, or
    # one released NULL by its noisy count): IS NULL and comparisons on it are undecided.
    maybe_null: bool = False


@functools.lru_cache(maxsize=256)
def projections(post_sql: str) -> tuple[exp.Expression, ...]:
    """The select list of `post_sql`, in the order of the visible outputs."""
    tree = sqlglot.parse_one(post_sql, dialect="postgres")
    assert isinstance(tree, exp.Select)
    return tuple(p.this if isinstance(p, exp.Alias) else p for p in tree.expressions)


def inputs_of(node: exp.Expression) -> list[int]:
    """The released outputs (o_i) the expression reads, in order of first use."""
    return list(dict.fromkeys(_index(c) for c in node.find_all(exp.Column)))


def interval_of(node: exp.Expression, inputs: Callable[[int], Input]) -> Interval | None:
    """The interval of `node`'s value (None when it is NULL whatever the inputs), with
    each o_i within inputs(i); NoInterval when it has no numeric interval."""
    value = _Evaluate(inputs).value(node)
    if isinstance(value, str):
        raise NoInterval("a text value")
    return value


def _index(column: exp.Column) -> int:
    name = column.name
    if not (name.startswith("o") and name[1:].isdigit()):
        raise NoInterval(f"{name} is not a released value")
    return int(name[1:])


Value = Interval | str | None  # an interval, a text, or NULL


@dataclass(frozen=True)
class _Evaluate:
    inputs: Callable[[int], Input]

    def value(self, node: exp.Expression) -> Value:
        value = self._value(node)
        if isinstance(value, tuple) and (math.isnan(value[0]) or math.isnan(value[1])):
            # ∞ − ∞ and the like: an end that says nothing is as far as it can be.
            return (-math.inf if math.isnan(value[0]) else value[0],
                    math.inf if math.isnan(value[1]) else value[1])
        return value

    def _value(self, node: exp.Expression) -> Value:
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        if isinstance(node, exp.Column):
            return self.inputs(_index(node)).interval
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Literal):
            return node.this if node.is_string else (float(node.this), float(node.this))
        if isinstance(node, exp.Case) and node.this is None:
            return self._case(node)
        if isinstance(node, (exp.Greatest, exp.Least)):
            return self._extreme(node)
        if isinstance(node, exp.Coalesce):
            return _union([self.number(e) for e in [node.this, *node.expressions]])
        if isinstance(node, exp.Cast):
            return self._cast(node)
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            return self._arithmetic(node)
        return self._function(node)

    def number(self, node: exp.Expression) -> Interval | None:
        value = self.value(node)
        if isinstance(value, str):
            raise NoInterval("a text value in arithmetic")
        return value

    def _arithmetic(self, node: exp.Binary) -> Interval | None:
        if isinstance(node, exp.Mul) and self._same(node.this, node.expression):
            operand = self.number(node.this)
            return None if operand is None else _square(operand)
        left, right = self.number(node.this), self.number(node.expression)
        if left is None or right is None:
            return None
        if isinstance(node, exp.Add):
            return left[0] + right[0], left[1] + right[1]
        if isinstance(node, exp.Sub):
            return left[0] - right[1], left[1] - right[0]
        if isinstance(node, exp.Mul):
            return _ends([a * b for a in left for b in right])
        if right[0] <= 0 <= right[1]:
            return INFINITE  # a divisor that may be 0 (or near it) says nothing
        quotient = _ends([a / b for a in left for b in right])
        # PostgreSQL's integer division truncates toward 0, a monotone map; where the
        # operands' types are not known, the value lies within the real quotient's
        # interval widened to its truncations either way.
        whole = self._whole(node)
        if whole is False:
            return quotient
        truncated = _trunc(quotient[0]), _trunc(quotient[1])
        return truncated if whole else (min(quotient[0], truncated[0]),
                                        max(quotient[1], truncated[1]))

    def _whole(self, node: exp.Expr) -> bool | None:
        """Whether PostgreSQL computes `node` in an integer type (None: not known)."""
        if isinstance(node, exp.Paren):
            return self._whole(node.this)
        if isinstance(node, exp.Column):
            return self.inputs(_index(node)).whole_type
        if isinstance(node, exp.Literal):
            return None if node.is_string else node.this.isdigit()
        if isinstance(node, (exp.Neg, exp.Abs)):
            return self._whole(node.this)
        if isinstance(node, exp.Cast):
            return str(getattr(node.args["to"].this, "value", "")).lower() in _INTEGER_CASTS
        if isinstance(node, (exp.Round, exp.Sqrt)):
            return False
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            kinds = [self._whole(node.this), self._whole(node.expression)]
            # An integer beside a numeric or a float is computed as the latter.
            return False if False in kinds else None if None in kinds else True
        return None

    def _same(self, left: exp.Expression, right: exp.Expression) -> bool:
        """Both operands the same released value (a variance's sum times itself)."""
        left, right = _unparen(left), _unparen(right)
        if isinstance(left, exp.Column) and isinstance(right, exp.Column):
            return self.inputs(_index(left)).identity == self.inputs(_index(right)).identity
        return left == right

    def _case(self, node: exp.Case) -> Value:
        reached: list[Value] = []
        for branch in node.args.get("ifs", []):
            holds = self._condition(branch.this)
            if holds is not False:
                reached.append(self._narrowed(branch.this).value(branch.args["true"]))
            if holds is True:
                return _union(reached)
        default = node.args.get("default")
        reached.append(None if default is None else self.value(default))
        return _union(reached)

    def _narrowed(self, condition: exp.Expression) -> _Evaluate:
        """The inputs as a branch sees them: `o > c` (or `>=`, within an AND) holds
        there, so o's interval starts at c (past it, for a whole number: a variance's
        `n > 1` makes its divisor n − 1 at least 1, not an interval holding 0)."""
        floors: dict[object, float] = {}
        for test in _conjuncts(condition):
            column = _unparen(test.this)
            if isinstance(test, (exp.GT, exp.GTE)) and isinstance(column, exp.Column):
                floor = self.value(test.expression)
                if not isinstance(floor, tuple):
                    continue
                given = self.inputs(_index(column))
                step = 1.0 if isinstance(test, exp.GT) and given.integer else 0.0
                # o > e holds for e's truth, which is only known to be ≥ e's lower end
                low = math.floor(floor[0]) + step if given.integer else floor[0]
                floors[given.identity] = max(floors.get(given.identity, -math.inf), low)
        if not floors:
            return self

        def inputs(index: int) -> Input:
            given = self.inputs(index)
            low = floors.get(given.identity)
            if low is None or not isinstance(given.interval, tuple) or \
                    given.interval[1] < low:
                return given
            return replace(given, interval=(max(given.interval[0], low), given.interval[1]))
        return _Evaluate(inputs)

    def _condition(self, node: exp.Expression) -> bool | None:
        """True or False when the condition holds or fails for every value within the
        inputs' intervals (NULL fails, as in a CASE), None when it may go either way."""
        if isinstance(node, exp.Paren):
            return self._condition(node.this)
        if isinstance(node, exp.Not):
            inner = self._condition(node.this)
            return None if inner is None else not inner
        if isinstance(node, (exp.And, exp.Or)):
            left, right = self._condition(node.this), self._condition(node.expression)
            if isinstance(node, exp.And):
                return False if False in (left, right) else \
                    True if left is True and right is True else None
            return True if True in (left, right) else \
                False if left is False and right is False else None
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            null = self.value(node.this) is None
            if not null and self._nullable(node.this):
                return None
            return not null if node.args.get("negate") else null
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ, exp.NEQ)):
            this, other = self.value(node.this), self.value(node.expression)
            if this is not None and other is not None and \
                    (self._nullable(node.this) or self._nullable(node.expression)):
                return None  # NULL fails where a value might hold
            if isinstance(this, str) or isinstance(other, str):
                # Text is compared by PostgreSQL's types and collations ('2024-03-01'
                # equals a timestamptz at midnight), not Python's: undecided, except a
                # key against itself.
                same = isinstance(this, str) and self._same(node.this, node.expression)
                return None if not same else isinstance(node, (exp.EQ, exp.GTE, exp.LTE))
            return _compare(node, this, other)
        raise NoInterval(f"a condition dpgate cannot decide: {node.sql(dialect='postgres')[:40]}")

    def _nullable(self, node: exp.Expression) -> bool:
        """Whether `node` reads a value whose truth may be NULL (an over-estimate)."""
        return any(self.inputs(i).maybe_null for i in inputs_of(node))

    def _extreme(self, node: exp.Expression) -> Interval | None:
        """GREATEST and LEAST ignore NULLs and are monotone in each argument."""
        spans = [s for s in (self.number(e) for e in [node.this, *node.expressions])
                 if s is not None]
        if not spans:
            return None
        pick = max if isinstance(node, exp.Greatest) else min
        return pick(lo for lo, _ in spans), pick(hi for _, hi in spans)

    def _cast(self, node: exp.Cast) -> Value:
        target = node.args["to"]
        name = str(getattr(target.this, "value", "")).lower()
        if name not in _NUMBER_CASTS:
            raise NoInterval(f"a cast to {target.sql(dialect='postgres')}")
        value = self.number(node.this)
        if value is None:
            return None
        if name in _INTEGER_CASTS:
            return _rounded(value, 0)
        if len(target.expressions) > 1:  # numeric(p, s) rounds to s digits
            return _rounded(value, int(target.expressions[1].this.this))
        if target.expressions and name == "decimal":  # numeric(p): to whole numbers
            return _rounded(value, 0)
        return value

    def _function(self, node: exp.Expression) -> Interval | None:
        if isinstance(node, exp.Neg):
            value = self.number(node.this)
            return None if value is None else (-value[1], -value[0])
        if isinstance(node, exp.Abs):
            value = self.number(node.this)
            if value is None:
                return None
            low = 0.0 if value[0] <= 0 <= value[1] else min(abs(value[0]), abs(value[1]))
            return low, max(abs(value[0]), abs(value[1]))
        if isinstance(node, exp.Sqrt):
            value = self.number(node.this)
            # The truth under a square root is ≥ 0 (a variance): the lower end too.
            return None if value is None else (
                math.sqrt(max(value[0], 0.0)), math.sqrt(max(value[1], 0.0)))
        if isinstance(node, exp.Round):
            value = self.number(node.this)
            places = node.args.get("decimals")
            digits = 0 if places is None else _constant(places)
            return None if value is None else _rounded(value, digits)
        if isinstance(node, (exp.Ceil, exp.Floor)):
            value = self.number(node.this)
            step = math.ceil if isinstance(node, exp.Ceil) else math.floor
            return None if value is None else (_finite(step, value[0]), _finite(step, value[1]))
        if isinstance(node, exp.Nullif):
            return self.number(node.this)  # or NULL, which has no error to state
        raise NoInterval(f"{node.sql(dialect='postgres')[:40]} has no interval dpgate derives")


_INTEGER_CASTS = frozenset({"bigint", "int", "smallint"})
_NUMBER_CASTS = _INTEGER_CASTS | {"decimal", "double", "float", "money"}


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    node = _unparen(node)
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _ends(values: list[float]) -> Interval:
    values = [0.0 if math.isnan(v) else v for v in values]  # 0·∞: the product is 0
    return min(values), max(values)


def _square(value: Interval) -> Interval:
    lo, hi = value
    low = 0.0 if lo <= 0 <= hi else min(lo * lo, hi * hi)
    return low, max(lo * lo, hi * hi)


def _union(values: list[Value]) -> Value:
    """Any of the values (NULLs left out: a NULL answer has no error to state)."""
    texts = [v for v in values if isinstance(v, str)]
    numbers = [v for v in values if isinstance(v, tuple)]
    if texts:
        if numbers or any(v != texts[0] for v in texts):
            raise NoInterval("a text value")
        return texts[0]
    if not numbers:
        return None
    return min(v[0] for v in numbers), max(v[1] for v in numbers)


def _compare(node: exp.Expression, left: Interval | None, right: Interval | None
             ) -> bool | None:
    if left is None or right is None:
        return False
    (a, b), (c, d) = left, right
    if isinstance(node, (exp.GT, exp.LTE)):
        result = True if a > d else False if b <= c else None
        return result if isinstance(node, exp.GT) or result is None else not result
    if isinstance(node, (exp.GTE, exp.LT)):
        result = True if a >= d else False if b < c else None
        return result if isinstance(node, exp.GTE) or result is None else not result
    equal = True if a == b == c == d else False if b < c or d < a else None
    return equal if isinstance(node, exp.EQ) or equal is None else not equal


def _trunc(value: float) -> float:
    return float(math.trunc(value)) if math.isfinite(value) else value


def _finite(step: Callable[[float], int], value: float) -> float:
    return float(step(value)) if math.isfinite(value) else value


def _rounded(value: Interval, digits: int) -> Interval:
    """Where a value within `value` lands once rounded to `digits` places: rounding is
    monotone, and a half rounds up or down by type (numeric away from zero, float8 to
    even), so the lower end rounds halves down and the upper end up."""
    scale = 10.0 ** digits
    lo, hi = value
    return (math.ceil(lo * scale - 0.5) / scale if math.isfinite(lo) else lo,
            math.floor(hi * scale + 0.5) / scale if math.isfinite(hi) else hi)


def _constant(node: exp.Expression) -> int:
    node = _unparen(node)
    if isinstance(node, exp.Literal) and not node.is_string:
        return int(node.this)
    raise NoInterval("ROUND to a number of places that is not a constant")
