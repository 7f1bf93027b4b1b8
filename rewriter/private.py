"""Plans for aggregates over private tables: validate, compute sensitivity, rewrite.

This first slice answers COUNT(*) and COUNT(col) over one private table with a WHERE
built from row-safe expressions. One changed row moves each count by at most 1, so the
elastic sensitivity is 1 (SPEC.md §1, a private base table has stability 1).
"""

from __future__ import annotations

from sqlglot import exp

from .errors import policy_refusal, unsupported
from .functions import ROW_SAFE_NODES, function_name
from .plan import NoisyColumn, PrivateAggregate
from .policy import Policy
from .positions import position_of

ONLY_AGGREGATES = "only aggregates of private tables are answered"


def plan_private_aggregate(tree: exp.Expression, policy: Policy, offset: int) -> PrivateAggregate:
    """Validate a query that reads private tables and rewrite it for the backend."""
    if not isinstance(tree, exp.Select):
        raise unsupported(
            f"{tree.key.upper()} over private tables is not supported",
            hint="Ask one SELECT of aggregates at a time.",
            position=position_of(tree, offset),
        )
    _refuse_unsupported_clauses(tree, offset)
    table = _single_private_table(tree, policy, offset)
    columns = tuple(
        _noisy_column(projection, index, offset)
        for index, projection in enumerate(tree.expressions)
    )
    where = tree.args.get("where")
    if where is not None:
        _check_row_expression(where.this, table, offset)

    schema, name = policy.resolve(table.db, table.name)
    source = exp.table_(name, db=schema, quoted=True)
    if table.alias:
        source = exp.alias_(source, table.alias, table=True)
    rewritten = exp.select(
        *(
            exp.alias_(_count_of(projection), f"c{i}", quoted=True)
            for i, projection in enumerate(tree.expressions)
        )
    ).from_(source)
    if where is not None:
        rewritten = rewritten.where(where.this.copy())
    return PrivateAggregate(
        sql=rewritten.sql(dialect="postgres"),
        columns=columns,
        fingerprint_text=tree.sql(dialect="postgres", normalize=True),
        tables=(f"{schema}.{name}",),
    )


def _refuse_unsupported_clauses(select: exp.Select, offset: int) -> None:
    if select.args.get("with_") or select.args.get("with"):
        raise unsupported("WITH over private tables is not supported yet",
                          position=position_of(select, offset))
    if select.args.get("distinct"):
        raise unsupported("SELECT DISTINCT over private tables is not supported",
                          position=position_of(select, offset))
    clauses = {
        "group": "GROUP BY over private tables is not supported yet",
        "having": "HAVING over private tables is not supported yet",
        "order": "ORDER BY over private aggregates is not supported yet",
        "limit": "LIMIT over private aggregates is not supported yet",
        "offset": "OFFSET over private aggregates is not supported yet",
        "windows": "WINDOW over private tables is not supported",
        "qualify": "QUALIFY is not supported",
    }
    for key, message in clauses.items():
        node = select.args.get(key)
        if node:
            raise unsupported(message, hint="Ask for COUNT(*) or COUNT(column) with a WHERE.",
                              position=position_of(node, offset) if isinstance(node, exp.Expression)
                              else None)


def _single_private_table(select: exp.Select, policy: Policy, offset: int) -> exp.Table:
    source = select.args.get("from_") or select.args.get("from")
    joins = select.args.get("joins")
    if joins:
        raise unsupported(
            "joins over private tables are not supported yet",
            hint="Count over one private table at a time.",
            position=position_of(joins[0], offset),
        )
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        raise unsupported(
            "only a private table may stand in FROM of a private aggregate",
            position=position_of(source, offset) if source is not None else None,
        )
    if not policy.is_private(table.db, table.name):
        raise unsupported("private and public tables cannot be mixed yet",
                          position=position_of(table, offset))
    return table


def _count_of(projection: exp.Expression) -> exp.Expression:
    return (projection.this if isinstance(projection, exp.Alias) else projection).copy()


def _noisy_column(projection: exp.Expression, index: int, offset: int) -> NoisyColumn:
    inner = projection.this if isinstance(projection, exp.Alias) else projection
    position = position_of(projection, offset)
    if isinstance(inner, exp.Count):
        argument = inner.this
        if isinstance(argument, exp.Distinct):
            raise unsupported("COUNT(DISTINCT …) is not supported yet", position=position)
        if not isinstance(argument, (exp.Star, exp.Column)):
            raise unsupported("COUNT takes * or a column", position=position)
        name = projection.alias if isinstance(projection, exp.Alias) else "count"
        return NoisyColumn(name=name, aggregate="count", sensitivity=1.0)
    if isinstance(inner, exp.AggFunc):
        raise unsupported(
            f"{inner.sql_name()} is not supported yet: this version answers COUNT",
            position=position,
        )
    raise policy_refusal(
        f"{ONLY_AGGREGATES}: output column {index + 1} ({projection.sql(dialect='postgres')}) "
        "would reveal rows",
        hint="Ask for an aggregate such as SELECT count(*) FROM … WHERE ….",
        position=position,
    )


def _check_row_expression(node: exp.Expression, table: exp.Table, offset: int) -> None:
    """Refuse anything in a WHERE clause that is not known to be total and side-effect free.

    Denied functions were refused already for the whole statement (classify.py).

    A cast of a constant is fine (it fails or not whatever the data); a cast of a column
    could fail on some rows only, and that failure would reveal them.
    """
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
        raise unsupported("subqueries over private tables are not supported yet",
                          position=position_of(node, offset))
    if isinstance(node, exp.Cast) and node.find(exp.Column) is None:
        return
    if isinstance(node, exp.Column) and node.table:
        names = {table.name.lower(), (table.alias or table.name).lower()}
        if node.table.lower() not in names:
            raise unsupported(f"column {node.sql(dialect='postgres')} is not from {table.name}",
                              position=position_of(node, offset))
    if not isinstance(node, ROW_SAFE_NODES):
        raise unsupported(
            f"{function_name(node) or node.key.upper()} is not allowed in a WHERE over "
            "private rows",
            hint="Use comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, IS NULL, CASE and "
            "simple functions (lower, upper, length, trim, abs, extract, coalesce).",
            position=position_of(node, offset),
        )
    for child in node.iter_expressions():
        _check_row_expression(child, table, offset)
