"""Issue 2's user-visible behaviour, driven through dpgate by real clients (psql, psycopg,
asyncpg) against a real PostgreSQL."""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import subprocess

import asyncpg
import psycopg
import pytest
from psycopg import errors

from tests.conftest import RunningProxy

pytestmark = pytest.mark.end_to_end

COUNT_PRODUCT_1 = "SELECT count(*) FROM orders WHERE product_id = 1"


def psql(proxy: RunningProxy, user: str, *commands: str, password: str | None = None
         ) -> subprocess.CompletedProcess:
    args = ["psql", proxy.dsn(user, password), "-X", "-v", "ON_ERROR_STOP=1",
            "-v", "VERBOSITY=verbose"]
    for command in commands:
        args += ["-c", command]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True)


def admin_scalar(proxy: RunningProxy, query: str) -> object:
    with psycopg.connect(proxy.database.admin_dsn) as connection:
        return connection.execute(query).fetchone()[0]


def notices_of(connection: psycopg.Connection) -> list[str]:
    received: list[str] = []
    connection.add_notice_handler(lambda diagnostic: received.append(diagnostic.message_primary))
    return received


def test_private_count_is_noisy_charged_and_within_the_stated_bound(proxy: RunningProxy):
    truth = admin_scalar(proxy, COUNT_PRODUCT_1)
    before = proxy.cli("user", "show", "alice", "--json")
    with connect(proxy.dsn("alice")) as connection:
        notices = notices_of(connection)
        cursor = connection.execute(COUNT_PRODUCT_1 + " AND quantity > 0")
        rows = cursor.fetchall()
        assert [column.name for column in cursor.description] == ["count"]
        assert cursor.description[0].type_code == 20  # int8
    assert len(rows) == 1 and isinstance(rows[0][0], int)
    assert len(notices) == 1
    match = re.search(r"charged epsilon 0\.1, epsilon left ([\d.]+) of 10; 95% accuracy: "
                      r"count ±(\d+)", notices[0])
    assert match, notices[0]
    assert abs(rows[0][0] - truth) <= int(match.group(2)) * 3  # far beyond this: not noise
    assert before.returncode == 0
    after = proxy.cli("user", "show", "alice")
    assert "quantity > 0" in after.stdout and "answered" in after.stdout


def test_repeating_a_question_returns_the_same_answer_for_free(proxy: RunningProxy):
    query = "SELECT count(*) FROM orders WHERE product_id = 2"
    with connect(proxy.dsn("alice")) as connection:
        notices = notices_of(connection)
        first = connection.execute(query).fetchone()[0]
        spent = connection.execute("SHOW dp.budget").fetchone()[1]
        # Whitespace and keyword case do not make a new question.
        second = connection.execute("select   COUNT(*) from orders\n where product_id=2")
        second = second.fetchone()[0]
        spent_after = connection.execute("SHOW dp.budget").fetchone()[1]
    assert first == second
    assert spent_after == spent
    assert "repeated question" in notices[-1] and "nothing is charged" in notices[-1]


def test_each_analyst_is_charged_for_their_own_answer(proxy: RunningProxy):
    query = "SELECT count(*) FROM orders WHERE product_id = 3"
    answers = {}
    for user in ("alice", "bob"):
        with connect(proxy.dsn(user)) as connection:
            notices = notices_of(connection)
            answers[user] = connection.execute(query).fetchone()[0]
            assert "charged epsilon 0.1" in notices[-1]
    bob = proxy.cli("user", "show", "bob").stdout
    assert "product_id = 3" in bob


def test_select_star_from_a_private_table_is_refused(proxy: RunningProxy):
    with connect(proxy.dsn("alice")) as connection:
        with pytest.raises(errors.InsufficientPrivilege) as refused:
            connection.execute("SELECT * FROM orders")
        assert "only aggregates of private tables are answered" in str(refused.value)
        # The session goes on after a refusal.
        assert connection.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("statement", [
    "DELETE FROM orders", "DROP TABLE orders", "COPY orders TO STDOUT",
    "UPDATE orders SET quantity = 0", "TRUNCATE orders", "INSERT INTO orders VALUES (0)",
    "CREATE TABLE leak AS SELECT * FROM orders",
    "WITH gone AS (DELETE FROM orders RETURNING 1) SELECT count(*) FROM gone",
])
def test_writes_are_refused_and_change_nothing(proxy: RunningProxy, statement: str):
    before = admin_scalar(proxy, "SELECT count(*) FROM orders")
    result = psql(proxy, "alice", statement)
    assert result.returncode != 0
    assert "42501" in result.stderr
    assert admin_scalar(proxy, "SELECT count(*) FROM orders") == before
    assert admin_scalar(proxy, "SELECT to_regclass('public.leak') IS NULL")


def test_psql_lists_the_four_tables(proxy: RunningProxy):
    result = psql(proxy, "alice", r"\dt")
    assert result.returncode == 0, result.stderr
    for table in ("customers", "orders", "products", "recommendations"):
        assert re.search(rf"\b{table}\b", result.stdout)


def test_psql_shows_the_noisy_count_and_notice(proxy: RunningProxy):
    result = psql(proxy, "bob", "SELECT count(*) FROM orders WHERE product_id = 4;")
    assert result.returncode == 0, result.stderr
    assert re.search(r"count\s*\n-+\s*\n\s*-?\d+\s*\n\(1 row\)", result.stdout)
    assert "NOTICE" in result.stderr and "epsilon left" in result.stderr


def test_wrong_password_and_unknown_user_fail_with_28P01(proxy: RunningProxy):
    async def connect(user: str, password: str) -> None:
        await asyncpg.connect(proxy.dsn(user, password))

    for user, password in (("alice", "wrong"), ("mallory", "x")):
        with pytest.raises(asyncpg.InvalidPasswordError):
            asyncio.run(connect(user, password))
    result = psql(proxy, "alice", "SELECT 1", password="nope")
    assert 'password authentication failed for user "alice"' in result.stderr


def test_several_statements_in_one_query_string(proxy: RunningProxy):
    result = psql(proxy, "alice", "SELECT 41 + 1 AS answer; SET dp.epsilon = 0.2; "
                  "SHOW dp.epsilon; SELECT count(*) FROM customers WHERE customer_id < 100")
    assert result.returncode == 0, result.stderr
    assert "42" in result.stdout and "0.2" in result.stdout
    assert "charged epsilon 0.2" in result.stderr


def test_an_error_stops_the_rest_of_the_query_string(proxy: RunningProxy):
    result = psql(proxy, "alice", "SELECT 1 AS one; SELECT * FROM orders; SELECT 2 AS two")
    assert "one" in result.stdout and "two" not in result.stdout
    assert "42501" in result.stderr


def test_dp_epsilon_setting_is_validated(proxy: RunningProxy):
    with connect(proxy.dsn("alice")) as connection:
        with pytest.raises(errors.InvalidParameterValue):
            connection.execute("SET dp.epsilon = -1")
        with pytest.raises(errors.UndefinedObject):
            connection.execute("SET dp.nonsense = 1")
        connection.execute("SET dp.epsilon TO 0.05")
        assert connection.execute("SHOW dp.epsilon").fetchone() == ("0.05",)
        connection.execute("RESET dp.epsilon")
        assert connection.execute("SHOW dp.epsilon").fetchone() == ("0.1",)


def test_budget_exhaustion_is_53400_and_nothing_is_overspent(proxy: RunningProxy):
    proxy.add_analyst("carol", "carol-pw", 0.25)
    dsn = proxy.dsn("carol", "carol-pw")
    with connect(dsn) as connection:
        connection.execute("SELECT count(*) FROM orders WHERE quantity = 1").fetchone()
        connection.execute("SELECT count(*) FROM orders WHERE quantity = 2").fetchone()
        with pytest.raises(errors.ConfigurationLimitExceeded) as exhausted:
            connection.execute("SELECT count(*) FROM orders WHERE quantity = 3")
        assert exhausted.value.sqlstate == "53400"
        assert "0.05 of 0.25 is left" in str(exhausted.value)
        budget = connection.execute("SHOW dp.budget").fetchone()
    assert budget[1] == pytest.approx(0.2) and budget[5] == 2


def test_schema_errors_are_reported_before_any_charge(proxy: RunningProxy):
    with connect(proxy.dsn("bob")) as connection:
        spent = connection.execute("SHOW dp.budget").fetchone()[1]
        with pytest.raises(errors.UndefinedColumn):
            connection.execute("SELECT count(*) FROM orders WHERE no_such_column = 1")
        assert connection.execute("SHOW dp.budget").fetchone()[1] == spent


def test_public_tables_and_catalogs_are_relayed(proxy: RunningProxy):
    with connect(proxy.dsn("alice")) as connection:
        products = connection.execute("SELECT product_id, name FROM products ORDER BY 1 LIMIT 3")
        assert [row[0] for row in products.fetchall()] == [1, 2, 3]
        names = connection.execute(
            "SELECT table_name FROM information_schema.columns "
            "WHERE table_name = 'orders' AND column_name = 'customer_id'").fetchall()
        assert names == [("orders",)]


@pytest.mark.parametrize("statement", [
    "SELECT * FROM pg_stats WHERE tablename = 'orders'",
    "SELECT query_to_xml('select * from orders', true, true, '')",
    "EXPLAIN SELECT * FROM orders WHERE customer_id = 42",
    "SET ROLE postgres",
])
def test_leak_channels_are_refused(proxy: RunningProxy, statement: str):
    with connect(proxy.dsn("alice")) as connection:
        with pytest.raises(errors.InsufficientPrivilege):
            connection.execute(statement)


def test_relay_role_cannot_read_private_rows(proxy: RunningProxy):
    """Defence in depth: even a relayed statement could not read private tables."""
    with psycopg.connect(proxy.database.relay_dsn) as connection:
        with pytest.raises(errors.InsufficientPrivilege):
            connection.execute("SELECT count(*) FROM orders")


def test_refusal_inside_a_transaction_aborts_it_like_postgres(proxy: RunningProxy):
    with connect(proxy.dsn("alice")) as connection:
        connection.execute("BEGIN")
        with pytest.raises(errors.InsufficientPrivilege):
            connection.execute("SELECT * FROM orders")
        assert connection.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(errors.InFailedSqlTransaction):
            connection.execute("SELECT 1")
        connection.execute("ROLLBACK")
        assert connection.execute("SELECT 1").fetchone() == (1,)


def _raw(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


@pytest.mark.parametrize("payload", [
    b"\x00\x00\x00\x03",                                   # length below the minimum
    b"\x7f\xff\xff\xff" + b"\x00" * 8,                      # absurd length
    struct.pack("!ii", 8, 1234),                            # unknown protocol
    struct.pack("!ii", 16, 196608) + b"user\x00x",         # truncated parameters
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",                  # not PostgreSQL at all
])
def test_malformed_startup_closes_only_that_connection(proxy: RunningProxy, payload: bytes):
    bad = _raw(proxy.port)
    bad.sendall(payload)
    bad.shutdown(socket.SHUT_WR)
    reply = b""
    while chunk := bad.recv(4096):
        reply += chunk
    bad.close()
    assert reply == b"" or reply.startswith(b"E")
    with connect(proxy.dsn("bob")) as connection:
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_oversized_message_after_login_closes_only_that_session(proxy: RunningProxy):
    with connect(proxy.dsn("alice")) as other, connect(proxy.dsn("bob")) as big:
        with pytest.raises(psycopg.OperationalError):
            big.execute("SELECT '" + "x" * 200_000 + "'")
        assert other.execute("SELECT 2").fetchone() == (2,)


def test_user_list_and_remove(proxy: RunningProxy):
    added = proxy.cli("user", "add", "dave", "--epsilon", "1", stdin="dave-pw\n")
    assert added.returncode == 0
    assert "dave" in proxy.cli("user", "list").stdout
    assert proxy.cli("user", "remove", "dave").returncode == 0
    assert "dave" not in proxy.cli("user", "list").stdout
    assert psql(proxy, "dave", "SELECT 1", password="dave-pw").returncode != 0
