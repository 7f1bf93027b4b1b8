"""PostgreSQL restarts and goes away under a running dpgate (issue 14: backend resilience).

The test has a PostgreSQL of its own (pgserver, whatever backend the other tests use) so
that it can stop and start it. Through a restart an open session goes on; while the
database is down a private statement gets a per-statement connection error, is not
charged, and the session stays usable; when the database is back the same session is
answered again. Never XX000, never a dropped session.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pgserver
import psycopg
import pytest
from pgserver._commands import pg_ctl
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from proxy.demo.demo import PRIVATE_TABLES, PUBLIC_TABLES
from proxy.demo.demo_data import load_demo_dataset
from proxy.demo.roles import READER, RELAY, prepare_roles
from tests.conftest import DemoDatabase, Postgres
from tests.proxies import OwnProxy, start_own_proxy

pytestmark = pytest.mark.end_to_end

COUNT = "SELECT count(*) FROM orders WHERE quantity > {n}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[pgserver.PostgresServer]:
    own = pgserver.get_server(tmp_path / "pgdata", cleanup_mode="delete")
    try:
        yield own
    finally:
        own.cleanup()


@pytest.fixture
def proxy(server: pgserver.PostgresServer, tmp_path: Path) -> Iterator[OwnProxy]:
    admin = Postgres(server.get_uri()).create_database("dpgate_e2e")
    load_demo_dataset(admin)
    passwords = {READER: secrets.token_urlsafe(12), RELAY: secrets.token_urlsafe(12)}
    prepare_roles(admin, PRIVATE_TABLES, PUBLIC_TABLES, passwords[READER], passwords[RELAY])
    params = {k: v for k, v in conninfo_to_dict(admin).items() if k not in ("user", "password")}
    dsn = {role: make_conninfo(**params, user=role, password=pw) for role, pw in passwords.items()}
    own = start_own_proxy(tmp_path, DemoDatabase(admin, dsn[READER], dsn[RELAY]))
    yield own
    own.stop()


def _pg_ctl(server: pgserver.PostgresServer, *action: str) -> None:
    info = server.get_postmaster_info()
    options = ["-o", '-h ""', "-o", f"-k {info.socket_dir}", "-l", str(server.log)]
    pg_ctl(["-w", "-m", "fast", *options, *action] if action[0] != "stop" else
           ["-w", "-m", "fast", *action], pgdata=server.pgdata, user=server.system_user)


def _spent(connection: psycopg.Connection) -> str:
    return connection.execute("SHOW dp.budget").fetchone()[1]


def test_a_session_outlives_a_postgresql_restart_and_outage(
        server: pgserver.PostgresServer, proxy: OwnProxy):
    with psycopg.connect(proxy.dsn(), autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda notice: notices.append(notice.message_primary))
        assert isinstance(connection.execute(COUNT.format(n=1)).fetchone()[0], int)

        _pg_ctl(server, "restart")
        # Both the relay and the reader pool renew their connections.
        assert connection.execute("SELECT count(*) FROM products").fetchone() == (1000,)
        assert any("renewed" in notice for notice in notices)
        assert isinstance(connection.execute(COUNT.format(n=2)).fetchone()[0], int)

        _pg_ctl(server, "stop")
        spent = _spent(connection)
        with pytest.raises(psycopg.OperationalError) as down:
            connection.execute(COUNT.format(n=3))
        assert down.value.sqlstate in ("08006", "57P01", "57P03"), down.value
        assert "nothing was charged" in str(down.value)
        assert _spent(connection) == spent  # the ledger still answers, nothing charged
        with pytest.raises(psycopg.OperationalError) as relayed:
            connection.execute("SELECT count(*) FROM products")
        assert relayed.value.sqlstate == "08006"

        _pg_ctl(server, "start")
        assert connection.execute("SELECT count(*) FROM products").fetchone() == (1000,)
        assert isinstance(connection.execute(COUNT.format(n=3)).fetchone()[0], int)
    log = proxy.process.log_path.read_text()
    assert "Traceback" not in log and "internal error" not in log


def test_prepared_statements_survive_a_restart_and_the_ledger_answers_while_it_is_down(
        server: pgserver.PostgresServer, proxy: OwnProxy):
    """Issue 24: psycopg prepares `_pg3_0`… once and uses the names for good; after the
    relay connection is renewed they must still exist. SHOW dp.budget over the extended
    protocol is the ledger's alone: it works while PostgreSQL is down."""
    relayed = "SELECT count(*) FROM products WHERE product_id > %s"
    with psycopg.connect(proxy.dsn(), autocommit=True) as connection:
        before = connection.execute(relayed, (10,), prepare=True).fetchone()
        private = connection.execute(COUNT.format(n=1), prepare=True).fetchone()
        budget = connection.execute("SHOW dp.budget", prepare=True).fetchone()
        assert before is not None and before[0] > 0 and private is not None

        _pg_ctl(server, "stop")
        for _ in range(3):  # prepared, so over Parse/Bind/Execute
            assert connection.execute("SHOW dp.budget", prepare=True).fetchone() == budget
        with pytest.raises(psycopg.OperationalError) as down:
            connection.execute(relayed, (10,), prepare=True)
        assert down.value.sqlstate == "08006"

        _pg_ctl(server, "start")
        for _ in range(3):
            assert connection.execute(relayed, (10,), prepare=True).fetchone() == before
            assert connection.execute("SHOW dp.budget", prepare=True).fetchone() == budget

        _pg_ctl(server, "restart")  # the session idle meanwhile
        for _ in range(3):
            assert connection.execute(relayed, (10,), prepare=True).fetchone() == before
            assert connection.execute("SHOW dp.budget", prepare=True).fetchone() == budget
        # The repeated private count is answered from the ledger: nothing charged anew.
        assert connection.execute(COUNT.format(n=1), prepare=True).fetchone() == private
    log = proxy.process.log_path.read_text()
    assert "Traceback" not in log and "internal error" not in log
