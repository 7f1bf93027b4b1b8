"""What invalidates stored answers, seen by a real client of the running proxy: the owner's
`ledger forget-answers` and `user rotate-shift`; delta running out before epsilon; and
the owner's view of the spend."""

from __future__ import annotations

import csv
import io
import json
import secrets

import psycopg
import pytest

from tests.conftest import RunningProxy

pytestmark = pytest.mark.end_to_end

QUESTION = "SELECT count(*) FROM orders WHERE product_id = 77"


def fresh_analyst(proxy: RunningProxy, epsilon: float = 1.0, delta: float = 1e-6) -> str:
    """A new analyst; its password is its name."""
    name = f"ledger_{secrets.token_hex(4)}"
    proxy.add_analyst(name, name, epsilon, delta)
    return name


def ask_twice(dsn: str) -> tuple[float, float]:
    """ε spent after asking QUESTION once, and after asking it again."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(QUESTION).fetchone()
        first = connection.execute("SHOW dp.budget").fetchone()[1]
        connection.execute(QUESTION).fetchone()
        second = connection.execute("SHOW dp.budget").fetchone()[1]
    return first, second


@pytest.mark.parametrize("invalidate", [
    ("ledger", "forget-answers", "--analyst"),
    ("user", "rotate-shift"),
])
def test_a_repeat_is_free_until_the_owner_invalidates_stored_answers(
        proxy: RunningProxy, invalidate: tuple[str, ...]):
    name = fresh_analyst(proxy)
    dsn = proxy.dsn(name, name)
    assert ask_twice(dsn) == pytest.approx((0.1, 0.1))  # the repeat cost nothing
    done = proxy.cli(*invalidate, name)
    assert done.returncode == 0, done.stderr
    # The next session gets a fresh answer and pays for it; its repeat is free again.
    assert ask_twice(dsn) == pytest.approx((0.2, 0.2))


def test_the_owner_sees_every_charge_and_the_global_loss(proxy: RunningProxy):
    name = fresh_analyst(proxy)
    ask_twice(proxy.dsn(name, name))
    shown = json.loads(proxy.cli("budget", "show", "--json").stdout)
    entry = next(a for a in shown["analysts"] if a["name"] == name)
    assert entry["epsilon_spent"] == pytest.approx(0.1) and entry["queries"] == 1
    everyone = sum(a["epsilon_spent"] for a in shown["analysts"])
    assert shown["global"]["epsilon_spent"] == pytest.approx(everyone)
    exported = proxy.cli("ledger", "export", "--analyst", name)
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert [(r["statement"].strip(), r["outcome"]) for r in rows] == [(QUESTION, "answered")]


def test_delta_runs_out_before_epsilon_and_refuses_with_53400(proxy: RunningProxy):
    name = fresh_analyst(proxy, 10, 2e-8)
    join = ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
            "WHERE o.quantity = {}")
    with psycopg.connect(proxy.dsn(name, name), autocommit=True) as connection:
        connection.execute("SET dp.delta = 1e-8")
        for quantity in (1, 2):  # each join costs delta 1e-8 (smooth sensitivity)
            connection.execute(join.format(quantity)).fetchone()
        with pytest.raises(psycopg.errors.ConfigurationLimitExceeded) as refused:
            connection.execute(join.format(3))
        assert refused.value.sqlstate == "53400"
        assert "epsilon 9.8 of 10 is left, delta 0 of 2e-08 is left" in str(refused.value)
        # A query that needs no delta still fits.
        connection.execute("SELECT count(*) FROM orders WHERE quantity = 3").fetchone()
        budget = connection.execute("SHOW dp.budget").fetchone()
    assert budget[1] == pytest.approx(0.3) and budget[4] == pytest.approx(2e-8)
    assert budget[5] == 3
