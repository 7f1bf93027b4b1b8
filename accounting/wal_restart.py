"""The WAL checkpointed and restarted by the ledger's own thread, so that no answer's
commit makes more than one fsync.

A commit in WAL mode with synchronous=FULL syncs the WAL once. But the first commit
after a checkpoint has copied the whole WAL into the database restarts the WAL from its
beginning, and writes and syncs a new WAL header before its frames: two fsyncs, on the
path of whichever answer came first. So the checkpointer writes that first commit itself:

1. it pins a read snapshot (a read transaction on a second connection): while a reader
   holds a snapshot that uses the WAL, no writer may restart it, and commits append;
2. it checkpoints (PASSIVE: copying pages while commits go on);
3. under the lock every commit of the process holds, it lets the snapshot go, copies
   the frames committed since the snapshot (a few pages), and, if the WAL is then all
   copied, commits a write of its own, which restarts the WAL and pays the header's
   fsync. Commits wait for this short part (a few fsyncs), once per checkpoint.

Under a steady stream of commits the WAL is now restarted at every checkpoint: before,
a checkpoint overtaken by commits left the WAL to grow (70 MB after 3,000 back-to-back
answers).

Another process writing the same file (the `dpgate user …` commands) may still be the
first after a checkpoint; a proxy's answers are not.
"""

from __future__ import annotations

import ctypes
import sqlite3
import threading
from pathlib import Path

WAL_HEADER_BYTES = 32  # a WAL file shorter than this has no header yet


def restart_wal(connection: sqlite3.Connection) -> None:
    """Commit a write that changes nothing: writing the header's user_version back as
    it is dirties page 1, which is all a commit needs to write a WAL frame (and, if the
    WAL was wholly checkpointed, to restart it). Call it with the commits' lock held."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        connection.execute(f"PRAGMA user_version = {int(version)}")
        connection.execute("COMMIT")
    finally:
        if connection.in_transaction:
            connection.execute("ROLLBACK")


class Checkpointer(threading.Thread):
    """Copies the WAL into the database file when asked, on its own connections and
    thread (named dpgate-ckpt where the system allows), and restarts the WAL itself
    (module docstring). A checkpoint that fails is tried again at the next call; SQLite
    also checkpoints when the last connection closes."""

    def __init__(self, path: Path, writing: threading.Lock):
        super().__init__(name="dpgate-checkpoint", daemon=True)
        self.path = path
        self.writing = writing  # held by every commit of the process
        self.wanted = threading.Event()
        self._connections: tuple[sqlite3.Connection, sqlite3.Connection] | None = None

    def run(self) -> None:
        _name_this_thread(b"dpgate-ckpt")
        while True:
            self.wanted.wait()
            self.wanted.clear()
            try:
                self.checkpoint()
            except sqlite3.Error:
                pass  # busy or failing disk: the WAL grows until the next attempt

    def checkpoint(self) -> None:
        """One checkpoint, then the WAL's restart if the checkpoint copied all of it."""
        if self._connections is None:
            self._connections = (self._open(), self._open())
        connection, pin = self._connections
        pin.execute("BEGIN")
        try:
            pin.execute("SELECT count(*) FROM sqlite_master").fetchone()  # takes the snapshot
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()  # the bulk
        finally:
            with self.writing:
                pin.execute("ROLLBACK")
                # The frames of commits made since the snapshot (during the copy, or
                # before the lock was ours), copied now while no commit of this process
                # can add more: under a steady stream of commits a checkpoint would
                # otherwise never copy everything, and the WAL would never restart and
                # grow without end. Nothing new: nothing written, no fsync.
                _, frames, copied = connection.execute(
                    "PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                # Everything copied: the next commit restarts the WAL, so let it be ours.
                # (Not everything: a reader holds an older snapshot, and no commit can
                # restart the WAL before the next checkpoint.)
                if frames > 0 and frames == copied:
                    restart_wal(connection)

    def _open(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=60, isolation_level=None,
                                     check_same_thread=False)
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("PRAGMA wal_autocheckpoint=0")
        return connection


def _name_this_thread(name: bytes) -> None:
    """The thread's name as the system shows it (Linux prctl), for strace and top."""
    try:
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name[:15]), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass
