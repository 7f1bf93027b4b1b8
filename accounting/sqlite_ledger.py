"""The privacy ledger in one SQLite file (WAL, synchronous=FULL).

Each thread has its own connection, so the ledger is safe to use from several threads and
processes at once; SQLite's write lock (BEGIN IMMEDIATE) serialises budget checks.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from .group_commit import GroupCommit
from .one_commit import AnswerCharge, FailureCharge, ShiftChanged, Standing
from .rows import ANALYST_COLUMNS, CHARGE_COLUMNS, analyst_from_row, now
from .sqlite_connection import SqliteConnections
from .sqlite_schema import migrate
from .store import (
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
from .wal_restart import WAL_HEADER_BYTES, restart_wal

# A stored answer longer than this (JSON characters) is not decoded by look_up_at_once:
# about a millisecond of json.loads, too long for a caller that serves others meanwhile.
AT_ONCE_ANSWER_BYTES = 64 << 10


class SqliteLedger:
    """The Ledger interface over a SQLite file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.connections = SqliteConnections(self.path)
        self._local = threading.local()
        self._group = GroupCommit(self.connections.connection, self.connections.count_commit,
                                  self.connections.writing)
        with self.connections.opened() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            migrate(connection)
            # A WAL without a header yet (new, or emptied when the last connection
            # closed) gets one from the next commit, which then syncs it too: here, once,
            # rather than on the first answer's path.
            wal = self.path.with_name(self.path.name + "-wal")
            if not wal.exists() or wal.stat().st_size < WAL_HEADER_BYTES:
                with self.connections.writing:
                    restart_wal(connection)

    def ping(self) -> None:
        """One read of the file: raises if the ledger cannot be read (health checks)."""
        with self.connections.opened() as connection:
            connection.execute("SELECT count(*) FROM metrics").fetchone()

    # analysts

    def add_analyst(self, analyst: Analyst) -> None:
        """Store a new analyst. A name that was removed before starts with what it spent
        then: charges belong to a name, and the ledger cannot tell two people apart."""
        verifier = analyst.verifier
        with self.connections.transaction() as connection:
            try:
                connection.execute(
                    "INSERT INTO analysts (name, scram_salt, scram_stored_key, scram_server_key,"
                    " scram_iterations, epsilon_total, delta_total, shift, created_at,"
                    " epsilon_spent, delta_spent, queries)"
                    " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(sum(epsilon), 0),"
                    " coalesce(sum(delta), 0), count(*) FROM charges WHERE analyst = ?",
                    (analyst.name, verifier.salt, verifier.stored_key, verifier.server_key,
                     verifier.iterations, analyst.epsilon_total, analyst.delta_total,
                     analyst.shift, now(), analyst.name),
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"analyst {analyst.name!r} already exists") from None

    def remove_analyst(self, name: str) -> None:
        """Remove the credentials and cached answers; the charges stay for the global loss."""
        with self.connections.transaction() as connection:
            if not connection.execute("DELETE FROM analysts WHERE name = ?", (name,)).rowcount:
                raise UnknownAnalyst(name)
            connection.execute("DELETE FROM answers WHERE analyst = ?", (name,))

    def analyst(self, name: str) -> Analyst | None:
        with self.connections.opened() as connection:
            row = connection.execute(
                f"SELECT {ANALYST_COLUMNS} FROM analysts WHERE name = ?", (name,)
            ).fetchone()
        return None if row is None else analyst_from_row(row)

    def analysts(self) -> list[Analyst]:
        with self.connections.opened() as connection:
            rows = connection.execute(
                f"SELECT {ANALYST_COLUMNS} FROM analysts ORDER BY name"
            ).fetchall()
        return [analyst_from_row(row) for row in rows]

    def rotate_shift(self, name: str, shift: float) -> None:
        """Give the analyst a new secret shift and forget their stored answers.

        A stored answer carries the old shift; serving it again would keep the retired
        shift in use next to answers carrying the new one.
        """
        with self.connections.transaction() as connection:
            updated = connection.execute(
                "UPDATE analysts SET shift = ? WHERE name = ?", (shift, name)).rowcount
            if not updated:
                raise UnknownAnalyst(name)
            _forget_answers(connection, name)

    def set_budgets(self, epsilon_totals: Mapping[str, float]) -> None:
        """Set the epsilon totals of existing analysts, all or none of them.

        Raises UnknownAnalyst naming every missing analyst, and ValueError for a total
        that is not a positive finite number; then nothing is written.
        """
        bad = [name for name, total in epsilon_totals.items() if not 0 < total < math.inf]
        if bad:
            raise ValueError(f"an epsilon total must be positive and finite: {', '.join(bad)}")
        with self.connections.transaction() as connection:
            known = {row[0] for row in connection.execute("SELECT name FROM analysts")}
            missing = sorted(set(epsilon_totals) - known)
            if missing:
                raise UnknownAnalyst(", ".join(missing))
            connection.executemany(
                "UPDATE analysts SET epsilon_total = ? WHERE name = ?",
                [(total, name) for name, total in epsilon_totals.items()],
            )

    # budgets and charges

    def budget(self, name: str) -> Budget:
        with self.connections.opened() as connection:
            return _budget(connection, name)

    def budgets(self) -> list[AnalystBudget]:
        """Every analyst, and every removed name that still has charges, by name."""
        with self.connections.opened() as connection:
            rows = connection.execute(  # one statement: one consistent snapshot
                "SELECT name, epsilon_total, epsilon_spent, delta_total, delta_spent, queries,"
                " 1 FROM analysts UNION ALL"
                " SELECT analyst, 0.0, sum(epsilon), 0.0, sum(delta), count(*), 0 FROM charges"
                " WHERE analyst NOT IN (SELECT name FROM analysts) GROUP BY analyst"
                " ORDER BY 1").fetchall()
        return [AnalystBudget(name, Budget(*spend), bool(is_active))
                for name, *spend, is_active in rows]

    def charges(self, name: str | None = None) -> list[ChargeRecord]:
        """The charges of one analyst, or of every analyst (removed ones too), by id."""
        where, parameters = ("WHERE analyst = ?", (name,)) if name is not None else ("", ())
        with self.connections.opened() as connection:
            rows = connection.execute(
                f"SELECT {CHARGE_COLUMNS} FROM charges {where} ORDER BY id", parameters
            ).fetchall()
        return [ChargeRecord(*row) for row in rows]

    def charge_or_repeat(self, request: ChargeRequest) -> Charged | Repeated:
        """Return the stored answer to a repeated question, or charge the budget durably.

        The budget check and the insert are one IMMEDIATE transaction: two sessions of the
        same analyst can never both pass a check that only one of them fits. Both epsilon
        and delta must fit; otherwise BudgetExceeded and nothing is charged.
        """
        with self.connections.transaction() as connection:
            stored = _stored(connection, request)
            if stored is not None:
                return stored
            charge_id, shift = _charge(connection, request, "charged")
            return Charged(charge_id, _budget(connection, request.analyst), shift)

    # one commit per fresh answer (one_commit.py)

    def look_up(self, analyst: str, fingerprint: str) -> Repeated | Standing:
        """The stored answer to a repeated question, or the budget and shift: a read of
        one snapshot, which waits for no writer and writes nothing (no fsync)."""
        with self.connections.opened() as connection:
            found = _look_up(connection, analyst, fingerprint, None)
        assert found is not None  # no size limit: always an answer
        return found

    def look_up_at_once(self, analyst: str, fingerprint: str) -> Repeated | Standing | None:
        """`look_up` for a caller that must not wait (the event loop): None when SQLite
        would wait for a lock (a WAL reader rarely does) or the stored answer is too large
        to decode in passing; then call `look_up` on a thread.

        It saves a fresh answer a trip to a worker thread and back: the read itself takes
        tens of microseconds, the trip as long again or more on a busy machine."""
        connection = getattr(self._local, "at_once", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=0, isolation_level=None)
            self._local.at_once = connection
        try:
            return _look_up(connection, analyst, fingerprint, AT_ONCE_ANSWER_BYTES)
        except sqlite3.OperationalError:  # busy, locked: the thread's look_up waits
            return None

    def charge_answer(self, request: ChargeRequest, shift: float,
                      rows: list[list[object]]) -> Charged | Repeated | ShiftChanged:
        """Check, charge and store the answer in one transaction (one fsync), shared with
        other sessions' charges arriving meanwhile (group_commit.py).

        The answer is stored unless the analyst's answers were forgotten after the
        look-up (answers_after), as record_answer does."""
        return self._group.run(_answer_work(AnswerCharge(request, shift, rows)))

    def charge_failure(self, request: ChargeRequest, outcome: str) -> Charged | Repeated:
        """Charge a failed question with its outcome, in a shared transaction too."""
        return self._group.run(_failure_work(FailureCharge(request, outcome)))

    def prepare_thread(self) -> None:
        """Open this thread's connection and commit once with it (nothing changes): the
        first sync of a connection's WAL handle also syncs the folder (SQLite's unix VFS
        does so for a journal it may have created), a second fsync that would otherwise
        fall on the first answer this thread commits."""
        connection = self.connections.connection()
        with self.connections.writing:
            restart_wal(connection)

    def charge_together(self, charges: list[AnswerCharge | FailureCharge]
                        ) -> list[tuple[object, BaseException | None]]:
        """Several charge_answer / charge_failure calls from one thread, committed
        together: each one's (result, None) or (None, exception), in order."""
        return self._group.run_all([
            _answer_work(charge) if isinstance(charge, AnswerCharge) else _failure_work(charge)
            for charge in charges])

    def record_answer(self, charge_id: int, rows: list[list[object]]) -> None:
        """Store the released answer so a repeat of the question gets it back for free.

        Not stored when the analyst's answers were forgotten after this charge was made
        (or the analyst was removed): that answer predates the invalidation.
        """
        with self.connections.transaction() as connection:
            analyst, fingerprint = connection.execute(
                "SELECT analyst, fingerprint FROM charges WHERE id = ?", (charge_id,)
            ).fetchone()
            connection.execute("UPDATE charges SET outcome = 'answered' WHERE id = ?", (charge_id,))
            connection.execute(
                "INSERT OR IGNORE INTO answers SELECT ?, ?, ?, ? FROM analysts"
                " WHERE name = ? AND answers_after < ?",
                (analyst, fingerprint, charge_id, json.dumps(rows), analyst, charge_id),
            )

    def record_failure(self, charge_id: int, outcome: str) -> None:
        """Mark a charged query that released nothing; the charge itself stays."""
        with self.connections.transaction() as connection:
            connection.execute("UPDATE charges SET outcome = ? WHERE id = ?", (outcome, charge_id))

    def forget_answers(self, name: str | None = None) -> int:
        """Drop the stored answers of one analyst (or of all): their next repeat is a new,
        charged question. Returns how many answers were dropped."""
        with self.connections.transaction() as connection:
            if name is not None and connection.execute(
                    "SELECT 1 FROM analysts WHERE name = ?", (name,)).fetchone() is None:
                raise UnknownAnalyst(name)
            return _forget_answers(connection, name)

    # metrics

    def metrics(self) -> list[Metric]:
        with self.connections.opened() as connection:
            rows = connection.execute(
                "SELECT table_name, column_name, max_freq, measured_at FROM metrics"
                " ORDER BY table_name, column_name"
            ).fetchall()
        return [Metric(*row) for row in rows]

    def store_metrics(self, metrics: list[Metric]) -> None:
        """Insert or replace the measurements, all in one transaction."""
        with self.connections.transaction() as connection:
            connection.executemany(
                "INSERT INTO metrics VALUES (?, ?, ?, ?) ON CONFLICT (table_name, column_name)"
                " DO UPDATE SET max_freq = excluded.max_freq,"
                " measured_at = excluded.measured_at",
                [(m.table, m.column, m.max_freq, m.measured_at) for m in metrics],
            )


def _answer_work(charge: AnswerCharge
                 ) -> Callable[[sqlite3.Connection], Charged | Repeated | ShiftChanged]:
    """charge_answer's part of a group's transaction."""
    request = charge.request

    def work(connection: sqlite3.Connection) -> Charged | Repeated | ShiftChanged:
        stored = _stored(connection, request)
        if stored is not None:
            return stored
        # The shift and the budget in one read, and the budget after the charge computed
        # (the same float sums SQLite makes): three statements fewer per answer.
        row = connection.execute(
            "SELECT shift, epsilon_total, epsilon_spent, delta_total, delta_spent, queries"
            " FROM analysts WHERE name = ?", (request.analyst,)).fetchone()
        if row is None:
            raise UnknownAnalyst(request.analyst)
        current, *spend = row
        if current != charge.shift:
            return ShiftChanged(current)
        budget = Budget(*spend)
        if not budget.fits(request.epsilon, request.delta):
            raise BudgetExceeded(request.epsilon, budget, request.delta)
        charge_id = _insert_charge(connection, request, "answered")
        connection.execute(
            "INSERT OR IGNORE INTO answers SELECT ?, ?, ?, ? FROM analysts"
            " WHERE name = ? AND answers_after < ?",
            (request.analyst, request.fingerprint, charge_id, json.dumps(charge.rows),
             request.analyst, charge_id),
        )
        after = Budget(budget.epsilon_total, budget.epsilon_spent + request.epsilon,
                       budget.delta_total, budget.delta_spent + request.delta,
                       budget.queries + 1)
        return Charged(charge_id, after, charge.shift)
    return work


def _failure_work(charge: FailureCharge
                  ) -> Callable[[sqlite3.Connection], Charged | Repeated]:
    """charge_failure's part of a group's transaction."""
    request = charge.request

    def work(connection: sqlite3.Connection) -> Charged | Repeated:
        stored = _stored(connection, request)
        if stored is not None:
            return stored
        charge_id, shift = _charge(connection, request, charge.outcome)
        return Charged(charge_id, _budget(connection, request.analyst), shift)
    return work


def _look_up(connection: sqlite3.Connection, analyst: str, fingerprint: str,
             limit: int | None) -> Repeated | Standing | None:
    """look_up's reads in one statement (one snapshot, no BEGIN nor ROLLBACK: a fresh
    answer's look-up runs on the event loop); None if the stored answer is longer than
    `limit` characters."""
    row = connection.execute(
        "SELECT a.rows, n.shift, n.epsilon_total, n.epsilon_spent, n.delta_total,"
        " n.delta_spent, n.queries FROM analysts n LEFT JOIN answers a"
        " ON a.analyst = n.name AND a.fingerprint = ? WHERE n.name = ?",
        (fingerprint, analyst)).fetchone()
    if row is None:
        raise UnknownAnalyst(analyst)
    stored, shift, *spend = row
    if stored is not None and limit is not None and len(stored) > limit:
        return None
    budget = Budget(*spend)
    return Repeated(json.loads(stored), budget) if stored is not None \
        else Standing(budget, shift)


def _stored(connection: sqlite3.Connection, request: ChargeRequest) -> Repeated | None:
    """The stored answer to this analyst's question, with their budget, if there is one."""
    stored = connection.execute(
        "SELECT rows FROM answers WHERE analyst = ? AND fingerprint = ?",
        (request.analyst, request.fingerprint),
    ).fetchone()
    if stored is None:
        return None
    return Repeated(json.loads(stored[0]), _budget(connection, request.analyst))


def _charge(connection: sqlite3.Connection, request: ChargeRequest, outcome: str
            ) -> tuple[int, float]:
    """Check the budget and insert the charge (inside the caller's IMMEDIATE transaction);
    returns the charge's id and the analyst's shift. Raises BudgetExceeded."""
    budget = _budget(connection, request.analyst)
    if not budget.fits(request.epsilon, request.delta):
        raise BudgetExceeded(request.epsilon, budget, request.delta)
    charge_id = _insert_charge(connection, request, outcome)
    (shift,) = connection.execute("SELECT shift FROM analysts WHERE name = ?",
                                  (request.analyst,)).fetchone()
    return charge_id, shift


def _insert_charge(connection: sqlite3.Connection, request: ChargeRequest, outcome: str
                   ) -> int:
    """Insert the charge and add it to the analyst's spending; its id. The budget was
    checked by the caller, in the same IMMEDIATE transaction."""
    cursor = connection.execute(
        "INSERT INTO charges (analyst, at, statement, fingerprint, epsilon, delta,"
        " mechanism, sensitivity, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (request.analyst, now(), request.statement, request.fingerprint,
         request.epsilon, request.delta, request.mechanism, request.sensitivity, outcome),
    )
    connection.execute(
        "UPDATE analysts SET epsilon_spent = epsilon_spent + ?,"
        " delta_spent = delta_spent + ?, queries = queries + 1 WHERE name = ?",
        (request.epsilon, request.delta, request.analyst),
    )
    assert cursor.lastrowid is not None  # the INSERT above made a row
    return cursor.lastrowid


def _budget(connection: sqlite3.Connection, name: str) -> Budget:
    row = connection.execute(
        "SELECT epsilon_total, epsilon_spent, delta_total, delta_spent, queries FROM analysts"
        " WHERE name = ?", (name,)
    ).fetchone()
    if row is None:
        raise UnknownAnalyst(name)
    return Budget(*row)


def _forget_answers(connection: sqlite3.Connection, name: str | None) -> int:
    """Drop stored answers, and refuse to store any of a charge made before now."""
    last_charge = connection.execute("SELECT coalesce(max(id), 0) FROM charges").fetchone()[0]
    if name is None:
        connection.execute("UPDATE analysts SET answers_after = ?", (last_charge,))
        return connection.execute("DELETE FROM answers").rowcount
    connection.execute("UPDATE analysts SET answers_after = ? WHERE name = ?",
                       (last_charge, name))
    return connection.execute("DELETE FROM answers WHERE analyst = ?", (name,)).rowcount
