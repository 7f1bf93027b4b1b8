"""Random but well-formed extended-protocol conversations: whatever the order of Parse,
Bind, Describe, Execute, Close and Flush over relayed, private, refused and failing
statements, every batch ends in ReadyForQuery, nothing is an internal error, and the
session still answers afterwards."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.pgwire import wire
from tests.conftest import RunningProxy
from tests.test_extended_protocol import RawClient, kinds

pytestmark = pytest.mark.end_to_end

FUZZER, PASSWORD = "fuzzer", "fuzzer-pw"
QUERIES = [
    "SELECT count(*) FROM orders WHERE product_id = $1",             # private
    "SELECT quantity, count(*) FROM orders GROUP BY 1",              # private histogram
    "SELECT product_id, name FROM products WHERE product_id < $1",   # relayed
    "SELECT relname FROM pg_class LIMIT 3",                          # relayed catalog
    "SELECT * FROM orders",                                          # refused (42501)
    "SELECT no_such_column FROM products",                           # backend error
    "SELECT 1 / (product_id - product_id) FROM products",            # fails at Execute
    "SHOW dp.budget",
    "SET dp.epsilon = 0.01",
    "BEGIN", "COMMIT", "ROLLBACK", "",
]
NAMES = st.sampled_from(["", "a", "b"])


@st.composite
def stray_message(draw: st.DrawFn) -> bytes:
    """Any message, with names and values that may not fit anything parsed."""
    kind = draw(st.sampled_from("PBDECH"))
    if kind == "P":
        return wire.parse_message(draw(NAMES), draw(st.sampled_from(QUERIES)), ())
    if kind == "B":
        values = draw(st.sampled_from([(), (b"3",), (b"x",), (None,)]))
        return wire.bind_message(draw(NAMES), draw(NAMES), (), values,
                                 draw(st.sampled_from([(), (0,), (1,)])))
    if kind in "DC":
        target = b"S" if draw(st.booleans()) else b"P"
        message = wire.describe_message(target, draw(NAMES))
        return message if kind == "D" else b"C" + message[1:]
    if kind == "E":
        return wire.execute_message(draw(NAMES), draw(st.sampled_from([0, 1, 2])))
    return wire.FLUSH


@st.composite
def statement_run(draw: st.DrawFn) -> list[bytes]:
    """What a driver sends for one statement: Parse, Bind, Describe, Execute (…)."""
    query, statement, portal = draw(st.sampled_from(QUERIES)), draw(NAMES), draw(NAMES)
    values = (draw(st.sampled_from([b"3", b"4"])),) if "$1" in query else ()
    run = [wire.parse_message(statement, query, ()),
           wire.describe_message(b"S", statement),
           wire.bind_message(portal, statement, (), values,
                             draw(st.sampled_from([(), (0,), (1,)]))),
           wire.describe_message(b"P", portal)]
    run += [wire.execute_message(portal, draw(st.sampled_from([0, 1, 2])))
            for _ in range(draw(st.integers(1, 3)))]
    if draw(st.booleans()):
        run.append(b"C" + wire.describe_message(b"S", statement)[1:])
    return [m for m in run if draw(st.integers(0, 9)) > 0]  # sometimes one goes missing


batches = st.lists(st.one_of(statement_run(), st.lists(stray_message(), max_size=3))
                   .map(list), min_size=1, max_size=3)


@pytest.fixture(scope="module")
def fuzzer(proxy: RunningProxy) -> RunningProxy:
    proxy.add_analyst(FUZZER, PASSWORD, 100000)
    return proxy


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(batches, min_size=1, max_size=3))
def test_any_conversation_ends_in_ready_for_query_without_internal_errors(
        fuzzer: RunningProxy, conversation: list[list[list[bytes]]]):
    client = RawClient(fuzzer, FUZZER, PASSWORD)
    try:
        for runs in conversation:
            batch = [message for run in runs for message in run]
            client.raw(b"".join(batch) + wire.SYNC)
            replies = client.until_ready()
            codes = [wire.parse_error_fields(payload)["C"] for kind, payload in replies
                     if kind == b"E"]
            assert "XX000" not in codes and len(codes) <= 1, codes
            assert set(kinds(replies)) <= set(b"123tTnDCIsENSZ")
        client.raw(wire.message(b"Q", b"ROLLBACK; SELECT 41 + 1\0"))
        after = client.until_ready()
        assert [payload for kind, payload in after if kind == b"D"] == [
            wire.data_row(["42"])[5:]]
    finally:
        client.close()
