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
