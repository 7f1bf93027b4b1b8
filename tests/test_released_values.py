"""Issue 23, family 4: the SQL over released values (post-processing: computed.py's
expressions over noisy aggregates, outer.py's query around an aggregate subquery) and the
probe described for their types run as the relay role, which cannot read private tables,
on pooled connections whose session state is reset before each use. So even SQL the
classifier wrongly let through there reads no private row, and no state one statement
leaves (setseed, set_config, SET, temporary tables, prepared statements, advisory locks)
reaches the next one, or the reader connections that run private aggregates."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from accounting import SqliteLedger
from proxy.config import load_config
from proxy.demo.roles import READER, RELAY
from proxy.pgwire.backend import BackendError
from proxy.server.server import Proxy
from tests.conftest import RunningProxy
from tests.test_end_to_end import connect
from tests.test_ledger_proxy import fresh_analyst

pytestmark = pytest.mark.end_to_end

# Post-processing in the select list (computed.py) and around a subquery (outer.py), and
# with a constant computed before the query (its probe is described too).
ROUTES = [
    "SELECT count(*), {e} FROM orders",
    "SELECT count(*) + 0, {e} FROM orders WHERE order_date > current_date - 100000",
    "SELECT product_id, count(*), {e} FROM orders GROUP BY product_id ORDER BY 1 LIMIT 1",
    "SELECT n, {e} FROM (SELECT count(*) AS n FROM orders) AS s",
    "WITH t AS (SELECT count(*) AS n FROM orders) SELECT n, {e} FROM t",
]


@pytest.fixture(scope="module")
def analyst(proxy: RunningProxy) -> str:
    return fresh_analyst(proxy, 1000)


@pytest.mark.parametrize("route", ROUTES)
def test_post_processing_runs_as_the_role_that_cannot_read_private_tables(
        proxy: RunningProxy, analyst: str, route: str):
    statement = route.format(e="current_user, has_table_privilege('public.orders', 'SELECT')")
    with connect(proxy.dsn(analyst, analyst)) as connection:
        row = connection.execute(statement).fetchall()[0]
    assert row[-2:] == (RELAY, False)


@pytest.fixture
def own_proxy(proxy: RunningProxy, tmp_path: Path) -> Proxy:
    """An in-process Proxy on the running proxy's configuration: its pools, unstarted."""
    return Proxy(load_config(proxy.config_path), SqliteLedger(tmp_path / "ledger.sqlite3"))


def _run(coroutine):
    return asyncio.run(coroutine)


def test_the_released_values_pool_cannot_read_a_private_table(own_proxy: Proxy):
    """As if the classifier had let a private read through into post-processing."""
    async def main() -> tuple[str, str, str]:
        async with own_proxy.released.connection() as backend:
            user = (await backend.fetch("SELECT current_user")).rows[0][0]
            with pytest.raises(BackendError) as denied:
                await backend.fetch("SELECT count(*) FROM public.orders")
            with pytest.raises(BackendError) as copied:
                await backend.fetch("SELECT query_to_xml('SELECT * FROM orders', true, "
                                    "true, '')")
        async with own_proxy.pool.connection() as backend:
            reader = (await backend.fetch("SELECT current_user")).rows[0][0]
        own_proxy.released.close()
        own_proxy.pool.close()
        return bytes(user or b"").decode() + " " + bytes(reader or b"").decode(), \
            denied.value.sqlstate, copied.value.sqlstate
    users, denied, copied = _run(main())
    assert users == f"{RELAY} {READER}"
    assert denied == copied == "42501"


# Each leaves state on a session; `read` reads it back on the next use. None: `read`
# must differ from the draw right after setseed(0.5), which the first use asked for.
STATE = [
    ("SELECT setseed(0.5)", "SELECT random()", None),
    ("SELECT set_config('dpgate.leak', 'x', false)",
     "SELECT coalesce(current_setting('dpgate.leak', true), '')", ""),
    ("SET work_mem = '77MB'", "SELECT current_setting('work_mem') = '77MB'", "f"),
    ("SET SESSION statement_timeout = 1",
     "SELECT current_setting('statement_timeout') = '1ms'", "f"),
    ("CREATE TEMP TABLE leak AS SELECT 1 AS x",
     "SELECT count(*) FROM pg_class WHERE relname = 'leak' AND relpersistence = 't'", "0"),
    ("PREPARE leak AS SELECT 1", "SELECT count(*) FROM pg_prepared_statements", "0"),
    ("SELECT pg_advisory_lock(42)",
     "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = "
     "pg_backend_pid()", "0"),
    ("LISTEN leak", "SELECT count(*) FROM pg_listening_channels()", "0"),
]


@pytest.mark.parametrize(("leave", "read", "expected"), STATE)
def test_no_session_state_survives_from_one_use_to_the_next(own_proxy: Proxy, leave: str,
                                                            read: str, expected: str | None):
    async def main() -> tuple[list, bytes | None, bytes | None]:
        pool, pids = own_proxy.released, []
        for step in range(2):
            async with pool.connection() as backend:
                pids.append((await backend.fetch("SELECT pg_backend_pid()")).rows[0][0])
                if step == 0:
                    await backend.fetch(leave)
                    continue
                value = (await backend.fetch(read)).rows[0][0]
                seeded = (await backend.fetch("SELECT setseed(0.5), random()")).rows[0][1]
        pool.close()
        own_proxy.pool.close()
        return pids, value, seeded
    pids, value, seeded = _run(main())
    assert pids[0] == pids[1]  # the same connection, reused
    if expected is None:
        assert value != seeded
    else:
        assert value == expected.encode()
