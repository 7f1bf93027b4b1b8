"""Aggregates answered by the exponential mechanism (McSherry & Talwar 2007): which output asks
for one, and over which column.

`mode() WITHIN GROUP (ORDER BY c)` picks a key of c's public domain; MIN, MAX, `median`
and `percentile_cont`/`percentile_disc(p) WITHIN GROUP (ORDER BY x)` pick a point of a
grid of x's declared bounds (MIN is the quantile p = 0, MAX p = 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from mechanisms.exponential import quantile_level

from ..errors import unsupported
from ..sql.positions import position_of

_PERCENTILES = {exp.PercentileCont: "percentile_cont", exp.PercentileDisc: "percentile_disc"}


@dataclass(frozen=True)
class ChoiceSpec:
    """One output answered by the exponential mechanism, as the query wrote it."""

    aggregate: str  # mode, min, max, percentile_cont, percentile_disc
    column: exp.Column
    level: Fraction | None  # the quantile p; None for a mode
    written: str = ""  # the function as the analyst wrote it, when another (median)

    @property
    def name(self) -> str:
        """The aggregate's name as the statement wrote it, for messages."""
        return self.written or self.aggregate

    @property
    def kind(self) -> str:
        """"mode" or "quantile": which candidates the backend counts."""
        return "mode" if self.aggregate == "mode" else "quantile"


def choice_spec(node: exp.Expression, offset: int) -> ChoiceSpec | None:
    """The choice an output expression asks for; None when it is not such an aggregate.

    Raises Refusal for a malformed one (DISTINCT, a computed argument, a level that is
    not a constant in [0, 1]).
    """
    position = position_of(node, offset)
    if isinstance(node, (exp.Min, exp.Max)):
        name = "min" if isinstance(node, exp.Min) else "max"
        if node.expressions:
            raise unsupported(f"{name.upper()} takes one column", position=position)
        return ChoiceSpec(name, _column(node.this, name, position),
                          Fraction(0 if name == "min" else 1))
    if isinstance(node, exp.Median):
        return ChoiceSpec("percentile_cont", _column(node.this, "median", position),
                          Fraction(1, 2), "median")
    if not isinstance(node, exp.WithinGroup):
        return None
    function, order = node.this, node.expression
    items = order.expressions if isinstance(order, exp.Order) else []
    if len(items) != 1:
        raise unsupported("WITHIN GROUP takes ORDER BY one column", position=position)
    descending = bool(items[0].args.get("desc"))
    if isinstance(function, exp.Mode):
        return ChoiceSpec("mode", _column(items[0].this, "mode", position), None)
    name = _PERCENTILES.get(type(function), "")
    if not name:
        raise unsupported(f"{function.sql(dialect='postgres')} WITHIN GROUP is not "
                          "supported: dpgate answers mode, percentile_cont and "
                          "percentile_disc", position=position)
    level = _level(function.this, name, position)
    # ORDER BY x DESC asks for the p-quantile of −x, i.e. the (1 − p)-quantile of x.
    return ChoiceSpec(name, _column(items[0].this, name, position),
                      1 - level if descending else level)


def _column(node: exp.Expression, what: str, position: int | None) -> exp.Column:
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        raise unsupported(f"{what} takes a plain column", hint="A column with declared "
                          "bounds (quantiles) or a declared domain (mode).", position=position)
    return node


def _level(node: exp.Expression | None, what: str, position: int | None) -> Fraction:
    """p as written, read to 0.1% (the public resolution of the mechanism)."""
    negative = isinstance(node, exp.Neg)
    literal = node.this if isinstance(node, exp.Neg) else node
    if not isinstance(literal, exp.Literal) or literal.is_string:
        raise unsupported(f"{what} takes one constant fraction between 0 and 1",
                          position=position)
    try:
        return quantile_level(-float(literal.this) if negative else float(literal.this))
    except ValueError:
        raise unsupported(f"{what}({literal.this}) needs a fraction between 0 and 1",
                          position=position) from None
