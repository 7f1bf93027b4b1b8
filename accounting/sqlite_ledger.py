"""The privacy ledger in one SQLite file (WAL, synchronous=FULL).

Every method opens its own connection, so the ledger is safe to use from several threads
and processes at once; SQLite's write lock (BEGIN IMMEDIATE) serialises budget checks.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from .store import (
    Analyst,
    Budget,
    BudgetExceeded,
    Charged,
    ChargeRecord,
    ChargeRequest,
    Repeated,
    ScramVerifier,
    UnknownAnalyst,
)

# Each entry moves the schema one version up; PRAGMA user_version says where a file is.
MIGRATIONS = (
    """
    CREATE TABLE analysts (
        name TEXT PRIMARY KEY,
        scram_salt BLOB NOT NULL,
        scram_stored_key BLOB NOT NULL,
        scram_server_key BLOB NOT NULL,
        scram_iterations INTEGER NOT NULL,
        epsilon_total REAL NOT NULL CHECK (epsilon_total >= 0),
        delta_total REAL NOT NULL CHECK (delta_total >= 0),
        shift REAL NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE charges (
        id INTEGER PRIMARY KEY,
        analyst TEXT NOT NULL,
        at TEXT NOT NULL,
        statement TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        epsilon REAL NOT NULL CHECK (epsilon >= 0),
        delta REAL NOT NULL CHECK (delta >= 0),
        mechanism TEXT NOT NULL,
        sensitivity REAL NOT NULL,
        outcome TEXT NOT NULL
    );
    CREATE INDEX charges_by_analyst ON charges (analyst);
    CREATE TABLE answers (
        analyst TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        charge_id INTEGER NOT NULL REFERENCES charges (id),
        rows TEXT NOT NULL,
        PRIMARY KEY (analyst, fingerprint)
    );
    """,
)

_ANALYST_COLUMNS = (
    "name, scram_salt, scram_stored_key, scram_server_key, scram_iterations,"
    " epsilon_total, delta_total, shift"
)
# Float sums of many small charges must not refuse the last one that exactly fits.
_TOLERANCE = 1e-9


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class SqliteLedger:
    """The Ledger interface over a SQLite file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            self._migrate(connection)

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        connection.execute("PRAGMA synchronous=FULL")
        return connection

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taking the write lock up front so checks and writes agree."""
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        finally:
            connection.close()

    def _migrate(self, connection: sqlite3.Connection) -> None:
        connection.execute("BEGIN IMMEDIATE")
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            for statement in filter(str.strip, script.split(";")):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {number}")
        connection.execute("COMMIT")

    # analysts

    def add_analyst(self, analyst: Analyst) -> None:
        verifier = analyst.verifier
        with self._transaction() as connection:
            try:
                connection.execute(
                    "INSERT INTO analysts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (analyst.name, verifier.salt, verifier.stored_key, verifier.server_key,
                     verifier.iterations, analyst.epsilon_total, analyst.delta_total,
                     analyst.shift, _now()),
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"analyst {analyst.name!r} already exists") from None

    def remove_analyst(self, name: str) -> None:
        """Remove the credentials and cached answers; the charges stay for the global loss."""
        with self._transaction() as connection:
            if not connection.execute("DELETE FROM analysts WHERE name = ?", (name,)).rowcount:
                raise UnknownAnalyst(name)
            connection.execute("DELETE FROM answers WHERE analyst = ?", (name,))

    def analyst(self, name: str) -> Analyst | None:
        connection = self._connect()
        try:
            row = connection.execute(
                f"SELECT {_ANALYST_COLUMNS} FROM analysts WHERE name = ?", (name,)
            ).fetchone()
        finally:
            connection.close()
        return None if row is None else _analyst(row)

    def analysts(self) -> list[Analyst]:
        connection = self._connect()
        try:
            rows = connection.execute(
                f"SELECT {_ANALYST_COLUMNS} FROM analysts ORDER BY name"
            ).fetchall()
        finally:
            connection.close()
        return [_analyst(row) for row in rows]

    # budgets and charges

    def budget(self, name: str) -> Budget:
        connection = self._connect()
        try:
            return _budget(connection, name)
        finally:
            connection.close()

    def charges(self, name: str) -> list[ChargeRecord]:
        connection = self._connect()
        try:
            rows = connection.execute(
                "SELECT id, at, statement, fingerprint, epsilon, delta, mechanism, sensitivity,"
                " outcome FROM charges WHERE analyst = ? ORDER BY id",
                (name,),
            ).fetchall()
        finally:
            connection.close()
        return [ChargeRecord(*row) for row in rows]

    def charge_or_repeat(self, request: ChargeRequest) -> Charged | Repeated:
        """Return the stored answer to a repeated question, or charge the budget durably.

        The budget check and the insert are one IMMEDIATE transaction: two sessions of the
        same analyst can never both pass a check that only one of them fits.
        """
        with self._transaction() as connection:
            stored = connection.execute(
                "SELECT rows FROM answers WHERE analyst = ? AND fingerprint = ?",
                (request.analyst, request.fingerprint),
            ).fetchone()
            budget = _budget(connection, request.analyst)
            if stored is not None:
                return Repeated(json.loads(stored[0]), budget)
            epsilon_after = budget.epsilon_spent + request.epsilon
            delta_after = budget.delta_spent + request.delta
            if (epsilon_after > budget.epsilon_total + _TOLERANCE
                    or delta_after > budget.delta_total + _TOLERANCE):
                raise BudgetExceeded(request.epsilon, budget)
            cursor = connection.execute(
                "INSERT INTO charges (analyst, at, statement, fingerprint, epsilon, delta,"
                " mechanism, sensitivity, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'charged')",
                (request.analyst, _now(), request.statement, request.fingerprint,
                 request.epsilon, request.delta, request.mechanism, request.sensitivity),
            )
            return Charged(int(cursor.lastrowid), _budget(connection, request.analyst))

    def record_answer(self, charge_id: int, rows: list[list[object]]) -> None:
        """Store the released answer so a repeat of the question gets it back for free."""
        with self._transaction() as connection:
            analyst, fingerprint = connection.execute(
                "SELECT analyst, fingerprint FROM charges WHERE id = ?", (charge_id,)
            ).fetchone()
            connection.execute("UPDATE charges SET outcome = 'answered' WHERE id = ?", (charge_id,))
            connection.execute(
                "INSERT OR IGNORE INTO answers VALUES (?, ?, ?, ?)",
                (analyst, fingerprint, charge_id, json.dumps(rows)),
            )

    def record_failure(self, charge_id: int, outcome: str) -> None:
        """Mark a charged query that released nothing; the charge itself stays."""
        with self._transaction() as connection:
            connection.execute("UPDATE charges SET outcome = ? WHERE id = ?", (outcome, charge_id))


def _analyst(row: tuple) -> Analyst:
    name, salt, stored_key, server_key, iterations, epsilon, delta, shift = row
    return Analyst(name, ScramVerifier(salt, stored_key, server_key, iterations),
                   epsilon, delta, shift)


def _budget(connection: sqlite3.Connection, name: str) -> Budget:
    totals = connection.execute(
        "SELECT epsilon_total, delta_total FROM analysts WHERE name = ?", (name,)
    ).fetchone()
    if totals is None:
        raise UnknownAnalyst(name)
    spent = connection.execute(
        "SELECT coalesce(sum(epsilon), 0), coalesce(sum(delta), 0), count(*)"
        " FROM charges WHERE analyst = ?",
        (name,),
    ).fetchone()
    return Budget(totals[0], spent[0], totals[1], spent[1], spent[2])
