"""Checks for statements that read only catalogs and public tables (relayed as they are).

Catalogs describe the schema, which is public, but a few of their relations and columns
hold statistics about the rows of private tables. Those are refused here; the relay role's
own missing privileges are the second line of defence.
"""

from __future__ import annotations

from sqlglot import exp

from .errors import policy_refusal
from .positions import position_of

STATISTICS_RELATIONS = frozenset({
    "pg_statistic", "pg_statistic_ext_data", "pg_stats", "pg_stats_ext",
    "pg_stats_ext_exprs", "pg_largeobject",
})
STATISTICS_PREFIXES = ("pg_stat_", "pg_statio_")
# Columns of pg_class that estimate how many rows a table has.
ROW_ESTIMATE_COLUMNS = frozenset({"reltuples", "relpages", "relallvisible"})


def check_catalog_query(tree: exp.Expression, tables: list[exp.Table], offset: int) -> None:
    """Refuse catalog reads that reveal statistics about private rows."""
    class_aliases: set[str] = set()
    for table in tables:
        name = table.name.lower()
        if name in STATISTICS_RELATIONS or name.startswith(STATISTICS_PREFIXES):
            raise policy_refusal(
                f"{name} is refused: it holds statistics about private rows",
                position=position_of(table, offset),
            )
        if name == "pg_class":
            class_aliases.add((table.alias_or_name).lower())
    if not class_aliases:
        return
    for column in tree.find_all(exp.Column):
        name = column.name.lower()
        if name in ROW_ESTIMATE_COLUMNS:
            raise policy_refusal(
                f"pg_class.{name} is refused: it estimates the size of private tables",
                hint="Select the other pg_class columns by name.",
                position=position_of(column, offset),
            )
        if not column.table and name in class_aliases:
            raise policy_refusal(
                "a whole pg_class row is refused: it includes row estimates",
                hint="Select the pg_class columns you need by name.",
                position=position_of(column, offset),
            )
    for star in tree.find_all(exp.Star):
        if isinstance(star.parent, exp.Count):
            continue
        raise policy_refusal(
            "SELECT * over pg_class is refused: it includes row estimates (reltuples)",
            hint="Select the pg_class columns you need by name.",
            position=position_of(star, offset),
        )
