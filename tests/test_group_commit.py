"""Group commit (accounting/group_commit.py) on a real SQLite file: pieces queued during a
commit share the next transaction; a piece that raises is rolled back alone."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from accounting.group_commit import GroupCommit
from tests.test_ledger_one_commit import wal_commits

pytestmark = pytest.mark.unit


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "group.sqlite3"
    with sqlite3.connect(path, isolation_level=None) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE t (n INTEGER UNIQUE)")
    local = threading.local()

    def connection() -> sqlite3.Connection:
        if not hasattr(local, "connection"):
            local.connection = sqlite3.connect(path, isolation_level=None,
                                               check_same_thread=False)
            local.connection.execute("PRAGMA synchronous=FULL")
            local.connection.execute("PRAGMA wal_autocheckpoint=0")
        return local.connection
    return path, connection


def test_pieces_queued_meanwhile_share_one_commit_and_fail_alone(database):
    path, connection = database
    commits = []
    group = GroupCommit(connection, lambda: commits.append(1))
    release = threading.Event()
    results: dict[int, object] = {}

    def insert(n: int, wait: bool = False):
        def work(c: sqlite3.Connection) -> int:
            if wait:
                release.wait(10)
            c.execute("INSERT INTO t VALUES (?)", (n,))
            return n
        try:
            results[n] = group.run(work)
        except sqlite3.IntegrityError as error:
            results[n] = error

    first = threading.Thread(target=insert, args=(1, True))
    first.start()
    time.sleep(0.2)  # the first group is open, its piece waiting
    others = [threading.Thread(target=insert, args=(n,)) for n in (2, 3, 1, 4)]
    for thread in others:
        thread.start()
    time.sleep(0.2)  # they queue behind it
    before = wal_commits(path.with_name(path.name + "-wal"))
    release.set()
    for thread in [first, *others]:
        thread.join(10)
    assert results[2] == 2 and results[3] == 3 and results[4] == 4
    assert isinstance(results[1], int) or isinstance(results[1], sqlite3.IntegrityError)
    with sqlite3.connect(path) as check:
        assert sorted(n for (n,) in check.execute("SELECT n FROM t")) == [1, 2, 3, 4]
    # The first commit alone, then one for the four queued pieces (one of them refused).
    assert len(commits) == 2
    assert wal_commits(path.with_name(path.name + "-wal")) - before == 2


def test_a_lost_transaction_fails_every_piece(database):
    path, connection = database
    group = GroupCommit(connection)
    with pytest.raises(sqlite3.OperationalError):
        group.run(lambda c: c.execute("COMMIT"))  # ends the group's transaction early
    assert group.run(lambda c: c.execute("INSERT INTO t VALUES (7)").rowcount) == 1


def test_run_all_commits_one_threads_pieces_together_and_fails_them_alone(database):
    path, connection = database
    commits = []
    group = GroupCommit(connection, lambda: commits.append(1))

    def insert(n: int):
        def work(c: sqlite3.Connection) -> int:
            c.execute("INSERT INTO t VALUES (?)", (n,))
            return n
        return work

    outcomes = group.run_all([insert(1), insert(2), insert(1), insert(3)])
    assert [result for result, _ in outcomes] == [1, 2, None, 3]
    assert isinstance(outcomes[2][1], sqlite3.IntegrityError)  # the duplicate, alone
    assert len(commits) == 1
    with sqlite3.connect(path) as check:
        assert [n for (n,) in check.execute("SELECT n FROM t ORDER BY n")] == [1, 2, 3]
    assert group.run_all([]) == []
