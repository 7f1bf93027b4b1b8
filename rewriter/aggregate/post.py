"""HAVING, ORDER BY, LIMIT and OFFSET over noisy values, applied by the proxy after noise
(PostProcess); an operand that no output releases is released as a hidden output."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..errors import unsupported
from ..plan import Comparison, Condition, PostProcess
from ..sql.nodes import unalias, unparen
from .released import Released

_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


def post_process(released: Released) -> PostProcess:
    """Raises Refusal when a clause is an expression over released values (computed_sql.py
    answers it then, or refuses it)."""
    return _Clauses(released).post_process()


@dataclass(frozen=True)
class _Clauses:
    released: Released

    def post_process(self) -> PostProcess:
        tree = self.released.scope.tree
        having = tree.args.get("having")
        order = tree.args.get("order")
        return PostProcess(
            having=self._condition(having.this) if having is not None else None,
            order=tuple(self._order_item(item) for item in order.expressions) if order else (),
            limit=self._count_clause("limit"),
            offset=self._count_clause("offset") or 0,
        )

    def _count_clause(self, key: str) -> int | None:
        node = self.released.scope.tree.args.get(key)
        if node is None:
            return None
        value = node.expression if isinstance(node, (exp.Limit, exp.Offset)) else node
        if not (isinstance(value, exp.Literal) and not value.is_string and
                value.this.isdigit()):
            raise unsupported(f"{key.upper()} takes a constant number here",
                              position=self.released.scope.position(node))
        return int(value.this)

    def _order_item(self, item: exp.Ordered) -> tuple[int, bool]:
        return self._output_index(item.this), bool(item.args.get("desc"))

    def _output_index(self, node: exp.Expression, having: bool = False) -> int:
        """The output a HAVING/ORDER BY operand refers to, adding a hidden one if needed.

        As in PostgreSQL, a bare name in ORDER BY is an output column's name first; HAVING
        sees input columns only.
        """
        released = self.released
        projections = released.scope.tree.expressions
        node = unparen(node)
        if isinstance(node, exp.Literal) and not node.is_string:
            index = int(node.this) - 1
            if 0 <= index < len(projections):
                return index
            raise unsupported(f"ORDER BY position {node.this} is not in the select list",
                              position=released.scope.position(node))
        if isinstance(node, exp.Column) and not node.table and not having:
            for index, output in enumerate(released.outputs):
                if not output.hidden and output.name.lower() == node.name.lower():
                    return index
        text = node.sql(dialect="postgres", normalize=True)
        for index, projection in enumerate(projections):
            if unalias(projection).sql(dialect="postgres", normalize=True) == text:
                return index
        hidden = released.output(node, len(released.outputs), hidden=True)
        assert hidden is not None  # only a visible expression is computed
        released.outputs.append(hidden)
        return len(released.outputs) - 1

    def _condition(self, node: exp.Expression) -> Condition | Comparison:
        node = unparen(node)
        if isinstance(node, (exp.And, exp.Or)):
            return Condition("and" if isinstance(node, exp.And) else "or",
                             (self._condition(node.this), self._condition(node.expression)))
        if isinstance(node, exp.Not):
            return Condition("not", (self._condition(node.this),))
        op = _COMPARISONS.get(type(node))
        if op is None:
            raise unsupported("HAVING supports comparisons of aggregates with constants, "
                              "joined by AND, OR and NOT",
                              position=self.released.scope.position(node))
        left, left_is_column = self._operand(node.this)
        right, right_is_column = self._operand(node.expression)
        return Comparison(op, left, right, left_is_column, right_is_column)

    def _operand(self, node: exp.Expression) -> tuple[int | float | str, bool]:
        node = unparen(node)
        if isinstance(node, exp.Literal):
            return (node.this, False) if node.is_string else (float(node.this), False)
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
            return -float(node.this.this), False
        return self._output_index(node, having=True), True
