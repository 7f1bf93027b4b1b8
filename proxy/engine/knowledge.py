"""What the rewriter needs to know of the data, measured on the backend and kept current.

Which functions PostgreSQL marks volatile is read with the column names, once. FLEX metrics
(maxFreq of join columns) are measured with one GROUP BY query per column as
the reader role, stored in the ledger with the time measured, and measured on demand for a
column first seen. Column names come from information_schema, to resolve unqualified
columns in joins. `dpgate metrics refresh` measures every column again with the same
queries over an asyncpg pool (admin/metrics_refresh.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime

from accounting import Ledger, Metric
from rewriter.sensitivity.metrics import ColumnKey, Metrics, max_freq_query

from ..pgwire.backend import BackendConnection

# The fourth column names an enum column's type, which a domain's labels are cast to.
CATALOG_QUERY = (
    "SELECT c.table_schema || '.' || c.table_name, c.column_name, c.data_type, "
    "(SELECT format('%I.%I', n.nspname, t.typname) FROM pg_type t JOIN pg_namespace n "
    "ON n.oid = t.typnamespace WHERE t.typtype = 'e' AND n.nspname = c.udt_schema "
    "AND t.typname = c.udt_name) FROM information_schema.columns c "
    "WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') "
    "ORDER BY c.ordinal_position")

# Functions that may change state when run: refused in private statements (classify.py).
VOLATILE_QUERY = "SELECT DISTINCT lower(proname) FROM pg_proc WHERE provolatile = 'v'"


class Knowledge:
    """Metrics and column names, with a version that changes on every update.

    Shared by every session of one proxy; plans are cached per version.
    """

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self.metrics = Metrics(max_freq=_from_ledger(ledger.metrics()))
        self.catalog_loaded = False

    async def load_catalog(self, backend: BackendConnection) -> None:
        columns, types, enums = await fetch_columns(backend)
        volatile = frozenset(bytes(name or b"").decode()
                             for (name,) in (await backend.fetch(VOLATILE_QUERY)).rows)
        self.metrics = replace(self.metrics, columns=columns, column_types=types,
                               enum_types=enums,
                               volatile_functions=volatile, version=self.metrics.version + 1)
        self.catalog_loaded = True

    async def remember(self, measured: list[Metric]) -> None:
        """Store metrics measured on the backend (measure_column) in the ledger and use
        them from now on. Called without a backend connection: the ledger's commit
        never holds one."""
        await asyncio.to_thread(self.ledger.store_metrics, measured)
        self.metrics = replace(
            self.metrics, max_freq={**self.metrics.max_freq, **_from_ledger(measured)},
            version=self.metrics.version + 1)


def _from_ledger(metrics: Iterable[Metric]) -> dict[ColumnKey, int]:
    return {(m.table, m.column): m.max_freq for m in metrics}


async def fetch_columns(backend: BackendConnection) -> tuple[
        dict[str, tuple[str, ...]], dict[ColumnKey, str], dict[ColumnKey, str]]:
    """Every table's columns in order, each column's type (information_schema's
    data_type: integer, numeric, text…), and the type of each enum column."""
    rows = []
    for table, column, data_type, enum in (await backend.fetch(CATALOG_QUERY)).rows:
        assert table is not None and column is not None and data_type is not None
        rows.append((table.decode(), column.decode(), data_type.decode(),
                     None if enum is None else enum.decode()))
    return catalog(rows)


def catalog(rows: Iterable[tuple[str, str, str, str | None]]) -> tuple[
        dict[str, tuple[str, ...]], dict[ColumnKey, str], dict[ColumnKey, str]]:
    """CATALOG_QUERY's rows as the analysis takes them (also `dpgate explain`'s)."""
    columns: dict[str, list[str]] = {}
    types: dict[ColumnKey, str] = {}
    enums: dict[ColumnKey, str] = {}
    for table, column, data_type, enum in rows:
        columns.setdefault(table, []).append(column)
        types[(table, column)] = data_type
        if enum is not None:
            enums[(table, column)] = enum
    return {table: tuple(names) for table, names in columns.items()}, types, enums


async def measure_column(backend: BackendConnection, table: str, column: str) -> Metric:
    """maxFreq(table.column) on the real data (FLEX's metric); raises BackendError."""
    rows = (await backend.fetch(max_freq_query(table, column))).rows
    value = rows[0][0]
    return Metric(table, column, int(value) if value is not None else 0,
                  datetime.now(UTC).isoformat(timespec="seconds"))
