"""Copy a SQLite ledger into an empty PostgreSQL ledger, row for row, in one transaction.

Everything is copied as stored, not re-derived: analysts (SCRAM verifiers, totals, spend
kept so far, secret shift, the forget mark), charges with their ids, stored answers and
metrics. So `dpgate ledger export` prints the same charges before and after, repeats are
still free, and `answers_after` marks keep meaning the same charges.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .postgres_ledger import PostgresLedger
from .sqlite_ledger import SqliteLedger

# Columns of each table, in both stores (the SQLite file is migrated to its latest
# version first, so every one of them exists there).
TABLES = {
    "analysts": ("name", "scram_salt", "scram_stored_key", "scram_server_key",
                 "scram_iterations", "epsilon_total", "delta_total", "shift", "created_at",
                 "answers_after", "epsilon_spent", "delta_spent", "queries"),
    "charges": ("id", "analyst", "at", "statement", "fingerprint", "epsilon", "delta",
                "mechanism", "sensitivity", "outcome"),
    "answers": ("analyst", "fingerprint", "charge_id", "rows"),
    "metrics": ("table_name", "column_name", "max_freq", "measured_at"),
}


@dataclass(frozen=True)
class Copied:
    """How many rows of each table were copied."""

    counts: dict[str, int]


def copy_sqlite_to_postgres(source: str | Path, target: PostgresLedger) -> Copied:
    """Copy the SQLite ledger at `source` into `target`, which must hold nothing yet.

    Raises ValueError if the target already has analysts, charges or metrics (a copy must
    never merge two ledgers: their charge ids and spend would collide). The source is
    read in one transaction, so a proxy still running on it cannot tear the copy.
    """
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"no SQLite ledger at {path}")
    SqliteLedger(path)  # migrates an old file to the latest SQLite version first
    reader = sqlite3.connect(path, isolation_level=None)
    s = target.schema
    counts: dict[str, int] = {}
    try:
        reader.execute("BEGIN")  # one snapshot of the whole file
        with target.connections.transaction() as connection:
            for table in TABLES:
                # Locks out proxies that might already use the target while it is filled.
                connection.execute(f"LOCK TABLE {s}.{table} IN EXCLUSIVE MODE")
                if connection.execute(f"SELECT 1 FROM {s}.{table} LIMIT 1").fetchone():
                    raise ValueError(f"the target ledger (schema {s}) already holds {table}; "
                                     "copy only into an empty ledger")
            for table, columns in TABLES.items():
                names = ", ".join(columns)
                rows = reader.execute(f"SELECT {names} FROM {table} ORDER BY rowid").fetchall()
                with connection.cursor() as cursor, cursor.copy(
                        f"COPY {s}.{table} ({names}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                counts[table] = len(rows)
            # New charges continue after the copied ids (ids order the forget marks).
            connection.execute(
                f"SELECT setval(pg_get_serial_sequence('{s}.charges', 'id'),"
                f" coalesce((SELECT max(id) FROM {s}.charges), 0) + 1, false)")
    finally:
        reader.close()
    return Copied(counts)
