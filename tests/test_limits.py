"""Limits on the work one statement may ask (proxy/engine/limits.py) and the plan cache's bound."""

from __future__ import annotations

from dataclasses import replace

import pytest

from proxy.config import ServerSettings
from proxy.engine.limits import TooMuchWork, check_statement, measure_statement, nesting
from proxy.engine.plan_cache import PlanCache
from proxy.engine.shapes import Remembered, text_bytes
from proxy.ops.decision import _remembered_fingerprint, statement_fingerprint
from rewriter.analysis.classify import Statement
from rewriter.plan import Relay

pytestmark = pytest.mark.unit


def test_nesting_counts_parentheses_outside_strings_and_quoted_names():
    assert nesting("SELECT ((1))") == 2
    assert nesting("SELECT '(((' , \"(\" FROM t WHERE (a)") == 1
    assert nesting("SELECT 'it''s (' || (x)") == 1


def limits(**settings: int) -> ServerSettings:
    return replace(ServerSettings(), **settings)


def test_a_long_statement_is_refused_with_54000():
    with pytest.raises(TooMuchWork) as caught:
        check_statement("SELECT " + "1+" * 600 + "1", limits(max_statement_size=1000))
    assert caught.value.sqlstate == "54000"


def test_a_deep_statement_is_refused_with_54001():
    with pytest.raises(TooMuchWork) as caught:
        check_statement("SELECT " + "(" * 300 + "1" + ")" * 300, limits(max_nesting=200))
    assert caught.value.sqlstate == "54001"
    check_statement("SELECT " + "(" * 200 + "1" + ")" * 200, limits(max_nesting=200))


def test_a_statement_of_too_many_tokens_is_refused_with_54000():
    in_list = "SELECT count(*) FROM orders WHERE order_id IN (" + \
        ", ".join(str(n) for n in range(9000)) + ")"
    assert measure_statement(in_list).tokens == 18_011
    with pytest.raises(TooMuchWork) as caught:
        check_statement(in_list, limits(max_statement_tokens=10_000))
    assert caught.value.sqlstate == "54000" and "18011" not in caught.value.message
    check_statement(in_list, limits(max_statement_tokens=20_000))


def test_a_long_chain_of_operators_is_as_deep_as_its_tree():
    """`1+1+…+1` parses to a tree as deep as its chain: issue 24's 65,000 terms kept a
    worker thread for minutes, with no parenthesis at all."""
    chain = "SELECT count(*) FROM orders WHERE order_id <> " + "+".join(["1"] * 65_000)
    assert measure_statement(chain).nesting == 1  # count(*)
    with pytest.raises(TooMuchWork) as caught:
        check_statement(chain, limits(max_statement_tokens=1_000_000))
    assert caught.value.sqlstate == "54001"
    # Each AND's operands are compared (one operator each): the chain of ANDs counts.
    ands = "SELECT 1 FROM t WHERE " + " AND ".join(f"q <> {n}" for n in range(300))
    assert measure_statement(ands).depth == 300
    # Commas, clauses and parentheses end a chain; nested ones add up.
    assert measure_statement("SELECT a+b, c+d FROM t WHERE e+f").depth == 1
    assert measure_statement("SELECT (a+(b+c+d)) + e").depth == 5


def test_strings_quoted_names_and_comments_hide_what_they_hold():
    hidden = "SELECT '1+1+(((' , \"a+(b\" /* (+( */ -- ((+\n FROM t"
    assert measure_statement(hidden) == measure_statement("SELECT 'x', \"y\" FROM t")


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


def test_every_cache_keyed_by_text_is_bounded_by_its_bytes():
    """The plan check's verdicts and shapes and the calibrations are keyed by statement
    text or plans holding it: 4,096 entries of 130 KB were 530 MB."""
    remembered: Remembered[tuple[str, bytes], bool] = Remembered(size=4096, max_bytes=1 << 20)
    for index in range(100):
        remembered.put((f"{index}" + "x" * 100_000, b""), True)
    assert remembered.bytes <= 1 << 20
    assert remembered.get(("99" + "x" * 100_000, b"")) and \
        remembered.get(("0" + "x" * 100_000, b"")) is None


def test_a_plan_weighs_the_sql_it_holds():
    plan = Relay("SELECT '" + "x" * 50_000 + "'")
    assert 50_000 < text_bytes(("key", plan)) < 51_000
    assert text_bytes((1, 2.0, None)) == 0


def test_long_texts_are_fingerprinted_without_being_remembered():
    long = "SELECT '" + "x" * 10_000 + "'"
    assert statement_fingerprint(long) == statement_fingerprint(long.replace(" ", "  "))
    cached = _remembered_fingerprint.cache_info().currsize
    statement_fingerprint(long + " ")
    assert _remembered_fingerprint.cache_info().currsize == cached
    statement_fingerprint("SELECT 1 -- " + str(cached))
    assert _remembered_fingerprint.cache_info().currsize == cached + 1


def test_an_escape_string_or_a_dollar_quote_hides_no_tokens():
    """`E'\\''` is one string to PostgreSQL; read as two quotes, the rest of the text would
    look like an unclosed string and its 20,000 terms would go uncounted."""
    chain = "+".join(["1"] * 20_000)
    for text in (f"SELECT E'\\'' , {chain} , ''", f"SELECT $$'$$, {chain}, $$'$$",
                 f"SELECT $a$'$a$, {chain}, $a$'$a$"):
        assert measure_statement(text).tokens > 40_000
