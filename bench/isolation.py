"""Another analyst's latency while one analyst misbehaves, against an idle baseline.

    .venv/bin/python bench/isolation.py [--runs 100]

It starts an embedded PostgreSQL with the demo dataset and dpgate (as bench/clients.py
does), then measures the p50/p99 of a victim analyst's distinct private counts, first with
nothing else running, then while an attacker (another analyst, another session) does each
of issue 14's bad things in a loop:

- a statement too long to analyse (200 KB; refused 54000),
- a statement nested too deeply (5,000 parentheses; refused 54001),
- a long analysis under the size limit (an IN list of 9,000 numbers over a private table),
- a flood of logins (as many sessions as the attacker is allowed, then refused 53300),
- a stream of charges, while the victim reads SHOW dp.budget.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import psycopg

from bench.clients import DATABASE, start_dpgate
from proxy.demo.demo import prepare_database, start_embedded_postgres

ATTACKER, VICTIM = ("mallory", "mallory-pw"), ("victim", "victim-pw")


def start(directory: Path, dsns: dict[str, str], stack: ExitStack) -> int:
    port, _ = start_dpgate(directory, dsns, stack, dict((ATTACKER, VICTIM)),
                           "max_message_size = 1048576\n")
    return port


def dsn(port: int, who: tuple[str, str]) -> str:
    return f"postgresql://{who[0]}:{who[1]}@127.0.0.1:{port}/{DATABASE}"


def victim_latencies(port: int, runs: int, offset: int, statement: str) -> list[float]:
    with psycopg.connect(dsn(port, VICTIM), autocommit=True) as connection:
        timings = []
        for index in range(runs):
            started = time.perf_counter()
            connection.execute(statement.format(k=offset + index)).fetchone()
            timings.append(time.perf_counter() - started)
    return timings


def attacking(port: int, attack: Callable[[str], None]) -> Callable[[], None]:
    """Start `attack` in a loop on a thread; return the function that stops it."""
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            try:
                attack(dsn(port, ATTACKER))
            except psycopg.Error:
                pass

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return lambda: (stopping.set(), thread.join(timeout=30))


def ask(sql: str) -> Callable[[str], None]:
    def attack(conninfo: str) -> None:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            try:
                connection.execute(sql)
            except psycopg.Error:
                pass
    return attack


def flood(conninfo: str) -> None:
    held = []
    try:
        for _ in range(40):
            held.append(psycopg.connect(conninfo, autocommit=True))
    except psycopg.Error:
        pass
    time.sleep(0.5)
    for connection in held:
        connection.close()


def charges(conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        for index in range(50):
            connection.execute(f"SELECT count(*) FROM orders WHERE order_id > {index} "
                               f"AND quantity > {time.perf_counter_ns() % 10}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="victim requests per attack")
    args = parser.parse_args()
    count = "SELECT count(*) FROM orders WHERE product_id = {k}"
    attacks: list[tuple[str, Callable[[str], None] | None, str]] = [
        ("idle (baseline)", None, count),
        ("200 KB statement (54000)", ask("SELECT count(*) FROM orders WHERE quantity = "
                                         + "+".join(["1"] * 100_000)), count),
        ("5,000 nested parentheses (54001)", ask(
            "SELECT count(*) FROM orders WHERE " + "(" * 5000 + "quantity = 1"
            + ")" * 5000), count),
        ("IN list of 9,000 numbers", ask(
            "SELECT count(*) FROM orders WHERE order_id IN ("
            + ", ".join(str(n) for n in range(9000)) + ")"), count),
        ("login flood (53300)", flood, count),
        ("charges, victim reads SHOW dp.budget", charges, "SHOW dp.budget"),
        ("idle, SHOW dp.budget", None, "SHOW dp.budget"),
    ]
    results = []
    with tempfile.TemporaryDirectory(prefix="dpgate-isolation-") as temporary, \
            ExitStack() as stack:
        directory = Path(temporary)
        directory.chmod(0o755)
        print("starting an embedded PostgreSQL, the demo dataset and dpgate…", flush=True)
        server, admin_uri = start_embedded_postgres(directory / "pgdata")
        stack.callback(server.cleanup)
        port = start(directory, prepare_database(admin_uri, DATABASE), stack)
        for index, (name, attack, statement) in enumerate(attacks):
            print(f"{name}…", flush=True)
            halt = attacking(port, attack) if attack else None
            time.sleep(0.5 if attack else 0)
            timings = victim_latencies(port, args.runs, 1 + index * args.runs, statement)
            if halt:
                halt()
            results.append((name, timings))
    baseline = statistics.median(results[0][1])
    print(f"\nthe victim's {args.runs} requests per row (distinct private counts, or SHOW "
          "dp.budget)")
    print(f"{'while the attacker runs':<40}{'p50 ms':>9}{'p99 ms':>9}{'p50/idle':>10}")
    for name, timings in results:
        p50 = statistics.median(timings)
        print(f"{name:<40}{p50 * 1e3:>9.2f}{percentile(timings, 0.99) * 1e3:>9.2f}"
              f"{p50 / baseline:>10.1f}")


if __name__ == "__main__":
    main()
