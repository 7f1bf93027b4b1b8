"""Values computed before the query, and the ε range, through the running proxy."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from tests.conftest import RunningProxy
from tests.test_end_to_end import connect
from tests.test_ledger_proxy import fresh_analyst

pytestmark = pytest.mark.end_to_end


def spent(connection: psycopg.Connection) -> float:
    return connection.execute("SHOW dp.budget").fetchone()[1]


@pytest.mark.parametrize("condition", [
    "order_date > current_date - interval '30000 days'",
    "product_id IN (SELECT product_id FROM products WHERE price > 50)",
    "product_id NOT IN (SELECT product_id FROM products WHERE category = 'no such')",
    "EXISTS (SELECT 1 FROM products WHERE price > 0)",
    "quantity <= (SELECT max(product_id) FROM products)",
])
def test_row_independent_values_are_computed_and_the_answer_charged(
        proxy: RunningProxy, condition: str):
    name = fresh_analyst(proxy)
    with connect(proxy.dsn(name, name)) as connection:
        (count,) = connection.execute(f"SELECT count(*) FROM orders WHERE {condition}"
                                      ).fetchone()
        assert isinstance(count, int)
        assert spent(connection) == pytest.approx(0.1)


@pytest.mark.parametrize("threshold", [0, 10**9])  # the branch is reached by every row, or none
def test_a_failing_public_subquery_in_a_branch_fails_alike_for_free(
        proxy: RunningProxy, threshold: int):
    name = fresh_analyst(proxy)
    with connect(proxy.dsn(name, name)) as connection:
        with pytest.raises(errors.DivisionByZero):
            connection.execute(
                f"SELECT count(*) FROM orders WHERE CASE WHEN order_cost > {threshold} THEN "
                "quantity IN (SELECT 1 / (product_id - product_id) FROM products) END")
        assert spent(connection) == 0


def test_a_set_returning_constant_is_refused_for_free(proxy: RunningProxy):
    name = fresh_analyst(proxy)
    with connect(proxy.dsn(name, name)) as connection:
        with pytest.raises(errors.CardinalityViolation):
            connection.execute("SELECT count(*) FROM (SELECT generate_series(1, 1000) AS g "
                               "FROM orders) s WHERE g > 0")
        assert spent(connection) == 0
        assert connection.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("epsilon", ["1e-300", "1e-6", "0.0001", "11", "1e300"])
def test_epsilon_outside_the_owners_range_is_refused_and_the_session_goes_on(
        proxy: RunningProxy, epsilon: str):
    with connect(proxy.dsn("bob")) as connection:
        with pytest.raises(errors.InvalidParameterValue, match="between 0.001 and 10"):
            connection.execute(f"SET dp.epsilon = {epsilon}")
        assert connection.execute("SHOW dp.epsilon").fetchone() == ("0.1",)


def test_delta_outside_the_owners_range_is_refused(proxy: RunningProxy):
    with connect(proxy.dsn("bob")) as connection:
        with pytest.raises(errors.InvalidParameterValue, match="privacy.max_delta"):
            connection.execute("SET dp.delta = 0.5")
        connection.execute("SET dp.delta = 0")  # no δ at all stays allowed
