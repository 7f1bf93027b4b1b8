"""No answer's commit restarts the SQLite ledger's WAL (accounting/wal_restart.py): the
commit that does syncs the new WAL header too, a second fsync on that answer's path.

Each restart adds one to the checkpoint sequence number in the WAL's header, which is
how these tests see who restarted it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from accounting import SqliteLedger, charge_answer
from accounting.wal_restart import Checkpointer
from tests.test_ledger import make_ledger, request

pytestmark = pytest.mark.unit


def restarts(database: Path) -> int:
    """The WAL header's checkpoint sequence number."""
    header = database.with_name(database.name + "-wal").read_bytes()[:32]
    return int.from_bytes(header[12:16], "big")


def answer(ledger: SqliteLedger, numbers: range) -> None:
    for n in numbers:
        charge_answer(ledger, request(n), 0.3, [[n]])


def test_the_checkpointer_restarts_the_wal_itself(tmp_path):
    database = tmp_path / "ledger.sqlite3"
    ledger = make_ledger(lambda: SqliteLedger(database), epsilon=1e6)
    answer(ledger, range(20))
    opened = restarts(database)
    Checkpointer(database, ledger.connections.writing).checkpoint()
    assert restarts(database) == opened + 1  # by the checkpointer's own commit
    answer(ledger, range(20, 30))
    assert restarts(database) == opened + 1  # no answer restarted it


def test_without_it_the_first_answer_after_a_checkpoint_would(tmp_path):
    """The behaviour avoided: a plain checkpoint leaves the restart to the next commit."""
    database = tmp_path / "ledger.sqlite3"
    ledger = make_ledger(lambda: SqliteLedger(database), epsilon=1e6)
    answer(ledger, range(20))
    opened = restarts(database)
    with sqlite3.connect(database) as plain:
        plain.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    answer(ledger, range(20, 21))
    assert restarts(database) == opened + 1


def test_commits_during_the_copy_are_copied_too_and_the_wal_still_restarts(tmp_path):
    """Answers committed while the checkpoint copies (after its snapshot) are copied
    under the commits' lock, so that the WAL restarts at every checkpoint even under a
    steady stream of commits, and never by an answer."""
    database = tmp_path / "ledger.sqlite3"
    ledger = make_ledger(lambda: SqliteLedger(database), epsilon=1e6)
    answer(ledger, range(20))
    checkpointer = Checkpointer(database, ledger.connections.writing)
    connection, pin = checkpointer._open(), checkpointer._open()
    copies: list[str] = []

    class CommitDuringTheCopy:
        """The checkpoint's connection, with answers committed as its first copy starts
        (outside the lock: the second copy runs under it)."""

        def execute(self, sql: str, *args):
            if sql.startswith("PRAGMA wal_checkpoint"):
                copies.append(sql)
                if len(copies) == 1:
                    answer(ledger, range(20, 25))
            return connection.execute(sql, *args)

        def __getattr__(self, name: str):
            return getattr(connection, name)

    checkpointer._connections = (CommitDuringTheCopy(), pin)  # type: ignore[assignment]
    opened = restarts(database)
    checkpointer.checkpoint()
    assert len(copies) == 2
    assert restarts(database) == opened + 1
    answer(ledger, range(25, 30))
    assert restarts(database) == opened + 1
    # The WAL started again from its beginning: the last five answers' frames, not all.
    wal = database.with_name(database.name + "-wal")
    frames = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    assert 0 < frames < 60 and wal.exists()  # the 25 answers before wrote over 100


def test_a_ledger_opened_on_a_checkpointed_file_restarts_it_before_any_answer(tmp_path):
    database = tmp_path / "ledger.sqlite3"
    make_ledger(lambda: SqliteLedger(database), epsilon=1e6)
    with sqlite3.connect(database) as plain:
        plain.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    ledger = SqliteLedger(database)
    opened = restarts(database)
    answer(ledger, range(5))
    assert restarts(database) == opened


def test_a_ledger_opened_on_a_wal_in_use_writes_nothing(tmp_path):
    """Only a WAL without a header is given one at opening: opening a ledger (every
    `dpgate user …` command does) does not commit otherwise."""
    database = tmp_path / "ledger.sqlite3"
    ledger = make_ledger(lambda: SqliteLedger(database), epsilon=1e6)
    answer(ledger, range(3))
    wal = database.with_name(database.name + "-wal")
    size = wal.stat().st_size
    SqliteLedger(database)
    assert wal.stat().st_size == size
