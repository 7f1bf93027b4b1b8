"""Joins, histograms, SUM/AVG and post-processing through dpgate (issues 3 and 7), with
real clients against the demo dataset."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from tests.conftest import RunningProxy, dpgate_cli

pytestmark = pytest.mark.end_to_end

REFERENCE_POLICY = Path(__file__).parent / "data" / "reference_policy.toml"
PASSWORD = "analyst-pw"


@pytest.fixture(scope="module")
def carol(proxy: RunningProxy) -> str:
    """An analyst with a large budget, so this module cannot starve the others."""
    proxy.add_analyst("flexi", PASSWORD, 1000, delta=0.01)
    return proxy.dsn("flexi", PASSWORD)


def truth(proxy: RunningProxy, query: str) -> list[tuple]:
    with psycopg.connect(proxy.database.admin_dsn) as connection:
        return connection.execute(query).fetchall()


def ask(dsn: str, query: str, epsilon: float = 1.0) -> tuple[list[tuple], list, list[str]]:
    """Rows, column descriptions and notices of one query at the given epsilon."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        connection.execute(f"SET dp.epsilon = {epsilon}")
        cursor = connection.execute(query)
        return cursor.fetchall(), list(cursor.description), notices


def test_join_count_is_answered_with_smooth_sensitivity_and_measured_metrics(
        proxy: RunningProxy, carol: str):
    query = ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
             "WHERE o.quantity >= 2")
    (expected,) = truth(proxy, query)[0]
    rows, _, notices = ask(carol, query)
    # ES = maxFreq(orders.customer_id) + k ≤ 50 + k; at ε = 1 the smooth scale stays near 100.
    assert abs(rows[0][0] - expected) < 3000
    assert "delta" in notices[-1] and "smooth sensitivity" in notices[-1]
    metrics = json.loads(proxy.cli("metrics", "show", "--json").stdout)
    measured = {(m["table"], m["column"]): m["max_freq"] for m in metrics}
    assert measured[("public.orders", "customer_id")] == truth(
        proxy, "SELECT max(n) FROM (SELECT count(*) n FROM orders GROUP BY customer_id) s")[0][0]
    assert measured[("public.customers", "customer_id")] == 1


def test_histogram_keys_do_not_depend_on_the_data(proxy: RunningProxy, carol: str):
    (active,) = truth(proxy, "SELECT customer_id FROM orders LIMIT 1")[0]
    (idle,) = truth(proxy, "SELECT max(customer_id) + 1000 FROM customers")[0]
    keys = []
    for customer in (active, idle):
        rows, description, _ = ask(
            carol, f"SELECT quantity, count(*) FROM orders WHERE customer_id = {customer} "
            "GROUP BY quantity")
        keys.append([row[0] for row in rows])
        assert description[0].type_code == 23  # the key keeps its type: int4
    assert keys[0] == keys[1] == list(range(1, 11))


def test_histogram_over_a_public_domain_lists_every_product(proxy: RunningProxy, carol: str):
    rows, _, notices = ask(carol, "SELECT product_id, count(*) FROM orders GROUP BY product_id")
    assert len(rows) == 1000
    assert sorted(row[0] for row in rows) == list(range(1, 1001))
    assert "every key of the declared domain" in notices[-1]


def test_key_selection_releases_only_real_groups_and_charges_delta(
        proxy: RunningProxy, carol: str):
    budget_before = ask(carol, "SHOW dp.budget")[0][0]
    rows, _, notices = ask(carol, "SELECT customer_id, count(*) FROM orders "
                                  "WHERE quantity <= 3 GROUP BY customer_id", epsilon=5.0)
    existing = {row[0] for row in truth(proxy, "SELECT DISTINCT customer_id FROM orders "
                                               "WHERE quantity <= 3")}
    assert {row[0] for row in rows} <= existing
    assert "threshold" in notices[-1]
    budget_after = ask(carol, "SHOW dp.budget")[0][0]
    assert float(budget_after[4]) > float(budget_before[4])  # delta_spent grew


def test_sum_and_avg_are_noisy_values_of_postgresqls_types(proxy: RunningProxy, carol: str):
    rows, description, _ = ask(carol, "SELECT sum(quantity) AS total, avg(quantity) "
                                      "FROM orders WHERE product_id <= 100", epsilon=2.0)
    total, average = truth(proxy, "SELECT sum(quantity), avg(quantity) FROM orders "
                                  "WHERE product_id <= 100")[0]
    assert [d.name for d in description] == ["total", "avg"]
    assert description[0].type_code == 20  # bigint, as PostgreSQL types sum(integer)
    assert description[1].type_code == 1700  # numeric
    assert abs(float(rows[0][0]) - float(total)) < 200  # scale 10 / (2 / 2) = 10
    assert abs(float(rows[0][1]) - float(average)) < 0.5


def test_order_by_and_limit_apply_to_noisy_values(proxy: RunningProxy, carol: str):
    rows, _, _ = ask(carol, "SELECT quantity, count(*) AS n FROM orders GROUP BY quantity "
                            "HAVING count(*) > 0 ORDER BY n DESC LIMIT 3")
    assert len(rows) == 3
    assert [row[1] for row in rows] == sorted((row[1] for row in rows), reverse=True)
    assert rows[0][0] == 1  # quantity 1 is by far the most frequent (30% of orders)


def test_most_frequent_group_with_a_hidden_count(proxy: RunningProxy, carol: str):
    rows, description, notices = ask(carol, "SELECT quantity FROM orders GROUP BY quantity "
                                            "ORDER BY count(*) DESC LIMIT 1")
    assert [d.name for d in description] == ["quantity"]
    assert rows == [(1,)]
    assert "exponential mechanism" in notices[-1]  # issue 4: not a noisy histogram


def test_refused_join_reports_sqlstate_and_position(proxy: RunningProxy, carol: str):
    with psycopg.connect(carol, autocommit=True) as connection:
        with pytest.raises(errors.FeatureNotSupported) as caught:
            connection.execute("SELECT count(*) FROM orders o, customers c "
                               "WHERE o.customer_id > c.customer_id")
        assert "cross join" in caught.value.diag.message_primary
        assert caught.value.diag.statement_position is not None
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_psql_shows_a_histogram(proxy: RunningProxy, carol: str):
    result = subprocess.run(
        ["psql", carol, "-X", "-c", "SELECT quantity, count(*) FROM orders GROUP BY 1"],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "(10 rows)" in result.stdout and "NOTICE:  dpgate: charged" in result.stderr


def test_explain_with_a_policy_file_needs_no_database():
    result = dpgate_cli("explain", "--policy", str(REFERENCE_POLICY), "--epsilon", "0.1",
                        "--delta", "1e-8", "SELECT count(*) FROM orders o JOIN recommendations"
                        " r ON o.customer_id = r.customer_id")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (column,) = report["columns"]
    assert report["supported"] and not report["pure"]
    assert column["k_star"] == 132
    assert column["noise_scale"] == pytest.approx(5409.181856298167, rel=1e-9)
    refused = json.loads(dpgate_cli("explain", "--policy", str(REFERENCE_POLICY),
                                    "SELECT * FROM orders").stdout)
    assert refused["supported"] is False and refused["sqlstate"] == "42501"
    assert refused["position"] == 8


def test_metrics_refresh_shows_progress_and_stores(proxy: RunningProxy):
    result = proxy.cli("metrics", "refresh")
    assert result.returncode == 0, result.stderr
    assert "public.orders.customer_id: max_freq" in result.stdout
    assert result.stdout.count("[") >= 10  # one progress line per column


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian", "shifted_laplace"])
def test_dp_mechanism_setting_changes_the_noise_and_the_charge(
        proxy: RunningProxy, carol: str, mechanism: str):
    query = "SELECT count(*) FROM orders WHERE quantity = 4"
    (expected,) = truth(proxy, query)[0]
    with psycopg.connect(carol, autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        connection.execute(f"SET dp.mechanism = '{mechanism}'")
        connection.execute("SET dp.epsilon = 0.5")
        assert connection.execute("SHOW dp.mechanism").fetchone() == (mechanism,)
        (answer,) = connection.execute(query).fetchone()
    assert abs(answer - expected) < 200
    assert ("delta" in notices[-1]) == (mechanism == "gaussian")
    history = json.loads(proxy.cli("user", "show", "flexi", "--json").stdout)["charges"]
    assert history[-1]["mechanism"] == mechanism


def test_gaussian_is_refused_for_joins_and_bad_mechanisms_are_rejected(
        proxy: RunningProxy, carol: str):
    with psycopg.connect(carol, autocommit=True) as connection:
        with pytest.raises(errors.InvalidParameterValue):
            connection.execute("SET dp.mechanism = 'uniform'")
        connection.execute("SET dp.mechanism = gaussian")
        with pytest.raises(errors.FeatureNotSupported):
            connection.execute("SELECT count(*) FROM orders o JOIN customers c "
                               "ON o.customer_id = c.customer_id")
