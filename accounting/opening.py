"""Which store a configuration's ledger is: a PostgreSQL DSN selects the shared ledger,
anything else is a SQLite file (the default)."""

from __future__ import annotations

from pathlib import Path

from .postgres_ledger import DEFAULT_SCHEMA, PostgresLedger
from .sqlite_ledger import SqliteLedger
from .store import Ledger

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(location: str) -> bool:
    """Whether a ledger location (a DSN or a file path) names a PostgreSQL ledger."""
    return location.startswith(POSTGRES_SCHEMES)


def open_ledger(path: str | Path, dsn: str = "", schema: str = DEFAULT_SCHEMA, *,
                upgrade: bool = False) -> Ledger:
    """The ledger at `dsn` if one is given (PostgreSQL), else the SQLite file at `path`.

    A PostgreSQL ledger on an older schema raises LedgerOutdated unless `upgrade`; one that
    cannot be reached raises LedgerUnavailable.
    """
    if dsn:  # a postgresql:// URL or a libpq key=value string
        return PostgresLedger(dsn, schema, upgrade=upgrade)
    return SqliteLedger(path)
