"""Limits on the work one statement may ask (proxy/engine/limits.py) and the plan cache's bound."""

from __future__ import annotations

import pytest

from proxy.engine.limits import TooMuchWork, check_statement, nesting
from proxy.engine.plan_cache import PlanCache
from rewriter.classify import Statement
from rewriter.plan import Relay

pytestmark = pytest.mark.unit


def test_nesting_counts_parentheses_outside_strings_and_quoted_names():
    assert nesting("SELECT ((1))") == 2
    assert nesting("SELECT '(((' , \"(\" FROM t WHERE (a)") == 1
    assert nesting("SELECT 'it''s (' || (x)") == 1


def test_a_long_statement_is_refused_with_54000():
    with pytest.raises(TooMuchWork) as caught:
        check_statement("SELECT " + "1+" * 600 + "1", max_size=1000, max_nesting=100)
    assert caught.value.sqlstate == "54000"


def test_a_deep_statement_is_refused_with_54001():
    with pytest.raises(TooMuchWork) as caught:
        check_statement("SELECT " + "(" * 300 + "1" + ")" * 300, 10_000, 200)
    assert caught.value.sqlstate == "54001"
    check_statement("SELECT " + "(" * 200 + "1" + ")" * 200, 10_000, 200)


def relay(text: str) -> list[Statement]:
    return [Statement(text, 0, Relay(text))]


def test_the_plan_cache_is_bounded_by_bytes():
    cache = PlanCache(size=1000, max_bytes=100_000)
    for index in range(50):
        text = f"SELECT {index}" + " " * 10_000
        cache.put((text, 0), relay(text))
    assert cache.bytes <= 100_000
    assert cache.get(("SELECT 49" + " " * 10_000, 0)) is not None  # the newest stay
    assert cache.get(("SELECT 0" + " " * 10_000, 0)) is None  # the oldest went


def test_an_entry_larger_than_the_cache_is_not_kept():
    cache = PlanCache(size=10, max_bytes=1000)
    cache.put(("x" * 5000, 0), relay("x" * 5000))
    assert cache.bytes == 0 and cache.get(("x" * 5000, 0)) is None
