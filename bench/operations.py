"""What the operations tools cost: statement latency with metrics, audit log and dashboard
on (and scraped while the statements run) against a proxy with all of them off.

    .venv/bin/python -m bench.operations [--runs 300] [--no-scrape]

It starts an embedded PostgreSQL with the demo dataset and two dpgate processes on it:
one with `server.metrics_port`, `server.audit_log` (a file) and `server.dashboard_port`,
one without. Asking each statement of the two proxies in turn, it measures the p50 and
p99 of relayed `SELECT 1`, fresh private counts (charged) and repeated ones (answered
from the ledger), while a thread scrapes /metrics every 0.5 s and loads the dashboard
every 2 s on the proxy that has them (not with --no-scrape). It
also times one /metrics scrape and one dashboard page with the charges made. It prints
the ratios on/off; the statements themselves are the same on both proxies.
"""

from __future__ import annotations

import argparse
import base64
import statistics
import tempfile
import threading
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import psycopg

from bench.clients import DATABASE, free_port, start_dpgate
from proxy.demo.demo import prepare_database, start_embedded_postgres

ANALYST, OPERATOR = ("ann", "ann-pw"), ("ops", "ops-pw")


def start(directory: Path, dsns: dict[str, str], stack: ExitStack, operations: bool
          ) -> tuple[int, int, int]:
    """A dpgate process; returns its port and (if `operations`) the metrics and
    dashboard ports, else zeros."""
    directory.mkdir()
    metrics, dashboard = free_port(), free_port()
    extra = (f'metrics_port = {metrics}\ndashboard_port = {dashboard}\n'
             f'audit_log = "audit.jsonl"\nadmin_users = "{OPERATOR[0]}"\n'
             if operations else "")
    port, _ = start_dpgate(directory, dsns, stack, dict((ANALYST, OPERATOR)), extra)
    return (port, metrics, dashboard) if operations else (port, 0, 0)


def fetch(url: str, auth: tuple[str, str] | None = None) -> float:
    """Seconds to GET url (and read it all)."""
    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()
    return time.perf_counter() - started


def latencies(ports: tuple[int, int], runs: int, statement: str
              ) -> tuple[list[float], list[float]]:
    """The statement's latencies on each proxy, asked in turn (off, on, off, on…) so that
    the machine's load, which varies, weighs on both alike."""
    dsn = "postgresql://{}:{}@127.0.0.1:{}/" + DATABASE
    with psycopg.connect(dsn.format(*ANALYST, ports[0]), autocommit=True) as first, \
            psycopg.connect(dsn.format(*ANALYST, ports[1]), autocommit=True) as second:
        timings: tuple[list[float], list[float]] = ([], [])
        for index in range(runs):
            for connection, into in ((first, timings[0]), (second, timings[1])):
                started = time.perf_counter()
                connection.execute(statement.format(k=index)).fetchone()
                into.append(time.perf_counter() - started)
    return timings


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--no-scrape", action="store_true",
                        help="do not scrape /metrics nor load the dashboard meanwhile")
    args = parser.parse_args()
    statements = {
        "relayed SELECT 1": "SELECT 1 -- {k}",
        "private count (charged)": "SELECT count(*) FROM orders WHERE order_id > {k}",
        "repeated question (free)": "SELECT count(*) FROM orders WHERE order_id > 0",
    }
    with tempfile.TemporaryDirectory(prefix="dpgate-bench-") as temporary, ExitStack() as stack:
        directory = Path(temporary)
        directory.chmod(0o755)  # as bench/clients.py: PostgreSQL may run as another user
        server, admin = start_embedded_postgres(directory / "pgdata")
        stack.callback(server.cleanup)
        dsns = prepare_database(admin, DATABASE)
        off, _, _ = start(directory / "off", dsns, stack, operations=False)
        on, metrics, dashboard = start(directory / "on", dsns, stack, operations=True)
        stopping = threading.Event()

        def scrape() -> None:
            tick = 0
            while not stopping.wait(0.5):
                fetch(f"http://127.0.0.1:{metrics}/metrics")
                tick += 1
                if tick % 4 == 0:
                    fetch(f"http://127.0.0.1:{dashboard}/", OPERATOR)

        scraper = threading.Thread(target=scrape, daemon=True)
        if not args.no_scrape:
            scraper.start()
        print(f"{'statement':<28} {'off p50':>9} {'on p50':>9} {'ratio':>6} "
              f"{'off p99':>9} {'on p99':>9} {'ratio':>6}")
        for name, statement in statements.items():
            first, second = latencies((off, on), args.runs, statement)
            a50, b50, a99, b99 = p(first, 50), p(second, 50), p(first, 99), p(second, 99)
            print(f"{name:<28} {a50 * 1000:>7.2f}ms {b50 * 1000:>7.2f}ms {b50 / a50:>6.2f} "
                  f"{a99 * 1000:>7.2f}ms {b99 * 1000:>7.2f}ms {b99 / a99:>6.2f}")
        stopping.set()
        if scraper.is_alive():
            scraper.join()
        scrapes = [fetch(f"http://127.0.0.1:{metrics}/metrics") for _ in range(20)]
        pages = [fetch(f"http://127.0.0.1:{dashboard}/", OPERATOR) for _ in range(5)]
        lines = (directory / "on" / "audit.jsonl").read_text().count("\n")
        print(f"/metrics scrape p50 {statistics.median(scrapes) * 1000:.1f} ms; dashboard "
              f"page p50 {statistics.median(pages) * 1000:.0f} ms with {args.runs + 1} "
              f"charges; audit log lines: {lines}")


if __name__ == "__main__":
    main()
