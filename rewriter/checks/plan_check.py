"""Check a private statement against the plan PostgreSQL itself builds for it.

dpgate's analysis reads sqlglot's tree; PostgreSQL runs its own. If the two ever disagree
on what is read (a name resolved differently, a construct the analysis misread), the
sensitivity is wrong and the noise too small. So before anything runs, the proxy asks
PostgreSQL for `EXPLAIN (VERBOSE, FORMAT JSON)` of the rewritten SQL (never shown to the
client) and this module compares it with the analysis:

- every scan of a private table must be one the analysis counted (no more scans of a table
  than it saw, times the reads of the rows dpgate's SQL makes, `expected_scans`, and no
  more than it saw in each of those reads, planned on its own: a CTE the analysis matched
  to the wrong definition shows up here);
- no node that multiplies or sees other rows: ProjectSet (a set-returning function in a
  select list), WindowAgg, a recursive union, a function in FROM other than the
  generate_series of a declared domain;
- no subquery run while rows are read (SubPlan, or an InitPlan other than a CTE's): dpgate
  computes those first (constants.py), so one here is a subquery the analysis missed.

The statement that computes those constants is checked too: it may read public tables only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from ..plan import PlanChecks
from ..policy.model import Policy
from .plan_joins import JoinKeys, join_failure

_ROW_MULTIPLIERS = {
    "ProjectSet": "a set-returning function",
    "WindowAgg": "a window function",
    "Recursive Union": "a recursive query",
    "Table Function Scan": "a table function",
    "Foreign Scan": "a foreign table",
    "Custom Scan": "a custom scan",
}
# The only function dpgate's own SQL reads in FROM: the keys of a declared range domain.
_DOMAIN_FUNCTIONS = frozenset({"generate_series"})


def plan_failure(explain: list[Mapping[str, Any]], scans: Counter[str], policy: Policy,
                 own_windows: int = 0, join_keys: JoinKeys | None = None) -> str | None:
    """Why PostgreSQL's plan of a private statement does not match the analysis, or None.

    `own_windows` is the number of window functions dpgate's contribution bounding wrote
    (bounding.py): that many WindowAgg nodes are dpgate's own; one more is not.
    `join_keys`, when given, are the join columns the analysis used (plan_joins.py).
    """
    read: Counter[str] = Counter()
    windows = 0
    for node in _nodes(explain[0]["Plan"]):
        kind = node.get("Node Type", "")
        if kind == "WindowAgg" and windows < own_windows:
            windows += 1
            continue
        if kind in _ROW_MULTIPLIERS:
            return f"PostgreSQL's plan evaluates {_ROW_MULTIPLIERS[kind]} on private rows"
        if kind == "Function Scan" and node.get("Function Name") not in _DOMAIN_FUNCTIONS:
            return f"PostgreSQL's plan reads the function {node.get('Function Name')} in FROM"
        if _runs_per_row(node):
            return "PostgreSQL's plan runs a subquery while private rows are read"
        table = _private_table(node, policy)
        if table is not None:
            read[table] += 1
    for table, times in sorted(read.items()):
        if times > scans[table]:
            return (f"PostgreSQL reads {table} {times} time(s) where dpgate's analysis saw "
                    f"{scans[table]}")
    if join_keys is not None:
        return join_failure(explain, join_keys, policy)
    return None


def expected_scans(checks: PlanChecks, read: bool = False) -> Counter[str]:
    """The scans of each private table PostgreSQL's plan may show: the analysis's, times
    the reads of the statement's rows dpgate's SQL makes (PlanChecks.reads); in one of
    those reads (`read`), the analysis's."""
    copies = 1 if read else max(1, len(checks.reads))
    return Counter({table: times * copies for table, times in Counter(checks.scans).items()})


def public_plan_failure(explain: list[Mapping[str, Any]], policy: Policy) -> str | None:
    """Why the statement computing constants is not public-only, or None."""
    for node in _nodes(explain[0]["Plan"]):
        table = _private_table(node, policy)
        if table is not None:
            return f"a value computed before the query would read the private table {table}"
    return None


def _nodes(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _runs_per_row(node: Mapping[str, Any]) -> bool:
    relationship = node.get("Parent Relationship")
    if relationship == "SubPlan":
        return True
    return relationship == "InitPlan" and not str(node.get("Subplan Name", "")).startswith("CTE ")


def _private_table(node: Mapping[str, Any], policy: Policy) -> str | None:
    relation = node.get("Relation Name")
    if relation is None:
        return None
    schema = node.get("Schema") or policy.default_schema
    return f"{schema}.{relation}" if policy.is_private(schema, relation) else None
