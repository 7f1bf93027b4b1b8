"""One analyst must never stall, starve or lock out the others (issue 14).

Each test runs a real proxy over the real PostgreSQL. While one client does the bad thing,
another analyst logs in and asks a private count; the other's latency is printed (never
asserted: timings depend on the machine), and the bad client gets the documented SQLSTATE.
`bench/isolation.py` measures the same latencies against an idle baseline.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import DemoDatabase, add_analyst
from tests.proxies import (
    PASSWORD,
    USER,
    OwnProxy,
    connect_raw,
    errors,
    login,
    start_own_proxy,
)

pytestmark = pytest.mark.end_to_end

OTHER, OTHER_PASSWORD = "dave", "dave-pw"
NEWCOMER = "erin"  # password: the same
COUNT = "SELECT count(*) FROM orders WHERE quantity > 3"


@pytest.fixture
def proxy(demo_database: DemoDatabase, tmp_path: Path) -> Iterator[OwnProxy]:
    own = start_own_proxy(tmp_path, demo_database, max_clients=8, max_clients_per_analyst=4,
                          reserved_clients=1, max_statement_size=64 * 1024,
                          plan_cache_bytes=256 * 1024,
                          max_message_size=1 << 20)
    add_analyst(tmp_path / "dpgate.toml", OTHER, OTHER_PASSWORD, 100)
    yield own
    own.stop()


def other_dsn(proxy: OwnProxy) -> str:
    return proxy.dsn().replace(f"{USER}:{PASSWORD}", f"{OTHER}:{OTHER_PASSWORD}")


def other_analyst_answers(proxy: OwnProxy) -> float:
    """Seconds for another analyst to log in and get a private count."""
    started = time.monotonic()
    with psycopg.connect(other_dsn(proxy), autocommit=True) as connection:
        (count,) = connection.execute(COUNT).fetchone()
        assert isinstance(count, int)
    return time.monotonic() - started


def while_running(action, proxy: OwnProxy) -> tuple[object, list[float]]:
    """Run `action` in a thread; meanwhile the other analyst asks again and again."""
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(action()))
    thread.start()
    latencies = []
    while thread.is_alive() or not latencies:
        latencies.append(other_analyst_answers(proxy))
    thread.join()
    return outcome[0], latencies


def error_of(dsn: str, sql: str) -> psycopg.Error:
    with psycopg.connect(dsn, autocommit=True) as connection:
        with pytest.raises(psycopg.Error) as caught:
            connection.execute(sql)
        assert connection.execute("SELECT 1").fetchone() == (1,)  # the session goes on
        return caught.value


def refused_login(proxy: OwnProxy, user: str, password: str) -> dict[str, str]:
    """The FATAL error a login gets (read off the wire: libpq keeps no SQLSTATE then)."""
    with connect_raw(proxy.port) as sock:
        (error,) = errors(login(sock, user, password))
    return error


def resident_megabytes(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def refused_beside_the_others(proxy: OwnProxy, sql: str) -> psycopg.Error:
    """The error `sql` gets, while the other analyst asks again and again (printed)."""
    error, latencies = while_running(lambda: error_of(proxy.dsn(), sql), proxy)
    print(f"other analyst during a {len(sql)}-character statement: "
          f"max {max(latencies) * 1000:.0f} ms over {len(latencies)} answers")
    return error


def test_a_statement_too_long_to_analyse_is_refused_at_once(proxy: OwnProxy):
    huge = "SELECT count(*) FROM orders WHERE quantity = " + "+".join(["1"] * 100_000)
    error = refused_beside_the_others(proxy, huge)
    assert error.sqlstate == "54000" and "too long" in str(error)


def test_a_statement_nested_too_deeply_is_refused(proxy: OwnProxy):
    deep = "SELECT count(*) FROM orders WHERE " + "(" * 5000 + "quantity = 1" + ")" * 5000
    assert error_of(proxy.dsn(), deep).sqlstate == "54001"


def test_a_long_analysis_runs_beside_the_other_clients(proxy: OwnProxy):
    """Under the size and token limits but slow to parse: analysed on a worker thread, the
    event loop keeps serving the others."""
    values = ", ".join(str(n) for n in range(4000))
    long_in = f"SELECT count(*) FROM orders WHERE order_id IN ({values})"

    def ask() -> int:
        with psycopg.connect(proxy.dsn(), autocommit=True) as connection:
            return connection.execute(long_in).fetchone()[0]

    answer, latencies = while_running(ask, proxy)
    assert isinstance(answer, int)
    print(f"other analyst during a {len(long_in)}-character analysis: "
          f"max {max(latencies) * 1000:.0f} ms over {len(latencies)} answers")


def test_one_analyst_cannot_take_every_session(proxy: OwnProxy):
    held = [psycopg.connect(proxy.dsn(), autocommit=True) for _ in range(4)]
    try:
        refused = refused_login(proxy, USER, PASSWORD)
        assert (refused["S"], refused["C"]) == ("FATAL", "53300")
        assert refused["M"] == f'too many connections for analyst "{USER}"'
        # The other analyst still logs in and is answered.
        print(f"other analyst while {USER} holds 4 sessions: "
              f"{other_analyst_answers(proxy) * 1000:.0f} ms")
    finally:
        for connection in held:
            connection.close()
    psycopg.connect(proxy.dsn(), autocommit=True).close()  # the slots came back


def test_the_proxy_refuses_beyond_max_clients(proxy: OwnProxy, tmp_path: Path):
    """8 sessions, 4 per analyst, the last one kept for an analyst with none open."""
    add_analyst(tmp_path / "dpgate.toml", NEWCOMER, NEWCOMER, 1)
    held = [psycopg.connect(dsn, autocommit=True) for dsn in [proxy.dsn()] * 4 +
            [other_dsn(proxy)] * 3]
    try:
        # Both flooding analysts are below their own share, yet the last slot is kept ...
        refused = refused_login(proxy, OTHER, OTHER_PASSWORD)
        assert refused["C"] == "53300" and "kept for analysts with none open" in refused["M"]
        # ... for an analyst logging in for the first time, who is answered.
        newcomer = psycopg.connect(other_dsn(proxy).replace(f"{OTHER}:{OTHER_PASSWORD}",
                                                            f"{NEWCOMER}:{NEWCOMER}"),
                                   autocommit=True)
        held.append(newcomer)
        assert isinstance(newcomer.execute(COUNT).fetchone()[0], int)
        refused = refused_login(proxy, OTHER, OTHER_PASSWORD)
        assert (refused["C"], refused["M"]) == ("53300", "sorry, too many clients already")
    finally:
        for connection in held:
            connection.close()


def test_terminated_backend_connections_are_renewed(proxy: OwnProxy,
                                                    demo_database: DemoDatabase):
    with psycopg.connect(proxy.dsn(), autocommit=True) as connection:
        connection.execute("SET application_name = 'isolation-victim'")
        assert isinstance(connection.execute(COUNT).fetchone()[0], int)
        with psycopg.connect(demo_database.admin_dsn, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                "application_name IN ('dpgate-private', 'isolation-victim')").fetchone()[0]
        assert killed >= 2
        time.sleep(0.5)  # PostgreSQL's FATAL reaches the idle connections
        notices: list[str] = []
        connection.add_notice_handler(lambda notice: notices.append(notice.message_primary))
        # The relay is renewed (the session's SET is gone, and the client is told) ...
        assert connection.execute("SELECT 1").fetchone() == (1,)
        assert any("renewed" in notice for notice in notices)
        # ... and the private pool drops its dead connections before using them.
        assert isinstance(connection.execute(COUNT + " AND order_id > 0").fetchone()[0], int)


def test_the_plan_cache_does_not_keep_every_long_statement(proxy: OwnProxy):
    before = resident_megabytes(proxy.process.pid)
    padding = " " * 40_000
    with psycopg.connect(proxy.dsn(), autocommit=True) as connection:
        for index in range(250):  # 10 MB of distinct texts, a 256 KB cache
            connection.execute(f"SELECT {index} AS n{padding}").fetchone()
    grown = resident_megabytes(proxy.process.pid) - before
    print(f"proxy RSS grew by {grown:.1f} MB after 10 MB of distinct statements")
    assert grown < 5  # kept by an unbounded cache, the texts alone would take 10


def test_every_cache_keyed_by_text_stays_within_its_bytes(proxy: OwnProxy):
    """Issue 24: the statement fingerprints of the audit log were an lru_cache of 4,096
    whole texts. 1,000 distinct 60 KB relayed statements (60 MB, kept whole by the
    relay's plan: a string literal) must leave the proxy about where it was once the
    caches are full."""
    padding = "x" * 60_000
    with psycopg.connect(proxy.dsn(), autocommit=True) as connection:
        def ask(first: int, last: int) -> None:
            for index in range(first, last):
                assert connection.execute(
                    f"SELECT length('{index}{padding}')").fetchone() == (len(str(index)) + 60_000,)
        ask(0, 200)  # the caches fill up
        full = resident_megabytes(proxy.process.pid)
        ask(200, 1000)
        grown = resident_megabytes(proxy.process.pid) - full
    print(f"proxy RSS grew by {grown:.1f} MB over 48 MB more of distinct statements")
    assert grown < 20  # an lru_cache of whole texts keeps all 48


def test_a_chain_of_65000_terms_is_refused_before_it_is_analysed(proxy: OwnProxy):
    """Issue 24: `1+1+…+1` just under the size limit kept a worker thread for minutes."""
    chain = "SELECT count(*) FROM orders WHERE order_id <> " + "+".join(["1"] * 30_000)
    error = refused_beside_the_others(proxy, chain)
    assert error.sqlstate == "54001" and "too deep" in str(error)


def test_budget_reads_do_not_wait_for_charges(proxy: OwnProxy):
    def charge_many() -> None:
        with psycopg.connect(proxy.dsn(), autocommit=True) as connection:
            for index in range(40):
                connection.execute(f"SELECT count(*) FROM orders WHERE quantity > {index % 10}"
                                   f" AND order_id > {index}")

    workers = [threading.Thread(target=charge_many) for _ in range(3)]
    for worker in workers:
        worker.start()
    latencies = []
    with psycopg.connect(other_dsn(proxy), autocommit=True) as connection:
        while any(worker.is_alive() for worker in workers):
            started = time.monotonic()
            connection.execute("SHOW dp.budget").fetchone()
            latencies.append(time.monotonic() - started)
    for worker in workers:
        worker.join()
    latencies.sort()
    print(f"SHOW dp.budget during charges: p50 {latencies[len(latencies) // 2] * 1000:.1f} ms,"
          f" max {latencies[-1] * 1000:.1f} ms over {len(latencies)}")
    assert latencies


def test_tiny_epsilon_cannot_stall_the_proxy(proxy: OwnProxy):
    error = error_of(proxy.dsn(), "SET dp.epsilon = 1e-6")
    assert error.sqlstate == "22023"
    print(f"other analyst afterwards: {other_analyst_answers(proxy) * 1000:.0f} ms "
          f"(pid {os.getpid()})")
