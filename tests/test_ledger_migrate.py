"""`dpgate ledger migrate --from sqlite:PATH --to postgresql://…`, run as the operator
would: `ledger export` and `budget show` print the same before and after, and the copy
keeps working as a ledger (repeats free, spend continued, ids continued)."""

from __future__ import annotations

import json

import pytest

from accounting import Analyst, Charged, ChargeRequest, Metric, Repeated, ScramVerifier
from accounting.postgres_ledger import PostgresLedger
from accounting.sqlite_ledger import SqliteLedger
from tests.conftest import Postgres, as_url, dpgate_cli

pytestmark = pytest.mark.end_to_end

VERIFIER = ScramVerifier(b"\x00salt\xff", b"stored", b"server", 4096)


def question(analyst: str, n: int, epsilon: float = 0.1) -> ChargeRequest:
    sql = f"SELECT count(*) FROM orders WHERE product_id = {n}"
    return ChargeRequest(analyst, sql, f"{analyst}:{n}", epsilon, 1e-9 * n, "laplace", 2.0)


def fill(path) -> None:
    """Two analysts' history, one of them removed; stored answers; a forgotten answer
    mark; metrics."""
    ledger = SqliteLedger(path)
    ledger.add_analyst(Analyst("ann", VERIFIER, 5.0, 1e-6, 0.75))
    ledger.add_analyst(Analyst("bo", VERIFIER, 3.0, 1e-6, 1.1))
    for n in range(5):
        charged = ledger.charge_or_repeat(question("ann", n, 0.1 + n / 100))
        if n != 3:
            ledger.record_answer(charged.charge_id, [[str(n), None]])
        else:
            ledger.record_failure(charged.charge_id, "failed")
    ledger.forget_answers("ann")  # answers of charges up to here may not come back
    ledger.record_answer(ledger.charge_or_repeat(question("ann", 9)).charge_id, [["9", "x"]])
    ledger.charge_or_repeat(question("bo", 1, 0.5))
    ledger.remove_analyst("bo")
    ledger.store_metrics([Metric("public.orders", "customer_id", 50, "2024-01-01T00:00:00")])


def cli(*args: str) -> str:
    done = dpgate_cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_migrate_copies_a_sqlite_ledger_without_loss(postgres: Postgres, tmp_path):
    path = tmp_path / "ledger.sqlite3"
    fill(path)
    url = as_url(postgres.create_database("dpgate_migrate_test"))
    before = [cli("ledger", "export", "--format", "json", "--ledger", str(path)),
              cli("budget", "show", "--json", "--ledger", str(path))]

    out = cli("ledger", "migrate", "--from", f"sqlite:{path}", "--to", url)
    assert "copied 1 analysts, 7 charges, 1 answers, 1 metrics" in out

    after = [cli("ledger", "export", "--format", "json", "--ledger", url),
             cli("budget", "show", "--json", "--ledger", url)]
    assert after == before
    assert len(json.loads(after[0])) == 7
    # A second copy into the same ledger would merge two histories: refused.
    again = dpgate_cli("ledger", "migrate", "--from", f"sqlite:{path}", "--to", url)
    assert again.returncode == 1 and "empty ledger" in again.stderr

    copy, original = PostgresLedger(url), SqliteLedger(path)
    assert copy.analyst("ann") == original.analyst("ann")  # verifier bytes and shift too
    assert copy.metrics() == original.metrics()
    repeated = copy.charge_or_repeat(question("ann", 9))
    assert isinstance(repeated, Repeated) and repeated.rows == [["9", "x"]]
    # Answered before the forget mark: charged again, and its answer stored this time.
    fresh = copy.charge_or_repeat(question("ann", 1, 0.11))
    assert isinstance(fresh, Charged) and fresh.charge_id == 8
    assert fresh.budget.epsilon_spent == original.budget("ann").epsilon_spent + 0.11
