"""One durable commit per fresh answer (accounting/one_commit.py): the SQLite ledger's own
look_up / charge_answer / charge_failure, and the same functions composed from the plain
Ledger interface for stores that do not implement them (the PostgreSQL ledger, and the
SQLite ledger seen through the interface only)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from accounting import (
    BudgetExceeded,
    Charged,
    Repeated,
    ShiftChanged,
    SqliteLedger,
    Standing,
    charge_answer,
    charge_failure,
    look_up,
    look_up_at_once,
)
from accounting.sqlite_connection import CHECKPOINT_EVERY
from accounting.sqlite_ledger import AT_ONCE_ANSWER_BYTES
from tests.test_ledger import make_ledger, request

pytestmark = pytest.mark.end_to_end


class InterfaceOnly:
    """A real SQLite ledger seen only through the Ledger interface, as another store
    without the one-commit methods would be."""

    def __init__(self, ledger: SqliteLedger):
        self._ledger = ledger

    def __getattr__(self, name: str):
        if name in ("look_up", "look_up_at_once", "charge_answer", "charge_failure"):
            raise AttributeError(name)
        return getattr(self._ledger, name)


@pytest.fixture(params=["own", "composed"])
def store(request, new_ledger):
    """(the ledger as the proxy calls it, the same ledger for checks)."""
    ledger = make_ledger(new_ledger, epsilon=0.35)
    return (ledger if request.param == "own" else InterfaceOnly(ledger)), ledger


@pytest.fixture
def sqlite_ledger(tmp_path):
    def make() -> SqliteLedger:
        return SqliteLedger(tmp_path / "ledger.sqlite3")
    return make


def test_fresh_answer_then_repeat(store):
    ledger, sqlite = store
    asked = request(1)
    standing = look_up(ledger, "ann", asked.fingerprint, 0.3)
    assert isinstance(standing, Standing) and standing.shift == 0.3
    assert standing.budget is None or standing.budget.epsilon_spent == 0
    charged = charge_answer(ledger, asked, standing.shift, [[42]])
    assert isinstance(charged, Charged)
    assert charged.budget.epsilon_spent == pytest.approx(0.1)
    assert [c.outcome for c in sqlite.charges("ann")] == ["answered"]
    # Found by the look-up (SQLite) or by the charge (composed): free either way.
    again = look_up(ledger, "ann", asked.fingerprint, 0.3)
    if isinstance(again, Standing):
        again = charge_answer(ledger, asked, again.shift, [[7]])
    assert isinstance(again, Repeated) and again.rows == [[42]]
    assert sqlite.budget("ann").queries == 1


def test_budget_is_checked_in_the_commit(store):
    ledger, sqlite = store
    for n in range(3):
        assert isinstance(charge_answer(ledger, request(n), 0.3, [[n]]), Charged)
    with pytest.raises(BudgetExceeded):
        charge_answer(ledger, request(9), 0.3, [[9]])
    with pytest.raises(BudgetExceeded):
        charge_failure(ledger, request(10), "failed")
    assert sqlite.budget("ann").queries == 3
    assert sqlite.budget("ann").epsilon_spent == pytest.approx(0.3)


def test_a_failure_is_charged(store):
    ledger, sqlite = store
    charged = charge_failure(ledger, request(1), "failed")
    assert isinstance(charged, Charged)
    assert [c.outcome for c in sqlite.charges("ann")] == ["failed"]
    assert sqlite.budget("ann").epsilon_spent == pytest.approx(0.1)
    # Nothing stored: asking again is a fresh question.
    assert isinstance(look_up(ledger, "ann", request(1).fingerprint, 0.3), Standing)


@pytest.mark.unit
def test_a_rotated_shift_is_noticed_before_anything_is_stored(sqlite_ledger):
    """The SQLite ledger's own charge: nothing is written with a retired shift."""
    ledger = make_ledger(sqlite_ledger)
    standing = look_up(ledger, "ann", request(1).fingerprint, 0.3)
    ledger.rotate_shift("ann", 0.9)
    outcome = charge_answer(ledger, request(1), standing.shift, [[1]])
    assert outcome == ShiftChanged(0.9)
    assert ledger.charges("ann") == []  # the SQLite ledger writes nothing then
    assert isinstance(charge_answer(ledger, request(1), 0.9, [[2]]), Charged)


def wal_commits(path) -> int:
    """Commit frames in a WAL file: a frame whose header holds the database size after
    the commit (non-zero) ends a transaction, and each commit syncs the WAL once."""
    data = path.read_bytes() if path.exists() else b""
    if len(data) < 32:
        return 0
    page_size = int.from_bytes(data[8:12], "big")
    frames = range(32, len(data) - 24 - page_size + 1, 24 + page_size)
    return sum(1 for at in frames if int.from_bytes(data[at + 4:at + 8], "big"))


@pytest.mark.unit
def test_one_fresh_answer_is_one_write_transaction(tmp_path, sqlite_ledger):
    ledger = make_ledger(sqlite_ledger, epsilon=100.0)
    wal = tmp_path / "ledger.sqlite3-wal"
    before = wal_commits(wal)
    standing = look_up(ledger, "ann", request(1).fingerprint, 0.3)
    assert wal_commits(wal) == before  # the look-up writes nothing
    charge_answer(ledger, request(1), standing.shift, [[1]])
    assert wal_commits(wal) == before + 1
    charge_failure(ledger, request(2), "failed")
    assert wal_commits(wal) == before + 2
    # The old way, for comparison: a charge, then the answer, two commits.
    charged = ledger.charge_or_repeat(request(3))
    ledger.record_answer(charged.charge_id, [[3]])
    assert wal_commits(wal) == before + 4


def test_concurrent_answers_never_overspend(new_ledger):
    ledger = make_ledger(new_ledger, epsilon=1.0)

    def ask(n: int) -> bool:
        try:
            return isinstance(charge_answer(ledger, request(n), 0.3, [[n]]), Charged)
        except BudgetExceeded:
            return False

    with ThreadPoolExecutor(8) as pool:
        answered = sum(pool.map(ask, range(40)))
    assert answered == 10
    assert ledger.budget("ann").epsilon_spent == pytest.approx(1.0)


@pytest.mark.unit
def test_the_wal_is_checkpointed_off_the_answering_threads(tmp_path, sqlite_ledger):
    """Commits never checkpoint themselves (each answer: one fsync); a thread of the
    ledger's own does, every CHECKPOINT_EVERY commits."""
    def checkpointers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "dpgate-checkpoint"}

    others = checkpointers()  # of other tests' ledgers
    ledger = make_ledger(sqlite_ledger, epsilon=1e6)
    database = tmp_path / "ledger.sqlite3"
    for n in range(CHECKPOINT_EVERY - 2):  # make_ledger committed twice
        charge_answer(ledger, request(n), 0.3, [[n]])
    # Until a checkpoint, every page written stays in the WAL: the file does not grow.
    before = database.stat().st_size
    assert checkpointers() == others
    charge_answer(ledger, request(CHECKPOINT_EVERY), 0.3, [[0]])
    assert len(checkpointers() - others) == 1
    deadline = time.monotonic() + 10
    while database.stat().st_size == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert database.stat().st_size > before  # the checkpoint copied the pages in
    # The answers' own connection never checkpoints by itself.
    assert ledger.connections.connection().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0


def test_composed_a_rotated_shift_is_told_to_the_session(new_ledger):
    """Composed from the interface: the answer keeps the shift it was noised with, and
    the charge tells the session the new one for its next answers."""
    ledger = make_ledger(new_ledger)
    ledger.rotate_shift("ann", 0.9)
    outcome = charge_answer(InterfaceOnly(ledger), request(1), 0.3, [[1]])
    assert isinstance(outcome, Charged) and outcome.shift == 0.9
    assert [c.outcome for c in ledger.charges("ann")] == ["answered"]


def test_look_up_at_once_reads_what_look_up_reads(store):
    """The event loop's look-up (SQLite only): the same answers without waiting; a
    store without one says so (None) and is asked on a thread instead."""
    ledger, sqlite = store
    asked = request(1)
    if not hasattr(ledger, "look_up_at_once"):
        assert look_up_at_once(ledger, "ann", asked.fingerprint) is None
        return
    first = look_up_at_once(ledger, "ann", asked.fingerprint)
    assert first == look_up(ledger, "ann", asked.fingerprint, 0.0)
    assert isinstance(first, Standing) and first.shift == 0.3
    charge_answer(ledger, asked, first.shift, [[42]])
    again = look_up_at_once(ledger, "ann", asked.fingerprint)
    assert isinstance(again, Repeated) and again.rows == [[42]]
    assert again.budget.epsilon_spent == pytest.approx(0.1)
    # A stored answer too long to decode in passing is left to the thread's look-up.
    large = request(2)
    charge_answer(ledger, large, 0.3, [[str(n)] for n in range(AT_ONCE_ANSWER_BYTES // 4)])
    assert look_up_at_once(ledger, "ann", large.fingerprint) is None
    assert isinstance(look_up(ledger, "ann", large.fingerprint, 0.3), Repeated)


@pytest.mark.unit
def test_the_budget_told_after_an_answer_is_the_ledgers(sqlite_ledger):
    """charge_answer computes the budget after the charge instead of reading it again:
    it must be exactly what the ledger then holds (the same float sums)."""
    ledger = make_ledger(sqlite_ledger, epsilon=10.0)
    for n, epsilon in enumerate((0.1, 0.2, 0.3, 0.05, 0.7, 0.1, 1e-3)):
        asked = request(n, epsilon)
        charged = charge_answer(ledger, asked, 0.3, [[n]])
        assert isinstance(charged, Charged)
        assert charged.budget == ledger.budget("ann")
