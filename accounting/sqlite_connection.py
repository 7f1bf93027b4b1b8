"""Connections to the SQLite ledger file: one per thread, write transactions, checkpoints."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .wal_restart import Checkpointer

# The WAL is checkpointed on a thread of its own every this many commits (a fresh answer
# writes a few pages, so about SQLite's default of 1,000 pages), instead of by the commit
# that crosses the threshold: then that answer would pay the checkpoint's two fsyncs too.
CHECKPOINT_EVERY = 256


class SqliteConnections:
    """This thread's connection to the ledger file at `path`, and the process's write lock."""

    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()
        self._commits = 0
        self._checkpointer: Checkpointer | None = None
        # Held by every commit of this process, and by the checkpointer while it restarts
        # the WAL (wal_restart.py): no answer's commit is the first after a checkpoint.
        self.writing = threading.Lock()

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use and kept.

        A connection per call would be ten times slower: when the last connection to a
        WAL database closes, SQLite checkpoints and removes the WAL file.
        """
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            connection.execute("PRAGMA synchronous=FULL")
            connection.execute("PRAGMA wal_autocheckpoint=0")  # wal_restart.py's work
            self._local.connection = connection
        return connection

    @contextmanager
    def opened(self) -> Iterator[sqlite3.Connection]:
        """The connection, left outside any transaction whatever happens inside."""
        connection = self.connection()
        try:
            yield connection
        finally:
            if connection.in_transaction:
                connection.execute("ROLLBACK")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taking the write lock up front so checks and writes agree.

        An exception inside rolls it back (in `opened`).
        """
        with self.opened() as connection, self.writing:
            connection.execute("BEGIN IMMEDIATE")
            yield connection
            connection.execute("COMMIT")
        self.count_commit()

    def count_commit(self) -> None:
        """Ask for a checkpoint every CHECKPOINT_EVERY commits."""
        self._commits += 1  # approximate across threads, which is all it needs to be
        if self._commits % CHECKPOINT_EVERY == 0:
            if self._checkpointer is None:
                self._checkpointer = Checkpointer(self.path, self.writing)
                self._checkpointer.start()
            self._checkpointer.wanted.set()
