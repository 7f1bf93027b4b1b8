"""Neutralise catalog columns that count rows, so that tools reading them keep working.

`pg_class.reltuples/relpages/relallvisible` and the counters of the pg_stat_*/pg_statio_*
views are visible to every PostgreSQL role, the relay role included, and estimate how many
rows a private table has. BI tools read them (Metabase `n_live_tup`, pgAdmin and DBeaver
`reltuples`), so rather than refusing the statement, the relayed SQL is rewritten to return
constants of the same types: -1 for reltuples (PostgreSQL's own "never analysed"), 0 pages,
and what freshly reset statistics show (0 counters, NULL times).

pg_class keeps its real columns and only the estimates are replaced where they are named;
when its whole row is used (`*`, `c.*`, `c`, NATURAL JOIN, USING an estimate) or its
columns are renamed (`pg_class AS c(a, b, …)`), pg_class itself is replaced by a derived
table listing PostgreSQL 12-17's columns. A statistics view is always replaced by a derived
table made of its name columns and constants, so a counter dpgate does not know (a newer
PostgreSQL's) does not exist for the client rather than leak. Size functions and per-table
counter functions (psql's \\dt+, DBeaver) become NULL and 0.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

_COUNT = "CAST(0 AS BIGINT)"
_INT = "CAST(0 AS INT)"
_TIME = "CAST(NULL AS TIMESTAMPTZ)"
_SECONDS = "CAST(0 AS DOUBLE PRECISION)"

CLASS_ESTIMATES = {
    "reltuples": "CAST(-1 AS REAL)", "relpages": _INT, "relallvisible": _INT,
    "relallfrozen": _INT,  # PostgreSQL 18
}
_CLASS_COLUMNS = (
    "oid", "relname", "relnamespace", "reltype", "reloftype", "relowner", "relam",
    "relfilenode", "reltablespace", "relpages", "reltuples", "relallvisible",
    "reltoastrelid", "relhasindex", "relisshared", "relpersistence", "relkind", "relnatts",
    "relchecks", "relhasrules", "relhastriggers", "relhassubclass", "relrowsecurity",
    "relforcerowsecurity", "relispopulated", "relreplident", "relispartition", "relrewrite",
    "relfrozenxid", "relminmxid", "relacl", "reloptions", "relpartbound",
)

Columns = tuple[tuple[str, str | None], ...]  # (name, constant); None keeps the column


def _view(names: str, **constants: str) -> Columns:
    """A view's columns in PostgreSQL's order: its name columns, then its counters."""
    return tuple((name, None) for name in names.split()) + tuple(constants.items())


_TABLES = _view(
    "relid schemaname relname", seq_scan=_COUNT, last_seq_scan=_TIME, seq_tup_read=_COUNT,
    idx_scan=_COUNT, last_idx_scan=_TIME, idx_tup_fetch=_COUNT, n_tup_ins=_COUNT,
    n_tup_upd=_COUNT, n_tup_del=_COUNT, n_tup_hot_upd=_COUNT, n_tup_newpage_upd=_COUNT,
    n_live_tup=_COUNT, n_dead_tup=_COUNT, n_mod_since_analyze=_COUNT,
    n_ins_since_vacuum=_COUNT, last_vacuum=_TIME, last_autovacuum=_TIME,
    last_analyze=_TIME, last_autoanalyze=_TIME, vacuum_count=_COUNT,
    autovacuum_count=_COUNT, analyze_count=_COUNT, autoanalyze_count=_COUNT)
_XACT_TABLES = _view(
    "relid schemaname relname", seq_scan=_COUNT, seq_tup_read=_COUNT, idx_scan=_COUNT,
    idx_tup_fetch=_COUNT, n_tup_ins=_COUNT, n_tup_upd=_COUNT, n_tup_del=_COUNT,
    n_tup_hot_upd=_COUNT, n_tup_newpage_upd=_COUNT)
_TABLES_IO = _view(
    "relid schemaname relname", heap_blks_read=_COUNT, heap_blks_hit=_COUNT,
    idx_blks_read=_COUNT, idx_blks_hit=_COUNT, toast_blks_read=_COUNT,
    toast_blks_hit=_COUNT, tidx_blks_read=_COUNT, tidx_blks_hit=_COUNT)
_INDEX_NAMES = "relid indexrelid schemaname relname indexrelname"
_INDEXES = _view(_INDEX_NAMES, idx_scan=_COUNT, last_idx_scan=_TIME, idx_tup_read=_COUNT,
                 idx_tup_fetch=_COUNT)
_INDEXES_IO = _view(_INDEX_NAMES, idx_blks_read=_COUNT, idx_blks_hit=_COUNT)
_SEQUENCES_IO = _view("relid schemaname relname", blks_read=_COUNT, blks_hit=_COUNT)
_DATABASE = _view(
    "datid datname", numbackends=_INT, xact_commit=_COUNT, xact_rollback=_COUNT,
    blks_read=_COUNT, blks_hit=_COUNT, tup_returned=_COUNT, tup_fetched=_COUNT,
    tup_inserted=_COUNT, tup_updated=_COUNT, tup_deleted=_COUNT, conflicts=_COUNT,
    temp_files=_COUNT, temp_bytes=_COUNT, deadlocks=_COUNT, checksum_failures=_COUNT,
    checksum_last_failure=_TIME, blk_read_time=_SECONDS, blk_write_time=_SECONDS,
    session_time=_SECONDS, active_time=_SECONDS, idle_in_transaction_time=_SECONDS,
    sessions=_COUNT, sessions_abandoned=_COUNT, sessions_fatal=_COUNT,
    sessions_killed=_COUNT, stats_reset=_TIME)

_SCOPES = ("all", "user", "sys")
STATISTICS_VIEWS: dict[str, Columns] = {
    **{f"pg_stat_{scope}_tables": _TABLES for scope in _SCOPES},
    **{f"pg_stat_xact_{scope}_tables": _XACT_TABLES for scope in _SCOPES},
    **{f"pg_statio_{scope}_tables": _TABLES_IO for scope in _SCOPES},
    **{f"pg_stat_{scope}_indexes": _INDEXES for scope in _SCOPES},
    **{f"pg_statio_{scope}_indexes": _INDEXES_IO for scope in _SCOPES},
    **{f"pg_statio_{scope}_sequences": _SEQUENCES_IO for scope in _SCOPES},
    "pg_stat_database": _DATABASE,
}
_CLASS = tuple((name, CLASS_ESTIMATES.get(name)) for name in _CLASS_COLUMNS)

# Functions that measure relations or count their rows, read by psql (\dt+, \l+), DBeaver
# and pgAdmin: NULL sizes (PostgreSQL's answer for a relation it cannot measure) and reset
# counters. Other pg_stat_* functions stay refused (functions.py).
# Privilege checks answered for the analyst rather than for the relay role.
PRIVILEGE_CHECKS = frozenset({
    "has_table_privilege", "has_any_column_privilege", "has_column_privilege",
})
_NULL_SIZE = "CAST(NULL AS BIGINT)"
SIZE_AND_COUNT_FUNCTIONS = {
    **dict.fromkeys(("pg_relation_size", "pg_total_relation_size", "pg_table_size",
                     "pg_indexes_size", "pg_database_size", "pg_tablespace_size"), _NULL_SIZE),
    "pg_column_size": "CAST(NULL AS INT)",
    **dict.fromkeys(("pg_stat_get_numscans", "pg_stat_get_tuples_returned",
                     "pg_stat_get_tuples_fetched", "pg_stat_get_tuples_inserted",
                     "pg_stat_get_tuples_updated", "pg_stat_get_tuples_deleted",
                     "pg_stat_get_live_tuples", "pg_stat_get_dead_tuples",
                     "pg_stat_get_blocks_fetched", "pg_stat_get_blocks_hit"), _COUNT),
}


def neutralise(tree: exp.Expression, tables: list[exp.Table]) -> bool:
    """Rewrite `tree` in place so that row counts come back as constants.

    `tables` are the statement's real table references (CTE names excluded). Returns
    whether anything changed, so that unchanged statements keep their exact text.
    """
    changed = False
    for call in list(tree.find_all(exp.Anonymous)):
        name = call.name.lower()
        if name in PRIVILEGE_CHECKS:
            changed |= _select_as_analysts_see_it(call)
        elif name in SIZE_AND_COUNT_FUNCTIONS:
            # pg_catalog.f(x) is a Dot around the call: replace the whole reference.
            qualified = isinstance(call.parent, exp.Dot) and call.arg_key == "expression"
            target = call.parent if qualified and call.parent is not None else call
            _replace(target, SIZE_AND_COUNT_FUNCTIONS[name], name)
            changed = True
    classes: set[str] = set()
    for table in tables:
        name = table.name.lower()
        if name in STATISTICS_VIEWS:
            _replace_relation(tree, table, STATISTICS_VIEWS[name])
            changed = True
        elif name == "pg_class":
            classes.add(table.alias_or_name.lower())
            if _whole_row_used(tree, table):
                _replace_relation(tree, table, _CLASS)
                changed = True
    if not classes:
        return changed
    for column in list(tree.find_all(exp.Column)):
        constant = CLASS_ESTIMATES.get(column.name.lower())
        # An unqualified estimate name is taken for pg_class's: neutralising a same-named
        # column of another relation costs nothing, missing pg_class's would leak.
        if constant and (not column.table or column.table.lower() in classes):
            _replace(column, constant, column.this.copy())
            changed = True
    return changed


def _select_as_analysts_see_it(call: exp.Anonymous) -> bool:
    """has_table_privilege(…, 'SELECT') → (…, 'SELECT, REFERENCES').

    The relay role holds only REFERENCES on private tables, which analysts can query
    (through aggregates); tools such as Metabase list only tables that pass a SELECT
    check. PostgreSQL answers true when any privilege of the list is held.
    """
    wanted = call.expressions[-1] if call.expressions else None
    if not isinstance(wanted, exp.Literal) or not wanted.is_string:
        return False
    privileges = wanted.this.lower()
    if "select" not in privileges or "references" in privileges or "grant" in privileges:
        return False
    wanted.replace(exp.Literal.string(f"{wanted.this}, REFERENCES"))
    return True


def _replace_relation(tree: exp.Expression, table: exp.Table, columns: Columns) -> None:
    """Put a derived table of the same name in the relation's place."""
    bare = exp.Table(this=table.this.copy(), db=table.args.get("db"))
    body = exp.select(*(name if constant is None else f"{constant} AS {name}"
                        for name, constant in columns), dialect="postgres").from_(bare)
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(table.name))
    table.replace(exp.Subquery(this=body, alias=alias.copy()))
    # `pg_catalog.pg_class.relname` cannot name a derived table: keep the relation part.
    for column in tree.find_all(exp.Column):
        if column.table.lower() == alias.name.lower() and column.args.get("db"):
            column.set("db", None)
            column.set("catalog", None)


def _whole_row_used(tree: exp.Expression, table: exp.Table) -> bool:
    """Whether the statement reads pg_class's estimates without naming them."""
    alias = table.alias_or_name.lower()
    if table.args.get("alias") and table.args["alias"].args.get("columns"):
        return True  # pg_class AS c(a, b, …) renames the estimates by position
    select = table.find_ancestor(exp.Select)
    if select and any(isinstance(item, exp.Star) for item in select.expressions):
        return True
    for column in tree.find_all(exp.Column):
        if column.table.lower() == alias and isinstance(column.this, exp.Star):
            return True
        if not column.table and column.name.lower() == alias:  # c, (c).reltuples, to_json(c)
            return True
    for join in tree.find_all(exp.Join):
        using = {str(item.name).lower() for item in join.args.get("using") or ()}
        if str(join.args.get("method") or "").upper() == "NATURAL" or \
                using & CLASS_ESTIMATES.keys():
            return True
    return False


def _replace(node: exp.Expr, constant: str, name: str | exp.Identifier) -> None:
    """Replace a column or call by a constant, keeping the output name PostgreSQL gave it."""
    outermost = node
    while isinstance(outermost.parent, (exp.Cast, exp.Paren)):  # x::int is still named x
        outermost = outermost.parent
    named = isinstance(outermost.parent, exp.Select) and outermost.arg_key == "expressions"
    replacement = sqlglot.parse_one(constant, dialect="postgres")
    node.replace(replacement)
    if named:
        outermost = replacement if outermost is node else outermost
        outermost.replace(exp.alias_(outermost.copy(), name))
