"""Both ledger stores, SQLite on a real file and PostgreSQL on the test server (each test
runs once per store through `new_ledger`): charges, budgets, stored answers, metrics,
migrations, concurrency."""

from __future__ import annotations

import random
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from accounting import (
    Analyst,
    BudgetExceeded,
    Charged,
    ChargeRequest,
    GlobalLoss,
    Ledger,
    Metric,
    Repeated,
    ScramVerifier,
    SqliteLedger,
    UnknownAnalyst,
    fingerprint,
)
from accounting.sqlite_schema import MIGRATIONS

pytestmark = pytest.mark.end_to_end

VERIFIER = ScramVerifier(b"salt", b"stored", b"server", 4096)


def make_ledger(new_ledger, epsilon=1.0) -> Ledger:
    ledger = new_ledger()
    ledger.add_analyst(Analyst("ann", VERIFIER, epsilon, 1e-6, 0.3))
    return ledger


def request(n: int, epsilon: float = 0.1) -> ChargeRequest:
    sql = f"SELECT count(*) FROM t WHERE x = {n}"
    return ChargeRequest("ann", sql, fingerprint(sql, epsilon, 0.0, "shifted_laplace"),
                         epsilon, 0.0, "shifted_laplace", 1.0)


@pytest.mark.unit
def test_file_is_wal_with_a_schema_version(tmp_path):
    SqliteLedger(tmp_path / "ledger.sqlite3").add_analyst(
        Analyst("ann", VERIFIER, 1.0, 1e-6, 0.3))
    connection = sqlite3.connect(tmp_path / "ledger.sqlite3")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    # Opening again migrates nothing and loses nothing.
    assert SqliteLedger(tmp_path / "ledger.sqlite3").analyst("ann").shift == 0.3


def test_charge_answer_and_repeat(new_ledger):
    ledger = make_ledger(new_ledger)
    charged = ledger.charge_or_repeat(request(1))
    assert isinstance(charged, Charged)
    assert charged.budget.epsilon_spent == pytest.approx(0.1)
    ledger.record_answer(charged.charge_id, [[42]])
    repeated = ledger.charge_or_repeat(request(1))
    assert isinstance(repeated, Repeated) and repeated.rows == [[42]]
    assert ledger.budget("ann").queries == 1
    assert [c.outcome for c in ledger.charges("ann")] == ["answered"]


def test_failed_queries_keep_their_charge(new_ledger):
    ledger = make_ledger(new_ledger)
    charged = ledger.charge_or_repeat(request(1))
    ledger.record_failure(charged.charge_id, "failed")
    assert ledger.budget("ann").epsilon_spent == pytest.approx(0.1)
    assert isinstance(ledger.charge_or_repeat(request(1)), Charged)  # nothing was stored


def test_exact_fit_is_allowed_and_overspending_refused(new_ledger):
    ledger = make_ledger(new_ledger, epsilon=0.3)
    for n in range(3):
        ledger.charge_or_repeat(request(n))
    with pytest.raises(BudgetExceeded) as refused:
        ledger.charge_or_repeat(request(9))
    assert "0 of 0.3 is left" in str(refused.value)


def test_concurrent_charges_never_exceed_the_budget(new_ledger):
    ledger = make_ledger(new_ledger, epsilon=1.0)

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


def test_removing_an_analyst_keeps_their_charges(new_ledger):
    ledger = make_ledger(new_ledger)
    ledger.charge_or_repeat(request(1))
    ledger.remove_analyst("ann")
    assert ledger.analyst("ann") is None
    assert [c.analyst for c in ledger.charges()] == ["ann"]
    assert [b.active for b in ledger.budgets()] == [False]


def delta_request(n: int, delta: float) -> ChargeRequest:
    sql = f"SELECT count(*) FROM t JOIN u USING (k) WHERE x = {n}"
    return ChargeRequest("ann", sql, fingerprint(sql, 0.1, delta, "smooth"), 0.1, delta,
                         "smooth", 250.0)


def test_delta_is_charged_and_refused_like_epsilon(new_ledger):
    ledger = make_ledger(new_ledger, epsilon=10.0)  # delta total 1e-6
    for n in range(4):
        ledger.charge_or_repeat(delta_request(n, 2.5e-7))  # exactly fills delta
    assert ledger.budget("ann").delta_spent == pytest.approx(1e-6)
    with pytest.raises(BudgetExceeded) as refused:
        ledger.charge_or_repeat(delta_request(9, 1e-9))
    # Plenty of epsilon is left: delta alone refuses, and the message says both.
    assert "epsilon 9.6 of 10 is left, delta 0 of 1e-06 is left" in str(refused.value)
    assert "needs epsilon 0.1 and delta 1e-09" in str(refused.value)
    assert ledger.budget("ann").queries == 4
    # A query without delta still fits.
    assert isinstance(ledger.charge_or_repeat(request(1)), Charged)


def test_the_tolerance_is_relative_so_a_tiny_delta_cannot_overspend(new_ledger):
    ledger = new_ledger()
    ledger.add_analyst(Analyst("ann", VERIFIER, 1.0, 1e-8, 0.0))
    ledger.charge_or_repeat(delta_request(1, 1e-8))
    # An absolute slack of 1e-9 would let 10% more delta through.
    with pytest.raises(BudgetExceeded):
        ledger.charge_or_repeat(delta_request(2, 5e-10))
    # Float drift of ten charges of 0.1 still lets the tenth one through.
    ledger = make_ledger(new_ledger, epsilon=1.0)
    for n in range(10):
        ledger.charge_or_repeat(request(n))
    assert ledger.budget("ann").epsilon_left == 0.0


def test_metrics_are_upserted_in_one_transaction(new_ledger):
    ledger = make_ledger(new_ledger)
    assert ledger.metrics() == []
    ledger.store_metrics([Metric("public.orders", "customer_id", 50, "2024-01-01T00:00:00"),
                          Metric("public.orders", "product_id", 140, "2024-01-01T00:00:00")])
    ledger.store_metrics([Metric("public.orders", "customer_id", 51, "2024-02-01T00:00:00")])
    assert ledger.metrics() == [
        Metric("public.orders", "customer_id", 51, "2024-02-01T00:00:00"),
        Metric("public.orders", "product_id", 140, "2024-01-01T00:00:00"),
    ]
    # One bad row: none of the batch is stored.
    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.CheckViolation)):
        ledger.store_metrics([Metric("public.a", "x", 1, "t"), Metric("public.b", "y", -1, "t")])
    assert len(ledger.metrics()) == 2


def answer(ledger: Ledger, n: int, rows: list[list[object]]) -> None:
    charged = ledger.charge_or_repeat(request(n))
    assert isinstance(charged, Charged)
    ledger.record_answer(charged.charge_id, rows)


def test_rotating_the_shift_forgets_the_analysts_answers(new_ledger):
    ledger = make_ledger(new_ledger)
    ledger.add_analyst(Analyst("bo", VERIFIER, 1.0, 1e-6, -0.5))
    answer(ledger, 1, [[7]])
    bo = ChargeRequest("bo", "q", "fp-bo", 0.1, 0.0, "shifted_laplace", 1.0)
    ledger.record_answer(ledger.charge_or_repeat(bo).charge_id, [[8]])
    ledger.rotate_shift("ann", 0.9)
    assert ledger.analyst("ann").shift == 0.9 and ledger.analyst("bo").shift == -0.5
    charged = ledger.charge_or_repeat(request(1))
    assert isinstance(charged, Charged)  # charged again
    assert charged.shift == 0.9  # what an open session releases with from now on
    assert isinstance(ledger.charge_or_repeat(bo), Repeated)  # bo's answers stay
    assert ledger.budget("ann").epsilon_spent == pytest.approx(0.2)
    with pytest.raises(UnknownAnalyst):
        ledger.rotate_shift("nobody", 0.1)


def test_forgetting_answers_for_one_analyst_or_all(new_ledger):
    ledger = make_ledger(new_ledger)
    answer(ledger, 1, [[1]])
    answer(ledger, 2, [[2]])
    assert ledger.forget_answers("ann") == 2
    assert isinstance(ledger.charge_or_repeat(request(1)), Charged)
    with pytest.raises(UnknownAnalyst):
        ledger.forget_answers("nobody")
    answer(ledger, 3, [[3]])
    assert ledger.forget_answers() == 1
    assert ledger.forget_answers() == 0


def test_an_answer_in_flight_when_answers_are_forgotten_is_not_stored(new_ledger):
    ledger = make_ledger(new_ledger)
    in_flight = ledger.charge_or_repeat(request(1))
    ledger.forget_answers("ann")  # e.g. the data changed while the query ran
    ledger.record_answer(in_flight.charge_id, [[5]])
    assert [c.outcome for c in ledger.charges("ann")] == ["answered"]
    later = ledger.charge_or_repeat(request(1))
    assert isinstance(later, Charged)  # the old answer was not cached
    ledger.record_answer(later.charge_id, [[6]])
    assert ledger.charge_or_repeat(request(1)).rows == [[6]]


def test_set_budgets_is_all_or_nothing(new_ledger):
    ledger = make_ledger(new_ledger)
    ledger.add_analyst(Analyst("bo", VERIFIER, 1.0, 1e-6, 0.0))
    with pytest.raises(UnknownAnalyst, match="carl, dora"):
        ledger.set_budgets({"ann": 3.0, "carl": 1.0, "dora": 2.0})
    with pytest.raises(ValueError, match="positive"):
        ledger.set_budgets({"ann": 3.0, "bo": 0.0})
    assert ledger.budget("ann").epsilon_total == 1.0
    ledger.set_budgets({"ann": 3.0, "bo": 0.5})
    assert [ledger.budget(n).epsilon_total for n in ("ann", "bo")] == [3.0, 0.5]


def test_budgets_include_removed_analysts_in_the_global_loss(new_ledger):
    ledger = make_ledger(new_ledger, epsilon=2.0)
    ledger.add_analyst(Analyst("bo", VERIFIER, 3.0, 1e-6, 0.0))
    answer(ledger, 1, [[1]])
    ledger.charge_or_repeat(delta_request(2, 1e-7))
    ledger.add_analyst(Analyst("cy", VERIFIER, 5.0, 1e-5, 0.0))
    ledger.charge_or_repeat(ChargeRequest("cy", "q", "f", 0.4, 0.0, "shifted_laplace", 1.0))
    ledger.remove_analyst("cy")
    budgets = ledger.budgets()
    assert [(b.name, b.active, b.budget.queries) for b in budgets] == [
        ("ann", True, 2), ("bo", True, 0), ("cy", False, 1)]
    loss = GlobalLoss.of(budgets)
    assert loss.epsilon_spent == pytest.approx(0.6)  # cy's 0.4 still counts
    assert loss.delta_spent == pytest.approx(1e-7)
    assert loss.epsilon_allocated == 5.0  # cy's 5 no longer does
    assert loss.delta_allocated == pytest.approx(2e-6)
    assert [c.analyst for c in ledger.charges()] == ["ann", "ann", "cy"]


@pytest.mark.unit
def test_a_version_1_ledger_is_migrated_without_losing_anything(tmp_path):
    path = tmp_path / "old.sqlite3"
    connection = sqlite3.connect(path)
    connection.executescript(MIGRATIONS[0] + "PRAGMA user_version = 1;")
    connection.execute("INSERT INTO analysts VALUES ('ann', x'00', x'01', x'02', 4096, 1.0,"
                       " 1e-6, 0.25, '2024-01-01')")
    connection.execute("INSERT INTO charges (analyst, at, statement, fingerprint, epsilon,"
                       " delta, mechanism, sensitivity, outcome) VALUES ('ann', 't', 'q', 'f',"
                       " 0.1, 0, 'shifted_laplace', 1, 'answered')")
    connection.execute("INSERT INTO answers VALUES ('ann', 'f', 1, '[[3]]')")
    connection.commit()
    connection.close()
    ledger = SqliteLedger(path)
    assert ledger.analyst("ann").shift == 0.25
    assert ledger.budget("ann").epsilon_spent == pytest.approx(0.1)
    repeated = ledger.charge_or_repeat(ChargeRequest("ann", "q", "f", 0.1, 0.0, "s", 1.0))
    assert isinstance(repeated, Repeated) and repeated.rows == [[3]]
    assert ledger.metrics() == []


def test_the_spend_kept_per_analyst_equals_the_sum_of_their_charges(new_ledger):
    ledger = make_ledger(new_ledger, epsilon=100.0)
    rng = random.Random(5)
    for n in range(300):
        epsilon = rng.choice([0.01, 0.1, 0.37])
        sql = f"q{n}"
        ledger.charge_or_repeat(ChargeRequest("ann", sql, sql, epsilon, 1e-9, "m", 1.0))
    charges = ledger.charges("ann")
    budget = ledger.budget("ann")
    assert budget.epsilon_spent == pytest.approx(sum(c.epsilon for c in charges), rel=1e-12)
    assert budget.delta_spent == pytest.approx(300e-9, rel=1e-12)
    assert budget.queries == 300
    # A removed name that comes back starts with what it had spent.
    ledger.remove_analyst("ann")
    ledger.add_analyst(Analyst("ann", VERIFIER, 200.0, 1e-6, 0.0))
    assert ledger.budget("ann").epsilon_spent == pytest.approx(budget.epsilon_spent)
    assert ledger.budget("ann").queries == 300


def test_ping_reads_the_store(new_ledger):
    ledger = make_ledger(new_ledger)
    assert ledger.ping() is None  # what the health endpoint asks of either store
