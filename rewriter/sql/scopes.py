"""Which table references of a statement name a CTE rather than a real table."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, traverse_scope


def cte_reference_ids(tree: exp.Expression) -> set[int]:
    """The ids of the table nodes that name a CTE in their own scope.

    Resolved per scope, because a CTE may share its name with a private table that another
    part of the query reads. Anything not proven to be a CTE counts as a real table.
    """
    try:
        scopes = traverse_scope(tree)
    except (OptimizeError, ValueError):
        return set()
    return {
        id(table)
        for scope in scopes
        for table in scope.tables
        if not table.db and isinstance(scope.sources.get(table.alias_or_name), Scope)
    }


def real_tables(tree: exp.Expression) -> list[exp.Table]:
    """The table references of `tree` that name a real table: not a CTE in their scope,
    not a function in FROM."""
    ctes = cte_reference_ids(tree)
    return [table for table in tree.find_all(exp.Table)
            if isinstance(table.this, exp.Identifier) and id(table) not in ctes]
