"""The extended query protocol through dpgate: drivers' prepared statements, binary
results, pipelines, row limits and errors, against a real PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import time
from decimal import Decimal

import asyncpg
import psycopg
import pytest
from psycopg import errors

from proxy.pgwire import wire
from tests.conftest import ANALYSTS, RunningProxy
from tests.proxies import connect_raw, login, read_message

pytestmark = pytest.mark.end_to_end

COUNT_BY_PRODUCT = "SELECT count(*) FROM orders WHERE product_id = %s"


def charges(proxy: RunningProxy, user: str) -> int:
    shown = proxy.cli("user", "show", user, "--json")
    assert shown.returncode == 0, shown.stderr
    return len(json.loads(shown.stdout)["charges"])


def test_parameterised_private_count_is_noisy_and_charged_once_per_execute(
        proxy: RunningProxy):
    products = (11, 12, 13)
    with psycopg.connect(proxy.database.admin_dsn) as admin:
        truths = [admin.execute(COUNT_BY_PRODUCT, (p,)).fetchone()[0] for p in products]
    before = charges(proxy, "bob")
    with psycopg.connect(proxy.dsn("bob"), autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda d: notices.append(d.message_primary))
        answers = [connection.execute(COUNT_BY_PRODUCT, (p,)).fetchone()[0] for p in products]
        again = connection.execute(COUNT_BY_PRODUCT, (11,)).fetchone()[0]
    assert all(isinstance(answer, int) for answer in answers)
    assert again == answers[0]  # same statement, same value: the stored answer
    assert charges(proxy, "bob") == before + len(products)
    bounds = [int(re.search(r"count ±(\d+)", notice).group(1)) for notice in notices[:3]]
    for answer, truth, bound in zip(answers, truths, bounds, strict=True):
        assert abs(answer - truth) <= 3 * bound  # far beyond the stated bound: not noise
    # Noisy: the shifted Laplace moves each count by round(μ) + noise, μ ≥ 5 at ε = 0.1;
    # three exact answers would happen with a probability below 1e-4.
    assert answers != truths


def test_binary_results_and_server_side_prepared_statements(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True, prepare_threshold=0
                         ) as connection:
        cursor = connection.cursor(binary=True)
        answers = []
        for product in (21, 22, 21):
            row = cursor.execute(
                "SELECT count(*), avg(order_cost) FROM orders WHERE product_id = %s",
                (product,)).fetchone()
            answers.append(row)
            assert isinstance(row[0], int)
            # A binary numeric, clamped to order_cost's declared bounds [0, 5000].
            assert row[1] is None or (isinstance(row[1], Decimal) and 0 <= row[1] <= 5000)
        assert answers[2] == answers[0]  # asked again: the stored answer, in binary too
        names = cursor.execute("SELECT name FROM pg_prepared_statements").fetchall()
        assert names  # the relayed statement was prepared on the backend
        public = cursor.execute("SELECT product_id FROM products WHERE product_id = %s",
                                (7,)).fetchone()
        assert public == (7,)


def test_pipeline_mixes_relayed_and_private_statements(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        with connection.pipeline():
            public = connection.execute("SELECT count(*) FROM products WHERE product_id < %s",
                                        (11,))
            private = connection.execute(COUNT_BY_PRODUCT, (31,))
            setting = connection.execute("SHOW dp.epsilon")
        assert public.fetchone() == (10,)
        assert isinstance(private.fetchone()[0], int)
        assert setting.fetchone() == ("0.1",)


def test_a_refused_statement_raises_and_the_connection_keeps_working(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        with pytest.raises(errors.InsufficientPrivilege):
            connection.execute("SELECT * FROM orders WHERE product_id = %s", (1,))
        assert connection.execute("SELECT %s::int + 1", (1,)).fetchone() == (2,)


def test_errors_inside_a_transaction_abort_it_like_postgres(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice")) as connection:
        connection.execute("SELECT %s::int", (1,))
        with pytest.raises(errors.InsufficientPrivilege):
            connection.execute("SELECT order_id FROM orders WHERE product_id = %s", (1,))
        with pytest.raises(errors.InFailedSqlTransaction):
            connection.execute("SELECT %s::int", (1,))
        connection.rollback()
        assert connection.execute("SELECT %s::int", (3,)).fetchone() == (3,)


def test_asyncpg_prepared_statements_and_type_introspection(proxy: RunningProxy):
    async def run() -> tuple:
        connection = await asyncpg.connect(proxy.dsn("alice"))
        try:
            statement = await connection.prepare(
                "SELECT quantity, count(*) FROM orders WHERE product_id = $1 GROUP BY 1")
            types = [attribute.type.name for attribute in statement.get_attributes()]
            rows = await statement.fetch(41)
            value = await connection.fetchval(
                "SELECT count(*) FROM orders WHERE product_id = $1", 42)
            public = await connection.fetchval(
                "SELECT product_id FROM products WHERE product_id = $1", 5)
            return types, rows, value, public
        finally:
            await connection.close()

    types, rows, value, public = asyncio.run(run())
    assert types == ["int4", "int8"]
    assert [row[0] for row in rows] == list(range(1, 11))  # the whole declared domain
    assert isinstance(value, int)
    assert public == 5


class RawClient:
    """A client speaking the protocol by hand, for what drivers do not expose."""

    def __init__(self, proxy: RunningProxy, user: str = "alice", password: str | None = None):
        self.sock = connect_raw(proxy.port, timeout=30)
        ready = login(self.sock, user, password or ANALYSTS[user][0])
        assert ready[-1][0] == b"Z", ready

    def raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def until_ready(self) -> list[tuple[bytes, bytes]]:
        messages = []
        while True:
            kind, payload = read_message(self.sock)
            if not kind:
                raise ConnectionError("the proxy closed the connection")
            messages.append((kind, payload))
            if kind == b"Z":
                return messages

    def close(self) -> None:
        self.sock.sendall(wire.message(b"X"))
        self.sock.close()


def kinds(messages: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(kind for kind, _ in messages)


def test_row_limits_suspend_a_private_portal_and_resume_it_without_a_new_charge(
        proxy: RunningProxy):
    before = charges(proxy, "alice")
    client = RawClient(proxy)
    try:
        client.raw(wire.parse_message("h", "SELECT quantity, count(*) FROM orders "
                                           "WHERE product_id = $1 GROUP BY 1", ())
                   + wire.bind_message("p", "h", (), (b"51",), ())
                   + wire.execute_message("p", 4) + wire.execute_message("p", 4)
                   + wire.execute_message("p", 4) + wire.SYNC)
        messages = client.until_ready()
    finally:
        client.close()
    assert kinds(messages) == b"12" + b"D" * 4 + b"sN" + b"D" * 4 + b"s" + b"DDCZ"
    assert wire.cstring(messages[-2][1])[0] == "SELECT 2"
    assert charges(proxy, "alice") == before + 1


def test_describe_answers_without_running_or_charging(proxy: RunningProxy):
    before = charges(proxy, "alice")
    client = RawClient(proxy)
    try:
        client.raw(wire.parse_message("d", "SELECT count(*) FROM orders WHERE "
                                           "product_id = $1", ())
                   + wire.describe_message(b"S", "d") + wire.SYNC)
        messages = client.until_ready()
    finally:
        client.close()
    assert kinds(messages) == b"1tTZ"
    assert wire.parse_parameter_description(messages[1][1]) == [23]  # int4
    assert wire.parse_row_description(messages[2][1]) == [("count", wire.INT8_OID)]
    assert charges(proxy, "alice") == before


def test_after_an_error_messages_are_skipped_until_sync(proxy: RunningProxy):
    client = RawClient(proxy)
    try:
        client.raw(wire.parse_message("", "SELECT * FROM orders", ())
                   + wire.bind_message("", "", (), (), ()) + wire.execute_message("")
                   + wire.SYNC
                   + wire.parse_message("", "SELECT 1", ()) + wire.bind_message("", "", (), (), ())
                   + wire.execute_message("") + wire.SYNC)
        failed, ok = client.until_ready(), client.until_ready()
    finally:
        client.close()
    assert kinds(failed) == b"EZ"
    assert wire.parse_error_fields(failed[0][1])["C"] == "42501"
    assert kinds(ok) == b"12DCZ"


def test_unknown_statement_and_portal_names_are_errors(proxy: RunningProxy):
    client = RawClient(proxy)
    try:
        client.raw(wire.bind_message("", "missing", (), (), ()) + wire.SYNC
                   + wire.execute_message("nope") + wire.SYNC)
        statement, portal = client.until_ready(), client.until_ready()
    finally:
        client.close()
    assert wire.parse_error_fields(statement[0][1])["C"] == "26000"
    assert wire.parse_error_fields(portal[0][1])["C"] == "34000"


def test_statement_names_are_free_again_after_a_backend_error_or_deallocate(
        proxy: RunningProxy):
    client = RawClient(proxy)
    try:
        client.raw(wire.parse_message("s1", "SELECT no_such_column FROM products", ())
                   + wire.SYNC)
        failed = client.until_ready()
        client.raw(wire.parse_message("s1", "SELECT 1", ()) + wire.SYNC)
        reparsed = client.until_ready()
        client.raw(wire.message(b"Q", b"DEALLOCATE s1\0"))
        client.until_ready()
        client.raw(wire.parse_message("s1", "SELECT 2", ()) + wire.SYNC)
        after_deallocate = client.until_ready()
    finally:
        client.close()
    assert wire.parse_error_fields(failed[0][1])["C"] == "42703"
    assert kinds(reparsed) == b"1Z"
    assert kinds(after_deallocate) == b"1Z"


def test_psycopg_keeps_working_after_discard_all(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True, prepare_threshold=0
                         ) as connection:
        assert connection.execute("SELECT %s::int", (1,)).fetchone() == (1,)
        connection.execute("DISCARD ALL")
        assert connection.execute("SELECT %s::int", (2,)).fetchone() == (2,)
        assert isinstance(connection.execute(COUNT_BY_PRODUCT, (61,)).fetchone()[0], int)


def test_binary_histogram_keeps_the_key_type(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        rows = connection.cursor(binary=True).execute(
            "SELECT order_date, count(*), sum(quantity) FROM orders "
            "WHERE product_id = %s AND order_date < '2024-01-08' GROUP BY 1",
            (81,)).fetchall()
    # The declared domain is released, narrowed only by the WHERE's own conditions on the
    # key (order_date < '2024-01-08'): a week, whatever the data holds. (Without ORDER BY:
    # an ordered histogram drops keys whose noisy count is <= 0, docs/queries.md.)
    assert len(rows) == 7
    assert sorted(row[0] for row in rows)[:3] == [datetime.date(2024, 1, day)
                                                  for day in (1, 2, 3)]
    # bigint, as PostgreSQL; a day whose noisy count of quantities is below 0.5 has a NULL
    # sum, as PostgreSQL's over no row (docs/queries.md)
    assert all(isinstance(row[1], int) and (row[2] is None or isinstance(row[2], int))
               for row in rows)


def test_a_relayed_error_skips_the_private_messages_that_follow(proxy: RunningProxy):
    before = charges(proxy, "alice")
    client = RawClient(proxy)
    try:
        failing = "SELECT 1 / (product_id - product_id) FROM products"
        client.raw(wire.parse_message("", failing, ()) + wire.bind_message("", "", (), (), ())
                   + wire.execute_message("")
                   + wire.parse_message("c", "SELECT count(*) FROM orders", ())
                   + wire.bind_message("", "c", (), (), ()) + wire.execute_message("")
                   + wire.SYNC)
        messages = client.until_ready()
    finally:
        client.close()
    assert kinds(messages) == b"12EZ"
    assert wire.parse_error_fields(messages[2][1])["C"] == "22012"
    assert charges(proxy, "alice") == before


def test_a_syntax_error_in_parse_is_reported_with_its_sqlstate(proxy: RunningProxy):
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        with pytest.raises(errors.SyntaxError):
            connection.execute("SELECT count(*) FROM orders WHERE product_id = %s AND", (1,))
        assert connection.execute("SELECT %s::int", (5,)).fetchone() == (5,)


def test_a_bad_parameter_value_is_an_error_before_any_charge(proxy: RunningProxy):
    before = charges(proxy, "bob")
    client = RawClient(proxy, "bob")
    try:
        client.raw(wire.parse_message("", "SELECT count(*) FROM orders WHERE product_id = $1",
                                      ())
                   + wire.bind_message("", "", (), (b"not a number",), ())
                   + wire.execute_message("") + wire.SYNC)
        messages = client.until_ready()
    finally:
        client.close()
    assert kinds(messages) == b"12EZ"
    assert wire.parse_error_fields(messages[2][1])["C"] == "22P02"
    assert charges(proxy, "bob") == before


def _resident_megabytes(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


@pytest.mark.parametrize("extended", [False, True], ids=["simple", "extended"])
def test_a_client_that_does_not_read_cannot_fill_the_proxys_memory(proxy: RunningProxy,
                                                                   extended: bool):
    query = "SELECT repeat('x', 1000) FROM generate_series(1, 300000)"  # about 300 MB
    before = _resident_megabytes(proxy.process.pid)
    client = RawClient(proxy)
    if extended:
        client.raw(wire.parse_message("", query, ()) + wire.bind_message("", "", (), (), ())
                   + wire.execute_message("") + wire.SYNC)
    else:
        client.raw(wire.message(b"Q", query.encode() + b"\0"))
    time.sleep(3)  # the backend could send it all by now; the client reads nothing
    grown = _resident_megabytes(proxy.process.pid) - before
    client.sock.close()
    assert grown < 100, f"the proxy grew by {grown:.0f} MB"
    with psycopg.connect(proxy.dsn("bob"), autocommit=True) as other:
        assert other.execute("SELECT 1").fetchone() == (1,)
    # The client left while its answer was held back: its backend does not stay blocked
    # writing to the proxy (wait_event ClientWrite) for the rest of the proxy's life.
    with psycopg.connect(proxy.database.admin_dsn, autocommit=True) as admin:
        for _ in range(100):
            left = admin.execute("SELECT pid, state, wait_event FROM pg_stat_activity "
                                 "WHERE query = %s", (query,)).fetchall()
            if not left:
                break
            time.sleep(0.1)
    assert not left, left


def test_a_long_pipeline_without_sync_is_answered_in_order(proxy: RunningProxy):
    client = RawClient(proxy)
    try:
        statement = wire.parse_message("", "SELECT $1::int", ())
        client.raw(b"".join(statement + wire.bind_message("", "", (), (str(i).encode(),), ())
                            + wire.execute_message("") for i in range(1000)) + wire.SYNC)
        messages = client.until_ready()
    finally:
        client.close()
    assert kinds(messages) == b"12DC" * 1000 + b"Z"
    values = [wire.parse_data_row(payload)[0] for kind, payload in messages if kind == b"D"]
    assert values == [str(i).encode() for i in range(1000)]


def test_a_bad_value_after_good_ones_is_postgresqls_error_and_free(proxy: RunningProxy):
    """The plan check of a statement with parameters holds for every value (its generic
    plan), so a bad value is first met at the private query's Bind: still PostgreSQL's
    own error, still before any charge."""
    statement = "SELECT count(*) FROM orders WHERE product_id = $1 AND quantity >= $2"
    before = charges(proxy, "bob")
    client = RawClient(proxy, "bob")
    try:
        client.raw(wire.parse_message("bad_after_good", statement, ()) + wire.SYNC)
        assert kinds(client.until_ready()) == b"1Z"
        for values in ((b"41", b"2"), (b"42", b"2.5x")):
            client.raw(wire.bind_message("", "bad_after_good", (), values, ())
                       + wire.execute_message("") + wire.SYNC)
            messages = client.until_ready()
    finally:
        client.close()
    assert kinds(messages) == b"2EZ"
    assert wire.parse_error_fields(messages[1][1])["C"] == "22P02"
    assert charges(proxy, "bob") == before + 1  # the good value's answer only

