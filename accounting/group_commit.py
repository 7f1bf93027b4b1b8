"""Group commit: the charges of concurrent sessions share one transaction and one fsync.

SQLite has one writer at a time, and a writer that finds the lock taken sleeps in its busy
handler (for up to tens of milliseconds) even after the lock is free again. So instead of
every thread taking the lock for its own charge, the threads that arrive while a commit is
running queue their work; when it ends, one of them (the leader) runs the whole queue in
one IMMEDIATE transaction, each piece under its own SAVEPOINT (a piece that raises, such as
BudgetExceeded, is rolled back alone), commits once and wakes the others with their
results. Nothing is reported before the commit that makes it durable.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Piece(Generic[T]):
    """One thread's work in a group, and what became of it."""

    def __init__(self, work: Callable[[sqlite3.Connection], T]):
        self.work = work
        self.result: T | None = None
        self.error: BaseException | None = None
        self.lead = False  # woken to lead the next group rather than with a result
        self.done = threading.Event()


class GroupCommit:
    """Runs work(connection) pieces from many threads in shared transactions."""

    def __init__(self, connection: Callable[[], sqlite3.Connection],
                 committed: Callable[[], None] = lambda: None,
                 writing: threading.Lock | None = None):
        self._connection = connection  # the calling thread's connection
        self._committed = committed  # told after each durable commit
        # Held during each group's transaction: whoever else takes it (the ledger's
        # checkpointer) knows no commit of this process runs meanwhile.
        self._writing = writing or threading.Lock()
        self._lock = threading.Lock()
        self._queue: list[_Piece] = []
        self._busy = False

    def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """work(connection) inside a committed transaction; its result or its exception."""
        piece: _Piece[T] = _Piece(work)
        with self._lock:
            self._queue.append(piece)
            lead = not self._busy
            self._busy = True
        if not lead:
            piece.done.wait()
            lead = piece.lead
        if lead:
            self._lead()
        if piece.error is not None:
            raise piece.error
        return piece.result  # type: ignore[return-value]

    def run_all(self, works: list[Callable[[sqlite3.Connection], T]]
                ) -> list[tuple[T | None, BaseException | None]]:
        """Each work(connection) in committed transactions (all in the same one, with
        whatever else is queued), from one calling thread: (result, None) or (None,
        exception) for each, in order."""
        pieces: list[_Piece[T]] = [_Piece(work) for work in works]
        if not pieces:
            return []
        with self._lock:
            self._queue.extend(pieces)
            lead = not self._busy
            self._busy = True
        # A leader takes the whole queue: the pieces, queued together, are committed
        # together, and only the first can be handed the lead.
        if not lead:
            pieces[0].done.wait()
            lead = pieces[0].lead
        if lead:
            self._lead()
        for piece in pieces:
            piece.done.wait()
        return [(piece.result, piece.error) for piece in pieces]

    def _lead(self) -> None:
        """Commit everything queued, then hand the lead to a waiter, if any."""
        with self._lock:
            group, self._queue = self._queue, []
        try:
            self._commit(group)
        finally:
            with self._lock:
                if self._queue:
                    following = self._queue[0]
                    following.lead = True
                    following.done.set()
                else:
                    self._busy = False
            for piece in group:
                piece.done.set()

    def _commit(self, group: list[_Piece]) -> None:
        with self._writing:
            self._commit_locked(group)

    def _commit_locked(self, group: list[_Piece]) -> None:
        connection = self._connection()
        try:
            connection.execute("BEGIN IMMEDIATE")
            for number, piece in enumerate(group):
                connection.execute(f"SAVEPOINT piece{number}")
                try:
                    piece.result = piece.work(connection)
                except Exception as error:  # this piece only: the others go on
                    connection.execute(f"ROLLBACK TO piece{number}")
                    piece.error = error
                connection.execute(f"RELEASE piece{number}")
            connection.execute("COMMIT")
        except Exception as error:  # the transaction is lost: so is every piece of it
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            for piece in group:
                piece.result, piece.error = None, error
            return
        self._committed()
