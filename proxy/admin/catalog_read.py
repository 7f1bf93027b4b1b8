"""What `dpgate policy init` learns of a database: its catalog only, never a row of a table.

Every query here reads pg_catalog; none selects from a user table, so drafting a policy
reveals nothing the schema does not already say.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
import sqlglot
from sqlglot import exp


@dataclass(frozen=True)
class ForeignKey:
    column: str
    table: str  # the referenced table's name (same schema)
    key: str


@dataclass
class TableInfo:
    name: str
    columns: dict[str, str] = field(default_factory=dict)  # name -> format_type
    primary_key: tuple[str, ...] = ()
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    # What the catalog proves of a column's values: CHECK … IN lists, enum labels, and
    # CHECK ranges (both ends inclusive).
    values: dict[str, list[str | int | float]] = field(default_factory=dict)
    enums: dict[str, list[str]] = field(default_factory=dict)
    ranges: dict[str, tuple[int | float, int | float]] = field(default_factory=dict)


_TABLES = """
SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY c.relname
"""
_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod),
       ARRAY(SELECT e.enumlabel::text FROM pg_enum e WHERE e.enumtypid = a.atttypid
             ORDER BY e.enumsortorder)
FROM pg_attribute a WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""
_CONSTRAINTS = """
SELECT con.contype,
       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(num, i)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num ORDER BY k.i),
       ref.relname,
       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(num, i)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num
             ORDER BY k.i),
       pg_get_constraintdef(con.oid)
FROM pg_constraint con LEFT JOIN pg_class ref ON ref.oid = con.confrelid
WHERE con.conrelid = %s AND con.contype IN ('p', 'f', 'c') ORDER BY con.conname
"""


def read_catalog(dsn: str, schema: str) -> dict[str, TableInfo]:
    """The tables of `schema`, with columns, keys and what constraints prove of values."""
    tables: dict[str, TableInfo] = {}
    with psycopg.connect(dsn, autocommit=True) as connection:
        for oid, name in connection.execute(_TABLES, (schema,)).fetchall():
            table = tables[name] = TableInfo(name)
            for column, type_name, labels in connection.execute(_COLUMNS, (oid,)).fetchall():
                table.columns[column] = type_name
                if labels:
                    table.enums[column] = list(labels)
            for kind, columns, ref, ref_columns, definition in connection.execute(
                    _CONSTRAINTS, (oid,)).fetchall():
                if kind == "p":
                    table.primary_key = tuple(columns)
                elif kind == "f" and len(columns) == 1 and ref is not None:
                    table.foreign_keys.append(ForeignKey(columns[0], ref, ref_columns[0]))
                elif kind == "c" and len(columns) == 1:
                    _read_check(table, columns[0], definition)
    return tables


def _read_check(table: TableInfo, column: str, definition: str) -> None:
    """A one-column CHECK of the form `col IN (…)` or `col BETWEEN lo AND hi` (PostgreSQL
    stores them as `= ANY (ARRAY[…])` and `>= AND <=`); any other shape proves nothing."""
    try:
        condition = sqlglot.parse_one("SELECT " + definition.removeprefix("CHECK "),
                                      read="postgres").expressions[0]
    except sqlglot.errors.ParseError:
        return
    condition = _bare(condition)
    if isinstance(condition, exp.EQ) and _is_column(condition.this, column):
        array = _bare(condition.expression)
        if isinstance(array, exp.Any):
            array = _bare(array.this)
        if isinstance(array, exp.Array):
            values = [_literal(item) for item in array.expressions]
            if values and all(value is not None for value in values):
                table.values[column] = values  # type: ignore[assignment]
        return
    if isinstance(condition, exp.And):
        ends: dict[type, int | float | None] = {}
        for side in (_bare(condition.this), _bare(condition.expression)):
            if isinstance(side, (exp.GTE, exp.LTE)) and _is_column(side.this, column):
                value = _literal(side.expression)
                ends[type(side)] = value if not isinstance(value, str) else None
        low, high = ends.get(exp.GTE), ends.get(exp.LTE)
        if low is not None and high is not None and low <= high:
            table.ranges[column] = (low, high)


def _bare(node: exp.Expression) -> exp.Expression:
    while isinstance(node, (exp.Paren, exp.Cast)):
        node = node.this
    return node


def _is_column(node: exp.Expression, column: str) -> bool:
    node = _bare(node)
    return isinstance(node, exp.Column) and node.name == column


def _literal(node: exp.Expression) -> str | int | float | None:
    node = _bare(node)
    negative = isinstance(node, exp.Neg)
    if negative:
        node = _bare(node.this)
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return None if negative else node.this
    number = float(node.this) if any(c in node.this for c in ".eE") else int(node.this)
    return -number if negative else number
