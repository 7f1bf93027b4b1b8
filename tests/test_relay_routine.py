"""The one relay routine (proxy/server/relay.py) serves the session's task as it serves
fast_relay: a relay connection lost under an extended-protocol batch the task relayed
fails that batch as PostgreSQL's error, and the session goes on (as it always did for a
statement relayed the fast way, tests/test_fast_relay.py)."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from tests.conftest import RunningProxy

pytestmark = pytest.mark.end_to_end


def test_a_relay_connection_lost_under_a_parsed_statement_fails_it_and_the_session_goes_on(
        proxy: RunningProxy):
    long = "SELECT count(*) FROM generate_series(1, %s::bigint)"
    seen = long.replace("%s", "$1")  # as PostgreSQL shows it

    def terminate() -> None:  # once the statement runs on PostgreSQL
        with psycopg.connect(proxy.database.admin_dsn, autocommit=True) as admin:
            for _ in range(100):
                if admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE query = %s AND state = 'active'", (seen,)).fetchall():
                    return
                time.sleep(0.1)

    # With a parameter psycopg's default cursor speaks the extended protocol, Parse
    # first: the session's task relays every message of the batch, never fast_relay.
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        notices: list[str] = []
        connection.add_notice_handler(lambda notice: notices.append(notice.message_primary))
        for _ in range(2):
            timer = threading.Timer(0.2, terminate)
            timer.start()
            with pytest.raises(psycopg.OperationalError) as lost:
                connection.execute(long, (2000000002,))
            timer.join()
            assert lost.value.sqlstate in ("57P01", "08006")
            assert not connection.closed
            assert connection.execute("SELECT %s::int", (1,)).fetchone() == (1,)
        assert sum("renewed" in notice for notice in notices) == 2
