"""The privacy ledger in PostgreSQL, shared by several proxies.

The same interface and the same guarantees as the SQLite ledger, across processes and
machines: the analyst's row is locked (SELECT … FOR UPDATE) for the budget check and the
charge, so sessions of one analyst are serialised wherever they connect, while different
analysts charge in parallel. Each charge is committed (synchronous_commit) before the call
returns, so before anything is released. Nothing is cached: every call reads the store, so
a budget change or a shift rotation made by any proxy or the CLI applies at once.

psycopg 3, synchronous, one connection per thread: the proxy calls the ledger from worker
threads (like the SQLite ledger), and the interface is synchronous.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
from collections.abc import Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict

from .postgres_connection import PerThreadConnections, first_row
from .postgres_schema import bring_up_to_date
from .rows import ANALYST_COLUMNS, CHARGE_COLUMNS, analyst_from_row, now
from .store import (
    TOLERANCE,
    Analyst,
    AnalystBudget,
    Budget,
    BudgetExceeded,
    Charged,
    ChargeRecord,
    ChargeRequest,
    Metric,
    Repeated,
    UnknownAnalyst,
)

DEFAULT_SCHEMA = "dpgate_ledger"
# An unreachable ledger must fail a statement within seconds, not hang a worker thread
# for TCP's retransmission timeout (about 15 minutes). Used unless the DSN sets them.
CONNECTION_DEFAULTS = {"connect_timeout": "5", "tcp_user_timeout": str(15_000),
                       "application_name": "dpgate-ledger"}
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class PostgresLedger:
    """The Ledger interface over PostgreSQL (schema `dpgate_ledger` unless told otherwise).

    `create=True` (the default) creates the schema in a database that has none; an existing
    schema of an older version raises LedgerOutdated unless `upgrade=True`.
    """

    def __init__(self, dsn: str, schema: str = DEFAULT_SCHEMA, *, upgrade: bool = False,
                 create: bool = True):
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"ledger schema {schema!r}: lower-case letters, digits and _ only")
        given = conninfo_to_dict(dsn)
        self.dsn = dsn
        self.schema = schema
        self.connections = PerThreadConnections(dsn, {k: v for k, v in CONNECTION_DEFAULTS.items()
                                              if k not in given})
        self.proxy = f"{socket.gethostname()}:{os.getpid()}"
        with self.connections.transaction() as connection:
            bring_up_to_date(connection, schema, upgrade, create)

    def version(self) -> int:
        """The schema version of the store (len(MIGRATIONS) once opened)."""
        with self.connections.transaction() as connection:
            return first_row(
                connection.execute(f"SELECT version FROM {self.schema}.version"))[0]

    def ping(self) -> None:
        """One round trip to the store; LedgerUnavailable if it does not answer."""
        with self.connections.transaction() as connection:
            connection.execute("SELECT 1")

    def close(self) -> None:
        """Close this thread's connection (others close with their threads' exit)."""
        self.connections.drop()

    # analysts

    def add_analyst(self, analyst: Analyst) -> None:
        """Store a new analyst; a name removed before starts with what it spent then."""
        verifier = analyst.verifier
        s = self.schema
        try:
            with self.connections.transaction() as connection:
                connection.execute(
                    f"INSERT INTO {s}.analysts (name, scram_salt, scram_stored_key,"
                    " scram_server_key, scram_iterations, epsilon_total, delta_total, shift,"
                    " created_at, epsilon_spent, delta_spent, queries)"
                    " SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(sum(epsilon), 0),"
                    f" coalesce(sum(delta), 0), count(*) FROM {s}.charges WHERE analyst = %s",
                    (analyst.name, verifier.salt, verifier.stored_key, verifier.server_key,
                     verifier.iterations, analyst.epsilon_total, analyst.delta_total,
                     analyst.shift, now(), analyst.name),
                )
        except psycopg.errors.UniqueViolation:
            raise ValueError(f"analyst {analyst.name!r} already exists") from None

    def remove_analyst(self, name: str) -> None:
        """Remove the credentials and cached answers; the charges stay for the global loss."""
        s = self.schema
        with self.connections.transaction() as connection:
            if not connection.execute(f"DELETE FROM {s}.analysts WHERE name = %s",
                                      (name,)).rowcount:
                raise UnknownAnalyst(name)
            connection.execute(f"DELETE FROM {s}.answers WHERE analyst = %s", (name,))

    def analyst(self, name: str) -> Analyst | None:
        with self.connections.transaction() as connection:
            row = connection.execute(
                f"SELECT {ANALYST_COLUMNS} FROM {self.schema}.analysts WHERE name = %s",
                (name,)).fetchone()
        return None if row is None else analyst_from_row(row)

    def analysts(self) -> list[Analyst]:
        with self.connections.transaction() as connection:
            rows = connection.execute(
                f"SELECT {ANALYST_COLUMNS} FROM {self.schema}.analysts ORDER BY name"
            ).fetchall()
        return [analyst_from_row(row) for row in rows]

    def rotate_shift(self, name: str, shift: float) -> None:
        """A new secret shift, and the analyst's stored answers forgotten (they carry the
        old one). The next charge on any proxy releases with the new shift."""
        def work(connection: psycopg.Connection) -> None:
            if not connection.execute(f"UPDATE {self.schema}.analysts SET shift = %s"
                                      " WHERE name = %s", (shift, name)).rowcount:
                raise UnknownAnalyst(name)
            self._forget_answers(connection, name)
        self.connections.retrying(work)

    def set_budgets(self, epsilon_totals: Mapping[str, float]) -> None:
        """Set the epsilon totals of existing analysts, all or none of them."""
        bad = [name for name, total in epsilon_totals.items() if not 0 < total < math.inf]
        if bad:
            raise ValueError(f"an epsilon total must be positive and finite: {', '.join(bad)}")
        s = self.schema

        def work(connection: psycopg.Connection) -> None:
            # Locked in name order, as every multi-row lock here, so two never deadlock.
            known = {row[0] for row in connection.execute(
                f"SELECT name FROM {s}.analysts ORDER BY name FOR UPDATE")}
            missing = sorted(set(epsilon_totals) - known)
            if missing:
                raise UnknownAnalyst(", ".join(missing))
            with connection.cursor() as cursor:
                cursor.executemany(f"UPDATE {s}.analysts SET epsilon_total = %s WHERE name = %s",
                                   [(total, name) for name, total in epsilon_totals.items()])
        self.connections.retrying(work)

    # budgets and charges

    def budget(self, name: str) -> Budget:
        with self.connections.transaction() as connection:
            return self._budget(connection, name)

    def budgets(self) -> list[AnalystBudget]:
        """Every analyst, and every removed name that still has charges, by name."""
        s = self.schema
        with self.connections.transaction() as connection:
            rows = connection.execute(  # one statement: one consistent snapshot
                "SELECT name, epsilon_total, epsilon_spent, delta_total, delta_spent, queries,"
                f" true FROM {s}.analysts UNION ALL"
                " SELECT analyst, 0.0, sum(epsilon), 0.0, sum(delta), count(*), false"
                f" FROM {s}.charges WHERE analyst NOT IN (SELECT name FROM {s}.analysts)"
                " GROUP BY analyst ORDER BY 1").fetchall()
        return [AnalystBudget(name, Budget(*spend), bool(is_active))
                for name, *spend, is_active in rows]

    def charges(self, name: str | None = None) -> list[ChargeRecord]:
        """The charges of one analyst, or of every analyst (removed ones too), by id."""
        where, parameters = ("WHERE analyst = %s", (name,)) if name is not None else ("", ())
        with self.connections.transaction() as connection:
            rows = connection.execute(
                f"SELECT {CHARGE_COLUMNS} FROM {self.schema}.charges {where} ORDER BY id",
                parameters).fetchall()
        return [ChargeRecord(*row) for row in rows]

    def charge_or_repeat(self, request: ChargeRequest) -> Charged | Repeated:
        """The stored answer to a repeated question, or a durable charge.

        One call of the schema's `charge` function: it locks the analyst's row first, so
        sessions of one analyst on any proxy pass one after the other, and each sees the
        spend and the stored answers the previous one committed. Both epsilon and delta
        must fit; otherwise BudgetExceeded and nothing is charged.
        """
        kind, charge_id, *figures, shift, stored = self.connections.call(
            f"SELECT * FROM {self.schema}.charge(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (request.analyst, now(), request.statement, request.fingerprint,
             request.epsilon, request.delta, request.mechanism, request.sensitivity,
             self.proxy, TOLERANCE))
        if kind == "unknown":
            raise UnknownAnalyst(request.analyst)
        budget = Budget(*figures)
        if kind == "repeated":
            return Repeated(json.loads(stored), budget)
        if kind == "exceeded":
            raise BudgetExceeded(request.epsilon, budget, request.delta)
        return Charged(int(charge_id), budget, shift)

    def record_answer(self, charge_id: int, rows: list[list[object]]) -> None:
        """Store the released answer, unless the analyst's answers were forgotten after this
        charge was made (or the analyst was removed); one call of `record_answer`."""
        try:
            self.connections.call(f"SELECT {self.schema}.record_answer(%s, %s)",
                       (charge_id, json.dumps(rows)))
        except psycopg.errors.NoDataFound:
            raise ValueError(f"no charge {charge_id}") from None

    def record_failure(self, charge_id: int, outcome: str) -> None:
        """Mark a charged query that released nothing; the charge itself stays."""
        with self.connections.transaction() as connection:
            connection.execute(f"UPDATE {self.schema}.charges SET outcome = %s WHERE id = %s",
                               (outcome, charge_id))

    def forget_answers(self, name: str | None = None) -> int:
        """Drop the stored answers of one analyst (or of all); returns how many."""
        def work(connection: psycopg.Connection) -> int:
            if name is not None and connection.execute(
                    f"SELECT 1 FROM {self.schema}.analysts WHERE name = %s",
                    (name,)).fetchone() is None:
                raise UnknownAnalyst(name)
            return self._forget_answers(connection, name)
        return self.connections.retrying(work)

    def _forget_answers(self, connection: psycopg.Connection, name: str | None) -> int:
        """Drop stored answers, and refuse to store any of a charge made before now.

        The analysts' rows are locked before the last charge id is read: a charge of theirs
        in flight holds that lock, so it has committed (and is counted) by then, and any
        later charge of theirs gets a larger id.
        """
        s = self.schema
        where, parameters = ("WHERE name = %s", (name,)) if name is not None else ("", ())
        connection.execute(f"SELECT 1 FROM {s}.analysts {where} ORDER BY name FOR UPDATE",
                           parameters)
        (last,) = first_row(connection.execute(f"SELECT coalesce(max(id), 0) FROM {s}.charges"))
        connection.execute(f"UPDATE {s}.analysts SET answers_after = %s {where}",
                           (last, *parameters))
        where = "WHERE analyst = %s" if name is not None else ""
        return connection.execute(f"DELETE FROM {s}.answers {where}", parameters).rowcount

    def _budget(self, connection: psycopg.Connection, name: str) -> Budget:
        row = connection.execute(
            "SELECT epsilon_total, epsilon_spent, delta_total, delta_spent, queries"
            f" FROM {self.schema}.analysts WHERE name = %s", (name,)).fetchone()
        if row is None:
            raise UnknownAnalyst(name)
        return Budget(*row)

    # metrics

    def metrics(self) -> list[Metric]:
        with self.connections.transaction() as connection:
            rows = connection.execute(
                "SELECT table_name, column_name, max_freq, measured_at"
                f" FROM {self.schema}.metrics ORDER BY table_name, column_name").fetchall()
        return [Metric(*row) for row in rows]

    def store_metrics(self, metrics: list[Metric]) -> None:
        """Insert or replace the measurements, all in one transaction."""
        with self.connections.transaction() as connection, connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {self.schema}.metrics VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (table_name, column_name) DO UPDATE SET"
                " max_freq = excluded.max_freq, measured_at = excluded.measured_at",
                [(m.table, m.column, m.max_freq, m.measured_at) for m in metrics])

