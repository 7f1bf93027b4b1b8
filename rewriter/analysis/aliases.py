"""Column alias lists: `FROM orders AS o(a, b)`, `WITH w(a, b) AS (…)`. They rename a
relation's columns by position, as PostgreSQL does; more names than columns is
PostgreSQL's own error (42703), and a list over SELECT * or over a table whose columns
dpgate does not know is refused."""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from ..errors import INVALID_COLUMN_REFERENCE, Refusal, unsupported
from .sources import AMBIGUOUS, Columns, DerivedColumn


def alias_columns(node: exp.Expression) -> tuple[str, ...]:
    """The column alias list of a FROM item or a WITH item: `AS o(a, b)`, `w(a, b) AS`."""
    alias = node.args.get("alias")
    if not isinstance(alias, exp.TableAlias):
        return ()
    return tuple(column.name for column in alias.columns)


def renamed(columns: Columns, names: tuple[str, ...], star: bool, alias: str,
            position: int | None) -> Columns:
    """A derived table's columns renamed by a column alias list."""
    if not names:
        return columns
    if star:
        raise unsupported("a column alias list over SELECT * is not supported",
                          hint="Name the columns in the inner SELECT.", position=position)
    _check_alias_count(alias, len(columns), len(names), position)
    return tuple((new, column) for new, (_, column) in zip(names, columns, strict=False)
                 ) + columns[len(names):]


def renamed_base(known: tuple[str, ...] | None, table: str, names: tuple[str, ...],
                 alias: str, position: int | None
                 ) -> tuple[Mapping[str, str | None], tuple[tuple[str, str], ...]]:
    """A base table's columns (`known`, in the catalog's order) under a column alias list:
    each visible name's real column (None: ambiguous), and the (visible, real) pairs in
    order, which the plan check compares with PostgreSQL's plan."""
    if known is None:
        raise unsupported(f"a column alias list on {table} needs its columns, which "
                          "dpgate does not know", position=position)
    _check_alias_count(alias, len(known), len(names), position)
    visible: dict[str, str | None] = {}
    positional = tuple(zip([*names, *known[len(names):]], known, strict=True))
    for name, real in positional:
        visible[name] = None if name in visible else real
    return visible, positional


def column_map(columns: Columns) -> dict[str, DerivedColumn]:
    """Columns by name; a name given twice is ambiguous."""
    mapped: dict[str, DerivedColumn] = {}
    for name, column in columns:
        mapped[name] = AMBIGUOUS if name in mapped else column
    return mapped


def _check_alias_count(alias: str, available: int, specified: int,
                       position: int | None) -> None:
    if specified > available:
        raise Refusal(INVALID_COLUMN_REFERENCE, f'table "{alias}" has {available} columns '
                      f"available but {specified} columns specified", position=position)
