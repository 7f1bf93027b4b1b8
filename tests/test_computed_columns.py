"""Columns computed from released values (proxy/engine/computed_errors.py): each error bar
is said of its column and no other (repeated names numbered), a column without one says
so in the NOTICE, SHOW dp.last_answers and `dpgate explain`, and working out the bars of
many rows runs off the event loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounting import Budget
from bench.accuracy_kinds import ends
from mechanisms.seeded_source import SeededRandomSource
from proxy.config import PrivacySettings, load_policy_file
from proxy.engine.computed_errors import computed_bounds
from proxy.engine.notice import answer_notice
from proxy.engine.private_query import heavy_release
from proxy.engine.recent import recent_answer
from proxy.engine.release import Release, _rounded_up, release
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.plan import PrivateAggregate
from rewriter.release.explain import explain
from rewriter.sensitivity.calibrate import Calibration, calibrate
from rewriter.sensitivity.metrics import Metrics

pytestmark = pytest.mark.unit

POLICY = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")
BUDGET = Budget(epsilon_total=10.0, epsilon_spent=1.0, delta_total=1e-5, delta_spent=0.0,
                queries=1)


def _answer(sql: str) -> tuple[PrivateAggregate, Calibration, Release]:
    plan = plan_private_aggregate(parse_query(sql), POLICY, 0)
    calibration = calibrate(plan, 0.5, 1e-8)
    columns = [(o.name, 20) for o in plan.outputs]  # the released outputs, all of them
    answer = release(plan, calibration, [], [[b"100"] * len(plan.parts)], 0.0,
                     PrivacySettings(), SeededRandomSource(7), columns)
    return plan, calibration, answer


def test_two_unnamed_columns_get_a_bar_each():
    plan, _, answer = _answer(
        "SELECT count(*) * 1000, count(*) * 2 FROM orders WHERE product_id = 1")
    assert plan.labels == ("?column?", "?column? (2)")
    thousand, twice = ends(answer.bounds["?column?"]), ends(answer.bounds["?column? (2)"])
    assert thousand is not None and twice is not None
    assert thousand[0] > 400 * twice[0]  # about 500 times: one noisy count, read twice
    recent = recent_answer("…", plan, answer.bounds, 0.95, 0.5, 0.0, True)
    assert [name for name, _ in recent.columns] == ["?column?", "?column? (2)"]
    assert recent.columns[0][1] != recent.columns[1][1]


def test_a_computed_column_without_a_bar_says_so():
    plan, calibration, answer = _answer(
        "SELECT count(*) % 3 AS z, count(*) * 2 AS twice FROM orders WHERE product_id = 1")
    assert "twice" in answer.bounds and "z" not in answer.bounds
    notice = answer_notice(plan, calibration, answer, BUDGET, 0.95)
    assert "z: no interval stated (" in notice
    recent = dict(recent_answer("…", plan, answer.bounds, 0.95, 0.5, 0.0, True).columns)
    assert recent["z"].startswith("computed from the noisy values: no interval stated")


@pytest.mark.parametrize("expression", ["count(*) % 3", "count(*)::text"])
def test_explain_does_not_promise_an_interval_that_never_comes(expression):
    report = explain(f"SELECT {expression} AS z, count(*) * 2 AS twice FROM orders",
                     POLICY, Metrics(), 1.0, 1e-8)
    z, twice = report["columns"]
    assert z["error"].startswith("not stated: ")
    assert twice["error"].startswith("stated with each answer")


def test_the_bars_of_many_rows_are_worked_out_on_a_worker_thread():
    plan = plan_private_aggregate(parse_query(
        "SELECT product_id, count(*) * 2 FROM orders GROUP BY product_id"), POLICY, 0)
    plain = plan_private_aggregate(parse_query(
        "SELECT product_id, count(*) FROM orders GROUP BY product_id"), POLICY, 0)
    calibration = calibrate(plan, 1.0, 1e-8)
    rows = [[str(i).encode(), b"100"] for i in range(10)]
    assert heavy_release(plan, calibration, rows)
    assert not heavy_release(plan, calibration, rows[:1])
    assert not heavy_release(plain, calibrate(plain, 1.0, 1e-8), rows)


def test_a_bar_is_measured_from_the_value_postgresql_reads_and_within_the_range():
    plan = plan_private_aggregate(parse_query(
        "SELECT var_pop(quantity) AS v, count(*) * 3 AS t FROM orders"), POLICY, 0)
    assert plan.computed is not None and plan.computed.ranges[0] == (0.0, 20.25)
    # o2… : n = 100, Σ(q − m)² = 900, Σ(q − m) = 0 (read twice), n, n; o8 a count of 7.5,
    # sent as 8 in its integer column (the point PostgreSQL computes 3 × 8 from)
    values = [None, None, 100, 900.0, 0.0, 0.0, 100, 100, 7.5]
    whole = [False, False, True, False, False, False, True, True, True]

    def interval(output, value, drawn, beta):
        # the sum of squares' interval far off (a 5% miss): the variance's range holds
        far = 1e6 if output.bounds == (0.0, 20.25) else 0.0
        return value + far - 1, value + far + 1
    bars = computed_bounds(plan, [(values, [])], interval, 0.05, _rounded_up, whole)
    assert ends(bars["v"]) == (9.0, 12.0)  # 9 released, the range [0, 20.25]
    assert ends(bars["t"]) == (4.5, 1.5)  # 24 sent, within [3 × 6.5, 3 × 8.5]
