"""Answers computed from released values (post-processing, free of charge): arithmetic,
casts, ROUND, CASE and constants over noisy aggregates and group keys, in the select
list, HAVING and ORDER BY.

Every aggregate and key such an expression uses is released as an output o0, o1, … of its
own; the proxy then runs `post_sql` on PostgreSQL with the released rows as a VALUES
list in place of FROM. The expression so gets PostgreSQL's exact semantics, result types,
NULL handling and ordering, and reads no private row: post-processing, no extra cost.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ..errors import unsupported
from ..plan import branch_table
from ..sql.positions import position_of

ROWS = "__dpgate_released__"  # the proxy puts the released rows here
_NOT_RELEASED = (exp.Filter, exp.WithinGroup, exp.Window, exp.Subquery, exp.Select,
                 exp.AggFunc)


def placeholder(index: int) -> exp.Column:
    return exp.column(f"o{index}", table="r", quoted=True)


def substitute(node: exp.Expr, aggregate: Callable[[exp.Expression], int],
               key: Callable[[exp.Column], int], offset: int,
               bucket: Callable[[exp.Expression], int | None]) -> exp.Expr:
    """`node` with each COUNT/SUM/AVG, each computed group key (`bucket`, None where the
    expression is none) and each column replaced by its released output."""
    def replace(sub: exp.Expression) -> exp.Expression:
        index = bucket(sub)
        if index is not None:
            return placeholder(index)
        if isinstance(sub, (exp.Count, exp.Sum, exp.Avg)) or (
                isinstance(sub, exp.Filter) and
                isinstance(sub.this, (exp.Count, exp.Sum, exp.Avg))):
            return placeholder(aggregate(sub))
        if isinstance(sub, _NOT_RELEASED):
            raise unsupported(
                f"{sub.sql(dialect='postgres')[:60]} is not supported inside an expression "
                "over released aggregates", hint="Select it on its own, without arithmetic.",
                position=position_of(sub, offset))
        if isinstance(sub, exp.Column) and not isinstance(sub.this, exp.Star):
            return placeholder(key(sub))
        return sub
    return node.transform(replace)


def post_sql(tree: exp.Select, projections: list[exp.Expr],
             having: exp.Expr | None, order: list[exp.Ordered]) -> str:
    """The query over the released rows: the statement's own select list, HAVING (as
    WHERE), ORDER BY, LIMIT and OFFSET, with released outputs in place of aggregates."""
    query = exp.select(*projections).from_(exp.to_table(ROWS).as_("r"))
    if having is not None:
        query = query.where(having)
    if order:
        query.set("order", exp.Order(expressions=order))
    for clause in ("limit", "offset"):
        if tree.args.get(clause) is not None:
            query.set(clause, tree.args[clause].copy())
    return query.sql(dialect="postgres")


def probe(tree: exp.Select, sources: list[exp.Expression],
          keys: list[exp.Expression]) -> exp.Select:
    """The statement asking for each released output as written: described (never run)
    for PostgreSQL's type of each one. It is also all the statement evaluates on private
    rows; the rest is evaluated over released values."""
    probe = tree.copy()
    for clause in ("having", "order", "limit", "offset"):
        probe.set(clause, None)
    probe.set("expressions", [source.copy() for source in sources])
    probe.set("group", exp.Group(expressions=[key.copy() for key in keys]) if keys else None)
    return probe


def with_rows(sql: str, rows: list[list[str | None]], type_names: list[str],
              bound: BoundValues) -> str:
    """`post_sql` reading the released rows (each value cast to its PostgreSQL type)."""
    names = [f"o{i}" for i in range(len(type_names))]
    return sql.replace(f"{ROWS} AS r", values_table(rows, type_names, "r", names, bound), 1)


def branch_source(number: int) -> exp.Table:
    """The FROM item of a Composite's `combine` that with_branches fills with branch
    `number`'s released rows."""
    table = exp.to_table(branch_table(number))
    table.set("alias", exp.TableAlias(this=exp.to_identifier(f"b{number}", quoted=True)))
    return table


def with_branches(sql: str, branches: list[tuple[list[list[str | None]], list[str]]],
                  bound: BoundValues) -> str:
    """A Composite's `combine` reading each branch's released rows and type names."""
    for number, (rows, type_names) in enumerate(branches):
        source = branch_source(number).sql(dialect="postgres")
        names = [f"c{column}" for column in range(len(type_names))]
        sql = sql.replace(source, values_table(rows, type_names, f"b{number}", names, bound),
                          1)
    return sql


class BoundValues:
    """Released values bound as parameters after the statement's own ($first+1, …), never
    written into the SQL text: PostgreSQL shows a session's running or last statement in
    pg_stat_activity to every session of the same role, and the relay role that computes
    over released values is every analyst's (their relayed statements read that view)."""

    def __init__(self, first: int) -> None:
        self.first = first
        self.values: list[bytes | None] = []

    def placeholder(self, value: str | None, type_name: str) -> str:
        self.values.append(None if value is None else value.encode())
        return f"${self.first + len(self.values)}::{type_name}"


def values_table(rows: list[list[str | None]], type_names: list[str], alias: str,
                 names: list[str], bound: BoundValues) -> str:
    """A FROM item of released values, each cast to its PostgreSQL type."""
    columns = ", ".join(exp.to_identifier(name, quoted=True).sql(dialect="postgres")
                        for name in names)
    if rows:
        values = "VALUES " + ", ".join(
            "(" + ", ".join(bound.placeholder(value, name)
                            for value, name in zip(row, type_names, strict=True)) + ")"
            for row in rows)
    else:
        values = "SELECT " + ", ".join(f"NULL::{name}" for name in type_names) + " WHERE FALSE"
    quoted = exp.to_identifier(alias, quoted=True).sql(dialect="postgres")
    return f"({values}) AS {quoted}({columns})"
