"""Statements answered by several private releases under one charge (issue 28;
rewriter/aggregate/composite.py): a quantile beside noisy aggregates, and UNION /
INTERSECT / EXCEPT of private aggregates. The split and the budget without a database,
then through dpgate: one ledger entry with the summed ε, every column's interval in the
NOTICE and SHOW dp.last_answers, PostgreSQL's rows and types at zero noise, failures
before the charge free and after it charged."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from proxy.config import load_config, load_policy_file
from proxy.engine.errors import StatementError
from rewriter.analysis.classify import classify
from rewriter.errors import Refusal
from rewriter.plan import Composite
from rewriter.release.explain import explain
from rewriter.sensitivity.calibrate import AVERAGE_SUM_WEIGHT, branch_budgets, calibrate
from rewriter.sensitivity.metrics import Metrics
from tests.conftest import (
    DemoDatabase,
    RunningProxy,
    free_port,
    write_config,
)
from tests.proxies import zero_noise_proxy

pytestmark = pytest.mark.end_to_end

POLICY = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")
METRICS = Metrics({("public.orders", "customer_id"): 100,
                   ("public.customers", "customer_id"): 1})
MIXED = ("SELECT count(*), avg(quantity), percentile_cont(0.5) WITHIN GROUP "
         "(ORDER BY quantity) FROM orders")
UNION = "SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM customers"
JOINED = ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
          "UNION ALL SELECT count(*) FROM orders")
INT8, FLOAT8, NUMERIC = 20, 701, 1700


def composite(sql: str) -> Composite:
    (statement,) = classify(sql, POLICY, METRICS)
    assert isinstance(statement.plan, Composite), statement.plan
    return statement.plan


def refusal(sql: str) -> Refusal:
    (statement,) = classify(sql, POLICY, METRICS)
    assert isinstance(statement.plan, Refusal), statement.plan
    return statement.plan


# -- the split -----------------------------------------------------------------------------

@pytest.mark.unit
def test_a_quantile_beside_noisy_aggregates_is_two_releases_in_the_statements_order():
    plan = composite(MIXED)
    noisy, chosen = plan.branches
    assert [(o.name, o.kind) for o in noisy.plan.visible] == [("count", "noisy"),
                                                              ("avg", "noisy")]
    assert [(o.name, o.kind) for o in chosen.plan.visible] == [("percentile_cont", "choice")]
    assert chosen.text.startswith("SELECT PERCENTILE_CONT(0.5)")
    assert plan.combine == ('SELECT "b0"."c0" AS "count", "b0"."c1" AS "avg", '
                            '"b1"."c0" AS "percentile_cont" FROM __dpgate_branch_0__ AS "b0" '
                            'CROSS JOIN __dpgate_branch_1__ AS "b1"')


@pytest.mark.unit
def test_choices_of_different_columns_are_one_release_each():
    plan = composite("SELECT max(order_cost), count(*), min(quantity), "
                     "median(order_cost) AS m FROM orders")
    assert [[o.name for o in b.plan.visible] for b in plan.branches] == [
        ["count"], ["max", "m"], ["min"]]
    assert not plan.postgres_sql  # median is dpgate's: PostgreSQL cannot describe it
    assert '"b1"."c1" AS "m"' in plan.combine


@pytest.mark.unit
@pytest.mark.parametrize(("sql", "words"), [
    # a choice inside an expression, or beside GROUP BY / HAVING: one release, refused
    ("SELECT max(order_cost) - min(order_cost), count(*) FROM orders",
     "inside an expression"),
    ("SELECT quantity, median(order_cost) FROM orders GROUP BY quantity", "cannot share"),
    ("SELECT count(*), median(order_cost) FROM orders HAVING count(*) > 5", "cannot share"),
    ("SELECT count(*) FROM orders UNION ALL SELECT order_id FROM orders", "would reveal"),
    ("WITH RECURSIVE t AS (SELECT 1) SELECT count(*) FROM orders UNION SELECT 1 FROM t",
     "WITH"),
])
def test_what_is_not_split_keeps_a_refusal(sql: str, words: str):
    assert words in refusal(sql).message


@pytest.mark.unit
def test_limit_and_offset_apply_to_the_combined_row():
    plan = composite("SELECT count(*), median(order_cost) FROM orders ORDER BY 1 LIMIT 1 "
                     "OFFSET 0")
    assert [b.text for b in plan.branches] == [
        "SELECT COUNT(*) FROM orders",
        "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY order_cost) FROM orders"]
    assert plan.combine.endswith("LIMIT 1 OFFSET 0")  # ORDER BY of one row: nothing to do


LIMITED = ("SELECT quantity, count(*) FROM orders GROUP BY quantity ORDER BY 2 DESC "
           "LIMIT (SELECT count(*) FROM orders WHERE customer_id = 1)")


@pytest.mark.unit
def test_a_limit_by_a_private_count_is_a_release_read_by_the_combination():
    plan = composite(LIMITED)
    assert [(b.text, b.label) for b in plan.branches] == [
        ("SELECT quantity, COUNT(*) FROM orders GROUP BY quantity ORDER BY 2 DESC", ""),
        ("SELECT COUNT(*) FROM orders WHERE customer_id = 1", "subquery in LIMIT")]
    # The groups that exist: those whose noisy count is above 0, as PostgreSQL limits.
    assert plan.branches[0].plan.grouping.occupied_by is not None
    assert plan.combine.endswith(
        'LIMIT (SELECT "b1"."c0" FROM __dpgate_branch_1__ AS "b1")')


@pytest.mark.unit
@pytest.mark.parametrize(("sql", "words"), [
    # beside the private count, a subquery dpgate did not write over a release (one
    # naming a release's rows reads a table the policy does not know: private, a release)
    ("SELECT quantity, count(*) FROM orders GROUP BY quantity LIMIT "
     "(SELECT count(*) FROM orders WHERE customer_id = 1) + (SELECT count(*) FROM products)",
     "take a constant"),
    ("SELECT quantity, count(*) FROM orders GROUP BY quantity LIMIT "
     "(SELECT count(*) FROM orders WHERE customer_id = 1) OFFSET "
     "(SELECT \"b1\".\"c0\" FROM __dpgate_branch_1__ AS \"b1\")", "keeps for itself"),
    # one row and one column only
    ("SELECT quantity, count(*) FROM orders GROUP BY quantity LIMIT "
     "(SELECT count(*) FROM orders GROUP BY customer_id)", "without GROUP BY"),
    ("SELECT quantity, count(*) FROM orders GROUP BY quantity LIMIT "
     "(SELECT quantity FROM orders WHERE customer_id = 1)", "would reveal rows"),
])
def test_a_subquery_in_limit_is_a_release_or_refused(sql: str, words: str):
    assert words in refusal(sql).message


@pytest.mark.unit
def test_set_operation_branches_are_releases_and_public_branches_stay_in_the_combination():
    plan = composite("SELECT count(*) FROM orders UNION SELECT count(*) FROM customers "
                     "EXCEPT SELECT count(*) FROM products ORDER BY 1 LIMIT 1")
    assert [b.label for b in plan.branches] == ["branch 1", "branch 2"]
    assert [b.text for b in plan.branches] == ["SELECT COUNT(*) FROM orders",
                                               "SELECT COUNT(*) FROM customers"]
    assert plan.combine.endswith("EXCEPT SELECT COUNT(*) FROM products ORDER BY 1 LIMIT 1")
    assert " UNION SELECT " in plan.combine
    # A WITH before the set operation is given to each branch.
    shared = composite("WITH t AS (SELECT quantity FROM orders WHERE quantity > 2) "
                       "SELECT count(*) FROM t UNION ALL SELECT sum(quantity) FROM t")
    assert all(b.text.startswith("WITH t AS (SELECT quantity FROM orders WHERE quantity > 2)")
               for b in shared.branches)
    assert "WITH" not in shared.combine
    # A branch reading none of the WITH's private queries stays public.
    mixed = composite("WITH t AS (SELECT quantity FROM orders), u AS (SELECT * FROM t) "
                      "SELECT count(*) FROM u UNION ALL SELECT count(*) FROM products")
    (branch,) = mixed.branches
    assert branch.text.startswith("WITH t AS (SELECT quantity FROM orders), u AS")
    assert mixed.combine.endswith("UNION ALL SELECT COUNT(*) FROM products")


@pytest.mark.unit
def test_a_branch_mixing_a_quantile_with_counts_is_split_in_turn():
    plan = composite("SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY quantity) "
                     "FROM orders UNION ALL SELECT 0, 0 UNION ALL SELECT count(*), "
                     "percentile_cont(0.5) WITHIN GROUP (ORDER BY order_cost) FROM orders "
                     "ORDER BY 1")
    assert [b.label for b in plan.branches] == ["branch 1", "branch 1", "branch 3",
                                                "branch 3"]
    assert plan.combine.count("CROSS JOIN") == 2 and "SELECT 0, 0" in plan.combine


@pytest.mark.unit
def test_each_release_gets_what_it_would_in_one_plan_and_the_charge_is_their_sum():
    plan = composite(MIXED)
    plans = tuple(b.plan for b in plan.branches)
    # count, avg's sum and count, the quantile: four parts, three in the first release;
    # an AVG's sum takes AVERAGE_SUM_WEIGHT slots of the split, as in one plan
    slots = 3 + AVERAGE_SUM_WEIGHT
    assert branch_budgets(plans, 0.3, 1e-8) == (
        pytest.approx((0.3 * (slots - 1) / slots, 1e-8)), pytest.approx((0.3 / slots, 1e-8)))
    parts = [part for p, (e, d) in zip(plans, branch_budgets(plans, 0.3, 1e-8), strict=True)
             for part in calibrate(p, e, d).parts]
    slot = 0.3 / slots
    assert [p.epsilon for p in parts] == pytest.approx(
        [slot, slot * AVERAGE_SUM_WEIGHT, slot, slot])  # as one plan's split
    report = explain(MIXED, POLICY, METRICS, 0.3, 1e-8)
    assert report["supported"] and report["kind"] == "composite"
    assert report["epsilon"] == pytest.approx(0.3) and report["delta"] == 0
    assert [b["epsilon"] for b in report["branches"]] == pytest.approx(
        [0.3 - 0.3 / slots, 0.3 / slots])


@pytest.mark.unit
def test_delta_goes_only_to_the_releases_that_spend_one():
    plan = composite(JOINED)
    plans = tuple(b.plan for b in plan.branches)
    (joined, alone) = branch_budgets(plans, 0.2, 1e-8)
    assert joined == pytest.approx((0.1, 1e-8)) and alone[0] == pytest.approx(0.1)
    report = explain(JOINED, POLICY, METRICS, 0.2, 1e-8)
    assert report["delta"] == pytest.approx(1e-8) and not report["pure"]
    assert [b["delta"] for b in report["branches"]] == pytest.approx([1e-8, 0.0])


@pytest.mark.unit
def test_the_plan_cache_weighs_every_release():
    from proxy.engine.plan_cache import PlanCache
    from rewriter.analysis.classify import Statement

    plan = composite(MIXED)
    cache = PlanCache(size=10, max_bytes=1 << 20)
    cache.put((MIXED, 0), [Statement(MIXED, 0, plan)])
    assert cache.bytes > len(plan.combine) + sum(len(b.plan.sql) for b in plan.branches)


# -- through dpgate ------------------------------------------------------------------------

def fresh(proxy: RunningProxy, epsilon: float = 5.0) -> str:
    name = f"several_{secrets.token_hex(4)}"
    proxy.add_analyst(name, name, epsilon)
    return proxy.dsn(name, name)


def charges(proxy: RunningProxy, dsn: str) -> list[dict]:
    name = psycopg.conninfo.conninfo_to_dict(dsn)["user"]
    return json.loads(proxy.cli("user", "show", str(name), "--json").stdout)["charges"]


def test_one_charge_of_the_summed_epsilon_and_every_columns_interval(proxy: RunningProxy):
    dsn = fresh(proxy)
    with psycopg.connect(dsn, autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        connection.execute("SET dp.epsilon = 0.3")
        cursor = connection.execute(MIXED)
        ((count, average, median),) = cursor.fetchall()
        assert [d.type_code for d in cursor.description] == [INT8, NUMERIC, FLOAT8]
        assert [d.name for d in cursor.description] == ["count", "avg", "percentile_cont"]
        spent = connection.execute("SHOW dp.budget").fetchone()[1]
        last = connection.execute("SHOW dp.last_answers").fetchall()
        again = connection.execute(MIXED).fetchall()
        assert connection.execute("SHOW dp.budget").fetchone()[1] == spent
    assert again == [(count, average, median)]  # a repeated question: stored, free
    assert spent == pytest.approx(0.3)
    (charge,) = charges(proxy, dsn)
    assert charge["epsilon"] == pytest.approx(0.3) and charge["outcome"] == "answered"
    (notice,) = [n for n in notices if "charged epsilon" in n]
    assert "charged epsilon 0.3," in notice and "in 2 releases" in notice
    assert "[count, avg] epsilon 0.233333" in notice
    assert "[percentile_cont] epsilon 0.0666667" in notice
    for name in ("count ±", "avg ±", "percentile_cont ±"):
        assert name in notice
    shown = {row[2]: row[3] for row in last}
    assert set(shown) == {"count", "avg", "percentile_cont"}
    assert all(error.startswith("±") for error in shown.values())
    assert {row[5] for row in last} == {0.3}


def test_a_set_operations_branches_are_named_in_the_notice(proxy: RunningProxy):
    dsn = fresh(proxy)
    with psycopg.connect(dsn, autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        rows = connection.execute(UNION).fetchall()
        last = connection.execute("SHOW dp.last_answers").fetchall()
    assert len(rows) == 2 and all(isinstance(n, int) and n >= 0 for (n,) in rows)
    assert "[branch 1] epsilon 0.05" in notices[-1] and "[branch 2] epsilon 0.05" in notices[-1]
    assert [row[2] for row in last] == ["count (branch 1)", "count (branch 2)"]
    assert [c["epsilon"] for c in charges(proxy, dsn)] == pytest.approx([0.1])


def test_a_limit_by_a_private_count_is_one_charge_and_its_rows_the_noisy_count(
        proxy: RunningProxy):
    dsn = fresh(proxy)
    with psycopg.connect(dsn, autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        connection.execute("SET dp.epsilon = 0.3")
        rows = connection.execute(LIMITED).fetchall()
        last = connection.execute("SHOW dp.last_answers").fetchall()
        spent = connection.execute("SHOW dp.budget").fetchone()[1]
    assert spent == pytest.approx(0.3)
    assert [c["epsilon"] for c in charges(proxy, dsn)] == pytest.approx([0.3])
    assert "in 2 releases" in notices[-1] and "[subquery in LIMIT] epsilon" in notices[-1]
    (released,) = [row for row in last if row[2] == "count (subquery in LIMIT)"]
    assert [n for _, n in rows] == sorted((n for _, n in rows), reverse=True)
    assert len(rows) <= 10 and released  # at most the domain's 10 keys


def test_a_release_refused_before_the_charge_is_free(proxy: RunningProxy):
    """The second branch needs a δ the session does not give: refused, nothing charged,
    though the first branch alone would be answered."""
    dsn = fresh(proxy)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("SET dp.delta = 0")
        with pytest.raises(errors.InvalidParameterValue):
            connection.execute("SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM "
                               "orders o JOIN customers c ON o.customer_id = c.customer_id")
        assert connection.execute("SHOW dp.budget").fetchone()[1] == 0
    assert charges(proxy, dsn) == []


def test_a_failure_of_the_second_release_after_its_values_were_drawn_is_charged(
        proxy: RunningProxy):
    """The second branch divides by its released count minus itself: PostgreSQL's error,
    after both releases were drawn, so the whole statement's ε is kept."""
    dsn = fresh(proxy)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("SET dp.epsilon = 0.2")
        with pytest.raises(errors.DivisionByZero):
            connection.execute("SELECT count(*) FROM orders UNION ALL SELECT 1 / "
                               "(count(*) - count(*)) FROM customers")
        spent = connection.execute("SHOW dp.budget").fetchone()[1]
    assert spent == pytest.approx(0.2)
    assert [(c["epsilon"], c["outcome"]) for c in charges(proxy, dsn)] == [
        (pytest.approx(0.2), "failed")]


def test_a_second_release_run_to_its_timeout_keeps_the_whole_charge(
        tmp_path: Path, demo_database: DemoDatabase):
    """The second branch's query on private rows runs to private_statement_timeout after
    the first one ran: the generic 22000, the statement's ε charged once, as failed."""
    from tests.test_private_connections import SLOW, Setup, WatchedLedger, error_fields

    path = tmp_path / "dpgate.toml"
    write_config(path, free_port(), tmp_path / "ledger.sqlite3", demo_database)
    made = Setup(load_config(path), WatchedLedger(tmp_path / "watched.sqlite3"), 2,
                 statement_timeout=1.0)
    engine = made.engine("eve")

    async def scenario() -> None:
        sql = f"SELECT count(*) FROM customers UNION ALL {SLOW}"
        [statement] = await engine.statements(sql)
        assert isinstance(statement.plan, Composite)
        with pytest.raises(StatementError) as timed_out:
            await engine.execute(sql, statement.plan)
        assert error_fields(timed_out.value)["C"] == "22000"
    try:
        made.run(scenario())
    finally:
        made.workers.close()
    assert made.ledger.budget("eve").epsilon_spent == pytest.approx(0.1)
    assert [what for what, _ in made.ledger.lent_at_commit if what != "metrics"] == ["failure"]


def test_prepared_statements_describe_the_combined_columns(proxy: RunningProxy):
    """The extended protocol: Describe tells the answer's columns before anything runs."""
    dsn = fresh(proxy)
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0) as connection:
        sql = "SELECT count(*) AS n FROM orders UNION ALL SELECT sum(order_cost) FROM orders"
        cursor = connection.execute(sql, prepare=True)
        assert [(d.name, d.type_code) for d in cursor.description] == [("n", NUMERIC)]
        assert len(cursor.fetchall()) == 2


def test_bound_values_reach_every_release(proxy: RunningProxy):
    """Parameters (the extended protocol, psycopg's server-side binding): each release is
    bound to all of them, typed as PostgreSQL types the whole statement's."""
    dsn = fresh(proxy)
    with psycopg.connect(dsn, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT count(*) FROM orders WHERE product_id = %s UNION ALL "
            "SELECT count(*) FROM customers WHERE customer_id < %s", (3, 100)).fetchall()
        assert len(rows) == 2
        cursor = connection.execute(
            "SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY order_cost) "
            "FROM orders WHERE quantity > %s", (2,), prepare=True)
        assert [d.type_code for d in cursor.description] == [INT8, FLOAT8]
        assert len(cursor.fetchall()) == 1
        with pytest.raises(errors.FeatureNotSupported):
            connection.execute("SELECT count(*), median(order_cost) FROM orders "
                               "WHERE quantity > %s", (2,))
        spent = connection.execute("SHOW dp.budget").fetchone()[1]
    assert spent == pytest.approx(0.2)


def test_statements_differing_in_where_literals_share_one_plan(proxy: RunningProxy):
    """A quantile beside a count, asked for two products: the second answered with the
    first one's plan, its literal as a parameter (literals.py); the ledger keeps each
    statement as written."""
    dsn = fresh(proxy)
    sql = ("SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY order_cost) "
           "FROM orders WHERE product_id = {}")
    with psycopg.connect(dsn, autocommit=True) as connection:
        for product in (11, 12):
            ((count, median),) = connection.execute(sql.format(product)).fetchall()
            assert count >= 0 and 0 <= median <= 5000
    assert [c["statement"] for c in charges(proxy, dsn)] == [sql.format(11), sql.format(12)]


# -- zero noise: PostgreSQL's rows ---------------------------------------------------------

@pytest.fixture(scope="module")
def exact(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[str]:
    """A proxy with zero noise, as tests/test_differential.py's."""
    with zero_noise_proxy(tmp_path_factory.mktemp("composite"), demo_database, "zed",
                          "zed-pw") as dsn:
        yield dsn


@pytest.mark.parametrize("sql", [
    "SELECT count(*), avg(quantity), max(order_cost), sum(order_cost) FROM orders "
    "WHERE quantity > 2",
    "SELECT count(*) AS n FROM orders UNION ALL SELECT sum(order_cost) FROM orders ORDER BY 1",
])
def test_the_noisy_columns_are_postgresqls_at_zero_noise(
        exact: str, demo_database: DemoDatabase, sql: str):
    with psycopg.connect(exact, autocommit=True) as through:
        cursor = through.execute(sql)
        answered, columns = cursor.fetchall(), [(d.name, d.type_code) for d in cursor.description]
    with psycopg.connect(demo_database.admin_dsn) as direct:
        cursor = direct.execute(sql)
        expected = cursor.fetchall()
        assert columns == [(d.name, d.type_code) for d in cursor.description]
    if "max(" in sql:  # the choice is a grid point at or above the maximum; the rest exact
        ((count, average, most, total),) = answered
        ((true_count, true_average, true_most, true_total),) = expected
        assert (count, total) == (true_count, true_total)
        assert abs(average - true_average) < 1e-6 and true_most <= most <= 5000
    else:
        assert answered == expected


def test_median_beside_a_count_takes_dpgates_names(exact: str):
    with psycopg.connect(exact, autocommit=True) as through:
        cursor = through.execute("SELECT count(*), median(order_cost) AS m FROM orders")
        ((count, median),) = cursor.fetchall()
        assert [(d.name, d.type_code) for d in cursor.description] == [("count", INT8),
                                                                       ("m", FLOAT8)]
    assert count > 0 and median > 0


def test_released_values_never_reach_the_text_other_analysts_can_see(proxy: RunningProxy):
    """Post-processing runs on the relay role, every analyst's: its statement's text is in
    pg_stat_activity for them to read, so the released values travel as parameters."""
    asked = {"SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM customers": 2,
             "SELECT count(*) * 3 AS n FROM orders WHERE quantity > 2": 1}
    with psycopg.connect(fresh(proxy), autocommit=True) as connection:
        for sql, rows in asked.items():
            answer = [str(value) for row in connection.execute(sql).fetchall()
                      for value in row]
            assert len(answer) == rows
            with psycopg.connect(fresh(proxy), autocommit=True) as other:
                texts = [text for (text,) in other.execute(
                    "SELECT query FROM pg_stat_activity "
                    "WHERE application_name = 'dpgate-released'").fetchall()]
            assert texts and any("$1::" in text for text in texts)
            for text in texts:
                assert "VALUES ('" not in text
                assert not any(value in text for value in answer if len(value) > 2)


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM customers "
    "LIMIT (SELECT count(*) FROM orders WHERE quantity > 5)",
    "SELECT count(*), median(quantity) FROM orders "
    "OFFSET (SELECT min(quantity) FROM orders WHERE customer_id = 7)",
    "(SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM customers) "
    "UNION ALL SELECT 1 LIMIT (SELECT 1)",
])
def test_limit_and_offset_of_several_releases_take_a_constant(sql: str):
    """They run over the released rows after the charge: a subquery there would count
    private rows without noise (one person's value, through how many rows come back)."""
    assert "take a constant" in refusal(sql).message


@pytest.mark.parametrize("sql", [
    "SELECT length('__dpgate_branch_0__ AS \"b0\"')::bigint UNION ALL SELECT count(*) FROM orders",
    "SELECT count(*) + length('__dpgate_released__ AS r') FROM orders",
    "SELECT count(*) AS \"__DPGATE_released__ AS r\", count(*) + 1 FROM orders",
    "SELECT n + length('__dpgate_answer__') FROM (SELECT count(*) AS n FROM orders) AS t",
])
def test_a_name_dpgate_keeps_for_itself_is_refused(sql: str):
    """dpgate fills those names in by their text in the SQL over released values: one
    written by the analyst would make it a charged failure where PostgreSQL answers."""
    assert "keeps for itself" in refusal(sql).message


@pytest.mark.parametrize("sql", [
    "SELECT count(*), median(quantity) FROM orders FETCH FIRST (SELECT (WITH orders AS "
    "(SELECT 1) SELECT 0) + (SELECT count(*) FROM orders WHERE customer_id = 7)) ROWS ONLY",
    "SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM customers FETCH FIRST "
    "(SELECT count(*) FROM products) ROWS ONLY",
])
def test_fetch_first_of_several_releases_takes_a_constant_too(sql: str):
    """FETCH FIRST is LIMIT by another name; a CTE named like a private table in one
    subquery does not hide that table read in another."""
    message = refusal(sql).message
    assert "take a constant" in message or "read outside the private parts" in message


@pytest.mark.parametrize("sql", [
    "SELECT quantity, count(*) FROM orders WHERE quantity > $1 GROUP BY quantity "
    "HAVING count(*) > $2 ORDER BY 1",
    "SELECT count(*) + $2 FROM orders WHERE quantity > $1",
])
def test_an_untyped_parameter_only_post_processing_reads_is_typed_as_postgresql_types_it(
        exact: str, demo_database: DemoDatabase, sql: str):
    """libpq and node-postgres send parameters untyped (OID 0): one that only HAVING or a
    computed column reads is not in the rewritten SQL, which cannot type it alone."""
    def rows(dsn: str) -> list[list[bytes | None]]:
        with psycopg.connect(dsn, autocommit=True) as connection:
            result = connection.pgconn.exec_params(sql.encode(), [b"2", b"100"], [0, 0])
            assert result.status == psycopg.pq.ExecStatus.TUPLES_OK, \
                result.error_message.decode()
            return [[result.get_value(r, c) for c in range(result.nfields)]
                    for r in range(result.ntuples)]
    assert rows(exact) == rows(demo_database.admin_dsn)
