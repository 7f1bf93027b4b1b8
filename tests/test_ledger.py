"""The SQLite ledger on a real file: charges, budgets, stored answers, concurrency."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest

from accounting import (
    Analyst,
    BudgetExceeded,
    Charged,
    ChargeRequest,
    Repeated,
    ScramVerifier,
    SqliteLedger,
    fingerprint,
)

VERIFIER = ScramVerifier(b"salt", b"stored", b"server", 4096)


def make_ledger(tmp_path, epsilon=1.0) -> SqliteLedger:
    ledger = SqliteLedger(tmp_path / "ledger.sqlite3")
    ledger.add_analyst(Analyst("ann", VERIFIER, epsilon, 1e-6, 0.3))
    return ledger


def request(n: int, epsilon: float = 0.1) -> ChargeRequest:
    sql = f"SELECT count(*) FROM t WHERE x = {n}"
    return ChargeRequest("ann", sql, fingerprint(sql, epsilon, 0.0, "shifted_laplace"),
                         epsilon, 0.0, "shifted_laplace", 1.0)


def test_file_is_wal_with_a_schema_version(tmp_path):
    make_ledger(tmp_path)
    connection = sqlite3.connect(tmp_path / "ledger.sqlite3")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("PRAGMA user_version").fetchone()[0] == 1
    # Opening again migrates nothing and loses nothing.
    assert SqliteLedger(tmp_path / "ledger.sqlite3").analyst("ann").shift == 0.3


def test_charge_answer_and_repeat(tmp_path):
    ledger = make_ledger(tmp_path)
    charged = ledger.charge_or_repeat(request(1))
    assert isinstance(charged, Charged)
    assert charged.budget.epsilon_spent == pytest.approx(0.1)
    ledger.record_answer(charged.charge_id, [[42]])
    repeated = ledger.charge_or_repeat(request(1))
    assert isinstance(repeated, Repeated) and repeated.rows == [[42]]
    assert ledger.budget("ann").queries == 1
    assert [c.outcome for c in ledger.charges("ann")] == ["answered"]


def test_failed_queries_keep_their_charge(tmp_path):
    ledger = make_ledger(tmp_path)
    charged = ledger.charge_or_repeat(request(1))
    ledger.record_failure(charged.charge_id, "failed")
    assert ledger.budget("ann").epsilon_spent == pytest.approx(0.1)
    assert isinstance(ledger.charge_or_repeat(request(1)), Charged)  # nothing was stored


def test_exact_fit_is_allowed_and_overspending_refused(tmp_path):
    ledger = make_ledger(tmp_path, epsilon=0.3)
    for n in range(3):
        ledger.charge_or_repeat(request(n))
    with pytest.raises(BudgetExceeded) as refused:
        ledger.charge_or_repeat(request(9))
    assert "0 of 0.3 is left" in str(refused.value)


def test_concurrent_charges_never_exceed_the_budget(tmp_path):
    ledger = make_ledger(tmp_path, epsilon=1.0)

    def attempt(n: int) -> bool:
        try:
            ledger.charge_or_repeat(request(n, epsilon=0.07))
            return True
        except BudgetExceeded:
            return False

    with ThreadPoolExecutor(max_workers=24) as pool:
        granted = sum(pool.map(attempt, range(48)))
    budget = ledger.budget("ann")
    assert granted == 14 == budget.queries  # 14 × 0.07 = 0.98 ≤ 1 < 15 × 0.07
    assert budget.epsilon_spent <= 1.0


def test_removing_an_analyst_keeps_their_charges(tmp_path):
    ledger = make_ledger(tmp_path)
    ledger.charge_or_repeat(request(1))
    ledger.remove_analyst("ann")
    assert ledger.analyst("ann") is None
    connection = sqlite3.connect(tmp_path / "ledger.sqlite3")
    assert connection.execute("SELECT count(*) FROM charges").fetchone()[0] == 1
