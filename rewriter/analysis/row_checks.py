"""Expressions evaluated on private rows, checked: each node total on its inputs (so that
no error can tell anything of a row), arithmetic rewritten so that it cannot fail, and
the argument types some nodes are total for only."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..errors import PROGRAM_LIMIT_EXCEEDED, Refusal, unsupported
from ..sql.functions import (
    function_name,
    is_literal_constant,
    may_be_array,
    node_failure,
    row_failure,
)
from ..sql.positions import position_of
from .arithmetic import (
    ARITHMETIC,
    NUMBER_TYPES,
    TOTAL,
    TRUNCATIONS,
    NotTotal,
    TooCostly,
    mixes_numeric_and_float,
    total_form,
    total_trunc,
)
from .resolver import Resolver
from .row_cost import COSTLY_HINT
from .sources import Relation

EXACT_NUMBER_TYPES = NUMBER_TYPES - {"real", "double precision"}
DATETIME_TYPES = frozenset({"date", "timestamp without time zone", "timestamp with time zone"})


@dataclass(frozen=True)
class RowChecker:
    resolver: Resolver
    offset: int

    def check(self, node: exp.Expression, relation: Relation,
                             allow_aggregates: bool = False) -> None:
        """Refuse anything evaluated on private rows that could fail on some rows only.

        Every allowed node is total on its inputs, so an error cannot tell anything about a
        row (functions.node_failure); a cast or arithmetic is allowed on literals only.
        """
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists, exp.Union)):
            # Those in WHERE, ON and select lists were computed first (constants.py); one
            # here would run only when a row reaches it.
            raise unsupported("a subquery is allowed here only in WHERE, ON or the select "
                              "list of a derived table", position=position_of(node, self.offset))
        if isinstance(node, exp.Column):
            if not isinstance(node.this, exp.Star):
                self.resolver.resolve(node, relation)
            return
        if node.meta.get(TOTAL):  # built total by dpgate (a variance's sum of squares)
            return
        if isinstance(node, ARITHMETIC) and not is_literal_constant(node):
            try:
                total = total_form(node, lambda column: self.resolver.type_of(column, relation))
            except TooCostly as error:
                raise Refusal(PROGRAM_LIMIT_EXCEEDED, str(error), COSTLY_HINT,
                              position_of(node, self.offset)) from None
            except NotTotal as error:
                raise unsupported(str(error), position=position_of(node, self.offset)
                                  ) from None
            node.replace(total)
            if isinstance(total, exp.Cast):  # to text: what it casts is checked like any other
                self.check(total.this, relation, allow_aggregates)
            return
        if isinstance(node, TRUNCATIONS):
            if (failure := row_failure(node)) is not None:
                raise unsupported(failure, position=position_of(node, self.offset))
            self._check_operand_types(node, relation)
            for argument in node.iter_expressions():
                self.check(argument, relation, allow_aggregates)
            node.replace(total_trunc(node))
            return
        if allow_aggregates and isinstance(node, (exp.Count, exp.Sum, exp.Avg, exp.Min,
                                                  exp.Max, exp.Distinct)):
            pass
        elif (failure := node_failure(node)) is not None:
            raise unsupported(
                failure,
                hint="Use comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, IS NULL, CASE and "
                "simple functions (lower, upper, length, trim, extract, coalesce).",
                position=position_of(node, self.offset))
        self._check_operand_types(node, relation)
        for child in node.iter_expressions():
            self.check(child, relation, allow_aggregates)

    def _check_operand_types(self, node: exp.Expression, relation: Relation) -> None:
        """Nodes total for some argument types only: extract and date_trunc on dates and
        times (an interval or a time rejects some units, row by row), SUM and AVG on
        integers and numerics (an interval, money or float sum overflows), || and ARRAY[]
        on anything but arrays (arrays of different dimensions do not concatenate),
        comparisons and choices of a numeric with a float (the numeric is cast, and fails
        beyond the float's range). A column of unknown type passes: the proxy always
        knows the types, `dpgate explain --policy` may not."""
        if mixes_numeric_and_float(node, lambda column: self.resolver.type_of(column, relation)):
            raise unsupported("a numeric value read from a row meets a real or double "
                              "precision one: PostgreSQL casts it to the float, which fails "
                              "beyond the float's range", hint="Cast the float side to "
                              "numeric (d::numeric).", position=position_of(node, self.offset))
        if isinstance(node, (exp.Extract, exp.TimestampTrunc, exp.DateTrunc)):
            argument = node.expression if isinstance(node, exp.Extract) else node.this
            wanted, what = DATETIME_TYPES, f"{function_name(node)} on private rows"
        elif isinstance(node, (exp.Sum, exp.Avg)):
            # a float sum overflows ("value out of range: overflow"), a numeric one cannot
            argument, wanted, what = node.this, EXACT_NUMBER_TYPES, f"{node.sql_name()}()"
        elif isinstance(node, (exp.DPipe, exp.Array)):
            operands = node.expressions if isinstance(node, exp.Array) else \
                [node.this, node.expression]
            if any(may_be_array(operand, lambda column: self.resolver.type_of(column, relation)
                                == "ARRAY") for operand in operands):
                raise unsupported("arrays of arrays and || of arrays can fail on some rows "
                                  "only (their dimensions differ)",
                                  position=position_of(node, self.offset))
            return
        else:
            return
        if isinstance(argument, exp.Column):
            kind = self.resolver.type_of(argument, relation)
            if kind is not None and kind not in wanted:
                raise unsupported(f"{what} takes {' or '.join(sorted(wanted))} columns here, "
                                  f"not {kind}: it could fail on some rows only",
                                  position=position_of(node, self.offset))
