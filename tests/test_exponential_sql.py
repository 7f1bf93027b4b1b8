"""The exponential mechanism from SQL (issue 4): mode, the most frequent group, MIN/MAX,
median and percentiles. Plans and calibrations without a database, seeded releases, then
real queries through dpgate against the demo dataset."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from mechanisms.accuracy import mode_bound, quantile_rank_bound
from mechanisms.exponential import QUANTILE_GRID_BITS
from mechanisms.seeded_source import SeededRandomSource
from proxy.config import PrivacySettings, load_policy_file
from proxy.engine.release import release
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import classify, parse_query
from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from rewriter.release.explain import explain
from rewriter.sensitivity.calibrate import calibrate
from rewriter.sensitivity.metrics import Metrics
from tests.conftest import RunningProxy
from tests.test_queries_end_to_end import ask, truth

pytestmark = pytest.mark.end_to_end

POLICY = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")
NO_SHIFT = PrivacySettings(shift_interval=(0.0, 0.0))
INT4, INT8, FLOAT8, NUMERIC = 23, 20, 701, 1700
MOST_FREQUENT = "SELECT quantity FROM orders GROUP BY quantity ORDER BY count(*) DESC LIMIT 1"


def plan_of(sql: str) -> PrivateAggregate:
    return plan_private_aggregate(parse_query(sql), POLICY, 0)


def refusal_of(sql: str) -> Refusal:
    (statement,) = classify(sql, POLICY, Metrics())
    assert isinstance(statement.plan, Refusal), statement.plan
    return statement.plan


# -- plans ---------------------------------------------------------------------------------

@pytest.mark.unit
def test_mode_counts_every_key_of_the_domain_with_the_where():
    plan = plan_of("SELECT mode() WITHIN GROUP (ORDER BY quantity) FROM orders "
                   "WHERE order_cost > 10")
    assert [(o.name, o.kind, o.aggregate) for o in plan.outputs] == [("mode", "choice", "mode")]
    assert [p.aggregate for p in plan.parts] == ["mode"] and plan.keys == 1
    assert plan.parts[0].elastic.at(0) == 1  # Δu = ES of a count, not 2 as a histogram
    assert plan.grouping is None  # the SQL: tests/golden/rewritten/choices.sql


@pytest.mark.unit
def test_quantiles_share_one_grid_histogram_of_the_column():
    plan = plan_of("SELECT min(order_cost), max(order_cost), median(order_cost), "
                   "percentile_disc(0.9) WITHIN GROUP (ORDER BY order_cost DESC) AS p "
                   "FROM orders")
    assert [o.name for o in plan.outputs] == ["min", "max", "median", "p"]
    assert [o.aggregate for o in plan.outputs] == ["min", "max", "percentile_cont",
                                                   "percentile_disc"]
    # DESC asks for the 0.9-quantile of −x: the 0.1-quantile of x.
    assert [p.level for p in plan.parts] == [0, 1, Fraction(1, 2), Fraction(1, 10)]
    grid = plan.parts[0].grid
    assert grid is not None and grid.points == 2**QUANTILE_GRID_BITS + 1
    assert grid.lo == 0 and grid.value(grid.points - 1) == 5000
    assert plan.keys == 2  # the grid's SQL: tests/golden/rewritten/choices.sql


@pytest.mark.unit
def test_most_frequent_group_becomes_a_mode_and_other_shapes_stay_histograms():
    plan = plan_of(MOST_FREQUENT)
    assert [(o.name, o.kind, o.aggregate) for o in plan.outputs] == [
        ("quantity", "choice", "mode")]
    assert plan.post.limit is None and plan.grouping is None
    for other in (MOST_FREQUENT.replace("LIMIT 1", "LIMIT 2"),
                  MOST_FREQUENT.replace("DESC", "ASC"),
                  MOST_FREQUENT.replace("SELECT quantity", "SELECT quantity, count(*)"),
                  # no declared domain: key selection, as before
                  "SELECT customer_id FROM orders GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"):
        assert plan_of(other).grouping is not None, other


@pytest.mark.unit
def test_utility_sensitivity_follows_the_stability_of_the_from():
    plan = plan_of("SELECT mode() WITHIN GROUP (ORDER BY quantity) FROM (SELECT quantity "
                   "FROM orders UNION ALL SELECT quantity FROM orders) t")
    assert plan.parts[0].elastic.at(0) == 2  # one order appears twice
    # A public table joined in keeps the global sensitivity: allowed.
    joined = plan_of("SELECT median(o.order_cost) FROM orders o JOIN products p "
                     "ON o.product_id = p.product_id")
    assert joined.parts[0].elastic.at(0) == 300


@pytest.mark.unit
@pytest.mark.parametrize(("sql", "sqlstate", "words"), [
    ("SELECT mode() WITHIN GROUP (ORDER BY customer_id) FROM orders", "42501", "domain"),
    ("SELECT min(order_id) FROM orders", "42501", "bounds"),
    ("SELECT median(o.order_cost) FROM orders o JOIN customers c "
     "ON o.customer_id = c.customer_id", "0A000", "join of private tables"),
    # (beside other aggregates, or of other columns, they are releases of their own under
    # one charge: tests/test_composite.py; not with GROUP BY or HAVING)
    ("SELECT count(*), median(order_cost) FROM orders HAVING count(*) > 1", "0A000",
     "separate|own"),
    ("SELECT quantity, median(order_cost) FROM orders GROUP BY quantity", "0A000", "GROUP BY"),
    ("SELECT percentile_cont(1.5) WITHIN GROUP (ORDER BY order_cost) FROM orders", "0A000",
     "between 0 and 1"),
    ("SELECT min(order_cost + 1) FROM orders", "0A000", "plain column"),
    ("SELECT min(DISTINCT order_cost) FROM orders", "0A000", "plain column"),
])
def test_refusals(sql, sqlstate, words):
    refusal = refusal_of(sql)
    assert refusal.sqlstate == sqlstate, refusal
    text = (refusal.message + " " + (refusal.hint or "")).lower()
    assert any(word.lower() in text for word in words.split("|")), text


@pytest.mark.unit
def test_epsilon_is_split_over_choices_and_no_delta_is_charged():
    plan = plan_of("SELECT min(order_cost), median(order_cost), max(order_cost) FROM orders")
    for mechanism in ("shifted_laplace", "gaussian"):
        calibration = calibrate(plan, 0.3, 1e-8, mechanism=mechanism)
        assert [p.epsilon for p in calibration.parts] == [pytest.approx(0.1)] * 3
        assert calibration.delta == 0.0 and calibration.pure


@pytest.mark.unit
def test_explain_names_the_exponential_mechanism():
    report = explain("SELECT median(order_cost) FROM orders", POLICY, Metrics(), 0.5, 1e-8)
    (column,) = report["columns"]
    assert column["mechanism"] == "exponential" and column["utility_sensitivity"] == 1
    assert column["grid_points"] == 2**QUANTILE_GRID_BITS + 1 and column["level"] == 0.5
    # its error in rank, as the NOTICE states it (choices.choice_bound)
    assert column["rank_error"] > 0 and f"± {column['rank_error']} of the n rows" in \
        column["error"]


# -- seeded releases -----------------------------------------------------------------------

def _mode_rows(counts: dict[int, int]) -> list[list[bytes | None]]:
    return [[str(k).encode(), str(n).encode()] for k, n in counts.items()]


@pytest.mark.unit
def test_mode_probabilities_use_epsilon_over_the_utility_sensitivity():
    """Two candidates, counts 0 and 4, ε = 1: P(second) = e^(ε·4/2Δu) / (1 + e^(ε·4/2Δu)),
    0.881 with Δu = 1 and 0.731 with Δu = 2 (a UNION ALL of the table with itself)."""
    single = plan_of(MOST_FREQUENT)
    doubled = plan_of("SELECT mode() WITHIN GROUP (ORDER BY quantity) FROM (SELECT quantity "
                      "FROM orders UNION ALL SELECT quantity FROM orders) t")
    rng = SeededRandomSource(7)
    for plan, exponent in ((single, 2.0), (doubled, 1.0)):
        calibration = calibrate(plan, 1.0, 1e-8)
        rows = _mode_rows({1: 0, 2: 4})
        trials = 4000
        second = sum(release(plan, calibration, [INT4], rows, 0.0, NO_SHIFT, rng).rows
                     == [["2"]] for _ in range(trials))
        expected = math.exp(exponent) / (1 + math.exp(exponent))
        assert abs(second / trials - expected) < 0.03, (second / trials, expected)


@pytest.mark.unit
def test_mode_release_names_the_mechanism_and_keeps_the_key_type():
    plan = plan_of(MOST_FREQUENT)
    answer = release(plan, calibrate(plan, 2.0, 1e-8), [INT4],
                     _mode_rows({k: 500 if k == 3 else 10 for k in range(1, 11)}), 0.0,
                     NO_SHIFT, SeededRandomSource(3))
    assert answer.rows == [["3"]] and answer.columns == [("quantity", INT4)]
    bound = math.ceil(mode_bound(2.0, 10, 0.05))
    assert answer.bounds == {"quantity": f"{bound} (exponential mechanism over 10 values: "
                             f"the count of the value chosen is within {bound} of the largest)"}


@pytest.mark.unit
def test_quantile_release_types_and_integer_rounding():
    plan = plan_of("SELECT min(quantity), percentile_disc(0.5) WITHIN GROUP (ORDER BY "
                   "quantity), median(quantity) FROM orders")
    grid = plan.parts[0].grid
    assert grid is not None
    # 1000 values at each of 2, …, 8: min 2, median 5.
    rows = [[None, str(grid.index(v)).encode(), b"1000"] for v in range(2, 9)]
    answer = release(plan, calibrate(plan, 3.0, 1e-8), [INT4, INT8], rows, 0.0, NO_SHIFT,
                     SeededRandomSource(11))
    assert answer.columns == [("min", INT4), ("percentile_disc", INT4), ("median", FLOAT8)]
    low, middle, median = answer.rows[0]
    assert low is not None and 1 <= int(low) <= 2  # all of [1, 2] is as good as 2 for p = 0
    assert middle == "5"  # rounded: percentile_disc of an int4 column is an int4
    assert median is not None and abs(float(median) - 5) < 0.01
    assert "in rank (exponential mechanism on 1048577 grid points of [1, 10])" in \
        str(answer.bounds["median"])


# -- through dpgate ------------------------------------------------------------------------

PASSWORD = "chooser-pw"


@pytest.fixture(scope="module")
def chooser(proxy: RunningProxy) -> str:
    proxy.add_analyst("chooser", PASSWORD, 1000)
    return proxy.dsn("chooser", PASSWORD)


def test_most_frequent_product_is_chosen_among_the_whole_public_domain(
        proxy: RunningProxy, chooser: str):
    rows, description, notices = ask(
        chooser, "SELECT product_id FROM orders WHERE quantity > 1 GROUP BY product_id "
        "ORDER BY count(*) DESC LIMIT 1", epsilon=2.0)
    ((chosen,),) = rows
    assert description[0].name == "product_id" and description[0].type_code == INT4
    counts = dict(truth(proxy, "SELECT p.product_id, count(o.order_id) FROM products p "
                               "LEFT JOIN orders o ON o.product_id = p.product_id "
                               "AND o.quantity > 1 GROUP BY 1"))
    # Fails with probability below 1e-9 (mode_bound at β = 1e-9 over the 1000 products).
    assert counts[chosen] >= max(counts.values()) - mode_bound(2.0, len(counts), 1e-9)
    assert "charged epsilon 2" in notices[-1] and "exponential mechanism over 1000 values" \
        in notices[-1]


def test_median_and_min_of_bounded_columns(proxy: RunningProxy, chooser: str):
    rows, description, _ = ask(chooser, "SELECT min(quantity) AS least FROM orders", 2.0)
    assert rows == [(1,)] and description[0].type_code == INT4
    # (quantity 1 is lo and holds 30% of orders: no other grid point comes close)
    query = "SELECT median(order_cost), max(order_cost) FROM orders WHERE quantity < 5"
    rows, description, notices = ask(chooser, query, epsilon=4.0)
    ((median, _),) = rows
    assert [d.type_code for d in description] == [FLOAT8, NUMERIC]
    values = sorted(float(v) for (v,) in truth(
        proxy, "SELECT order_cost FROM orders WHERE quantity < 5"))
    plan = plan_of(query)
    assert plan.parts[0].grid is not None
    # Rank error below the bound at β = 1e-9 (ε = 2 per column), plus the grid's snapping.
    slack = math.ceil(quantile_rank_bound(2.0, 0.5, plan.parts[0].grid, 1e-9)) + 1
    step = float(plan.parts[0].grid.step)
    middle = len(values) // 2
    assert values[middle - slack] - step <= median <= values[middle + slack] + step
    assert "exponential mechanism" in notices[-1] and "in rank" in notices[-1]


def test_a_repeated_mode_is_stored_and_free(proxy: RunningProxy, chooser: str):
    query = "SELECT mode() WITHIN GROUP (ORDER BY quantity) FROM orders WHERE product_id < 50"
    first, _, _ = ask(chooser, query, epsilon=0.05)
    again, _, notices = ask(chooser, query, epsilon=0.05)
    assert again == first and "repeated question" in notices[-1]


def test_refusals_reach_the_client_before_any_charge(proxy: RunningProxy, chooser: str):
    with psycopg.connect(chooser, autocommit=True) as connection:
        before = connection.execute("SHOW dp.budget").fetchone()
        with pytest.raises(errors.InsufficientPrivilege):
            connection.execute("SELECT mode() WITHIN GROUP (ORDER BY customer_id) FROM orders")
        with pytest.raises(errors.FeatureNotSupported) as caught:
            connection.execute("SELECT median(o.order_cost) FROM orders o JOIN customers c "
                               "ON o.customer_id = c.customer_id")
        assert "join of private tables" in caught.value.diag.message_primary
        assert connection.execute("SHOW dp.budget").fetchone() == before
