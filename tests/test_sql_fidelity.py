"""Regression tests of issue 13: group keys without an aggregate, PostgreSQL's name scoping
in GROUP BY / ORDER BY / HAVING, and PostgreSQL's own errors where PostgreSQL fails."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from proxy.config import load_config, load_policy_file
from proxy.demo.demo import DEMO_POLICY_FILE
from rewriter.analysis.classify import classify
from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from rewriter.policy.model import Policy
from rewriter.release.explain import explain
from rewriter.sensitivity.calibrate import calibrate
from rewriter.sensitivity.metrics import Metrics
from tests.conftest import RunningProxy, dpgate_cli, free_port, wait_for_port
from tests.test_leaks import fresh_analyst

pytestmark = pytest.mark.end_to_end

# Row-level mode, as the proxy these tests start (conftest: [policy] row_level = true).
POLICY = dataclasses.replace(load_policy_file(DEMO_POLICY_FILE), unit=None)
METRICS = Metrics(columns={
    "public.orders": ("order_id", "customer_id", "product_id", "quantity", "order_cost",
                      "order_date"),
})


def plan_of(sql: str) -> PrivateAggregate:
    plan = classify(sql, POLICY, METRICS)[0].plan
    assert isinstance(plan, PrivateAggregate), plan
    return plan


def refusal_of(sql: str) -> Refusal:
    refusal = classify(sql, POLICY, METRICS)[0].plan
    assert isinstance(refusal, Refusal), refusal
    return refusal


# -- group keys without an aggregate ----------------------------------------------------

@pytest.mark.unit
def test_group_keys_without_an_aggregate_list_the_domain_for_free():
    plan = plan_of("SELECT quantity FROM orders GROUP BY quantity")
    assert plan.parts == ()  # the domain only, no private row read: golden/rewritten
    calibration = calibrate(plan, 0.1, 1e-8)
    assert (calibration.epsilon, calibration.delta) == (0.0, 0.0)


def test_explain_of_group_keys_without_an_aggregate_charges_nothing():
    report = explain("SELECT quantity, order_date FROM orders GROUP BY 1, 2", POLICY, METRICS,
                     0.1, 1e-8)
    assert report["supported"] and report["epsilon"] == 0.0
    cli = dpgate_cli("explain", "SELECT quantity FROM orders GROUP BY quantity",
                     "--policy", str(DEMO_POLICY_FILE))
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["epsilon"] == 0.0


@pytest.mark.unit
def test_keys_without_a_domain_are_released_by_key_selection_with_a_charge():
    plan = plan_of("SELECT customer_id FROM orders GROUP BY customer_id")
    assert plan.grouping is not None and plan.grouping.key_selection
    assert calibrate(plan, 0.1, 1e-8).epsilon == 0.1


def test_group_keys_without_an_aggregate_through_the_proxy(proxy: RunningProxy):
    name = fresh_analyst(proxy)
    with psycopg.connect(proxy.dsn(name, name), autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        rows = connection.execute("SELECT quantity FROM orders GROUP BY quantity").fetchall()
        assert sorted(rows) == [(q,) for q in range(1, 11)]
        assert "nothing charged" in notices[-1]
        assert connection.execute("SHOW dp.budget").fetchone()[1] == 0


# -- name scoping ------------------------------------------------------------------------

@pytest.mark.unit
def test_group_by_prefers_an_input_column_to_an_output_alias():
    plan = plan_of("SELECT quantity AS product_id, count(*) FROM orders "
                   "GROUP BY quantity, product_id")
    assert plan.keys == 2  # which column is k1: tests/golden/rewritten/group_keys.sql


@pytest.mark.unit
def test_group_by_an_alias_that_names_no_input_column():
    plan = plan_of("SELECT quantity AS q, count(*) FROM orders GROUP BY q")
    assert plan.keys == 1  # the SQL: tests/golden/rewritten/group_keys.sql


@pytest.mark.unit
def test_order_by_prefers_the_output_name():
    plan = plan_of("SELECT quantity AS product_id, count(*) AS n FROM orders "
                   "GROUP BY quantity ORDER BY product_id DESC")
    assert plan.post.order == ((0, True),)


@pytest.mark.unit
def test_having_sees_input_columns_not_output_names():
    plan = plan_of("SELECT count(*) AS quantity FROM orders GROUP BY quantity "
                   "HAVING quantity > 3")
    hidden = [o for o in plan.outputs if o.hidden]
    assert [(o.kind, o.name) for o in hidden] == [("key", "quantity")]
    assert plan.post.having.left == plan.outputs.index(hidden[0])


@pytest.mark.parametrize(("sql", "error", "words"), [
    ("SELECT quantity AS q, count(*) FROM orders GROUP BY quantity HAVING q > 3",
     errors.UndefinedColumn, 'column "q" does not exist'),
    ("SELECT quantity, count(*) FROM orders GROUP BY quantity HAVING order_date = 1",
     errors.UndefinedFunction, "operator does not exist: date = integer"),
    ("SELECT cout(*) FROM orders", errors.UndefinedFunction, "function cout() does not exist"),
    ("SELCT count(*) FROM orders", errors.SyntaxError, 'syntax error at or near "SELCT"'),
    ("SELECT count(*) FROM orders GROUP BY 7", errors.InvalidColumnReference,
     "GROUP BY position 7 is not in select list"),
    ("SELECT quantity, count(*) FROM orders", errors.GroupingError,
     'column "orders.quantity" must appear in the GROUP BY clause'),
])
def test_what_postgresql_rejects_gets_postgresqls_error_and_costs_nothing(
        proxy: RunningProxy, sql: str, error: type, words: str):
    name = fresh_analyst(proxy)
    with psycopg.connect(proxy.dsn(name, name), autocommit=True) as connection:
        with pytest.raises(error) as raised:
            connection.execute(sql)
        assert words in str(raised.value)
        assert connection.execute("SHOW dp.budget").fetchone()[1] == 0


def test_postgresqls_error_points_into_the_statement_of_a_query_string(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        with pytest.raises(errors.UndefinedColumn) as raised:
            connection.execute("SELECT 1; SELECT count(nosuch) FROM orders")
        assert raised.value.diag.statement_position == "24"  # 1-based, in the whole string


def test_dpgate_refusals_stay_where_postgresql_would_answer(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        with pytest.raises(errors.InsufficientPrivilege):
            connection.execute("SELECT order_id FROM orders")


# -- expressions over released values -----------------------------------------------------

@pytest.mark.unit
def test_expressions_over_aggregates_are_computed_over_released_values_only():
    plan = plan_of("SELECT quantity, count(*) * 100.0 / 7 AS pct FROM orders "
                   "GROUP BY quantity HAVING count(*) * 2 > 100 ORDER BY count(*) * -1, 1")
    # The SQL and the post-processing over released values: golden/rewritten/group_keys.sql
    assert plan.post_sql is not None
    # What runs on private rows: the key and one count, nothing else.
    assert plan.computed is not None
    assert plan.computed.probe_sql == "SELECT quantity, CAST(NULL AS TEXT), COUNT(*), COUNT(*), " \
        "COUNT(*) FROM orders GROUP BY quantity"
    assert len(plan.parts) == 1  # the same count(*) is noised once


@pytest.mark.unit
def test_constants_alone_over_private_rows_are_refused():
    assert "would return one row per private row" in refusal_of("SELECT 3 FROM orders").message


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT count(*) * 2 AS c, 3 AS three, 'x' AS label FROM orders",
     [(2 * 50, 3, "x")]),
    ("SELECT sum(quantity) / count(*) AS integer_division FROM orders", [(2,)]),
    ("SELECT round(avg(quantity), 1) AS r, CASE WHEN count(*) > 10 THEN 'many' END AS c "
     "FROM orders", [(Decimal("2.5"), "many")]),
])
def test_expressions_have_postgresqls_types_and_values(proxy: RunningProxy, sql: str,
                                                       expected: list[tuple]):
    """At ε = 10 the noise on 50 and 125 is small; the answer's types are PostgreSQL's."""
    name = fresh_analyst(proxy, 10)
    with psycopg.connect(proxy.dsn(name, name), autocommit=True) as connection:
        connection.execute("SET dp.epsilon = 10")
        where = " WHERE customer_id <= 0 OR order_id <= 50 AND quantity IS NOT NULL"
        cursor = connection.execute(sql.replace(" FROM orders", " FROM orders" + where))
        row = cursor.fetchone()
        direct = psycopg.connect(proxy.database.admin_dsn).execute(
            sql.replace(" FROM orders", " FROM orders" + where))
        assert [d.type_code for d in cursor.description] == \
            [d.type_code for d in direct.description]
        assert [type(v) for v in row] == [type(v) for v in expected[0]]


@pytest.mark.unit
def test_time_buckets_are_the_image_of_the_declared_domain():
    plan = plan_of("SELECT date_trunc('month', order_date) AS month, count(*) FROM orders "
                   "GROUP BY 1 ORDER BY 1")
    assert plan.keys == 1 and plan.grouping.domain_size == 731
    domain = plan.sql.split("LEFT JOIN")[0]
    assert "generate_series" in domain and '"public"."orders"' not in domain


@pytest.mark.unit
def test_a_bucket_of_a_column_without_a_domain_is_refused():
    refusal = refusal_of("SELECT CASE WHEN customer_id < 5 THEN 1 ELSE 2 END, count(*) "
                         "FROM orders GROUP BY 1")
    assert "needs a declared domain for customer_id" in refusal.message


def test_time_buckets_through_the_proxy(proxy: RunningProxy):
    name = fresh_analyst(proxy)
    with psycopg.connect(proxy.dsn(name, name), autocommit=True) as connection:
        rows = connection.execute(
            "SELECT extract(year FROM order_date) AS y, count(*) FROM orders "
            "GROUP BY 1 ORDER BY 1").fetchall()
    assert [row[0] for row in rows] == [Decimal(2024), Decimal(2025)]


# -- FILTER and CASE inside aggregates ------------------------------------------------------

@pytest.mark.unit
def test_filter_is_a_case_inside_the_aggregate():
    plan = plan_of("SELECT count(*) FILTER (WHERE quantity > 3), "
                   "sum(quantity) FILTER (WHERE order_cost > 10) FROM orders")
    # The CASE inside COUNT: tests/golden/rewritten/group_keys.sql
    assert [(p.aggregate, p.magnitude) for p in plan.parts] == [("count", 1.0), ("sum", 10.0)]


@pytest.mark.unit
@pytest.mark.parametrize(("expression", "magnitude"), [
    ("CASE WHEN quantity > 3 THEN 1 ELSE 0 END", 1.0),
    ("CASE WHEN quantity > 3 THEN order_cost ELSE 0 END", 5000.0),
    ("CASE WHEN quantity > 3 THEN -2 WHEN quantity > 1 THEN 7 END", 7.0),
])
def test_the_bounds_of_a_summed_case_span_its_branches(expression: str, magnitude: float):
    plan = plan_of(f"SELECT sum({expression}) FROM orders")
    assert plan.parts[0].magnitude == magnitude


@pytest.mark.unit
def test_a_summed_case_with_an_unbounded_branch_is_refused():
    assert "needs declared bounds" in refusal_of(
        "SELECT sum(CASE WHEN quantity > 3 THEN order_id ELSE 0 END) FROM orders").message


# -- a query over an aggregate subquery or CTE ------------------------------------------------

@pytest.mark.unit
def test_a_query_over_an_aggregate_cte_runs_over_its_answer_only():
    plan = plan_of("WITH t AS (SELECT quantity, count(*) AS n FROM orders GROUP BY 1) "
                   "SELECT sum(n) FROM t")
    assert plan.outer is not None and plan.outer.sql == "SELECT SUM(n) FROM __dpgate_answer__"
    assert plan.outer.alias == "t" and plan.keys == 1
    assert "WITH" in plan.fingerprint_text  # the whole question, not the inner one


def test_metabase_source_wrapper_through_the_proxy(proxy: RunningProxy):
    name = fresh_analyst(proxy)
    with psycopg.connect(proxy.dsn(name, name), autocommit=True) as connection:
        cursor = connection.execute(
            'SELECT "source"."count" AS "count" FROM (SELECT count(*) AS "count" '
            'FROM "public"."orders") AS "source" LIMIT 1048575')
        assert [(d.name, d.type_code) for d in cursor.description] == [("count", 20)]
        assert len(cursor.fetchall()) == 1


# -- figures a person writes ----------------------------------------------------------------

def test_budget_figures_are_the_decimals_a_person_writes(proxy: RunningProxy):
    name = fresh_analyst(proxy)
    with psycopg.connect(proxy.dsn(name, name), autocommit=True) as connection:
        connection.execute("SET dp.epsilon = 0.1")
        for quantity in (1, 2, 3):  # 0.1 + 0.1 + 0.1 is 0.30000000000000004 in floats
            connection.execute(f"SELECT count(*) FROM orders WHERE quantity = {quantity}")
        cursor = connection.execute("SHOW dp.budget")
        shown = dict(zip([d.name for d in cursor.description], cursor.fetchone(), strict=True))
    assert (shown["epsilon_spent"], shown["epsilon_left"]) == (0.3, 0.7)
    listed = json.loads(proxy.cli("budget", "show", "--json").stdout)
    mine = next(a for a in listed["analysts"] if a["name"] == name)
    assert (mine["epsilon_spent"], mine["epsilon_left"]) == (0.3, 0.7)


@pytest.mark.unit
def test_variance_is_computed_from_count_sum_and_sum_of_squares():
    plan = plan_of("SELECT var_samp(quantity) FROM orders")
    # centred on 5.5: (x − 5.5)² within [0, 20.25], x − 5.5 within [−4.5, 4.5]
    assert [(p.aggregate, p.magnitude) for p in plan.parts] == \
        [("count", 1.0), ("sum", 20.25), ("sum", 4.5)]
    assert "GREATEST(" in plan.post_sql and "> 1 THEN" in plan.post_sql  # ≥ 0; NULL for n ≤ 1


@pytest.mark.unit
def test_select_distinct_of_keys_is_a_group_by():
    plan = plan_of("SELECT DISTINCT quantity FROM orders")
    assert plan.parts == () and plan.keys == 1  # the domain, for free
    assert plan_of("SELECT DISTINCT customer_id FROM orders").grouping.key_selection


# -- the policy, visible from SQL -------------------------------------------------------------

def test_show_dp_policy_lists_what_can_be_asked_of_each_column(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        cursor = connection.execute("SHOW dp.policy")
        rows = {(r[0], r[1]): r for r in cursor.fetchall()}
    assert [d.name for d in cursor.description][:4] == ["table_name", "column_name",
                                                         "private", "domain"]
    date = rows[("public.orders", "order_date")]
    assert date[2:6] == ("true", "2024-01-01 .. 2025-12-31", None, "false")
    assert "GROUP BY over the whole domain" in date[7]
    cost = rows[("public.orders", "order_cost")]
    assert cost[4] == "[0, 5000]" and "sum, avg" in cost[7]
    assert rows[("public.orders", "customer_id")][5] == "true"
    assert rows[("public.products", "price")][2] == "false"
    assert rows[("public.customers", "address")][7] == "count, count(DISTINCT), WHERE"


def test_explain_without_flags_uses_the_demo_policy_and_says_so(monkeypatch):
    monkeypatch.delenv("DPGATE_CONFIG", raising=False)
    cli = dpgate_cli("explain", "SELECT order_date, count(*) FROM orders GROUP BY 1")
    assert cli.returncode == 0, cli.stderr
    report = json.loads(cli.stdout)
    assert report["supported"] and report["policy"] == str(DEMO_POLICY_FILE)


@pytest.mark.unit
def test_the_shipped_dpgate_toml_serves_the_demo_policy():
    """docker-compose mounts dpgate.toml: the README's walk-through needs the demo's
    domains and bounds there too."""
    shipped = load_config(Path(__file__).resolve().parent.parent / "dpgate.toml").policy
    assert shipped == load_policy_file(DEMO_POLICY_FILE)
    assert shipped.unit is not None  # customers are the demo's privacy unit


def test_a_bad_epsilon_is_told_with_the_valid_range(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        with pytest.raises(errors.InvalidParameterValue) as raised:
            connection.execute("SET dp.epsilon = -1")
    assert str(raised.value) == "dp.epsilon must be a positive number between 0.001 and 10, " \
        "not -1"


@pytest.mark.unit
def test_a_numeric_domain_bounds_min_max_and_sums():
    policy = Policy.from_dict({"tables": {"orders": {"private": True, "columns": {
        "quantity": {"domain": {"range": [1, 10]}},
        "product_id": {"domain": [3, 5, 8]}}}}})
    plan = classify("SELECT min(quantity), max(quantity) FROM orders", policy, METRICS)[0].plan
    assert isinstance(plan, PrivateAggregate) and plan.parts[0].grid.lo == 1
    summed = classify("SELECT sum(product_id) FROM orders", policy, METRICS)[0].plan
    assert isinstance(summed, PrivateAggregate) and summed.parts[0].magnitude == 8.0


def test_metrics_refresh_without_configuration_measures_the_demo_database(tmp_path: Path):
    port = free_port()
    demo = subprocess.Popen([sys.executable, "-m", "proxy", "demo", "--data-dir",
                             str(tmp_path), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(port, demo, seconds=300)
        refreshed = dpgate_cli("metrics", "refresh", "--data-dir", str(tmp_path))
    finally:
        demo.terminate()
        demo.wait(timeout=60)
    assert refreshed.returncode == 0, refreshed.stderr
    assert "public.orders.customer_id: max_freq 50" in refreshed.stdout
    assert f"metrics stored in {tmp_path / 'ledger.sqlite3'}" in refreshed.stdout
