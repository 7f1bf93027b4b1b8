"""Unit mode through the proxy and on PostgreSQL.

The proxy here serves the demo policy with its privacy unit (customers) and zero noise:
no analyst shift and ε = 10¹² per query, as in test_differential.py. So each answer is
the bounded aggregate itself, and can be compared with what PostgreSQL computes for the
same question with at most τ = 10 rows per customer. A last test adds one customer with
1,000 orders to a database of its own and checks that the rewritten SQL's answers move by
at most the stated sensitivity before any noise. One test sets dp.epsilon = 0.1 for the
shape × total estimator of a histogram, which only noise calls for.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction

import psycopg
import pytest
from psycopg import errors

from proxy.demo.demo import DEMO_POLICY_FILE
from proxy.engine.weighted_sums import Layout, layout, rows_at
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.plan import PrivateAggregate
from rewriter.sensitivity.calibrate import calibrate
from tests.conftest import (
    DemoDatabase,
    Postgres,
    add_analyst,
    dpgate_cli,
    free_port,
    start_proxy,
    wait_for_port,
    write_config,
)
from tests.unit_support import demo_policy, measured_metrics

pytestmark = pytest.mark.end_to_end

ANALYST, PASSWORD = "uma", "uma-pw"
TAU = 10
LIMIT = 100  # contributions_limit: the most a count's chosen τ may be
GROUPS = 5 * 10  # κ·τ_g: the most a histogram's chosen τ may be


@pytest.fixture(scope="module")
def unit_proxy(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[str, str]]:
    """(dsn of the proxy in unit mode with zero noise and the policy's τ = 10 for every
    answer (bound_choice_share = 0: no count chooses its own), its configuration file)."""
    yield from _zero_noise_proxy(demo_database, tmp_path_factory, "bound_choice_share = 0")


@pytest.fixture(scope="module")
def choosing_proxy(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[str, str]]:
    """The same with the default share: a lone count(*) chooses its τ per query."""
    yield from _zero_noise_proxy(demo_database, tmp_path_factory, "")


@pytest.fixture(scope="module")
def shaping_proxy(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[str, str]]:
    """choosing_proxy with the policy's opt-in shape × total histograms."""
    yield from _zero_noise_proxy(demo_database, tmp_path_factory, "", shape_times_total=True)


def _zero_noise_proxy(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory,
                      privacy: str, shape_times_total: bool = False
                      ) -> Iterator[tuple[str, str]]:
    directory = tmp_path_factory.mktemp("unit")
    port = free_port()
    config = directory / "dpgate.toml"
    write_config(config, port, directory / "ledger.sqlite3", demo_database)
    text = config.read_text().replace("row_level = true", "row_level = false")
    if shape_times_total:
        policy = directory / "policy.toml"
        policy.write_text(DEMO_POLICY_FILE.read_text().replace(
            "row_level_fallback = false", "row_level_fallback = false\nshape_times_total = true"))
        text = text.replace(str(DEMO_POLICY_FILE), str(policy))
    config.write_text(text.replace("default_epsilon = 0.1", "default_epsilon = 1e12\n"
                                   "max_epsilon = 1e12\nshift_interval = [0.0, 0.0]\n"
                                   + privacy))
    add_analyst(config, ANALYST, PASSWORD, 1e18)
    process = start_proxy(config)
    try:
        wait_for_port(port, process)
        yield f"postgresql://{ANALYST}:{PASSWORD}@127.0.0.1:{port}/dpgate_e2e", str(config)
    finally:
        process.terminate()
        process.wait(timeout=30)


def through_proxy(dsn: str, sql: str) -> tuple[list[tuple], list[str]]:
    notices: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        rows = connection.execute(sql).fetchall()
    return rows, notices


def on_postgres(database: DemoDatabase, sql: str) -> list[tuple]:
    with psycopg.connect(database.admin_dsn) as connection:
        return connection.execute(sql).fetchall()


JOIN_COUNT = ("SELECT count(*) FROM orders JOIN customers USING (customer_id) "
              "WHERE product_id = 1 AND address LIKE '%United States%'")


def test_the_issues_join_count_is_exact_when_no_customer_exceeds_tau(unit_proxy, demo_database):
    dsn, _ = unit_proxy
    # No customer has more than τ orders of product 1, so bounding keeps every row.
    (most,) = on_postgres(demo_database, "SELECT max(n) FROM (SELECT count(*) AS n FROM orders "
                          "WHERE product_id = 1 GROUP BY customer_id) AS s")[0]
    assert most <= TAU
    rows, notices = through_proxy(dsn, JOIN_COUNT)
    assert rows == on_postgres(demo_database, JOIN_COUNT)
    assert any("counted with at most 10 rows" in n and "not counted" in n for n in notices)


def test_a_composite_is_exact_when_no_customer_exceeds_tau(unit_proxy, demo_database):
    """Several releases under one charge in unit mode: each release bounded per customer
    (at most τ = 10 orders of product 1 each, and one row per customer): PostgreSQL's
    rows; the quantile beside them is a grid point within the bounds."""
    dsn, _ = unit_proxy
    union = ("SELECT count(*) FROM orders WHERE product_id = 1 UNION ALL "
             "SELECT count(*) FROM customers ORDER BY 1")
    rows, notices = through_proxy(dsn, union)
    assert rows == on_postgres(demo_database, union)
    assert any("[branch 1]" in n and "[branch 2]" in n for n in notices)
    mixed = "SELECT count(*), max(quantity) FROM orders WHERE product_id = 1"
    ((count, most),), _ = through_proxy(dsn, mixed)
    assert count == on_postgres(demo_database, mixed)[0][0] and 1 <= most <= 10
    limited = ("SELECT quantity, count(*) FROM orders WHERE product_id = 1 GROUP BY quantity "
               "ORDER BY 1 LIMIT (SELECT count(*) FROM orders WHERE customer_id = 1)")
    rows, notices = through_proxy(dsn, limited)
    assert rows == on_postgres(demo_database, limited)
    assert any("[subquery in LIMIT]" in n for n in notices)


def test_a_chosen_tau_counts_every_row_without_noise(choosing_proxy, demo_database):
    """At ε = 10¹² the walk passes every level some customer exceeds, so τ lands above
    the busiest customer (50 orders) and the count is PostgreSQL's, from one scan."""
    dsn, _ = choosing_proxy
    sql = "SELECT count(*) FROM orders WHERE quantity >= 2"
    rows, notices = through_proxy(dsn, sql)
    assert rows == on_postgres(demo_database, sql)
    (note,) = [n for n in notices if "a bound chosen privately" in n]
    assert "(at most 100;" in note and ("about 0 rows" in note or "never counted" in note)
    assert int(note.split("counted with at most ")[1].split()[0]) >= 50


def test_counts_inside_expressions_choose_tau_too(choosing_proxy, demo_database):
    """count(*) * 2, alone or per cell, is answered at a chosen τ (one scan, the same
    bound as a bare count), its interval taken from the count's: PostgreSQL's rows."""
    dsn, _ = choosing_proxy
    for sql, tau in [("SELECT count(*) * 2 AS twice FROM orders WHERE quantity >= 2", 50),
                     ("SELECT quantity, count(*) * 2 AS twice, count(*) + 1 FROM orders "
                      "WHERE product_id <= 500 GROUP BY 1 ORDER BY 1", 50)]:
        rows, notices = through_proxy(dsn, sql)
        assert rows == on_postgres(demo_database, sql), sql
        (note,) = [n for n in notices if "a bound chosen privately" in n]
        assert int(note.split("counted with at most ")[1].split()[0]) >= tau
        assert "how many is not released" not in note
        assert any("twice ±" in n for n in notices), notices


def test_a_histogram_with_a_chosen_tau_is_postgresqls_without_noise(choosing_proxy,
                                                                    demo_database):
    """τ lands at κ·τ_g = 50, the busiest customer's 50 orders: every cell is exact."""
    dsn, _ = choosing_proxy
    sql = "SELECT quantity, count(*) FROM orders WHERE product_id <= 500 GROUP BY 1 ORDER BY 1"
    rows, notices = through_proxy(dsn, sql)
    assert rows == on_postgres(demo_database, sql)
    assert any("at most 50 rows, a bound chosen privately" in n for n in notices)


def test_a_gaussian_histogram_keeps_whole_rows_and_a_stale_plan_is_refused(choosing_proxy,
                                                                           demo_database):
    """A session under the Gaussian mechanism plans a histogram's cells by unit (whole
    rows, ⌊m·τ/n⌋ at its fixed τ = 10); the others plan them by unit size. A statement
    prepared before SET dp.mechanism = gaussian holds the other SQL: refused, uncharged."""
    dsn, _ = choosing_proxy
    sql = "SELECT quantity, count(*) FROM orders WHERE product_id <= 500 GROUP BY 1 ORDER BY 1"
    expected_rows = on_postgres(demo_database, (
        "SELECT quantity, sum(CASE WHEN n <= 10 THEN m ELSE floor(m * 10 / n) END) FROM (SELECT "
        "customer_id, quantity, count(*) AS m, sum(count(*)) OVER (PARTITION BY customer_id) "
        "AS n FROM orders WHERE product_id <= 500 GROUP BY 1, 2) AS c GROUP BY 1 ORDER BY 1"))
    with psycopg.connect(dsn, autocommit=True) as connection:
        by_size = connection.execute(sql, prepare=True).fetchall()
        assert by_size == on_postgres(demo_database, sql)  # τ chosen at 50: every row
        connection.execute("SET dp.mechanism = gaussian")
        left = connection.execute("SHOW dp.budget").fetchone()
        with pytest.raises(errors.FeatureNotSupported, match="prepared for another"):
            connection.execute(sql, prepare=True)
        assert connection.execute("SHOW dp.budget").fetchone() == left  # not charged
        whole = connection.execute(sql, prepare=False).fetchall()  # planned anew
    assert [(k, int(v)) for k, v in whole] == [(k, int(v)) for k, v in expected_rows]
    assert whole != by_size  # customers beyond τ = 10 lost rows: the whole-row cells


@pytest.mark.parametrize("condition", ["", " AND o.order_date < now()"])
def test_weighted_sums_with_a_chosen_tau_are_postgresqls_without_noise(choosing_proxy,
                                                                       demo_database,
                                                                       condition: str):
    """Weighted sums read the rows twice (bounding.weighted_rows): PostgreSQL's plan of
    them passes the proxy's plan check, and at zero noise τ lands above every customer in
    each group, so the sums and averages are PostgreSQL's (no row weighs less than 1).
    A value computed before the statement (now()) is written into both reads (it was
    refused: "could not place a computed value")."""
    dsn, _ = choosing_proxy
    sql = ("SELECT p.category, sum(o.order_cost), avg(o.order_cost) FROM orders o JOIN "
           f"products p ON o.product_id = p.product_id WHERE o.product_id <= 300{condition} "
           "GROUP BY p.category ORDER BY p.category")
    rows, notices = through_proxy(dsn, sql)
    truth = on_postgres(demo_database, sql)
    assert [row[0] for row in rows] == [row[0] for row in truth]
    for (_, total, average), (_, true_total, true_average) in zip(rows, truth, strict=True):
        assert Decimal(str(total)) == pytest.approx(true_total, abs=Decimal("0.001"))
        assert Decimal(str(average)) == pytest.approx(true_average, abs=Decimal("0.001"))
    assert any("a bound chosen privately" in n for n in notices)


@pytest.mark.parametrize("sql", [
    # Metabase's count of a question's groups: over the keys whose released count is > 0
    "SELECT count(*) FROM (SELECT quantity, count(*) AS n FROM orders GROUP BY quantity) s",
    "SELECT count(*) FROM (SELECT order_date, sum(order_cost) AS s FROM orders "
    "WHERE order_date < '2024-03-01' GROUP BY order_date) AS source",
    # a semi- and an anti-join correlated on the unit: one customer row per customer
    "SELECT count(*) FROM customers c WHERE EXISTS (SELECT 1 FROM orders o "
    "WHERE o.customer_id = c.customer_id AND o.quantity > 8)",
    "SELECT count(*) FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o "
    "WHERE o.customer_id = c.customer_id AND o.quantity > 8)",
    # a subquery grouped by the unit: one row per customer
    "SELECT count(*) FROM (SELECT customer_id, count(*) AS n FROM orders "
    "GROUP BY customer_id) AS s WHERE n > 20",
    # outer joins that pad a private table on the unit: one row per customer
    "SELECT count(*), count(o.order_id) FROM customers c LEFT JOIN orders o "
    "ON o.customer_id = c.customer_id AND o.order_id = c.customer_id",
    "SELECT count(customer_id), count(o.order_id) FROM orders o RIGHT JOIN customers c "
    "USING (customer_id) WHERE c.customer_id % 7 = 0 AND o.order_id IS NULL",
])
def test_shapes_whose_rows_no_customer_repeats_are_postgresqls_without_noise(
        unit_proxy, demo_database, sql):
    dsn, _ = unit_proxy
    rows, _ = through_proxy(dsn, sql)
    assert rows == on_postgres(demo_database, sql)


def test_a_count_keeps_at_most_tau_rows_per_customer(unit_proxy, demo_database):
    dsn, _ = unit_proxy
    rows, _ = through_proxy(dsn, "SELECT count(*) FROM orders WHERE quantity >= 2")
    expected = on_postgres(demo_database, f"SELECT sum(least(n, {TAU})) FROM (SELECT count(*) "
                           "AS n FROM orders WHERE quantity >= 2 GROUP BY customer_id) AS s")
    assert rows[0][0] == expected[0][0]
    (truth,) = on_postgres(demo_database, "SELECT count(*) FROM orders WHERE quantity >= 2")[0]
    assert rows[0][0] < truth  # the demo's heavy customers are truncated, as documented


def test_count_distinct_sum_and_avg_on_one_table(unit_proxy, demo_database):
    dsn, _ = unit_proxy
    sql = ("SELECT count(DISTINCT customer_id), sum(order_cost), avg(quantity) FROM orders "
           "WHERE product_id = 7")
    (most,) = on_postgres(demo_database, "SELECT max(n) FROM (SELECT count(*) AS n FROM orders "
                          "WHERE product_id = 7 GROUP BY customer_id) AS s")[0]
    assert most <= TAU
    (released,), _ = through_proxy(dsn, sql)
    (truth,) = on_postgres(demo_database, sql)
    assert released[0] == truth[0]
    assert Decimal(str(released[1])) == pytest.approx(truth[1], abs=Decimal('0.001'))
    assert float(released[2]) == pytest.approx(float(truth[2]), abs=1e-3)


def test_a_join_histogram_over_a_public_domain(unit_proxy, demo_database):
    dsn, _ = unit_proxy
    sql = ("SELECT p.category, count(*) FROM orders o JOIN products p "
           "ON o.product_id = p.product_id WHERE o.order_date = DATE '2024-03-01' "
           "GROUP BY p.category ORDER BY p.category")
    rows, notices = through_proxy(dsn, sql)
    assert rows == on_postgres(demo_database, sql)  # nobody orders 10 times in one day
    # κ·τ_g ≥ τ: no group bound here (it would drop rows without lowering the noise).
    assert notices and not any("groups" in n for n in notices)


def test_a_histogram_with_truncation_never_adds_rows(unit_proxy, demo_database):
    dsn, _ = unit_proxy
    sql = "SELECT quantity, count(*) FROM orders GROUP BY quantity ORDER BY quantity"
    rows, _ = through_proxy(dsn, sql)
    truth = dict(on_postgres(demo_database, sql))
    assert len(rows) == 10 and all(n <= truth.get(q, 0) for q, n in rows)
    (kept,) = on_postgres(demo_database, f"SELECT sum(least(n, {TAU})) FROM (SELECT count(*) "
                          "AS n FROM orders GROUP BY customer_id) AS s")[0]
    assert sum(n for _, n in rows) <= kept


def test_key_selection_never_releases_one_customers_own_group(unit_proxy):
    dsn, _ = unit_proxy
    # Each group is one customer's: at most τ_g' = 10 rows, below T = 10 + b·ln(κ'/δ).
    rows, _ = through_proxy(dsn, "SELECT customer_id, count(*) FROM orders GROUP BY 1")
    assert rows == []


def test_a_join_that_mixes_customers_is_refused(unit_proxy):
    dsn, _ = unit_proxy
    with pytest.raises(errors.InsufficientPrivilege, match="mixes rows of different units"):
        through_proxy(dsn, "SELECT count(*) FROM orders o JOIN recommendations r "
                      "ON o.product_id = r.product_id")


def test_a_join_on_the_unit_with_a_median(unit_proxy):
    dsn, _ = unit_proxy
    rows, _ = through_proxy(dsn, "SELECT median(o.quantity) FROM orders o JOIN customers c "
                            "ON o.customer_id = c.customer_id WHERE c.address LIKE '%Japan%'")
    assert 1 <= float(rows[0][0]) <= 10


def test_an_analyst_may_choose_tau_for_a_session(unit_proxy, demo_database):
    dsn, _ = unit_proxy
    notices: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        connection.execute("SET dp.max_contributions = 1")
        assert connection.execute("SHOW dp.max_contributions").fetchone() == ("1",)
        (count,) = connection.execute("SELECT count(*) FROM orders o JOIN customers c "
                                      "ON o.customer_id = c.customer_id").fetchone()
        connection.execute("RESET dp.max_contributions")
        (again,) = connection.execute("SELECT count(*) FROM orders o JOIN customers c "
                                      "ON o.customer_id = c.customer_id").fetchone()
        with pytest.raises(errors.InvalidParameterValue, match="whole number from 1"):
            connection.execute("SET dp.max_groups = 0")
    # One order per customer who has any; the same text at τ = 10 is another question.
    assert count == on_postgres(demo_database, "SELECT count(DISTINCT customer_id) "
                                "FROM orders")[0][0]
    assert again == on_postgres(demo_database, f"SELECT sum(least(n, {TAU})) FROM (SELECT "
                                "count(*) AS n FROM orders GROUP BY customer_id) AS s")[0][0]
    assert any("at most 1 row;" in n for n in notices)


def test_row_level_sessions_cannot_set_tau(proxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        with pytest.raises(errors.InvalidParameterValue, match="needs a privacy unit"):
            connection.execute("SET dp.max_contributions = 3")


def test_explain_through_the_cli_reports_the_unit_mode(unit_proxy):
    dsn, config = unit_proxy
    qualified = ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = "
                 "c.customer_id WHERE o.product_id = 1 AND c.address LIKE '%United States%'")
    through_proxy(dsn, qualified)  # the proxy measures the join's metrics into the ledger
    cli = dpgate_cli("explain", qualified, "--epsilon", "0.1", "--config", config)
    assert cli.returncode == 0, cli.stderr
    report = json.loads(cli.stdout)
    # A lone count chooses τ per query, up to the policy's contributions_limit.
    assert report["mode"] == "unit" and report["max_contributions"] == "chosen per query"
    assert report["contributions_limit"] == LIMIT
    (column,) = report["columns"]
    assert column["noise_scale"] == pytest.approx(LIMIT / 0.1)  # the most it can be
    assert column["flex_noise_scale"] >= 3 * column["noise_scale"]


# -- one customer with 1,000 rows -----------------------------------------------------

SCHEMA = """
CREATE TABLE customers (customer_id int PRIMARY KEY, address text NOT NULL);
CREATE TABLE products (product_id int PRIMARY KEY, name text, category text, price numeric);
CREATE TABLE orders (order_id int PRIMARY KEY, customer_id int NOT NULL, product_id int,
                     quantity int, order_cost numeric, order_date date);
CREATE TABLE recommendations (customer_id int, product_id int);
INSERT INTO customers SELECT c, 'Street ' || c FROM generate_series(1, 300) AS c;
INSERT INTO products SELECT p, 'p' || p, 'cat' || (p % 4), 10 FROM generate_series(1, 20) AS p;
-- every customer within the bounds: 1 + c % 4 orders, quantities 1 + (c + i) % 4
INSERT INTO orders SELECT row_number() OVER (), c, 1 + (c + i) % 20, 1 + (c + i) % 4, 100,
    DATE '2024-01-01' + i FROM generate_series(1, 300) AS c, generate_series(0, 3) AS i
    WHERE i <= c % 4;
"""
BIG = """
INSERT INTO customers VALUES (1000000, 'Big Street');
INSERT INTO orders SELECT 1000000 + i, 1000000, 1 + i % 20, 1 + i % 10, 5000,
    DATE '2024-01-01' + i % 300 FROM generate_series(1, 1000) AS i;
"""


@pytest.fixture(scope="module")
def small_database(postgres: Postgres) -> str:
    conninfo = postgres.create_database("dpgate_unit_neighbours")
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(SCHEMA)
    return conninfo


def _notes_policy(column: str, bound: int):
    """The small database's policy with order_notes reaching the unit through orders
    (a hop dpgate joins itself), its `column` bounded by [0, bound], τ = 2."""
    from rewriter.policy.model import Policy

    return Policy.from_dict({
        "privacy_unit": {"table": "customers", "column": "customer_id"},
        "max_contributions": 2,
        "tables": {"customers": {"private": True},
                   "orders": {"private": True, "unit": "customer_id"},
                   "order_notes": {"private": True,
                                   "unit": "order_id -> orders.order_id -> orders.customer_id",
                                   "columns": {column: {"bounds": [0, bound]}}}}})


def test_a_foreign_key_chain_joined_by_dpgate_passes_postgresqls_plan_check(
        small_database: str):
    from collections import Counter

    from rewriter.checks.plan_check import expected_scans, plan_failure

    policy = _notes_policy("amount", 1000)
    sql = "SELECT count(*) FROM order_notes WHERE note <> 'x'"
    with psycopg.connect(small_database) as connection:
        connection.execute("CREATE TABLE order_notes (order_id int, note text, amount int); "
                           "INSERT INTO order_notes SELECT order_id, 'n', g FROM orders, "
                           "generate_series(1, 2) AS g")
        plan = plan_private_aggregate(parse_query(sql), policy, 0,
                                      measured_metrics(small_database))
        (explained,) = connection.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + plan.sql
                                          ).fetchone()
        # dpgate's own hop join (order_notes.order_id = orders.order_id) is a join key.
        assert plan.checks.join_keys is not None and {("public.order_notes", "order_id"),
                                               ("public.orders", "order_id")
                                               } <= plan.checks.join_keys.columns
        checks = plan.checks
        assert plan_failure(explained, Counter(checks.scans), policy, checks.windows,
                            checks.join_keys) is None
        # Per-unit counts, capped at the policy's τ = 2 (its contributions_limit too).
        count = sum(c * units for c, units in connection.execute(plan.sql).fetchall())
        (expected,) = connection.execute(
            "SELECT sum(least(n, 2)) FROM (SELECT o.customer_id, count(*) AS n FROM "
            "order_notes n JOIN orders o USING (order_id) GROUP BY 1) AS s").fetchone()
        # A weighted sum reads the rows, hop and all, twice: the plan check expects it.
        summed = plan_private_aggregate(parse_query("SELECT sum(amount) FROM order_notes "
                                                    "WHERE note <> 'x'"), policy, 0,
                                        measured_metrics(small_database))
        (explained,) = connection.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + summed.sql
                                          ).fetchone()
        checks = summed.checks
        assert len(checks.reads) == 2 and plan_failure(
            explained, expected_scans(checks), policy, checks.windows, checks.join_keys) is None
        weighed: Counter[int] = Counter()
        for n, rows, *_ in connection.execute(summed.sql):  # (n, rows, a bucket, …)
            weighed[int(n)] += int(rows)
        sizes = connection.execute(
            "SELECT n, count(*) * n FROM (SELECT o.customer_id, count(*) AS n FROM "
            "order_notes n JOIN orders o USING (order_id) GROUP BY 1) AS s GROUP BY 1"
        ).fetchall()
        connection.rollback()
    assert count == expected
    assert weighed == {int(n): int(rows) for n, rows in sizes}  # rows of units of size n


def test_a_column_the_hop_table_has_too_is_the_statements_own(small_database: str):
    """dpgate's hop join (order_notes → orders) adds no column a statement's unqualified
    name could mean: `order_id` is order_notes', as PostgreSQL reads the statement alone
    (it was AmbiguousColumn), in every SQL form unit mode writes."""
    from rewriter.checks.plan_check import expected_scans, plan_failure

    policy = _notes_policy("order_id", 10000)
    with psycopg.connect(small_database) as connection:
        connection.execute("CREATE TABLE order_notes (order_id int, note text); "
                           "INSERT INTO order_notes SELECT order_id, 'n' FROM orders, "
                           "generate_series(1, 3) AS g")
        metrics = measured_metrics(small_database)

        def run(sql: str) -> list[tuple]:
            plan = plan_private_aggregate(parse_query(sql), policy, 0, metrics)
            (explained,) = connection.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + plan.sql
                                              ).fetchone()
            checks = plan.checks
            assert plan_failure(explained, expected_scans(checks), policy, checks.windows,
                                checks.join_keys) is None, sql
            return connection.execute(plan.sql).fetchall()

        # A lone count's per-unit counts (capped at τ = 2): Σ min(n, 2) over the units.
        count = sum(c * units for c, units in run(
            "SELECT count(*) FROM order_notes WHERE order_id > 5"))
        (expected,) = connection.execute(
            "SELECT sum(least(n, 2)) FROM (SELECT o.customer_id, count(*) AS n FROM "
            "order_notes n JOIN orders o USING (order_id) WHERE n.order_id > 5 GROUP BY 1) "
            "AS s").fetchone()
        # A weighted sum: per unit size n its rows and their order_ids' sum (in buckets).
        summed: dict[int, Decimal] = {}
        for n, _, _, _, total, _ in run("SELECT sum(order_id) FROM order_notes"):
            summed[int(n)] = summed.get(int(n), Decimal(0)) + (total or 0)
        sizes = dict(connection.execute(
            "SELECT n, sum(t) FROM (SELECT o.customer_id, count(*) AS n, sum(n.order_id) AS t "
            "FROM order_notes n JOIN orders o USING (order_id) GROUP BY 1) AS s GROUP BY 1"
        ).fetchall())
        # The row_number() sort keeps τ = 2 of each unit's non-NULL order_ids.
        ((kept,),) = run("SELECT count(order_id) FROM order_notes")
        connection.rollback()
    assert count == expected
    assert summed == {int(n): total for n, total in sizes.items()}
    assert kept == 2 * 300  # every customer has ≥ 1 order, so ≥ 3 notes


@pytest.mark.parametrize(("sql", "bound"), [
    ("SELECT sum(order_cost) FROM orders WHERE quantity > 1", LIMIT),
    ("SELECT quantity, sum(order_cost) FROM orders GROUP BY quantity", GROUPS),
])
def test_a_sums_own_count_of_values_moves_by_at_most_its_sensitivity(
        small_database: str, sql: str, bound: int):
    """The hidden count that makes a SUM NULL over no value (tests/test_sum_presence.py)
    is a noisy count like any other: a unit of 1,000 rows moves it by at most τ."""
    plan = plan_private_aggregate(parse_query(sql), demo_policy(), 0,
                                  measured_metrics(small_database))
    (index,) = [i for i, part in enumerate(plan.parts) if part.presence_of is not None]
    assert calibrate(plan, 1.0, 1e-6).parts[index].elastic_sensitivity == bound
    assert plan.unit is not None and plan.unit.weights_cap is not None
    with psycopg.connect(small_database) as connection:
        without = connection.execute(plan.sql).fetchall()
        connection.execute(BIG)
        with_big = connection.execute(plan.sql).fetchall()
        connection.rollback()
    before, after = ({row[:plan.keys]: row[plan.keys + index] or 0 for row in
                      _weighed(rows, plan.keys, plan.unit.weights_cap, layout(plan))}
                     for rows in (without, with_big))
    moved = sum(abs(after.get(k, 0) - before.get(k, 0)) for k in before.keys() | after.keys())
    assert 0 < moved <= bound


def _weighed(rows: list[tuple], keys: int, tau: int, parts: Layout) -> list[tuple]:
    """psycopg's rows of a weighted plan (per key and unit size n) weighed at τ by the
    proxy's own code, each bucketed sum as a list of Fractions."""
    def text(value: object) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, list):
            return ("{" + ",".join(str(v) for v in value) + "}").encode()
        return str(value).encode()

    def number(raw: bytes | None) -> object:
        if raw is None:
            return None
        if raw.startswith(b"{"):
            return [Fraction(Decimal(v)) for v in raw.decode().strip("{}").split(",")]
        return Fraction(Decimal(raw.decode()))
    weighed = rows_at([tuple(text(v) for v in row) for row in rows], keys, tau, parts)
    return [tuple(row[:keys]) + tuple(number(v) for v in row[keys:]) for row in weighed]


def _cells_at(rows: list[tuple], keys: int, tau: int, by_size: bool) -> list[tuple]:
    """Each cell at τ from (keys…, m, n, units) rows, or `by_size` (keys…, n, rows): a
    unit of n > τ rows keeps m·τ/n of its m rows there, a fraction
    (proxy/engine/chosen_bound.py)."""
    cells: dict[tuple, Fraction] = {}
    for row in rows:
        key = row[:keys]
        m, n, units = (row[keys + 1], row[keys], 1) if by_size else row[keys:]
        cells[key] = cells.get(key, Fraction(0)) + (
            units * (m if n <= tau else Fraction(m * tau, n)) if m is not None else 0)
    return [(*key, value) for key, value in cells.items()]


TIGHT = "kappa=2,tau_g=3"  # κ·τ_g < τ: the group bounds lower the noise, and bind


@pytest.mark.parametrize(("sql", "bound"), [
    ("SELECT count(*) FROM orders", LIMIT),  # at any τ it chooses, a unit moves it ≤ τ
    (f"SELECT quantity, count(*) FROM orders GROUP BY quantity /* {TIGHT} */", 2 * 3),
    (f"SELECT order_date, count(*) FROM orders GROUP BY 1 /* {TIGHT} */", 2 * 3),
    ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
     "WHERE o.product_id <= 15", LIMIT),
    ("SELECT count(DISTINCT order_date) FROM orders", TAU),
    ("SELECT sum(order_cost) FROM orders", LIMIT * 5000),  # weighed at any τ ≤ the limit
    ("SELECT quantity, count(*) FROM orders GROUP BY quantity", GROUPS),
    ("SELECT p.category, count(*) FROM orders o JOIN products p ON o.product_id = p.product_id "
     "GROUP BY p.category", GROUPS),
    # semi- and anti-joins correlated on the unit; derived tables passing the unit on
    ("SELECT count(*) FROM customers c WHERE EXISTS (SELECT 1 FROM orders o "
     "WHERE o.customer_id = c.customer_id AND o.quantity > 1)", TAU),
    ("SELECT count(*) FROM orders WHERE customer_id IN (SELECT customer_id FROM orders "
     "GROUP BY customer_id HAVING count(*) > 2)", TAU),
    ("SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM recommendations r "
     "WHERE r.customer_id = o.customer_id)", TAU),
    ("SELECT count(*) FROM (SELECT customer_id, count(*) AS n FROM orders "
     "GROUP BY customer_id) s WHERE n > 1", TAU),
    ("SELECT sum(quantity) FROM (SELECT * FROM (SELECT * FROM orders) AS a "
     "WHERE quantity > 1) AS b", TAU * 10),
    ("SELECT count(*) FROM (SELECT customer_id, order_date FROM orders UNION ALL "
     "SELECT customer_id, order_date FROM orders) u", TAU),
    ("SELECT count(*) FROM (SELECT customer_id, quantity FROM orders UNION "
     "SELECT customer_id, product_id FROM orders) u", TAU),
    # outer joins padding a private table: each row the unit of its first non-NULL column
    ("SELECT count(*) FROM orders o FULL JOIN customers c USING (customer_id)", LIMIT),
    ("SELECT count(*) FROM orders o RIGHT JOIN customers c ON o.customer_id = c.customer_id "
     "AND o.quantity > 3", LIMIT),
    ("SELECT count(*) FROM customers c LEFT JOIN recommendations r USING (customer_id)",
     LIMIT),
    ("SELECT sum(o.quantity) FROM customers c LEFT JOIN orders o "
     "ON o.customer_id = c.customer_id AND o.product_id <= 5", LIMIT * 10),
])
def test_a_unit_with_1000_rows_moves_the_answer_by_at_most_its_sensitivity(
        small_database: str, sql: str, bound: int):
    policy = demo_policy()
    if TIGHT in sql:
        assert policy.unit is not None
        policy = dataclasses.replace(policy, unit=dataclasses.replace(
            policy.unit, max_groups=2, max_group_contributions=3))
    metrics = measured_metrics(small_database)
    plan = plan_private_aggregate(parse_query(sql), policy, 0, metrics)
    _moves_by_at_most(small_database, sql, plan, bound)


@pytest.mark.parametrize("sql", [
    "SELECT quantity, count(*) FROM orders GROUP BY quantity",
    "SELECT p.category, count(*) FROM orders o JOIN products p ON o.product_id = p.product_id "
    "GROUP BY p.category",
])
def test_a_gaussian_sessions_histogram_cells_by_unit_move_by_at_most_tau(
        small_database: str, sql: str):
    """The cells by unit a Gaussian session plans (whole rows per unit), as the others'
    by unit size above."""
    from mechanisms.names import Mechanism
    from rewriter.policy.session import with_session_noise

    plan = plan_private_aggregate(parse_query(sql), with_session_noise(
        demo_policy(), Mechanism.GAUSSIAN), 0, measured_metrics(small_database))
    assert plan.unit is not None and not plan.unit.cells_by_size
    _moves_by_at_most(small_database, sql, plan, GROUPS)


@pytest.mark.parametrize(("sql", "bounds"), [
    ("SELECT count(*), avg(quantity), percentile_cont(0.5) WITHIN GROUP (ORDER BY quantity) "
     "FROM orders", [LIMIT, TAU]),
    ("SELECT max(order_cost), sum(quantity) FROM orders WHERE quantity > 1",
     [LIMIT * 10, TAU]),  # the noisy release first: quantity ≤ 10, weighed at any τ
    ("SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM customers", [LIMIT, LIMIT]),
    ("SELECT quantity, count(*) FROM orders GROUP BY quantity EXCEPT "
     "SELECT quantity, count(*) FROM orders WHERE order_cost > 10 GROUP BY quantity",
     [GROUPS, GROUPS]),
])
def test_each_release_of_a_composite_moves_by_at_most_its_sensitivity(
        small_database: str, sql: str, bounds: list[int]):
    """A statement answered in several releases (rewriter/aggregate/composite.py): a unit
    of 1,000 rows moves each release by at most that release's own sensitivity, and the
    charge is the sum of the releases' ε."""
    from rewriter.aggregate.composite import plan_query
    from rewriter.plan import Composite

    plan = plan_query(parse_query(sql), demo_policy(), 0, measured_metrics(small_database),
                      lambda leaf: None)
    assert isinstance(plan, Composite) and len(plan.branches) == len(bounds)
    for branch, bound in zip(plan.branches, bounds, strict=True):
        _moves_by_at_most(small_database, branch.text, branch.plan, bound)


def _moves_by_at_most(small_database: str, sql: str, plan: PrivateAggregate, bound: int
                      ) -> None:
    """The plan's first part moves by at most `bound`, its stated sensitivity, when one
    customer with 1,000 orders joins the small database."""
    sensitivity = calibrate(plan, 1.0, 1e-6).parts[0].elastic_sensitivity
    assert sensitivity == bound
    with psycopg.connect(small_database) as connection:
        # The same draws for the other customers' rows in both runs (they are read first,
        # in the same order), so that only the big customer's rows differ: neighbours.
        connection.execute("SELECT setseed(0.25)")
        without = connection.execute(plan.sql).fetchall()
        connection.execute(BIG)
        connection.execute("SELECT setseed(0.25)")
        with_big = connection.execute(plan.sql).fetchall()
        (raw,) = connection.execute(f"SELECT count(*) FROM ({sql}) AS s").fetchone()
        connection.rollback()
    assert raw >= 1
    cap = plan.unit.counts_cap if plan.unit is not None else None
    weights = plan.unit.weights_cap if plan.unit is not None else None
    if weights is not None:  # weighed at the limit: every τ it may choose is at most that
        without, with_big = (_weighed(rows, plan.keys, weights, layout(plan))
                             for rows in (without, with_big))
    if plan.parts[0].edges is not None:  # bucket counts, then sums: one unit moves τ rows
        counts = len(plan.parts[0].edges) - 1
        cells = [sum(abs(a - b) for a, b in zip(w[plan.keys][:counts], b[plan.keys][:counts],
                                                strict=True))
                 for w, b in zip(with_big, without, strict=True)]
        assert 0 < sum(cells) <= (weights or TAU)
        without = [row[:plan.keys] + (sum(row[plan.keys][counts:]),) for row in without]
        with_big = [row[:plan.keys] + (sum(row[plan.keys][counts:]),) for row in with_big]
    elif cap is not None and not plan.keys:
        # Per-unit counts: the count at the cap (every τ it may choose is at most that)
        # moves by at most the cap; here also the number of units beyond any τ moves by 1.
        without, with_big = ([(sum(c * units for c, units in rows),)]
                             for rows in (without, with_big))
    elif cap is not None:  # a histogram's cells by unit (or size), at τ = the cap
        assert plan.unit is not None
        without, with_big = (_cells_at(rows, plan.keys, cap, plan.unit.cells_by_size)
                             for rows in (without, with_big))
    before = {row[:plan.keys]: row[plan.keys] or 0 for row in without}
    after = {row[:plan.keys]: row[plan.keys] or 0 for row in with_big}
    moved = sum(abs(after.get(k, 0) - before.get(k, 0)) for k in before.keys() | after.keys())
    assert 0 < moved <= bound  # the 1,000 rows count, but only as much as τ allows
    if plan.keys and cap is None:  # (counted per unit, a heavy unit's τ is spread over
        # all of its cells in fractions: its L1 stays τ, the number of cells it reaches not)
        changed = sum(after.get(k, 0) != before.get(k, 0) for k in before.keys() | after.keys())
        assert plan.unit is not None and changed <= min(plan.unit.max_groups, bound)


# -- row level: one row added or removed ---------------------------------------------

@pytest.mark.parametrize("neighbour", [
    "DELETE FROM customers WHERE customer_id = 3",  # its 4 orders become padded rows
    "INSERT INTO customers VALUES (1000001, 'New Street')",  # a padded customer
    "INSERT INTO orders VALUES (1000001, 3, 1, 1, 100, DATE '2024-01-01')",
    "UPDATE orders SET customer_id = 7 WHERE order_id = 1",  # one row changed
])
@pytest.mark.parametrize("sql", [
    "SELECT count(c.customer_id) FROM orders o FULL JOIN customers c USING (customer_id)",
    "SELECT count(customer_id) FROM orders o FULL JOIN customers c USING (customer_id) "
    "WHERE o.order_id IS NULL OR c.address IS NULL",
])
def test_one_row_moves_a_full_join_using_by_at_most_its_elastic_sensitivity(
        small_database: str, sql: str, neighbour: str):
    """FULL JOIN … USING at row level: FLEX's outer-join bound ES(0) (the database itself
    is at distance 0) bounds what one added, removed or changed row does to the count."""
    metrics = measured_metrics(small_database)
    plan = plan_private_aggregate(parse_query(sql), demo_policy(unit=False), 0, metrics)
    bound = plan.parts[0].elastic.at(0)
    with psycopg.connect(small_database) as connection:
        (before,) = connection.execute(sql).fetchone()
        connection.execute(neighbour)
        (after,) = connection.execute(sql).fetchone()
        connection.rollback()
    assert abs(after - before) <= bound
    if neighbour.startswith("DELETE"):  # customer 3's 1 + 3 % 4 orders flip, not vacuous
        assert abs(after - before) == 4 and bound == 2 * 4


def test_a_monthly_series_is_answered_as_shape_times_total_and_says_so(shaping_proxy,
                                                                       demo_database):
    """With the policy's opt-in, at ε = 0.1 the demo's orders by month (customers with up
    to 50 orders, spread over the months) take the shape × total estimator
    (proxy/engine/chosen_bound.py): the NOTICE says what it assumes, and the cells add up
    to the released total (its noise scale 50/0.029 ≈ 1,700 rows: 15% of the 100,000 rows
    is 8.7 scales)."""
    dsn, _ = shaping_proxy
    sql = ("SELECT date_trunc('month', order_date) AS m, count(*) FROM orders GROUP BY 1 "
           "ORDER BY 1")
    notices: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        connection.execute("SET dp.epsilon = 0.1")
        rows = connection.execute(sql).fetchall()
    truth = on_postgres(demo_database, sql)
    assert [month for month, _ in rows] == [month for month, _ in truth]
    assert any("assumes each unit's rows fall in the cells as all rows do" in n
               for n in notices), notices
    total = sum(n for _, n in truth)
    assert abs(sum(n for _, n in rows) - total) <= 0.15 * total


def test_without_the_policys_opt_in_a_monthly_series_keeps_plain_cells(choosing_proxy):
    """shape × total's interval holds only where each unit's rows fall in the cells as all
    rows do, which the data owner judges: the demo policy does not turn it on."""
    dsn, _ = choosing_proxy
    notices: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        connection.execute("SET dp.epsilon = 0.1")
        connection.execute("SELECT date_trunc('month', order_date) AS m, count(*) "
                           "FROM orders GROUP BY 1").fetchall()
    assert notices and not any("shape" in n or "assumes" in n for n in notices), notices



@pytest.mark.parametrize("sql", [
    "SELECT quantity, count(*) FROM orders JOIN featured USING (product_id) GROUP BY quantity",
    "SELECT sum(order_cost) FROM orders JOIN featured USING (product_id)"])
def test_a_public_view_that_reads_differently_each_time_is_caught_by_the_plan_check(
        postgres: Postgres, sql: str):
    """A view's body is not in the statement's text, so sql.functions.reads_alike cannot
    see its `ORDER BY random() LIMIT 1`: the two reads of a histogram by unit size or a
    weighted sum could see other rows (a unit of 60 rows sized 1 in the other read: 30×
    its τ of 2). PostgreSQL's plan shows the view's Limit and random(): refused there."""
    from mechanisms.names import Mechanism
    from rewriter.aggregate.private import plan_private_aggregate
    from rewriter.analysis.classify import parse_query
    from rewriter.checks.plan_check import expected_scans, plan_failure
    from rewriter.policy.model import Policy
    from rewriter.policy.session import with_session_noise
    from tests.unit_support import measured_metrics

    dsn = postgres.create_database("dpgate_view_reads")
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(SCHEMA)
        connection.execute("CREATE VIEW featured AS SELECT product_id FROM products "
                           "WHERE product_id IN (1, 2) ORDER BY random() LIMIT 1")
        policy = with_session_noise(Policy.from_dict({
            "privacy_unit": {"table": "customers", "column": "customer_id"},
            "max_contributions": 2, "contributions_limit": 8,
            "tables": {"customers": {"private": True}, "products": {"private": False},
                       "featured": {"private": False},
                       "orders": {"private": True, "unit": "customer_id", "columns": {
                           "quantity": {"domain": {"range": [1, 10]}},
                           "order_cost": {"bounds": [0, 200]}}}}}),
            Mechanism.SHIFTED_LAPLACE)
        plan = plan_private_aggregate(parse_query(sql), policy, 0, measured_metrics(dsn))
        checks = plan.checks
        assert len(checks.reads) == 2  # the form that reads the rows twice
        for text, scans in [(plan.sql, expected_scans(checks))] + [
                (read, expected_scans(checks, read=True)) for read in checks.reads]:
            (explained,) = connection.execute(
                "EXPLAIN (VERBOSE, FORMAT JSON) " + text).fetchone()
            assert plan_failure(explained, scans, policy, 0, checks.join_keys) is None
            assert "two reads" in (plan_failure(explained, scans, policy, 0, checks.join_keys,
                                                reads_twice=True) or "")
