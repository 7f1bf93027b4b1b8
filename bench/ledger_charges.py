"""How many durable charges per second the SQLite ledger takes, with 1, 8 and 32 sessions.

    .venv/bin/python bench/ledger_charges.py [--seconds 2] [--dir DIR] [--no-postgres]

Each session is a thread calling SqliteLedger directly, as the proxy does (its sessions
call the ledger through asyncio.to_thread, so threads of one process are what it sees;
SQLite releases the GIL while it waits for the disk and for its write lock). Each session
is its own analyst with an ample budget and asks questions never asked before, so every
call is a real charge: BEGIN IMMEDIATE, budget check, INSERT, COMMIT with fsync.

Columns, each measured in this run on the same disk:
- charge: `charge_or_repeat` alone;
- charge+answer: a fresh answer's whole ledger work (charge, then `record_answer`);
- sqlite commit: one INSERT + COMMIT on a kept-open SQLite connection, same pragmas: the
  floor set by the disk, without the ledger's checks or its connection per call;
- postgres commit: one INSERT + COMMIT on an embedded PostgreSQL (pgserver), the store a
  shared multi-proxy ledger would use.
The ratios divide the charge rate by the two commit rates.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from accounting import (
    Analyst,
    Charged,
    ChargeRequest,
    ScramVerifier,
    SqliteLedger,
)

SESSIONS = (1, 8, 32)
# A session's operation: called with a sequence number, does one durable unit of work.
Operation = Callable[[int], None]


def measure(make_operation: Callable[[int], Operation], sessions: int,
            seconds: float) -> float:
    """Operations per second of `sessions` threads, each running its own operation."""
    operations = [make_operation(index) for index in range(sessions)]
    counts = [0] * sessions
    start = threading.Barrier(sessions + 1)
    stop = threading.Event()

    def run(index: int) -> None:
        start.wait()
        while not stop.is_set():
            operations[index](counts[index])
            counts[index] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(sessions)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - began)


def ledger_operations(directory: Path, sessions: int, answer: bool
                      ) -> Callable[[int], Operation]:
    """A fresh ledger with one analyst per session; each operation charges a new question."""
    ledger = SqliteLedger(directory / f"ledger-{sessions}-{answer}.sqlite3")
    verifier = ScramVerifier(b"salt", b"stored", b"server", 4096)

    def make(index: int) -> Operation:
        name = f"analyst{index}"
        ledger.add_analyst(Analyst(name, verifier, 1e12, 1.0, 0.0))

        def charge(n: int) -> None:
            sql = f"SELECT count(*) FROM orders WHERE product_id = {n}"
            outcome = ledger.charge_or_repeat(ChargeRequest(
                name, sql, f"{name}:{n}", 0.1, 0.0, "shifted_laplace", 1.0))
            if answer:
                assert isinstance(outcome, Charged)
                ledger.record_answer(outcome.charge_id, [[str(n)]])

        return charge

    return make


def sqlite_operations(directory: Path, sessions: int) -> Callable[[int], Operation]:
    """INSERT + COMMIT on a kept-open connection per session, WAL and synchronous=FULL."""
    path = directory / f"plain-{sessions}.sqlite3"
    with sqlite3.connect(path, isolation_level=None) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE t (session INTEGER, n INTEGER, at REAL)")

    def make(index: int) -> Operation:
        connection = sqlite3.connect(path, timeout=60, isolation_level=None,
                                     check_same_thread=False)
        connection.execute("PRAGMA synchronous=FULL")

        def insert(n: int) -> None:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO t VALUES (?, ?, ?)", (index, n, time.time()))
            connection.execute("COMMIT")

        return insert

    return make


def postgres_operations(dsn: str, sessions: int) -> Callable[[int], Operation]:
    """INSERT + COMMIT (autocommit, synchronous_commit on) on one connection per session."""
    import psycopg

    table = f"bench_{sessions}"
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute(f"DROP TABLE IF EXISTS {table}")
        setup.execute(f"CREATE TABLE {table} (session int, n int, at timestamptz)")

    def make(index: int) -> Operation:
        connection = psycopg.connect(dsn, autocommit=True)

        def insert(n: int) -> None:
            connection.execute(f"INSERT INTO {table} VALUES (%s, %s, now())", (index, n))

        return insert

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--dir", help="where the ledgers go (default: a temporary folder); "
                        "put it on the disk a real ledger would use: fsync sets the pace")
    parser.add_argument("--no-postgres", action="store_true",
                        help="skip the embedded PostgreSQL comparison")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        directory = Path(folder)
        server = None if args.no_postgres else start_postgres(directory / "pgdata")
        try:
            rows = [measure_row(directory, sessions, server, args.seconds)
                    for sessions in SESSIONS]
        finally:
            if server is not None:
                server.cleanup()
    print_table(rows)


def start_postgres(data: Path):
    import pgserver

    print(f"starting an embedded PostgreSQL in {data}", flush=True)
    return pgserver.get_server(data, cleanup_mode="stop")


def measure_row(directory: Path, sessions: int, server, seconds: float) -> list[float]:
    """Rates for one number of sessions, in the order of the table's columns."""
    columns: list[tuple[str, Callable[[int], Operation]]] = [
        ("charge", ledger_operations(directory, sessions, answer=False)),
        ("charge+answer", ledger_operations(directory, sessions, answer=True)),
        ("sqlite commit", sqlite_operations(directory, sessions)),
    ]
    if server is not None:
        columns.append(("postgres commit", postgres_operations(server.get_uri(), sessions)))
    rates = []
    for label, make in columns:
        print(f"{sessions:>2} sessions: {label} ...", end=" ", flush=True)
        rates.append(measure(make, sessions, seconds))
        print(f"{rates[-1]:,.0f}/s", flush=True)
    return [sessions, *rates]


def print_table(rows: list[list[float]]) -> None:
    with_postgres = len(rows[0]) == 5
    header = "| sessions | charge/s | charge+answer/s | sqlite commit/s | charge ÷ sqlite |"
    if with_postgres:
        header += " postgres commit/s | charge ÷ postgres |"
    print()
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for sessions, charge, answered, sqlite, *postgres in rows:
        line = (f"| {sessions:.0f} | {charge:,.0f} | {answered:,.0f} | {sqlite:,.0f} | "
                f"{charge / sqlite:.2f} |")
        if postgres:
            line += f" {postgres[0]:,.0f} | {charge / postgres[0]:.2f} |"
        print(line)


if __name__ == "__main__":
    main()
