"""The data owner's dashboard in a real browser: headless Chromium (Debian's package)
loads the page from a running proxy with an operator's credentials; its numbers must be
the ledger's, and a screenshot is kept (DPGATE_SCREENSHOTS=DIR copies it there)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import psycopg
import pytest

from tests.conftest import DemoDatabase, add_analyst, dpgate_cli, free_port
from tests.proxies import PASSWORD, USER, OwnProxy, start_own_proxy

OPERATOR, OPERATOR_PASSWORD = "ops", "ops-pw"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.end_to_end, pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (apt-get install chromium; .ci/run does)")]


@pytest.fixture(scope="module")
def dashboard(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[OwnProxy, int, Path]]:
    directory = tmp_path_factory.mktemp("dashboard")
    port = free_port()
    running = start_own_proxy(directory, demo_database, dashboard_port=port,
                              admin_users=OPERATOR)
    config = directory / "dpgate.toml"
    add_analyst(config, OPERATOR, OPERATOR_PASSWORD, 0.001)
    yield running, port, config
    running.stop()


def _get(url: str, user: str | None = None, password: str | None = None,
         method: str = "GET") -> int:
    request = urllib.request.Request(url, method=method)
    if user is not None:
        import base64

        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def _chromium(url: str, directory: Path, *extra: str) -> subprocess.CompletedProcess:
    profile = directory / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--no-first-run",
         f"--user-data-dir={profile}", "--window-size=1200,1500", *extra, url],
        capture_output=True, text=True, timeout=120, check=False, cwd=directory)


class _Numbers(HTMLParser):
    """The page's figures: cells with data-analyst/data-field, tiles with an id."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str], str] = {}
        self.ids: dict[str, str] = {}
        self._open: tuple[str, str] | str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if "data-analyst" in found and "data-field" in found:
            self._open = (found["data-analyst"] or "", found["data-field"] or "")
        elif tag == "b" and found.get("id"):
            self._open = found["id"] or ""

    def handle_data(self, data: str) -> None:
        if isinstance(self._open, tuple):
            self.cells[self._open] = data.strip()
        elif isinstance(self._open, str):
            self.ids[self._open] = data.strip()
        self._open = None


def test_the_dashboard_shows_the_ledgers_numbers_in_chromium(dashboard, tmp_path: Path):
    proxy, port, config = dashboard
    with psycopg.connect(proxy.dsn(), autocommit=True) as connection:
        released = connection.execute("SELECT sum(order_cost) FROM orders").fetchone()[0]
        connection.execute("SET dp.epsilon = 0.25")
        connection.execute("SELECT count(*) FROM orders WHERE quantity = 7").fetchone()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            connection.execute("SELECT * FROM customers")
    url = f"http://127.0.0.1:{port}/"
    # Authenticated, by operators only, and read-only.
    assert _get(url) == 401
    assert _get(url, USER, PASSWORD) == 401  # an analyst is not an operator
    assert _get(url, OPERATOR, "wrong") == 401
    assert _get(url, OPERATOR, OPERATOR_PASSWORD) == 200
    assert _get(url, OPERATOR, OPERATOR_PASSWORD, method="POST") == 405

    credentials = f"http://{OPERATOR}:{OPERATOR_PASSWORD}@127.0.0.1:{port}/"
    dumped = _chromium(credentials, tmp_path, "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    numbers = _Numbers()
    numbers.feed(dumped.stdout)
    ledger = json.loads(dpgate_cli("budget", "show", "--json", "--config", str(config)).stdout)
    carol = next(entry for entry in ledger["analysts"] if entry["name"] == USER)
    for field in ("epsilon_total", "epsilon_spent", "epsilon_left", "delta_spent",
                  "queries"):
        assert float(numbers.cells[(USER, field)]) == pytest.approx(carol[field]), field
    assert float(numbers.cells[(USER, "epsilon_spent")]) == pytest.approx(0.35)
    assert float(numbers.ids["global-epsilon-spent"]) == \
        pytest.approx(ledger["global"]["epsilon_spent"])
    assert int(numbers.ids["refusals-last-hour"]) >= 1
    assert "rows of a private table asked without an aggregate" in dumped.stdout
    assert (OPERATOR, "epsilon_total") not in numbers.cells  # operators are not analysts
    assert dumped.stdout.count("<svg") >= 4  # the plots, inline
    assert str(released) not in dumped.stdout and f"{released:.2f}" not in dumped.stdout
    assert not re.search(r"(src|href)=\"https?://", dumped.stdout)  # nothing from elsewhere

    shot = _chromium(credentials, tmp_path, "--screenshot=dashboard.png")
    assert shot.returncode == 0, shot.stderr[-2000:]
    picture = tmp_path / "dashboard.png"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 20_000
    if os.environ.get("DPGATE_SCREENSHOTS"):
        shutil.copy(picture, Path(os.environ["DPGATE_SCREENSHOTS"]) / "dashboard.png")
