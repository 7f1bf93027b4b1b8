"""CROSS JOIN with a public table (rewriter/sensitivity/cross_joins.py): FLEX's join rule on a
constant key, whose max frequency is the public table's row count, in process. The answer
against PostgreSQL's is in tests/test_differential.py."""

from __future__ import annotations

import dataclasses

import pytest

from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.errors import Refusal
from rewriter.sensitivity.metrics import ROWS, MissingMetrics, max_freq_query
from tests.test_unit_golden import METRICS
from tests.unit_support import demo_policy

pytestmark = pytest.mark.unit

PRODUCTS = 1000  # rows of the public table
WITH_ROWS = dataclasses.replace(METRICS, max_freq={**METRICS.max_freq,
                                                   ("public.products", ROWS): PRODUCTS})


def plan_of(sql: str, unit: bool = False, metrics=WITH_ROWS):
    return plan_private_aggregate(parse_query(sql), demo_policy(unit), 0, metrics)


@pytest.mark.parametrize("k", [0, 3])
@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM orders o CROSS JOIN products p",
    "SELECT count(*) FROM orders o, products p WHERE p.category = 'Books'",
    # the public table written first: the same product
    "SELECT count(*) FROM products p CROSS JOIN orders o",
    "SELECT count(*) FROM products p, orders o WHERE p.category = 'Books'",
])
def test_each_private_row_recurs_once_per_public_row(sql, k):
    plan = plan_of(sql)
    assert plan.parts[0].elastic.at(k) == PRODUCTS  # S = |P|·S_L, and |P| is public: no k


def test_the_row_count_is_measured_like_a_max_frequency():
    with pytest.raises(MissingMetrics) as missing:
        plan_of("SELECT count(*) FROM orders o CROSS JOIN products p", metrics=METRICS)
    assert missing.value.columns == (("public.products", ROWS),)
    assert "public.products (rows)" in str(missing.value)
    assert max_freq_query("public.products", ROWS) == 'SELECT count(*) FROM "public"."products"'


@pytest.mark.parametrize("sql", ["SELECT count(*) FROM orders o CROSS JOIN products p",
                                 "SELECT count(*) FROM products p CROSS JOIN orders o"])
def test_in_unit_mode_the_rows_stay_their_units(sql):
    plan = plan_of(sql, unit=True)
    assert plan.unit is not None and plan.unit.max_contributions == 10


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM orders o CROSS JOIN customers c",  # two private tables
    "SELECT count(*) FROM products p CROSS JOIN orders o CROSS JOIN customers c",
    "SELECT count(*) FROM products p, products q CROSS JOIN orders o",  # |p × q| unmeasured
    # the crossed public table's columns recur |orders| times, whichever comes first
    "SELECT count(*) FROM products p CROSS JOIN orders o "
    "JOIN recommendations r ON r.product_id = p.product_id",
    # a column of the crossed table recurs |orders| times: no join key
    "SELECT count(*) FROM orders o CROSS JOIN products p "
    "JOIN recommendations r ON r.product_id = p.product_id",
])
def test_other_cross_joins_are_refused(sql):
    with pytest.raises(Refusal) as caught:
        plan_of(sql)
    assert caught.value.sqlstate == "0A000"
