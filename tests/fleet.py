"""Several `dpgate serve` processes sharing one PostgreSQL ledger (a schema of their own
in the test server's ledger database), as behind a load balancer."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from accounting.postgres_ledger import PostgresLedger
from tests.conftest import (
    DemoDatabase,
    add_analyst,
    as_url,
    dpgate_cli,
    free_port,
    start_proxy,
    wait_for_port,
    write_config,
)


@dataclass
class Fleet:
    """Proxies on one ledger; `configs[i]` is proxy i's dpgate.toml."""

    ledger_url: str
    schema: str
    configs: list[Path]
    ports: list[int]
    processes: list[subprocess.Popen | None] = field(default_factory=list)
    health_ports: list[int] = field(default_factory=list)

    def ledger(self) -> PostgresLedger:
        return PostgresLedger(self.ledger_url, self.schema)

    def dsn(self, index: int, user: str, password: str) -> str:
        return (f"postgresql://{user}:{password}@127.0.0.1:{self.ports[index]}/dpgate_e2e"
                "?connect_timeout=10")

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return dpgate_cli(*args, "--config", str(self.configs[0]), stdin=stdin)

    def add_analyst(self, epsilon: float) -> tuple[str, str]:
        name, password = f"fleet_{secrets.token_hex(4)}", secrets.token_urlsafe(12)
        add_analyst(self.configs[0], name, password, epsilon)
        return name, password

    def start(self, index: int) -> None:
        process = start_proxy(self.configs[index])
        wait_for_port(self.ports[index], process)
        self.processes[index] = process

    def stop(self) -> None:
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=30)


def write_fleet(directory: Path, database: DemoDatabase, ledger_conninfo: str,
                proxies: int, health: bool = False) -> Fleet:
    """Configurations of `proxies` proxies on one new ledger schema (none started); with
    `health`, each serves GET /health on a port of its own (`Fleet.health_ports`)."""
    url, schema = as_url(ledger_conninfo), f"fleet_{secrets.token_hex(4)}"
    configs, ports, health_ports = [], [], []
    for index in range(proxies):
        folder = directory / f"proxy{index}"
        folder.mkdir(parents=True)
        port = free_port()
        config = folder / "dpgate.toml"
        write_config(config, port, folder / "unused.sqlite3", database)
        text = config.read_text().replace(
            "[ledger]\n", f'[ledger]\ndsn = "{url}"\nschema = "{schema}"\n')
        if health:
            health_ports.append(free_port())
            text = text.replace("[server]\n", f"[server]\nhealth_port = {health_ports[-1]}\n")
        config.write_text(text)
        configs.append(config)
        ports.append(port)
    return Fleet(url, schema, configs, ports, [None] * proxies, health_ports)
