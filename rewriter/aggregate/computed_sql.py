"""Outputs, HAVING and ORDER BY that are expressions over released values: the SQL that
computes them from the released rows (post-processing, release/computed.py runs it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from ..analysis.arithmetic import TOTAL
from ..errors import Refusal, policy_refusal, unsupported
from ..plan import PostProcess
from ..release.computed import placeholder, post_sql, substitute
from ..sql.nodes import unalias
from .bounds import ValueBounds, centred
from .post import post_process
from .released import COUNTED, NO_AGGREGATE_REASON, ONLY_AGGREGATES, VARIANCES, Released


def clauses(released: Released, computed: bool) -> tuple[PostProcess, str | None]:
    """HAVING, ORDER BY and LIMIT applied by the proxy, or (when an output or one of
    them is an expression over released values) the SQL that computes the answer."""
    if not computed:
        outputs, parts = len(released.outputs), len(released.parts)
        try:
            return post_process(released), None
        except Refusal:  # an expression: computed below, or refused there
            del released.outputs[outputs:], released.parts[parts:]
    return PostProcess(), _Computed(released).sql()


@dataclass(frozen=True)
class _Computed:
    released: Released

    def sql(self) -> str:
        released = self.released
        tree = released.scope.tree
        visible = released.outputs[:len(tree.expressions)]
        projections = [exp.alias_(self._substitute(unalias(p)) if o.kind == "computed"
                                  else placeholder(i), o.name, quoted=True)
                       for i, (p, o) in enumerate(zip(tree.expressions, visible, strict=True))]
        having = tree.args.get("having")
        order = tree.args.get("order")
        for clause in ("limit", "offset"):
            self._refuse_row_reads(tree.args.get(clause), clause.upper())
        sql = post_sql(tree, projections,
                       self._substitute(having.this) if having is not None else None,
                       [self._post_order(item) for item in order.expressions] if order else [])
        if not released.parts and not len(released.keys):
            raise policy_refusal(f"{ONLY_AGGREGATES}: this statement has no aggregate and "
                                 "would return one row per private row",
                                 hint="Ask for an aggregate such as count(*).",
                                 position=released.scope.position(tree),
                                 reason=NO_AGGREGATE_REASON)
        return sql

    def _refuse_row_reads(self, node: exp.Expression | None, clause: str) -> None:
        """LIMIT and OFFSET are copied into the SQL over the released values, which runs
        on the reader connection: a subquery there would read private rows unnoised (its
        value would be the number of rows returned)."""
        if node is None:
            return
        found = node.find(exp.Subquery, exp.Select, exp.Table, exp.Column, exp.AggFunc,
                          exp.Window)
        if found is not None:
            raise unsupported(f"{clause} takes a constant or a parameter over private "
                              "aggregates", hint=f"Write the number of rows: {clause} 10 "
                              "(a count over private rows: ask it in a statement of its "
                              "own, then write its answer).",
                              position=self.released.scope.position(found))

    def _substitute(self, node: exp.Expression) -> exp.Expr:
        released = self.released
        expanded = node.copy().transform(
            lambda n: variance(n, self._centre(n)) if isinstance(n, VARIANCES) else n)
        return substitute(expanded, released.hidden_aggregate, released.hidden_key,
                          released.scope.offset, released.hidden_bucket)

    def _post_order(self, item: exp.Ordered) -> exp.Ordered:
        """An ORDER BY item over the released rows: a position, an output's name (which
        PostgreSQL looks up before input columns) as its position, or an expression."""
        ordered = item.copy()
        node = item.this
        if isinstance(node, exp.Column) and not node.table:
            visible = self.released.outputs[:len(self.released.scope.tree.expressions)]
            named = [i for i, o in enumerate(visible) if o.name == node.name]
            if named:
                ordered.set("this", exp.Literal.number(named[0] + 1))
                return ordered
        if not (isinstance(node, exp.Literal) and not node.is_string):
            ordered.set("this", self._substitute(node))
        return ordered

    def _centre(self, node: exp.Expression) -> float:
        """The midpoint of the declared bounds of a variance's column (see variance)."""
        if not isinstance(node.this, exp.Column):
            return 0.0  # refused by variance
        assert isinstance(node, exp.Func)
        lo, hi = self.released.bounds.of_column(node.this, node.sql_name(), None)
        return (lo + hi) / 2


def variance(node: exp.Expression, centre: float) -> exp.Expr:
    """var_samp, var_pop, stddev… of x from released n = count(x), and with d = x − m (m
    the bounds' midpoint) s = sum(d) and q = sum(d·d), post-processing of released values:
    (q − s²/n) / (n − 1) or / n, clamped at 0, NULL for too few rows as in PostgreSQL; the
    square root for a standard deviation. The formula does not depend on m; centred, s
    and q have sensitivities (hi − lo)/2 and ((hi − lo)/2)², not max(|lo|, |hi|) and its
    square."""
    x = node.this
    assert isinstance(node, exp.Func)  # one of VARIANCES
    if not isinstance(x, exp.Column):
        raise unsupported(f"{node.sql_name()} takes a plain column with declared bounds")
    value = centred(x, centre)
    n = exp.Count(this=x.copy())
    total = exp.Sum(this=value)
    square = exp.Mul(this=value.copy(), expression=value.copy())
    square.meta[TOTAL] = True  # numeric × numeric of a bounded column cannot fail
    squares = exp.Sum(this=square)
    total.meta[COUNTED] = squares.meta[COUNTED] = True  # NULL when n is too small, below
    # typed: PostgreSQL's own division, not a float one sqlglot would emulate.
    spread = exp.func("GREATEST", exp.Sub(this=squares, expression=exp.Div(
        this=exp.Mul(this=total, expression=total.copy()), expression=n.copy(), typed=True)),
        exp.Literal.number(0))
    population = isinstance(node, (exp.VariancePop, exp.StddevPop))
    divisor = n.copy() if population else exp.Sub(this=n.copy(), expression=exp.Literal.number(1))
    result = exp.Case(ifs=[exp.If(
        this=exp.GT(this=n.copy(), expression=exp.Literal.number(0 if population else 1)),
        true=exp.Div(this=spread, expression=exp.Paren(this=divisor), typed=True))])
    if isinstance(node, (exp.Stddev, exp.StddevSamp, exp.StddevPop)):
        return exp.func("SQRT", result)
    return result


def variance_range(node: exp.Expression, bounds: ValueBounds) -> tuple[float, float] | None:
    """What a variance of a column within [lo, hi] can take, whatever the data
    (Popoviciu): at most (hi − lo)²/4 over a population, at most twice that over a sample
    of n ≥ 2 rows (n/(n − 1) ≤ 2); its square root for a standard deviation. None for
    any other expression."""
    if not isinstance(node, VARIANCES) or not isinstance(node.this, exp.Column):
        return None
    lo, hi = bounds.of_column(node.this, node.sql_name(), None)
    population = isinstance(node, (exp.VariancePop, exp.StddevPop))
    top = (hi - lo) ** 2 / 4 * (1 if population else 2)
    if isinstance(node, (exp.Stddev, exp.StddevSamp, exp.StddevPop)):
        return 0.0, math.sqrt(top)
    return 0.0, top
