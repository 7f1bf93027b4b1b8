"""The last check of a query over private tables: nothing in it can fail for some rows only.

PostgreSQL evaluates an expression only when a row reaches it, so an expression that can
raise an error on some values turns the error itself into an exact, unnoised answer (a
one-bit oracle, whatever ε). The analysis in row_checks.py checks the clauses it reads; this
pass walks *every* node PostgreSQL will evaluate — CTE bodies, derived tables, DISTINCT ON,
subqueries, aggregate arguments and filters, GROUP BY — against the same allow list, so a
clause the analysis does not look at cannot slip through. What the proxy computes itself
from released values (arithmetic over aggregates, HAVING, ORDER BY, LIMIT) never reaches
PostgreSQL and is not walked. The same nodes get a bound on their work per row
(row_cost.py). The rule and its proof obligation: docs/totality.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from ..errors import unsupported
from ..sql.functions import AGGREGATE_NODES, STRUCTURE_NODES, node_failure
from ..sql.positions import position_of
from .arithmetic import TOTAL
from .buckets import DOMAIN_ONLY
from .row_cost import refuse_costly

# Top-level clauses the proxy applies to noisy values itself (post.py takes LIMIT and
# OFFSET as literal numbers only).
_PROXY_CLAUSES = frozenset({"limit", "offset"})
_MIXED_CLAUSES = frozenset({"expressions", "having", "order"})


def refuse_unsafe_nodes(tree: exp.Select, offset: int) -> None:
    """Raise a 0A000 refusal at the first node that could fail on some rows only, and a
    54000 one when their work per row is not bounded (row_cost.py)."""
    for node in _evaluated_nodes(tree):
        if _subquery_in_expression(node):
            raise unsupported("a subquery is allowed here only in WHERE, ON or the select "
                              "list of a derived table", position=position_of(node, offset))
        if isinstance(node, STRUCTURE_NODES + AGGREGATE_NODES):
            continue
        failure = node_failure(node)
        if failure is not None:
            raise unsupported(failure, hint="Use comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, "
                              "IS NULL, CASE and simple functions (lower, upper, length, trim, "
                              "extract, date_trunc, coalesce).",
                              position=position_of(node, offset))
    refuse_costly(list(evaluated_roots(tree)), offset)


def _subquery_in_expression(node: exp.Expression) -> bool:
    """A subquery evaluated when a row reaches it (constants.py computes the others first)."""
    if isinstance(node, exp.Exists) or (isinstance(node, exp.In) and node.args.get("query")):
        return True
    return isinstance(node, exp.Subquery) and not isinstance(node.parent, (exp.From, exp.Join))


def _evaluated_nodes(tree: exp.Select) -> Iterator[exp.Expression]:
    """Every node of the statement that PostgreSQL evaluates."""
    for root in evaluated_roots(tree):
        yield from _walk(root)


def evaluated_roots(tree: exp.Select) -> Iterator[exp.Expression]:
    """The subtrees of the statement that PostgreSQL evaluates (the proxy the rest)."""
    for key, value in tree.args.items():
        if key in _PROXY_CLAUSES or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, exp.Expression):
                continue
            if key in _MIXED_CLAUSES:
                yield from _sent_to_backend(item)
            else:
                yield item


def _walk(node: exp.Expression) -> Iterator[exp.Expression]:
    """Every node below `node`, but not inside the total forms arithmetic.py built nor in
    group keys evaluated on the public domain only (buckets.py)."""
    if node.meta.get(TOTAL) or node.meta.get(DOMAIN_ONLY):
        return
    yield node
    for child in node.iter_expressions():
        yield from _walk(child)


def _sent_to_backend(node: exp.Expression) -> Iterator[exp.Expression]:
    """The parts of an output, HAVING or ORDER BY item that the backend computes: whole
    aggregates (arguments and FILTER included) and aggregate-free subtrees (group keys),
    but not the arithmetic the proxy does over released aggregates."""
    if isinstance(node, AGGREGATE_NODES + (exp.Window,)) or node.find(exp.AggFunc) is None:
        yield node
        return
    for child in node.iter_expressions():
        yield from _sent_to_backend(child)
