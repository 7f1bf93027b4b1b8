"""The PrivateAggregate record every plan of a private aggregate ends in."""

from __future__ import annotations

from sqlglot import exp

from ..plan import (
    Grouping,
    NoisyPart,
    OutputColumn,
    PlanChecks,
    PostProcess,
    PrivateAggregate,
    UnitBounds,
)
from .bounding import window_count
from .scope import Scope
from .unit_mode import UnitMode


def plan_record(scope: Scope, mode: UnitMode, sql: str, keys: int,
                parts: tuple[NoisyPart, ...], post: PostProcess,
                outputs: tuple[OutputColumn, ...], cells_sql: str | None,
                grouping: Grouping | None = None,
                grouped_bounding: bool = False) -> PrivateAggregate:
    bounding = mode.bounding()
    relation = scope.relation
    return PrivateAggregate(
        sql=sql, keys=keys, parts=parts, outputs=outputs, grouping=grouping,
        post=post, private_tables=relation.private_tables,
        fingerprint_text=fingerprint(scope.tree, mode.bounds),
        tables=tuple(sorted(relation.base_tables)),
        postgres_sql=scope.tree.find(exp.Median) is None,
        unit=mode.bounds, row_level_reason=mode.row_level_reason,
        checks=PlanChecks(windows=0 if bounding is None or not parts else
                          window_count(bounding, grouped_bounding), cells_sql=cells_sql))


def fingerprint(tree: exp.Expression, unit: UnitBounds | None) -> str:
    """The normalized statement; in unit mode with its bounds, since another τ or κ
    makes another question (SET dp.max_contributions)."""
    text = tree.sql(dialect="postgres", normalize=True)
    if unit is None:
        return text
    return (f"{text} /* unit {unit.max_contributions} {unit.max_groups} "
            f"{unit.max_group_contributions} */")
