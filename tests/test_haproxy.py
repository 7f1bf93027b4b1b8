"""The scale-out topology of docker-compose.scale.yml, on this machine: real HAProxy (from
Debian's package) in TCP mode in front of two dpgate processes sharing one PostgreSQL
ledger, clients (psycopg and psql) connecting through it. The budget is shared whichever
replica a session lands on, and a replica that stops is drained by the health check."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import DemoDatabase, free_port, wait_for_port
from tests.fleet import Fleet, write_fleet

pytestmark = [pytest.mark.end_to_end, pytest.mark.skipif(
    shutil.which("haproxy") is None, reason="haproxy is not installed (apt-get install haproxy)")]

SESSIONS = 8
FITTING = 4


def haproxy_config(port: int, fleet: Fleet) -> str:
    """deploy/haproxy.cfg with local addresses and faster checks."""
    servers = "\n".join(
        f"    server dpgate{i} 127.0.0.1:{p} check port {h} inter 300ms fall 1 rise 1"
        for i, (p, h) in enumerate(zip(fleet.ports, fleet.health_ports, strict=True)))
    return f"""
global
    log stdout format raw local0

defaults
    mode tcp
    log global
    option tcplog
    timeout connect 5s
    timeout client 1h
    timeout server 1h

frontend dpgate
    bind 127.0.0.1:{port}

    default_backend dpgate_replicas

backend dpgate_replicas
    balance leastconn
    # A replica that refuses the connection (stopped between two checks): try another.
    retries 3
    option redispatch
    option httpchk GET /health
    http-check expect status 200
{servers}
"""


@pytest.fixture
def balanced(demo_database: DemoDatabase, ledger_database: str, tmp_path: Path
             ) -> Iterator[tuple[Fleet, int]]:
    fleet = write_fleet(tmp_path, demo_database, ledger_database, 2, health=True)
    for index in range(2):
        fleet.start(index)
    port = free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(haproxy_config(port, fleet))
    log = (tmp_path / "haproxy.log").open("w")
    haproxy = subprocess.Popen(["haproxy", "-f", str(config), "-db"], stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, haproxy)
        yield fleet, port
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=20)
        log.close()
        fleet.stop()


def dsn(port: int, user: str, password: str) -> str:
    return f"postgresql://{user}:{password}@127.0.0.1:{port}/dpgate_e2e?connect_timeout=10"


async def ask(url: str, index: int, connected: asyncio.Barrier) -> str | None:
    """One session's question; its SQLSTATE if refused, None if answered."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        await connected.wait()
        try:
            await (await connection.execute(
                f"SELECT count(*) FROM orders WHERE product_id = {300 + index}")).fetchone()
            return None
        except psycopg.Error as error:
            return error.sqlstate


def test_sessions_through_haproxy_share_one_budget_and_a_stopped_replica_is_drained(
        balanced: tuple[Fleet, int]):
    fleet, port = balanced
    name, password = fleet.add_analyst(FITTING * 0.1)
    url = dsn(port, name, password)

    async def race() -> list[str | None]:
        connected = asyncio.Barrier(SESSIONS)
        return await asyncio.wait_for(asyncio.gather(
            *(ask(url, i, connected) for i in range(SESSIONS))), timeout=120)

    outcomes = asyncio.run(race())
    assert outcomes.count(None) == FITTING
    assert outcomes.count("53400") == SESSIONS - FITTING
    # HAProxy put sessions on both replicas (its log names the server of each), and yet
    # only the answers one budget holds were given: the replicas share the ledger. (Which
    # replica's sessions win the race varies, so the charges may all be one replica's.)
    log = (fleet.configs[0].parent.parent / "haproxy.log").read_text()
    assert all(log.count(f"dpgate_replicas/dpgate{i} ") >= 2 for i in range(2)), log

    # psql through HAProxy sees the shared spend.
    shown = subprocess.run(["psql", url, "-At", "-c", "SHOW dp.budget"], check=True,
                           capture_output=True, text=True, timeout=60).stdout
    assert shown.split("|")[1:3] == ["0.4", "0.0"] and shown.split("|")[5].strip() == "4"

    # One replica stops: its health answers 503, then its port closes; new sessions all
    # reach the other one.
    stopped = fleet.processes[0]
    stopped.send_signal(signal.SIGTERM)
    stopped.wait(timeout=30)
    time.sleep(1.0)  # a few check intervals
    for _ in range(6):
        with psycopg.connect(url, autocommit=True) as connection:
            assert connection.execute("SHOW dp.budget").fetchone()[5] == FITTING


def test_the_deployment_haproxy_config_is_valid():
    """deploy/haproxy.cfg as docker-compose.scale.yml ships it (replica names that do not
    resolve here only disable those servers)."""
    config = Path(__file__).resolve().parent.parent / "deploy" / "haproxy.cfg"
    checked = subprocess.run(["haproxy", "-c", "-f", str(config)], check=False,
                             capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Configuration file is valid" in checked.stdout + checked.stderr
