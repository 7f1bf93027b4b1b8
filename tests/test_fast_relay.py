"""Relayed statements taken in the transports' callbacks (proxy/server/fast_relay.py):
the same answers as PostgreSQL's, in the client's order, with the same transaction
states and errors, whether a statement goes the fast way or the session's own.

A statement's text is planned the first time it comes (the session's way); once its plan
is cached, the same text is relayed the fast way. Each test therefore sends its
statements twice and expects the same answers both times."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from proxy.pgwire import wire
from proxy.pgwire.codes import Target
from tests.conftest import RunningProxy
from tests.test_extended_protocol import RawClient, kinds

pytestmark = pytest.mark.end_to_end

PUBLIC = "SELECT name FROM products WHERE product_id = {}"
PRIVATE = "SELECT count(*) FROM orders WHERE product_id = 7"
PREPARED = "SELECT name FROM products WHERE product_id = $1"


def query(sql: str) -> bytes:
    return wire.message(b"Q", sql.encode() + b"\0")


def names(proxy: RunningProxy, *products: int) -> list[str]:
    with psycopg.connect(proxy.database.admin_dsn) as admin:
        return [admin.execute(PUBLIC.format(p)).fetchone()[0] for p in products]


def values(messages: list[tuple[bytes, bytes]]) -> list[list[bytes | None]]:
    return [list(wire.parse_data_row(payload)) for kind, payload in messages if kind == b"D"]


def status(messages: list[tuple[bytes, bytes]]) -> bytes:
    assert messages[-1][0] == b"Z"
    return messages[-1][1]


def sqlstate(messages: list[tuple[bytes, bytes]]) -> str:
    (error,) = [wire.parse_error_fields(payload) for kind, payload in messages if kind == b"E"]
    return error["C"]


def test_pipelined_queries_of_both_ways_keep_their_order(proxy: RunningProxy):
    first, second = names(proxy, 1, 2)
    texts = [PUBLIC.format(1), PRIVATE, PUBLIC.format(2), "SELECT 1 / 0", PUBLIC.format(1)]
    client = RawClient(proxy)
    try:
        for _ in range(2):  # planned the first time, from the cache (fast) the second
            client.raw(b"".join(query(text) for text in texts))
            answers = [client.until_ready() for _ in texts]
            assert values(answers[0]) == [[first.encode()]]
            assert kinds(answers[1])[:3] == b"TDC"  # dpgate's own noisy answer, in its turn
            assert values(answers[2]) == [[second.encode()]]
            assert sqlstate(answers[3]) == "22012"  # PostgreSQL's error, passed on
            assert values(answers[4]) == [[first.encode()]]
            assert all(status(answer) == b"I" for answer in answers)
    finally:
        client.close()


def test_prepared_batches_bind_fail_and_recover_as_on_postgresql(proxy: RunningProxy):
    (third, fourth) = names(proxy, 3, 4)
    client = RawClient(proxy)

    def batch(value: bytes, portal: str = "") -> list[tuple[bytes, bytes]]:
        client.raw(wire.bind_message(portal, "s", (), (value,), ())
                   + wire.describe_message(Target.PORTAL, portal)
                   + wire.execute_message(portal) + wire.SYNC)
        return client.until_ready()

    try:
        client.raw(wire.parse_message("s", PREPARED, ()) + wire.SYNC)
        assert kinds(client.until_ready()) == b"1Z"
        for _ in range(2):
            answer = batch(b"3")
            assert kinds(answer) == b"2TDCZ" and values(answer) == [[third.encode()]]
            failed = batch(b"not a number")  # fails in Bind, outside a transaction
            assert sqlstate(failed) == "22P02" and status(failed) == b"I"
            assert values(batch(b"4")) == [[fourth.encode()]]
        # Inside a transaction: the failure aborts it until ROLLBACK, as on PostgreSQL.
        client.raw(query("BEGIN"))
        assert status(client.until_ready()) == b"T"
        assert values(batch(b"3", portal="p")) == [[third.encode()]]
        assert status(batch(b"x", portal="q")) == b"E"
        refused = batch(b"4", portal="r")
        assert sqlstate(refused) == "25P02" and status(refused) == b"E"
        client.raw(query("ROLLBACK"))
        assert status(client.until_ready()) == b"I"
        # The portals of the transaction are gone; their names are free again.
        assert values(batch(b"4", portal="p")) == [[fourth.encode()]]
    finally:
        client.close()


def test_a_refused_bind_behind_another_batch_is_undone_as_on_postgresql(proxy: RunningProxy):
    """Two batches sent at once are both relayed before PostgreSQL answers the first; the
    second's Bind, refused, leaves no portal behind in dpgate either (its ReadyForQuery
    comes after the first's), so binding the name again fails as PostgreSQL's does."""
    (third,) = names(proxy, 3)
    client = RawClient(proxy)

    def batch(value: bytes, portal: str) -> bytes:
        return (wire.bind_message(portal, "s", (), (value,), ()) + wire.execute_message(portal)
                + wire.SYNC)

    try:
        client.raw(wire.parse_message("s", PREPARED, ()) + wire.SYNC)
        assert kinds(client.until_ready()) == b"1Z"
        client.raw(query("BEGIN"))
        assert status(client.until_ready()) == b"T"
        client.raw(batch(b"3", "p") + batch(b"not a number", "q"))
        bound, refused = client.until_ready(), client.until_ready()
        assert values(bound) == [[third.encode()]] and status(bound) == b"T"
        assert sqlstate(refused) == "22P02" and status(refused) == b"E"
        client.raw(batch(b"3", "q"))
        again = client.until_ready()
        assert sqlstate(again) == "25P02" and status(again) == b"E"  # not 42P03
    finally:
        client.close()


def test_a_relayed_statement_taken_the_fast_way_can_be_cancelled(proxy: RunningProxy):
    long = "SELECT count(*) FROM generate_series(1, 2000000000)"
    # ClientCursor speaks the simple protocol: one Query message per statement.
    with psycopg.connect(proxy.dsn("alice"), autocommit=True,
                         cursor_factory=psycopg.ClientCursor) as connection:
        for _ in range(2):  # planned and cancelled, then cancelled the fast way
            timer = threading.Timer(0.5, connection.cancel)
            timer.start()
            with pytest.raises(psycopg.errors.QueryCanceled):
                connection.execute(long)
            timer.join()
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_a_relay_connection_lost_under_a_fast_statement_fails_it_and_the_session_goes_on(
        proxy: RunningProxy):
    long = "SELECT count(*) FROM generate_series(1, 2000000001)"

    def terminate_soon() -> threading.Timer:
        def terminate() -> None:  # once the statement runs on PostgreSQL
            with psycopg.connect(proxy.database.admin_dsn, autocommit=True) as admin:
                for _ in range(100):
                    if admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                     "WHERE query = %s AND state = 'active'",
                                     (long,)).fetchall():
                        return
                    time.sleep(0.1)
        timer = threading.Timer(0.2, terminate)
        timer.start()
        return timer

    with psycopg.connect(proxy.dsn("alice"), autocommit=True,
                         cursor_factory=psycopg.ClientCursor) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda notice: notices.append(notice.message_primary))
        for _ in range(2):  # the session's way, then the fast way
            timer = terminate_soon()
            with pytest.raises(psycopg.OperationalError) as lost:
                connection.execute(long)
            timer.join()
            # PostgreSQL's own FATAL comes first (57P01), then dpgate's 08006: either way
            # the statement failed, and the session goes on over a new relay connection.
            assert lost.value.sqlstate in ("57P01", "08006")
            assert connection.execute("SELECT 1").fetchone() == (1,)
        assert sum("renewed" in notice for notice in notices) == 2
