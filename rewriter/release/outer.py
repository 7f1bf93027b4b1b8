"""A query over one aggregate subquery or CTE (post-processing): the aggregate is answered, and
the query around it runs over its released rows only.

`WITH t AS (SELECT count(*) AS n FROM orders) SELECT * FROM t` and Metabase's
`SELECT "source"."count" FROM (SELECT count(*) AS "count" FROM orders) AS "source"` read
nothing but the inner answer: the proxy runs the outer query on PostgreSQL with the
released rows as a VALUES list in place of the subquery (post-processing, no extra cost).
"""

from __future__ import annotations

from sqlglot import exp

from .computed import BoundValues, values_table

ANSWER = "__dpgate_answer__"  # the proxy puts the inner answer here


def split_outer(tree: exp.Select) -> tuple[exp.Select, str, str] | None:
    """(inner aggregate, outer SQL reading ANSWER, the inner's alias), or None when the
    statement is not a query over exactly one aggregate subquery or CTE."""
    source = tree.args.get("from_")
    if source is None or tree.args.get("joins"):
        return None
    item = source.this
    ctes = tree.args.get("with_")
    if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select) and not ctes:
        inner, alias = item.this, item.alias or "unnamed_subquery"
    elif isinstance(item, exp.Table) and not item.db and ctes is not None and \
            len(ctes.expressions) == 1 and ctes.expressions[0].alias == item.name and \
            isinstance(ctes.expressions[0].this, exp.Select) and \
            not ctes.expressions[0].args.get("alias").columns:
        inner, alias = ctes.expressions[0].this, item.alias or item.name
    else:
        return None
    if inner.args.get("group") is None and not any(
            p.find(exp.AggFunc) for p in inner.expressions):
        return None  # rows, not an aggregate: the planner reads it as a derived relation
    outer = tree.copy()
    outer.set("with_", None)
    outer.set("from_", exp.From(this=exp.to_table(ANSWER)))
    if outer.find(exp.Subquery) or [t for t in outer.find_all(exp.Table) if t.name != ANSWER]:
        return None
    return inner.copy(), outer.sql(dialect="postgres"), alias


def with_answer(sql: str, alias: str, rows: list[list[str | None]],
                columns: list[tuple[str, str]], bound: BoundValues) -> str:
    """The outer SQL reading the inner answer: `columns` are its (name, type name)."""
    table = values_table(rows, [t for _, t in columns], alias, [n for n, _ in columns], bound)
    return sql.replace(ANSWER, table, 1)
