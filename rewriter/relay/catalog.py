"""Checks for statements that read catalogs: refused, neutralised or relayed as they are.

Catalogs describe the schema, which is public, but a few of their relations and columns
hold statistics about the rows of private tables. Those that tools need (row counts) are
neutralised by neutralise.py; those that reveal values (most common values, histograms)
are refused here. The relay role's own missing privileges are the second line of defence.
"""

from __future__ import annotations

from sqlglot import exp

from ..errors import policy_refusal
from ..policy.model import Policy
from ..sql.positions import position_of
from .neutralise import STATISTICS_VIEWS, neutralise

# Column values (most common values, histograms, extended statistics) cannot be neutralised
# without breaking what the relation is for; large objects are data outside any policy.
VALUE_STATISTICS = frozenset({
    "pg_statistic", "pg_statistic_ext_data", "pg_stats", "pg_stats_ext",
    "pg_stats_ext_exprs",
})
LARGE_OBJECTS = frozenset({"pg_largeobject", "pg_largeobject_metadata"})
STATISTICS_PREFIXES = ("pg_stat_", "pg_statio_")
# Sessions of the relay role (other analysts' catalog queries) and of the reader (no query
# text for the relay role): no counts of rows, and pgAdmin's dashboard reads it.
RELAYED_STATISTICS = frozenset({"pg_stat_activity"})


def check_catalog_query(tree: exp.Expression, tables: list[exp.Table], offset: int) -> bool:
    """Refuse catalog reads that reveal private values, neutralise row counts in place.

    Returns whether `tree` was rewritten.
    """
    for table in tables:
        name = table.name.lower()
        position = position_of(table, offset)
        if name in VALUE_STATISTICS:
            raise policy_refusal(
                f"{name} is refused: it holds statistics about private rows (most common "
                "values, histograms)", position=position)
        if name in LARGE_OBJECTS:
            raise policy_refusal(f"{name} is refused: large objects are not served by dpgate",
                                 position=position)
        if name.startswith(STATISTICS_PREFIXES) and name not in STATISTICS_VIEWS and \
                name not in RELAYED_STATISTICS:
            raise policy_refusal(
                f"{name} is refused: it holds statistics about private rows",
                hint="pg_stat_*_tables, pg_stat_*_indexes, pg_statio_* and pg_stat_database "
                     "are answered with their counters neutralised.",
                position=position)
    return neutralise(tree, tables)


def refuse_catalogs_with_private(tables: list[exp.Table], policy: Policy, offset: int) -> None:
    """Refuse a statement that reads both private tables and catalogs.

    The catalog part would run as the reader role, which sees every statistic, and its
    rows could steer or join the private part (pg_class.reltuples in a filter, say).
    """
    for table in tables:
        if policy.is_catalog(table.db, table.name):
            raise policy_refusal(
                f"{table.name.lower()} is refused here: a statement that reads private "
                "tables cannot read catalogs",
                hint="Ask the catalog question and the private aggregate separately.",
                position=position_of(table, offset))
