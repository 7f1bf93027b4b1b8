"""Private answers per second end to end: one dpgate with its SQLite ledger, beside one
and three dpgate processes sharing a PostgreSQL ledger, all on this machine.

    .venv/bin/python bench/scale_out.py [--seconds 10] [--clients 12]

One run starts an embedded PostgreSQL (pgserver) with the demo dataset (the backend, and
in database `ledger` the shared ledger), then for each setup the proxies (`dpgate serve`
subprocesses) and `--clients` client threads, each its own analyst, asking distinct
`SELECT count(*) FROM orders WHERE product_id = k` (every one a fresh, charged question:
analysis, PostgreSQL aggregate, noise, durable charge and stored answer) for `--seconds`.
Clients are spread round-robin over the proxies (what a TCP load balancer does).

Everything shares this machine's CPUs: the proxies, PostgreSQL and the clients. With
fewer cores than proxies, three proxies cannot do three times the work of one; the ratio
printed is what this machine gives, not what three machines would.
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.clients import free_port, stop, wait_for_port  # noqa: E402
from proxy.demo.demo import (  # noqa: E402
    DEMO_POLICY_FILE,
    prepare_database,
    start_embedded_postgres,
)
from proxy.demo.roles import READER, RELAY  # noqa: E402

DATABASE = "bench"


def write_config(path: Path, port: int, dsns: dict[str, str], ledger: str) -> None:
    path.write_text(f"""
[server]
listen_host = "127.0.0.1"
listen_port = {port}
max_clients = 200
max_clients_per_analyst = 4

[backend]
dsn = "{dsns[READER]}"
relay_dsn = "{dsns[RELAY]}"
pool_size = 4

[ledger]
{ledger}

[policy]
file = "{DEMO_POLICY_FILE}"
""")


def start_proxies(directory: Path, dsns: dict[str, str], ledger: str, proxies: int,
                  clients: int, stack: ExitStack) -> list[int]:
    """`proxies` dpgate processes on one ledger, with analysts a0… (one per client)."""
    ports, configs = [], []
    for index in range(proxies):
        folder = directory / f"proxy{index}"
        folder.mkdir()
        ports.append(free_port())
        configs.append(folder / "dpgate.toml")
        write_config(configs[-1], ports[-1], dsns,
                     ledger or f'path = "{folder / "ledger.sqlite3"}"')
    cli = [sys.executable, "-m", "proxy"]
    for client in range(clients):
        subprocess.run([*cli, "user", "add", f"a{client}", "--epsilon", "1000000",
                        "--password-stdin", "--config", str(configs[0])],
                       input=f"a{client}\n", text=True, check=True, capture_output=True)
    for index, config in enumerate(configs):
        process = subprocess.Popen([*cli, "serve", "--config", str(config)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stack.callback(stop, process)
        wait_for_port(ports[index], process, "dpgate")
    return ports


def answers_per_second(ports: list[int], clients: int, seconds: float) -> float:
    """Fresh private answers per second of `clients` threads spread over the proxies."""
    counts = [0] * clients
    start, stop_event = threading.Barrier(clients + 1), threading.Event()

    def client(index: int) -> None:
        port = ports[index % len(ports)]
        url = f"postgresql://a{index}:a{index}@127.0.0.1:{port}/{DATABASE}"
        with psycopg.connect(url, autocommit=True) as connection:
            start.wait()
            n = 0
            while not stop_event.is_set():
                n += 1
                connection.execute(f"SELECT count(*) FROM orders WHERE product_id = "
                                   f"{index * 10_000_000 + n}").fetchone()
                counts[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop_event.set()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per setup")
    parser.add_argument("--clients", type=int, default=12, help="client threads (analysts)")
    args = parser.parse_args()
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="dpgate-scale-") as temporary:
        directory = Path(temporary)
        directory.chmod(0o755)
        print("starting an embedded PostgreSQL and loading the demo dataset…", flush=True)
        server, admin = start_embedded_postgres(directory / "pgdata")
        try:
            dsns = prepare_database(admin, DATABASE)
            with psycopg.connect(admin, autocommit=True) as connection:
                connection.execute("CREATE DATABASE ledger")
            ledger_url = make_conninfo(admin, dbname="ledger")
            setups = [("sqlite, 1 proxy", "", 1), ("postgres, 1 proxy", ledger_url, 1),
                      ("postgres, 3 proxies", ledger_url, 3)]
            for label, ledger_dsn, proxies in setups:
                ledger = ""
                if ledger_dsn:  # each setup its own schema: fresh analysts
                    ledger = (f"dsn = '{ledger_dsn}'\n"
                              f'schema = "s_{secrets.token_hex(3)}"')
                with ExitStack() as stack:
                    folder = directory / label.replace(", ", "-").replace(" ", "_")
                    folder.mkdir()
                    ports = start_proxies(folder, dsns, ledger, proxies, args.clients, stack)
                    print(f"{label}: {args.clients} clients for {args.seconds:g} s…",
                          flush=True)
                    rates[label] = answers_per_second(ports, args.clients, args.seconds)
                    print(f"{label}: {rates[label]:,.0f} answers/s", flush=True)
        finally:
            server.cleanup()
    base = rates["sqlite, 1 proxy"]
    print("\n| setup | private answers/s | ÷ sqlite, 1 proxy |")
    print("|---|---|---|")
    for label, rate in rates.items():
        print(f"| {label} | {rate:,.0f} | {rate / base:.2f} |")


if __name__ == "__main__":
    main()
