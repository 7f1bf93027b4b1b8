"""The bounds of a value an aggregate sums: a column's declared bounds (or its numeric
domain), a CASE of columns and constants, an expression by interval arithmetic
(aggregate_args.py), and the centred values and squares dpgate writes itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ..analysis.arithmetic import TOTAL
from ..errors import missing_setting, policy_refusal, unsupported
from ..policy.model import Domain, RangeDomain, ValuesDomain
from ..sql.nodes import number, unparen
from .aggregate_args import NoBounds, interval
from .scope import Scope

# Marks the x − m that dpgate writes to centre a sum (centred).
CENTRED = "dpgate_centred"


@dataclass(frozen=True)
class ValueBounds:
    scope: Scope

    def of_aggregate(self, node: exp.Expression, position: int | None
                     ) -> tuple[float, float]:
        assert isinstance(node, exp.Func)  # an aggregate call
        if isinstance(node.this, exp.Distinct):
            raise unsupported(f"{node.sql_name()}(DISTINCT …) is not supported",
                              position=position)
        return self.of_value(node.this, node.sql_name(), position)

    def of_value(self, argument: exp.Expression, what: str, position: int | None
                 ) -> tuple[float, float]:
        centred = centred_value(argument)
        if centred is not None:  # x − m that dpgate wrote: x's bounds, shifted
            value, centre = centred
            lo, hi = self.of_value(value, what, position)
            return lo - centre, hi - centre
        if isinstance(argument, exp.Case) and plain_case(argument):
            return self._case(argument, what, position)
        square = squared_value(argument)
        if square is not None:  # the sum of squares of a variance
            lo, hi = self.of_value(square, what, position)
            low = 0.0 if lo <= 0 <= hi else min(lo * lo, hi * hi)
            return low, max(lo * lo, hi * hi)
        if not isinstance(argument, exp.Column):
            return self._expression(argument, what, position)
        return self.of_column(argument, what, position)

    def _expression(self, argument: exp.Expression, what: str, position: int | None
                    ) -> tuple[float, float]:
        """An expression of columns with declared bounds: by interval arithmetic
        (aggregate_args.py), which the rewrite then clamps its columns for."""
        try:
            return interval(argument, self.columns(what, position), self.types)
        except NoBounds as missing:
            raise unsupported(f"{what} takes a column with declared bounds, or +, -, *, "
                              "a division or modulo by a constant, casts to numbers, CASE, "
                              f"COALESCE, LEAST, GREATEST or abs of them: {missing}",
                              position=position) from None

    def columns(self, what: str, position: int | None
                ) -> Callable[[exp.Column], tuple[float, float]]:
        return lambda column: self.of_column(column, what, position)

    def types(self, column: exp.Column) -> str | None:
        """The column's type (the catalog's), which tells integer division apart."""
        return self.scope.analyzer.resolver.type_of(column, self.scope.relation)

    def _case(self, case: exp.Case, what: str, position: int | None) -> tuple[float, float]:
        """sum(CASE WHEN … THEN 1 ELSE 0 END): the bounds span the branches' values, each
        a constant or a column with declared bounds (a NULL branch adds nothing)."""
        spans = []
        branches = [i.args.get("true") for i in case.args.get("ifs", [])] + \
            [case.args.get("default")]
        for branch in (unparen(b) for b in branches if b is not None):
            if isinstance(branch, exp.Null):
                continue
            if isinstance(branch, exp.Column):
                spans.append(self.of_column(branch, what, position))
                continue
            value = number(branch)
            if value is None:
                raise unsupported(f"{what}(CASE …) takes constants or columns with declared "
                                  "bounds in its branches", position=position)
            spans.append((value, value))
        if not spans:
            raise unsupported(f"{what}(CASE …) has no value to sum", position=position)
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)

    def of_column(self, argument: exp.Column, what: str, position: int | None
                  ) -> tuple[float, float]:
        origin = self.scope.resolve(argument).origin
        rule = self.scope.policy.column(*origin) if origin else None
        bounds = (rule.bounds or _domain_bounds(rule.domain)) if rule else None
        if bounds is None:
            column = f"{origin[0]}.{origin[1]}" if origin else "the column"
            raise policy_refusal(
                f"{what}({argument.sql(dialect='postgres')}) needs declared bounds for the "
                "column", hint=f"count(…) needs no bounds; for {what}, ask the data owner for "
                f"bounds of {column}.", position=position,
                reason=missing_setting(*origin, "bounds") if origin else "no bounds")
        return bounds


def _domain_bounds(domain: Domain | None) -> tuple[float, float] | None:
    """A numeric declared domain bounds its column too (MIN/MAX over it)."""
    if isinstance(domain, RangeDomain) and isinstance(domain.low, int):
        return float(domain.low), float(domain.high)  # type: ignore[arg-type]
    if isinstance(domain, ValuesDomain) and domain.values and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in domain.values):
        numbers = [float(v) for v in domain.values]  # type: ignore[arg-type]
        return min(numbers), max(numbers)
    return None


def centred(value: exp.Expression, centre: float) -> exp.Paren:
    """(CAST(value AS numeric) − centre): exact, and clamping it to [lo − m, hi − m] is
    clamping value to [lo, hi], then subtracting m (rewrite.py clamps the argument)."""
    difference = exp.Sub(this=exp.cast(value.copy(), "numeric"),
                         expression=exp.Literal.number(repr(centre)))
    difference.meta[CENTRED] = True
    difference.meta[TOTAL] = True  # numeric − a constant cannot fail
    return exp.Paren(this=difference)


def centred_value(node: exp.Expression) -> tuple[exp.Expression, float] | None:
    """(value, m) of a (CAST(value AS numeric) − m) that centred wrote."""
    node = unparen(node)
    if not (isinstance(node, exp.Sub) and node.meta.get(CENTRED)):
        return None
    cast_value, centre = node.this, node.expression
    assert isinstance(cast_value, exp.Cast) and isinstance(centre, exp.Literal)
    return cast_value.this, float(centre.this)


def squared_value(node: exp.Expression) -> exp.Expression | None:
    """v in v * v, v a centred value (centred) or a column (CAST(x AS numeric) * …)."""
    if not isinstance(node, exp.Mul):
        return None
    factors = [unparen(f) for f in (node.this, node.expression)]
    if all(f.meta.get(CENTRED) for f in factors):
        return factors[0] if factors[0] == factors[1] else None
    factors = [f.this if isinstance(f, exp.Cast) else f for f in factors]
    if all(isinstance(f, exp.Column) for f in factors) and factors[0] == factors[1]:
        return factors[0]
    return None


def bounded_expression(argument: exp.Expression) -> bool:
    """A SUM/AVG argument bounded by interval arithmetic (aggregate_args.py): not a plain
    column, nor a CASE of columns and constants, nor the centred values and squares dpgate
    writes itself for averages and variances."""
    return not isinstance(argument, (exp.Column, exp.Star, exp.Distinct)) and \
        squared_value(argument) is None and centred_value(argument) is None and \
        not (isinstance(argument, exp.Case) and plain_case(argument))


def plain_case(case: exp.Case) -> bool:
    """A CASE whose branches are columns, constants or NULL (bounded as a whole)."""
    branches = [i.args.get("true") for i in case.args.get("ifs", [])] + \
        [case.args.get("default")]
    return all(isinstance(b, (exp.Column, exp.Null)) or number(b) is not None
               for b in (unparen(b) for b in branches if b is not None))
