"""Connections to the PostgreSQL ledger: one per thread, transactions, retries.

The proxy calls the ledger from worker threads, so each thread keeps its own psycopg
connection (autocommit; BEGIN/COMMIT explicit). A connection that died while idle (the
ledger restarted) is replaced before anything is asked on it; a failure while asking is
LedgerUnavailable, and the caller releases nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg

from .store import LedgerUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

# Deadlocks and serialisation failures roll back the whole transaction, which is then safe
# to run again; locks are taken in name order, so these should be rare.
RETRIES = 5
# Seconds a kept connection may sit unused before it is probed (SELECT 1) before use.
IDLE_PROBE = 1.0


class PerThreadConnections:
    """This thread's connection to the ledger at `dsn`, with psycopg `options`."""

    def __init__(self, dsn: str, options: dict[str, Any]):
        self.dsn = dsn
        self.options = options
        self._local = threading.local()

    def _connect(self) -> psycopg.Connection:
        try:
            connection = psycopg.connect(self.dsn, autocommit=True, **self.options)
        except psycopg.OperationalError as error:
            raise LedgerUnavailable(f"cannot connect to the ledger: {first_line(error)}") \
                from None
        # A ledger whose commits are not durable could lose a charge of an answer already
        # released; PostgreSQL's default is durable, a server configured otherwise is not
        # trusted for this one.
        if first_row(connection.execute("SHOW synchronous_commit"))[0] in ("off", "local"):
            connection.execute("SET synchronous_commit = on")
        return connection

    def connection(self) -> psycopg.Connection:
        """This thread's connection, opened on first use and after a failure."""
        connection = getattr(self._local, "connection", None)
        if connection is None or connection.closed:
            connection = self._local.connection = self._connect()
        return connection

    def drop(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            connection.close()

    def _begin(self) -> psycopg.Connection:
        """BEGIN on this thread's connection. A kept connection that died while idle (the
        ledger restarted) fails here, before anything was asked: then one fresh one."""
        connection = self.connection()
        try:
            connection.execute("BEGIN")
            return connection
        except psycopg.OperationalError:
            if not connection.broken:
                raise
        self.drop()
        connection = self.connection()
        connection.execute("BEGIN")
        return connection

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """One READ COMMITTED transaction; locks taken inside serialise what must be.

        A connection failure is LedgerUnavailable (the connection is dropped and the next
        call opens a new one); any other exception rolls the transaction back.
        """
        try:
            connection = self._begin()
            try:
                yield connection
                connection.execute("COMMIT")
            except BaseException:
                if not connection.broken and not connection.closed:
                    connection.execute("ROLLBACK")
                raise
        except psycopg.errors.TransactionRollback:
            raise  # retried by retrying
        except psycopg.OperationalError as error:
            # Also a COMMIT whose answer never came: the charge may or may not be stored.
            # The caller releases nothing; the charge, if stored, stays (worst case).
            kept: psycopg.Connection | None = getattr(self._local, "connection", None)
            if kept is None or kept.broken or kept.closed:
                self.drop()
            log.error("privacy ledger unavailable: %s", first_line(error))
            raise LedgerUnavailable(first_line(error)) from None

    def call(self, sql: str, parameters: tuple) -> tuple:
        """One statement in autocommit (its own transaction, committed when it returns),
        its first row; again after a deadlock or a serialisation failure.

        A connection kept idle for a while is probed first: one that died meanwhile (the
        ledger restarted) is replaced before anything is asked on it, so the answer to
        this statement is never lost in between.
        """
        for attempt in range(RETRIES):
            try:
                connection = self._live_connection()
                row = first_row(connection.execute(sql, parameters))
                self._local.used = time.monotonic()
                return row
            except psycopg.errors.TransactionRollback:
                if attempt == RETRIES - 1:
                    raise LedgerUnavailable("the ledger kept failing to serialise a "
                                            "transaction") from None
            except psycopg.OperationalError as error:
                # The COMMIT's answer may never have come: the caller releases nothing,
                # and a charge that was stored stays (the worst case is assumed).
                self._drop_if_broken()
                log.error("privacy ledger unavailable: %s", first_line(error))
                raise LedgerUnavailable(first_line(error)) from None
        raise AssertionError("unreachable")

    def _live_connection(self) -> psycopg.Connection:
        connection = self.connection()
        if time.monotonic() - getattr(self._local, "used", 0.0) > IDLE_PROBE:
            try:
                connection.execute("SELECT 1")
            except psycopg.OperationalError:
                if not connection.broken:
                    raise
                self.drop()
                connection = self.connection()
        return connection

    def _drop_if_broken(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is None or connection.broken or connection.closed:
            self.drop()

    def retrying(self, work: Callable[[psycopg.Connection], T]) -> T:
        """Run `work(connection)` in a transaction, again after a deadlock or a
        serialisation failure (both roll back everything they did)."""
        for attempt in range(RETRIES):
            try:
                with self.transaction() as connection:
                    return work(connection)
            except psycopg.errors.TransactionRollback:
                if attempt == RETRIES - 1:
                    raise LedgerUnavailable("the ledger kept failing to serialise a "
                                            "transaction") from None
        raise AssertionError("unreachable")


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def first_row(cursor: psycopg.Cursor) -> tuple[Any, ...]:
    """The first row of a statement that always returns one (an aggregate, a setting)."""
    row = cursor.fetchone()
    if row is None:
        raise LedgerUnavailable("the ledger returned no row where one is always expected")
    return row
