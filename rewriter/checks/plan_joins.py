"""Check the join and group-key columns of PostgreSQL's plan against dpgate's analysis.

FLEX takes the sensitivity of a join from the max frequencies of its join columns
(joins.py). If dpgate resolved a join column to the wrong base column (an alias list,
a CTE or a scope PostgreSQL reads otherwise), the frequency it used belongs to another
column and the noise can be far too small. PostgreSQL's plan names the columns it really
joins on, so this module reads every join condition of `EXPLAIN (VERBOSE, FORMAT JSON)`,
resolves each column through the plan's own scan nodes (Relation Name, Schema, Alias) to a
base table, and requires every base column of an equality joining a private table to be a
join column the analysis accounted for.

What is compared, and why it is conservative:

- Only equalities between columns of two different scans, at the top level of a
  condition (a conjunct): those are the join keys. Other conditions only filter rows, and
  an equality under an OR is a filter too; the analysis never took a frequency from them.
- Casts around a column (`(o.customer_id)::bigint`) are looked through; an equality with
  any other expression on a side is not a plain-column join (the analysis refuses those).
- A column of a scan that is not a base table (a subquery or CTE PostgreSQL did not inline,
  dpgate's own `q`, `d0`, `kept` subqueries, a function scan) is not resolved: PostgreSQL
  names it by the subquery's alias, and the base column under it is not checked here.
- An equality between two public tables is not a private join: it is skipped.
- PostgreSQL prints the columns of a base table with a column alias list under the alias
  names; the analysis's own reading of those lists (`renamed`, by position over its
  metrics' column order) maps them back to the table's columns, and that order is
  compared with PostgreSQL's catalog first (`renaming_failure`).

PostgreSQL may derive join equalities the statement did not write (from `a.x = b.y AND
b.y = c.z` it can join a and c on `a.x = c.z`); every column of such an equality is one of
the written join columns, so it passes.

Group keys the same way (`group_failure`): a `Group Key` of the plan that is a plain column
of a private base table must be a column the analysis grouped on, or key selection would
release the values of a column dpgate did not check.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..policy.model import Policy
from ..sensitivity.metrics import ColumnKey, quote_identifier

# The plan properties that hold conditions evaluated on pairs of rows (or, for a scan,
# with the outer row's value as a parameter).
_CONDITIONS = ("Hash Cond", "Merge Cond", "Join Filter", "Index Cond", "Recheck Cond",
               "Filter", "TID Cond")
# PostgreSQL makes aliases unique in EXPLAIN by appending _1, _2, ... to repeats.
_UNIQUIFIED = re.compile(r"^(.*)_\d+$")


@dataclass(frozen=True)
class JoinKeys:
    """The base-table columns the analysis joined on, and the alias lists it read.

    `columns` are (schema.table, column) pairs whose max frequency entered the
    sensitivity as join keys (dpgate's own privacy-unit hops included). `renamed` lists,
    for each base table read under a column alias list, (schema.table, alias, ((visible
    name, table column), ...)) for every column of the table in the catalog's order.
    `domains` pairs a group key's column with the public column of its domain; `groups`
    are the base columns the statement and its derived tables group on.
    """

    columns: frozenset[ColumnKey]
    renamed: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = ()
    domains: frozenset[tuple[ColumnKey, ColumnKey]] = frozenset()
    groups: frozenset[ColumnKey] | None = None  # None: group keys not checked

    def allows(self, left: set[ColumnKey], right: set[ColumnKey]) -> bool:
        """Whether an equality of these base columns is a join the analysis counted."""
        for a in left:
            for b in right:
                if (a, b) in self.domains or (b, a) in self.domains:
                    continue  # dpgate's own join of a key to its DISTINCT domain
                # A join column, or a domain column PostgreSQL matched with one through
                # an equivalence class (o.k = r.k and o.k = domain.k give r.k = domain.k).
                if not (self.known(a) and self.known(b)):
                    return False
        return True

    def known(self, column: ColumnKey) -> bool:
        """A join column of the analysis, or a public domain column of dpgate's own."""
        return column in self.columns or any(column == domain for _, domain in self.domains)


def join_failure(explain: list[Mapping[str, Any]], keys: JoinKeys, policy: Policy
                 ) -> str | None:
    """Why PostgreSQL's plan joins (or groups) private rows on a column the analysis
    did not use, or None."""
    root = explain[0]["Plan"]
    scans = _base_scans(root)
    for node in _nodes(root):
        for condition in _conditions(node):
            for left, right in _equalities(condition):
                sides = [_base_column(column, scans, keys) for column in (left, right)]
                if any(side is None for side in sides):
                    continue  # a subquery's, a CTE's or a function's column: not resolved
                if not any(policy.is_private(*table.split(".", 1))
                           for side in sides if side for table, _ in side):
                    continue  # public tables only
                left_columns, right_columns = sides[0] or set(), sides[1] or set()
                if keys.allows(left_columns, right_columns):
                    continue
                table, name = min(column for column in left_columns | right_columns
                                  if not keys.known(column))
                return (f"PostgreSQL's plan joins {table} on column {name}, which dpgate's "
                        "analysis did not take as a join key: the plan and the analysis "
                        "disagree on the statement's columns")
    return group_failure(root, scans, keys, policy)


def group_failure(root: Mapping[str, Any], scans: Mapping[str, str | None], keys: JoinKeys,
                  policy: Policy) -> str | None:
    """Why PostgreSQL groups private rows on a column the analysis did not group on."""
    if keys.groups is None:
        return None
    for node in _nodes(root):
        for text in node.get("Group Key") or ():
            try:
                tree = sqlglot.parse_one(text, read="postgres")
            except SqlglotError:
                continue
            column = _plain_column(tree) if isinstance(tree, exp.Expression) else None
            if column is None:
                continue  # an expression (a time bucket): the analysis checked its column
            for table, name in _base_column(column, scans, keys) or ():
                if not policy.is_private(*table.split(".", 1)):
                    continue  # a public column's values are public (a domain's keys)
                if (table, name) not in keys.groups:
                    return (f"PostgreSQL's plan groups on {table}.{name}, which dpgate's "
                            "analysis did not take as a group key: the plan and the "
                            "analysis disagree on the statement's columns")
    return None


def _nodes(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _base_scans(root: Mapping[str, Any]) -> dict[str, str | None]:
    """Every alias of the plan: the schema.table of a base-table scan, else None."""
    scans: dict[str, str | None] = {}
    for node in _nodes(root):
        alias = node.get("Alias")
        if alias is None:
            continue
        relation = node.get("Relation Name")
        table = f"{node.get('Schema') or ''}.{relation}".lower() if relation else None
        if alias in scans and scans[alias] != table:
            scans[alias] = None  # never seen (EXPLAIN makes aliases unique); stay safe
        else:
            scans[alias] = table
    return scans


def _conditions(node: Mapping[str, Any]) -> Iterator[exp.Expression]:
    for key in _CONDITIONS:
        text = node.get(key)
        if not text:
            continue
        try:
            tree = sqlglot.parse_one(text, read="postgres")
        except SqlglotError:
            continue  # a condition sqlglot cannot read has no plain column equality
        if isinstance(tree, exp.Expression):  # sqlglot types its results as Expr
            yield from _conjuncts(tree)


def _conjuncts(node: exp.Expression) -> Iterator[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


def _equalities(condition: exp.Expression) -> Iterator[tuple[exp.Column, exp.Column]]:
    if not isinstance(condition, exp.EQ):
        return
    left, right = _plain_column(condition.this), _plain_column(condition.expression)
    if left is not None and right is not None and left.table != right.table:
        yield left, right


def _plain_column(node: exp.Expression) -> exp.Column | None:
    while isinstance(node, (exp.Paren, exp.Cast)):
        node = node.this
    if isinstance(node, exp.Column) and node.table and isinstance(node.this, exp.Identifier):
        return node
    return None


def _base_column(column: exp.Column, scans: Mapping[str, str | None], keys: JoinKeys
                 ) -> set[ColumnKey] | None:
    """The base columns a plan column may be, or None when it is not a base table's."""
    alias = column.table
    table = scans.get(alias)
    if table is None:
        return None
    name = column.name
    renamings = [mapping for renamed_table, renamed_alias, mapping in keys.renamed
                 if renamed_table == table and renamed_alias in _written_aliases(alias)]
    if not renamings:
        return {(table, name)}
    # An alias list: the printed name is the visible one. Every reading is checked.
    real = {column_name for mapping in renamings for visible, column_name in mapping
            if visible == name}
    return {(table, column_name) for column_name in real or {name}}


def catalog_sql(table: str) -> str:
    """The statement listing a table's columns in PostgreSQL's order (attnum)."""
    name = ".".join(quote_identifier(part) for part in table.split(".", 1))
    literal = "'" + name.replace("'", "''") + "'"
    return ("SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = "
            f"{literal}::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum")


def renaming_failure(keys: JoinKeys, catalog: Mapping[str, Sequence[str]]) -> str | None:
    """Why the analysis's reading of an alias list is not PostgreSQL's, or None.

    A column alias list renames a table's columns by position; the analysis read the
    positions from its own metrics. `catalog` holds the columns PostgreSQL lists now.
    """
    for table, alias, mapping in keys.renamed:
        read = [column for _, column in mapping]
        if list(catalog.get(table, ())) != read:
            return (f"dpgate read the column alias list of {alias} with the columns of "
                    f"{table} in another order than PostgreSQL's: the plan and the analysis "
                    "disagree on the statement's columns")
    return None


def _written_aliases(printed: str) -> set[str]:
    """The aliases the statement may have written for one EXPLAIN prints."""
    match = _UNIQUIFIED.match(printed)
    return {printed, match.group(1)} if match else {printed}
