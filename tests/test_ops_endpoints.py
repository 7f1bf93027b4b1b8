"""Issue 23, family 4: operator endpoints are private by default. Metrics, health and
dashboard listen on 127.0.0.1 unless configured otherwise (dpgate.toml too), and /metrics,
which names analysts and their spend, can require a token: as a bearer token or as the
password of HTTP basic authentication (server.metrics_token, DPGATE_SERVER_METRICS_TOKEN)."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.config import ServerSettings, load_config
from tests.conftest import DemoDatabase, free_port
from tests.proxies import USER, OwnProxy, start_own_proxy

pytestmark = pytest.mark.end_to_end

TOKEN = "s3cret-metrics-token"
REPOSITORY = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"


def test_every_operator_endpoint_listens_on_loopback_by_default():
    server = ServerSettings()
    assert (server.metrics_host, server.dashboard_host, server.health_host) == (LOOPBACK,) * 3


def test_the_shipped_configuration_keeps_them_on_loopback():
    """dpgate.toml serves analysts on every address, and the operators' endpoints on
    loopback only."""
    server = load_config(REPOSITORY / "dpgate.toml", environ={}).server
    assert server.listen_host == "0.0.0.0"
    assert (server.metrics_host, server.dashboard_host, server.health_host) == (LOOPBACK,) * 3


def test_the_token_can_come_from_the_environment():
    server = load_config(REPOSITORY / "dpgate.toml",
                         environ={"DPGATE_SERVER_METRICS_TOKEN": TOKEN}).server
    assert server.metrics_token == TOKEN


@pytest.fixture(scope="module")
def guarded(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[OwnProxy, int, int]]:
    directory = tmp_path_factory.mktemp("ops-endpoints")
    metrics, health = free_port(), free_port()
    running = start_own_proxy(directory, demo_database, metrics_port=metrics,
                              health_port=health, metrics_token=TOKEN,
                              listen_host="0.0.0.0")
    yield running, metrics, health
    running.stop()


def _get(url: str, authorization: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("authorization", [
    None, "Bearer wrong", f"Bearer {TOKEN}x", "Bearer", _basic("prometheus", "wrong"),
    f"Token {TOKEN}", "Basic !!notbase64", _basic(TOKEN, ""),
])
def test_metrics_without_the_token_are_refused(guarded, authorization: str | None):
    _, port, _ = guarded
    status, body = _get(f"http://{LOOPBACK}:{port}/metrics", authorization)
    assert status == 401
    assert "dpgate_" not in body and USER not in body


@pytest.mark.parametrize("authorization", [f"Bearer {TOKEN}", _basic("prometheus", TOKEN)])
def test_metrics_with_the_token_are_served(guarded, authorization: str):
    proxy, port, _ = guarded
    import psycopg
    with psycopg.connect(proxy.dsn(), autocommit=True) as connection:
        connection.execute("SELECT count(*) FROM orders").fetchone()
    status, body = _get(f"http://{LOOPBACK}:{port}/metrics", authorization)
    assert status == 200
    assert "dpgate_statements_total" in body and f'analyst="{USER}"' in body


def _listening_addresses(port: int) -> set[str]:
    """The local addresses listening on `port` (IPv4 and IPv6), from /proc/net."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_metrics_and_health_listen_on_loopback_while_analysts_use_every_address(guarded):
    proxy, metrics, health = guarded
    assert _listening_addresses(proxy.port) == {"00000000"}
    assert _listening_addresses(metrics) == {"0100007F"}
    assert _listening_addresses(health) == {"0100007F"}
    assert _get(f"http://{LOOPBACK}:{health}/health")[0] == 200
