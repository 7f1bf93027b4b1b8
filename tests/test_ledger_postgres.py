"""What only the PostgreSQL ledger has: a schema version that a proxy will not silently
migrate, several processes' worth of connections sharing one store, and an unreachable
store that fails calls quickly and is reconnected afterwards."""

from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from accounting import (
    Analyst,
    BudgetExceeded,
    Charged,
    ChargeRequest,
    LedgerOutdated,
    LedgerUnavailable,
    Repeated,
    ScramVerifier,
)
from accounting.postgres_ledger import PostgresLedger
from accounting.postgres_schema import MIGRATIONS
from tests.conftest import free_port

pytestmark = pytest.mark.end_to_end

VERIFIER = ScramVerifier(b"salt", b"stored", b"server", 4096)


def schema() -> str:
    return f"t_{secrets.token_hex(6)}"


def question(n: int, epsilon: float = 0.1, analyst: str = "ann") -> ChargeRequest:
    sql = f"SELECT count(*) FROM t WHERE x = {n}"
    return ChargeRequest(analyst, sql, f"fp{n}:{epsilon}", epsilon, 0.0, "shifted_laplace", 1.0)


def test_a_new_schema_is_created_at_the_latest_version_and_reopened_as_is(ledger_database):
    name = schema()
    first = PostgresLedger(ledger_database, name)
    assert first.version() == len(MIGRATIONS)
    first.add_analyst(Analyst("ann", VERIFIER, 1.0, 1e-6, 0.25))
    again = PostgresLedger(ledger_database, name)
    assert again.analyst("ann") == first.analyst("ann")
    assert again.analyst("ann").verifier == VERIFIER  # bytea comes back as bytes


def test_an_older_schema_is_refused_with_the_upgrade_command_then_upgraded(ledger_database):
    name = schema()
    with psycopg.connect(ledger_database, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {name}")
        connection.execute(f"CREATE TABLE {name}.version (version integer NOT NULL)")
        connection.execute(f"INSERT INTO {name}.version VALUES (1)")
        connection.execute(MIGRATIONS[0].format(schema=name))
        connection.execute(f"INSERT INTO {name}.analysts (name, scram_salt, scram_stored_key,"
                           " scram_server_key, scram_iterations, epsilon_total, delta_total,"
                           " shift, created_at) VALUES ('ann', 's', 'k', 'v', 4096, 1, 1e-6,"
                           " 0.5, 't')")
    with pytest.raises(LedgerOutdated,
                       match=f"version 1 of {len(MIGRATIONS)}.*dpgate ledger upgrade"):
        PostgresLedger(ledger_database, name)
    upgraded = PostgresLedger(ledger_database, name, upgrade=True)
    assert upgraded.version() == len(MIGRATIONS)
    assert upgraded.analyst("ann").shift == 0.5
    assert isinstance(upgraded.charge_or_repeat(question(1)), Charged)


def test_a_newer_schema_is_refused(ledger_database):
    name = schema()
    PostgresLedger(ledger_database, name)
    with psycopg.connect(ledger_database, autocommit=True) as connection:
        connection.execute(f"UPDATE {name}.version SET version = 99")
    with pytest.raises(LedgerOutdated, match="newer than this dpgate"):
        PostgresLedger(ledger_database, name)


def test_two_ledgers_on_one_store_share_budget_answers_and_rotations(ledger_database):
    """Two PostgresLedger objects stand for two proxies: nothing is cached by either."""
    name = schema()
    one, two = PostgresLedger(ledger_database, name), PostgresLedger(ledger_database, name)
    one.add_analyst(Analyst("ann", VERIFIER, 1.0, 1e-6, 0.5))
    charged = one.charge_or_repeat(question(1))
    one.record_answer(charged.charge_id, [["41"]])
    repeated = two.charge_or_repeat(question(1))  # asked again through the other proxy
    assert isinstance(repeated, Repeated) and repeated.rows == [["41"]]
    two.rotate_shift("ann", 1.25)  # the CLI, on a third machine for all it matters
    again = one.charge_or_repeat(question(1))
    assert isinstance(again, Charged) and again.shift == 1.25
    two.set_budgets({"ann": 0.2})
    with pytest.raises(BudgetExceeded):
        one.charge_or_repeat(question(2))
    assert one.budget("ann").queries == two.budget("ann").queries == 2


def test_threads_of_three_ledgers_never_overspend_one_analyst(ledger_database):
    name = schema()
    ledgers = [PostgresLedger(ledger_database, name) for _ in range(3)]
    ledgers[0].add_analyst(Analyst("ann", VERIFIER, 1.5, 1e-6, 0.0))

    def attempt(n: int) -> bool:
        try:
            ledgers[n % 3].charge_or_repeat(question(n))
            return True
        except BudgetExceeded:
            return False

    with ThreadPoolExecutor(max_workers=24) as pool:
        granted = sum(pool.map(attempt, range(60)))
    budget = ledgers[1].budget("ann")
    assert granted == 15 == budget.queries == len(ledgers[2].charges("ann"))
    assert budget.epsilon_spent == pytest.approx(1.5)


def test_an_unreachable_ledger_fails_fast_and_is_reconnected_after(ledger_database):
    dead = f"postgresql://nobody@127.0.0.1:{free_port()}/nothing"
    began = time.monotonic()
    with pytest.raises(LedgerUnavailable, match="cannot connect"):
        PostgresLedger(dead)
    assert time.monotonic() - began < 30  # not TCP's retransmission timeout
    name = schema()
    ledger = PostgresLedger(ledger_database, name)
    ledger.add_analyst(Analyst("ann", VERIFIER, 1.0, 1e-6, 0.0))
    # The server ends the kept connection (as a restart would): the next call opens a new
    # one before asking anything, so it simply works.
    with psycopg.connect(ledger_database, autocommit=True) as admin:
        ended = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                              " WHERE application_name = 'dpgate-ledger'"
                              " AND datname = current_database()").fetchall()
    assert ended
    assert isinstance(ledger.charge_or_repeat(question(1)), Charged)
    assert ledger.budget("ann").queries == 1
