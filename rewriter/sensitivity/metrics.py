"""What the rewriter knows of the data besides the policy: FLEX metrics, column names and
which functions are volatile.

Both are measured by the proxy on the backend and handed in, so the rewriter stays pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

ColumnKey = tuple[str, str]  # ("schema.table", "column"), lower case
# The column "" stands for a constant: its maxFreq is the table's row count, the key
# frequency of a cross join (cross_joins.py).
ROWS = ""


@dataclass(frozen=True)
class Metrics:
    """`max_freq[(table, column)]`: the most rows sharing one non-NULL value of the column.
    `columns[table]`: the table's column names in order, to resolve unqualified columns
    in joins and alias lists; `column_types` their types, to make arithmetic total.
    `version` changes whenever the proxy measures again, so cached plans can be keyed by it.
    """

    max_freq: Mapping[ColumnKey, int] = field(default_factory=dict)
    columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Each column's type as information_schema names it (integer, numeric, text…).
    column_types: Mapping[ColumnKey, str] = field(default_factory=dict)
    # The type of each enum column, quoted and schema-qualified: a domain's labels are
    # written as text, and PostgreSQL compares an enum with no text, so they are cast to it.
    enum_types: Mapping[ColumnKey, str] = field(default_factory=dict)
    # Names of the functions PostgreSQL marks volatile (any overload), lower case: refused
    # in private statements (functions.changes_state).
    volatile_functions: frozenset[str] = frozenset()
    version: int = 0


class MissingMetrics(Exception):
    """The analysis needs maxFreq of columns nobody has measured yet.

    The proxy measures them and asks again; `dpgate explain --policy` reports them.
    """

    def __init__(self, columns: tuple[ColumnKey, ...]):
        names = ", ".join(f"{table}.{column}" if column != ROWS else f"{table} (rows)"
                          for table, column in columns)
        super().__init__(f"no max_freq known for {names}: declare it in the policy "
                         "(max_freq) or run `dpgate metrics refresh`")
        self.columns = columns


def max_freq_query(table: str, column: str) -> str:
    """The SQL that measures maxFreq(table.column) (FLEX's metric; NULL keys never join)."""
    schema, name = (quote_identifier(part) for part in table.split(".", 1))
    if column == ROWS:
        return f"SELECT count(*) FROM {schema}.{name}"
    column = quote_identifier(column)
    return (f"SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM {schema}.{name} "
            f"WHERE {column} IS NOT NULL GROUP BY {column}) AS s")


def quote_identifier(name: str) -> str:
    """A PostgreSQL quoted identifier; names come from analysts' SQL, so escape quotes."""
    return '"' + name.replace('"', '""') + '"'
