"""What the walk of one statement collects besides its relations: the columns whose max
frequency nobody measured yet, and what PostgreSQL's plan of the statement may show
(checks/plan_check.py, checks/plan_joins.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..checks.plan_joins import JoinKeys
from ..sensitivity.metrics import ColumnKey, MissingMetrics


@dataclass
class Findings:
    missing: set[ColumnKey] = field(default_factory=set)
    # Private base tables PostgreSQL will read (plan_check compares its plan with these).
    # A CTE body counts once, when first read from the statement: PostgreSQL drops a CTE
    # nobody reads and materializes one read twice, so counting every definition or every
    # reference would let an unused CTE over a private table hide a scan the analysis
    # resolved to something else.
    scans: Counter[str] = field(default_factory=Counter)
    # Base columns whose max frequency entered a join's sensitivity, and the column alias
    # lists read on base tables: plan_joins.py checks PostgreSQL's join columns with them.
    join_columns: set[ColumnKey] = field(default_factory=set)
    renamed: list[tuple[str, str, tuple[tuple[str, str], ...]]] = field(
        default_factory=list)
    # (key column, public domain column): dpgate's own histogram joins (rewrite.py).
    domain_joins: set[tuple[ColumnKey, ColumnKey]] = field(default_factory=set)
    # Base columns grouped on: the statement's keys and choices, derived tables' GROUP BY
    # and DISTINCT columns (PostgreSQL's Group Keys may name these only).
    group_columns: set[ColumnKey] = field(default_factory=set)

    def join_keys(self) -> JoinKeys:
        return JoinKeys(frozenset(self.join_columns), tuple(self.renamed),
                        frozenset(self.domain_joins), frozenset(self.group_columns))

    def refuse_missing(self) -> None:
        """Raise MissingMetrics if the analysis met a column nobody measured."""
        if self.missing:
            raise MissingMetrics(tuple(sorted(self.missing)))
