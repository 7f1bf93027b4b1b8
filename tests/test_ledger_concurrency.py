"""Many sessions of one analyst racing for the end of their budget, through the real proxy:
the ledger never lets the sum of charges pass the budget, and charges every answer once."""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from dataclasses import dataclass

import psycopg
import pytest

from accounting import SqliteLedger
from tests.conftest import RunningProxy

pytestmark = pytest.mark.end_to_end

SESSIONS = 24
QUERIES_PER_SESSION = 2
BUDGET = 1.0
ALREADY_SPENT = 0.7


@dataclass(frozen=True)
class Outcome:
    statement: str
    epsilon: float
    answer: int | None
    sqlstate: str | None


def add_analyst(proxy: RunningProxy, epsilon: float) -> tuple[str, str]:
    """A fresh analyst, so other tests' spending never meets this one's."""
    name, password = f"race_{secrets.token_hex(4)}", secrets.token_urlsafe(12)
    proxy.add_analyst(name, password, epsilon)
    return name, password


async def session(dsn: str, index: int, connected: asyncio.Barrier) -> list[Outcome]:
    """One connection: once every session is connected, ask distinct questions in a row."""
    epsilon = 0.05 if index % 2 else 0.1
    outcomes = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
        await connection.execute(f"SET dp.epsilon = {epsilon}")
        await connected.wait()
        for query in range(QUERIES_PER_SESSION):
            statement = (f"SELECT count(*) FROM orders WHERE product_id = "
                         f"{100 + index * QUERIES_PER_SESSION + query}")
            try:
                cursor = await connection.execute(statement)
                row = await cursor.fetchone()
                outcomes.append(Outcome(statement, epsilon, row[0], None))
            except psycopg.Error as error:
                outcomes.append(Outcome(statement, epsilon, None, error.sqlstate))
    return outcomes


async def race(dsn: str) -> list[Outcome]:
    connected = asyncio.Barrier(SESSIONS)
    results = await asyncio.wait_for(
        asyncio.gather(*(session(dsn, i, connected) for i in range(SESSIONS))), timeout=120)
    return [outcome for outcomes in results for outcome in outcomes]


def spend(dsn: str, epsilon: float) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"SET dp.epsilon = {epsilon}")
        connection.execute("SELECT count(*) FROM orders WHERE product_id = 99").fetchone()


def test_concurrent_sessions_of_one_analyst_never_overspend(proxy: RunningProxy):
    name, password = add_analyst(proxy, BUDGET)
    dsn = proxy.dsn(name, password)
    spend(dsn, ALREADY_SPENT)  # near the end: 0.3 left for 48 questions of 0.05 or 0.1

    outcomes = asyncio.run(race(dsn))

    answered = [o for o in outcomes if o.answer is not None]
    refused = [o for o in outcomes if o.answer is None]
    assert len(outcomes) == SESSIONS * QUERIES_PER_SESSION
    assert answered and refused
    assert {o.sqlstate for o in refused} == {"53400"}
    charges = SqliteLedger(proxy.ledger_path).charges(name)
    charged = Counter(charge.statement.strip() for charge in charges)
    # Every answer has exactly one charge, of the session's epsilon; refusals cost nothing.
    assert all(charged[o.statement] == 1 for o in answered)
    assert all(charged[o.statement] == 0 for o in refused)
    assert len(charges) == 1 + len(answered)
    epsilon_of = {o.statement: o.epsilon for o in outcomes}
    assert all(c.epsilon == pytest.approx(epsilon_of[c.statement.strip()])
               for c in charges[1:])
    spent = sum(charge.epsilon for charge in charges)
    assert spent <= BUDGET * (1 + 1e-9)
    # A refusal means less than its epsilon was left then, and spending only grows.
    assert all(BUDGET - spent < o.epsilon + 1e-9 for o in refused)
    with psycopg.connect(dsn, autocommit=True) as connection:
        shown = connection.execute("SHOW dp.budget").fetchone()
    assert shown[1] == pytest.approx(spent) and shown[5] == len(charges)
