"""Which groups a GROUP BY releases: every key of the declared domains (a histogram of at
most max_cells cells), or the groups whose noisy count passes key selection's threshold.
"""

from __future__ import annotations

import math
from typing import cast

from sqlglot import exp

from ..errors import missing_setting, policy_refusal, unsupported
from ..plan import Grouping
from ..policy.model import ColumnDomain, Domain, Policy
from ..sensitivity.metrics import quote_identifier
from .released import Released
from .scope import Scope

CELLS_HINT = ("Group by fewer columns, or keep fewer keys with WHERE (IN (…), BETWEEN); the "
              "limit is the data owner's (max_cells).")


def grouping(released: Released, unit_mode: bool
             ) -> tuple[Grouping | None, list[Domain | None], str | None]:
    """The grouping, each key's domain (None under key selection), and the SQL that counts
    a histogram's cells when a public table supplies a domain (see cells_sql)."""
    scope, keys = released.scope, released.keys.keys
    if not keys:
        return None, [], None
    domains = [scope.domain(resolved) for resolved, _ in keys]
    declared = [domain for domain in domains if domain is not None]
    if len(declared) == len(domains):
        size: int | None = 1
        for known in declared:
            size = None if size is None or known.size is None else size * known.size
        cells = cells_sql(scope, declared, scope.tree.args["group"])
        return Grouping(len(keys), key_selection=False, domain_size=size), domains, cells
    for (resolved, column), domain in zip(keys, domains, strict=True):
        origin = resolved.origin
        if origin is None:
            raise unsupported(
                f"GROUP BY {column.sql(dialect='postgres')}: a computed column has no "
                "public domain", hint="Group by a column with a declared domain.",
                position=scope.position(column))
        if domain is None and not scope.policy.column(*origin).key_selection:
            raise policy_refusal(
                f"GROUP BY {column.sql(dialect='postgres')} would reveal which groups "
                f"exist: {origin[0]}.{origin[1]} has no declared public domain (policy "
                "setting domain, or key_selection)",
                hint="Group by a column with a declared domain (SHOW dp.policy lists them), "
                f"or ask the data owner for a domain or key selection on {origin[0]}."
                f"{origin[1]}.", position=scope.position(column),
                reason=missing_setting(*origin, "domain") + " (or key_selection)")
    if scope.relation.stability.depends_on_k and not unit_mode:
        raise unsupported("key selection over joins of private tables is not supported",
                          hint="Declare a domain for the grouped column.",
                          position=scope.position(scope.tree.args["group"]))
    return Grouping(len(keys), key_selection=True,
                    selection_part=released.selection_part()), [None] * len(keys), None


def occupied_by(released: Released, groups: Grouping | None, always: bool) -> int | None:
    """Over a whole declared domain, the output holding COUNT(*) when the statement
    orders or limits its groups (or `always`): PostgreSQL ranks the groups that exist,
    so a group whose released count is ≤ 0 is dropped first (post-processing of
    released values only). Under LIMIT or OFFSET (which keys come back depends on it)
    a statement that selects no COUNT(*) gets a hidden one, which takes its share of
    ε. Without ORDER BY or LIMIT the whole domain is listed, as documented."""
    if groups is None or groups.key_selection:
        return None
    tree = released.scope.tree
    limited = any(tree.args.get(c) is not None for c in ("limit", "offset"))
    counted = next((index for index, output in enumerate(released.outputs)
                    if output.aggregate == "count" and
                    _is_count_star(released.parts[output.parts[0]].node)), None)
    if counted is not None and (always or limited or tree.args.get("order")):
        return counted
    return released.hidden_aggregate(exp.Count(this=exp.Star())) \
        if always or limited else None


def _is_count_star(node: exp.Expression) -> bool:
    return isinstance(node, exp.Count) and isinstance(node.this, exp.Star)


def cells_sql(scope: Scope, domains: list[Domain], node: exp.Expression) -> str | None:
    """Refuse a histogram of more than max_cells; when a public table supplies a domain,
    its size is known only to the database: the SQL returned has the proxy count it
    first, before any charge (proxy/engine/plan_check.py runs it)."""
    policy = scope.policy
    sizes = [domain.size for domain in domains]
    if all(size is not None for size in sizes):
        cells = math.prod(size for size in sizes if size is not None)
        if cells > policy.max_cells:
            raise policy_refusal(too_many_cells(cells, policy.max_cells),
                                 hint=CELLS_HINT, position=scope.position(node),
                                 reason="histogram larger than policy setting max_cells")
        return None
    if all(size is not None or isinstance(d, ColumnDomain) for d, size in
           zip(domains, sizes, strict=True)):
        factors = [str(size) if size is not None else
                   _distinct_count(cast(ColumnDomain, d), policy)
                   for d, size in zip(domains, sizes, strict=True)]
        return f"SELECT {' * '.join(factors)}"
    return None


def too_many_cells(cells: int, limit: int) -> str:
    return f"the histogram would have {cells} cells, more than the {limit} the policy allows"


def _distinct_count(domain: ColumnDomain, policy: Policy) -> str:
    """How many keys a public column supplies, counted up to one past max_cells."""
    schema, table = (quote_identifier(p) for p in domain.table.split(".", 1))
    column = quote_identifier(domain.column)
    return (f"(SELECT count(*) FROM (SELECT DISTINCT {column} FROM {schema}.{table} "
            f"WHERE {column} IS NOT NULL LIMIT {policy.max_cells + 1}) AS d)")
