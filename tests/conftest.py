"""Shared fixtures: one real PostgreSQL per test session, and dpgate in front of it.

PostgreSQL comes from DPGATE_TEST_DSN if set, else a testcontainers container if a
Docker engine answers, else an embedded pgserver. The proxy runs as a real subprocess
(`dpgate serve`) so tests see exactly what a client sees.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from accounting import Ledger, SqliteLedger
from accounting.postgres_ledger import PostgresLedger
from proxy.admin.cli_common import open_configured_ledger
from proxy.config import load_config
from proxy.demo.analysts import create_analyst
from proxy.demo.demo import DEMO_POLICY_FILE, PRIVATE_TABLES, PUBLIC_TABLES
from proxy.demo.demo_data import load_demo_dataset
from proxy.demo.roles import READER, RELAY, prepare_roles

# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (here and in the proxies
# tests start): otherwise every run compiles the project and rewrites every test
# module's asserts again, ~8 s of each worker's start.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

ANALYSTS = {"alice": ("alice-pw", 10.0), "bob": ("bob-pw", 10.0)}


@dataclass(frozen=True)
class Postgres:
    admin_dsn: str

    def create_database(self, name: str) -> str:
        """A fresh, empty database; returns its admin conninfo."""
        with psycopg.connect(self.admin_dsn, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return make_conninfo(self.admin_dsn, dbname=name)


def _docker_engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        info = subprocess.run(["docker", "info"], check=False, capture_output=True, timeout=10)
        return info.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    if os.environ.get("DPGATE_TEST_DSN"):
        # Every worker of `pytest -n` would create and drop the same databases in it.
        if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
            pytest.exit("DPGATE_TEST_DSN is one server: run pytest without -n", returncode=4)
        yield Postgres(os.environ["DPGATE_TEST_DSN"])
    elif _docker_engine_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16", driver=None) as container:
            yield Postgres(container.get_connection_url())
    else:
        import pgserver

        # Not under pytest's own temporary folder: pytest makes /tmp/pytest-of-root private
        # (mode 700) whenever a pytest run starts, which locks out the unprivileged user
        # pgserver runs PostgreSQL as (root's PostgreSQL then PANICs on pg_control).
        server = pgserver.get_server(Path(tempfile.mkdtemp(prefix="dpgate-pg-")),
                                     cleanup_mode="delete")
        try:
            yield Postgres(server.get_uri())
        finally:
            server.cleanup()


def as_url(conninfo: str) -> str:
    """A libpq conninfo as a postgresql:// URL (what ledger.dsn and --ledger take)."""
    params = conninfo_to_dict(conninfo)
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", "")
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host, port = params.get("host", ""), params.pop("port", "")
    netloc = "" if host.startswith("/") else params.pop("host", "") + (f":{port}" if port else "")
    if host.startswith("/") and port:
        params["port"] = port
    database = quote(params.pop("dbname", ""), safe="")
    query = "&".join(f"{k}={quote(str(v), safe='/')}" for k, v in params.items())
    return f"postgresql://{auth}{netloc}/{database}" + (f"?{query}" if query else "")


LEDGER_DATABASE = "dpgate_ledger_tests"


@pytest.fixture(scope="session")
def ledger_database(postgres: Postgres) -> str:
    """A database for PostgreSQL ledgers; each test takes a schema of its own in it."""
    return postgres.create_database(LEDGER_DATABASE)


@pytest.fixture(params=[pytest.param("sqlite", marks=pytest.mark.unit),
                        pytest.param("postgres", marks=pytest.mark.end_to_end)])
def new_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Ledger]]:
    """Makes empty ledgers of one store (the test runs once per store): a new SQLite file,
    or a new schema in the test PostgreSQL."""
    made: list[PostgresLedger] = []

    def make() -> Ledger:
        if request.param == "sqlite":
            return SqliteLedger(tmp_path / f"ledger-{secrets.token_hex(4)}.sqlite3")
        dsn = request.getfixturevalue("ledger_database")
        made.append(PostgresLedger(dsn, schema=f"t_{secrets.token_hex(6)}"))
        return made[-1]

    yield make
    for ledger in made:
        ledger.close()


@dataclass(frozen=True)
class DemoDatabase:
    admin_dsn: str
    reader_dsn: str
    relay_dsn: str


@pytest.fixture(scope="session")
def demo_database(postgres: Postgres) -> DemoDatabase:
    """The demo dataset and dpgate's two backend roles in database `dpgate_e2e`."""
    admin = postgres.create_database("dpgate_e2e")
    load_demo_dataset(admin)
    passwords = {READER: secrets.token_urlsafe(12), RELAY: secrets.token_urlsafe(12)}
    prepare_roles(admin, PRIVATE_TABLES, PUBLIC_TABLES, passwords[READER], passwords[RELAY])
    params = {k: v for k, v in conninfo_to_dict(admin).items() if k not in ("user", "password")}
    dsn = {role: make_conninfo(**params, user=role, password=pw) for role, pw in passwords.items()}
    return DemoDatabase(admin, dsn[READER], dsn[RELAY])


def _ports_of_this_worker() -> Iterator[int]:
    """Ports below the kernel's ephemeral range (32768+), where no outgoing connection
    can hold one, in a slice of its own for each xdist worker, never handed out twice:
    asking the kernel for port 0 can give two consecutive callers the same port."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    first = 20000 + 1500 * (worker % 8) + secrets.randbelow(500)
    yield from range(first, first + 1000)


_PORTS = _ports_of_this_worker()


def free_port() -> int:
    for port in _PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("this test worker used up its slice of ports")


@dataclass
class RunningProxy:
    port: int
    config_path: Path
    ledger_path: Path
    process: subprocess.Popen
    database: DemoDatabase

    def dsn(self, user: str, password: str | None = None) -> str:
        password = password if password is not None else ANALYSTS[user][0]
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/dpgate_e2e"

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return dpgate_cli(*args, "--config", str(self.config_path), stdin=stdin)

    def add_analyst(self, name: str, password: str, epsilon: float,
                    delta: float = 1e-6) -> None:
        add_analyst(self.config_path, name, password, epsilon, delta)


def add_analyst(config_path: Path, name: str, password: str, epsilon: float,
                delta: float = 1e-6) -> None:
    """What `dpgate user add NAME --config CONFIG_PATH` does, in this process: the same
    ledger, verifier and shift, without starting an interpreter (tests/test_ledger_cli.py
    and test_end_to_end.py run the command itself)."""
    config = load_config(config_path)
    ledger = open_configured_ledger(config)
    try:
        create_analyst(ledger, name, password, epsilon, delta, config.privacy)
    finally:
        if isinstance(ledger, PostgresLedger):
            ledger.close()


def dpgate_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proxy", *args], check=False, input=stdin,
                          capture_output=True, text=True, timeout=120)


def write_config(path: Path, port: int, ledger: Path, database: DemoDatabase) -> None:
    path.write_text(f"""
[server]
listen_host = "127.0.0.1"
listen_port = {port}
auth_timeout = 5.0
max_message_size = 65536
# test_ledger_concurrency races 24 sessions of one analyst
max_clients_per_analyst = 32

[backend]
dsn = "{database.reader_dsn}"
relay_dsn = "{database.relay_dsn}"
# One analyst here runs thousands of private queries on a loaded machine: no account of
# reader-seconds (tests/test_private_connections.py and test_reader_time.py test it).
reader_seconds_per_minute = 0

[ledger]
path = "{ledger}"

[privacy]
default_epsilon = 0.1

[policy]
file = "{DEMO_POLICY_FILE}"
# These tests compare zero-noise answers with PostgreSQL's: row-level (FLEX) mode, where
# no contribution bounding changes them (tests/test_unit_end_to_end.py covers the unit).
row_level = true
""")


# Every proxy a test starts logs here; the session's summary counts the private queries
# that failed and were charged (docs/totality.md: the generic 22000, a last resort).
PROXY_LOG = "dpgate-proxy.log"
FALLBACK_LINE = "private query failed and is charged"
# And the sessions a statement ended with dpgate's internal error (XX000): each is a bug.
INTERNAL_ERROR_LINE = "internal error in a client session"


def start_proxy(config_path: Path) -> subprocess.Popen:
    log = (config_path.parent / PROXY_LOG).open("a")
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", str(config_path)],
        stdout=log, stderr=subprocess.STDOUT, text=True)
    log.close()
    process.log_path = config_path.parent / PROXY_LOG  # type: ignore[attr-defined]
    return process


# Markers: every test module declares its kind in `pytestmark`: `end_to_end` (PostgreSQL, a
# dpgate process or another program), `statistical` (the samplers' many seeded draws),
# `slow` (an outside tool for minutes), or `unit` (in-process: `pytest -m unit` runs in
# seconds). In an end_to_end module, a test that needs neither may say @pytest.mark.unit
# too. Either way a test marked `unit` uses no fixture that starts a server, and starts no
# process (checked below), so `-m unit` never starts one.
KINDS = frozenset({"unit", "end_to_end", "statistical", "slow"})
SERVER_FIXTURES = frozenset({"postgres", "ledger_database", "demo_database", "proxy"})


def _declared_kinds(module: object) -> set[str]:
    marks = getattr(module, "pytestmark", [])
    return {mark.name for mark in (marks if isinstance(marks, list) else [marks])} & KINDS


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    undeclared = sorted({item.nodeid.split("::")[0] for item in items
                         if not _declared_kinds(getattr(item, "module", None))})
    servers = sorted(item.nodeid for item in items if item.get_closest_marker("unit")
                     and SERVER_FIXTURES & set(getattr(item, "fixturenames", ())))
    if undeclared:
        raise pytest.UsageError("test modules without a pytestmark of "
                                f"{sorted(KINDS)}: {undeclared}")
    if servers:
        raise pytest.UsageError(f"unit tests that start a server: {servers}")


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request: pytest.FixtureRequest,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a unit test starts no process: mark it end_to_end")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    factory = getattr(terminalreporter.config, "_tmp_path_factory", None)
    if factory is None:
        return
    logs = list(factory.getbasetemp().rglob(PROXY_LOG))
    texts = [path.read_text(errors="replace") for path in logs]
    fallbacks = sum(text.count(FALLBACK_LINE) for text in texts)
    internal = sum(text.count(INTERNAL_ERROR_LINE) for text in texts)
    terminalreporter.write_line(f"dpgate: {fallbacks} private queries failed and were "
                                f"charged (generic 22000), {internal} sessions ended in an "
                                f"internal error (XX000) in {len(logs)} proxy logs")


def wait_for_port(port: int, process: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = getattr(process, "log_path", None)
            raise RuntimeError("dpgate exited early:\n"
                               + (log.read_text() if log else str(process.returncode)))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("dpgate did not start listening")


@pytest.fixture(scope="session")
def proxy(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RunningProxy]:
    """dpgate serving the demo database, with analysts alice and bob."""
    directory = tmp_path_factory.mktemp("proxy")
    port = free_port()
    config_path, ledger_path = directory / "dpgate.toml", directory / "ledger.sqlite3"
    write_config(config_path, port, ledger_path, demo_database)
    for name, (password, epsilon) in ANALYSTS.items():
        add_analyst(config_path, name, password, epsilon)
    process = start_proxy(config_path)
    wait_for_port(port, process)
    running = RunningProxy(port, config_path, ledger_path, process, demo_database)
    yield running
    process.terminate()
    process.wait(timeout=20)
