"""Durable charges per second of the SQLite and the PostgreSQL ledger, with 1, 8 and 32
sessions on 1 or 3 proxies, beside plain commits of the same store.

    .venv/bin/python bench/ledger_charges.py [--seconds 2] [--dir DIR] [--dsn URL]
                                             [--no-postgres]

A proxy is a process; its sessions are threads calling the ledger directly, as the proxy
does (its sessions call the ledger on worker threads; SQLite and psycopg release the GIL
while they wait for the disk, the network and locks). With 3 proxies the sessions are
spread over 3 processes sharing one ledger (one SQLite file, or one PostgreSQL schema).
Each session is its own analyst with an ample budget and asks questions never asked
before, so every call is a real charge: lock, budget check, INSERT, COMMIT with fsync.

Columns, each measured in this run on the same disk:
- charge: `charge_or_repeat` alone;
- charge+answer: a fresh answer's whole ledger work (charge, then `record_answer`);
- commit: one INSERT + COMMIT on a kept-open connection of the same store with the same
  sessions in one process (SQLite: WAL, synchronous=FULL; PostgreSQL: synchronous_commit
  on): the floor the store itself sets.
The ratio divides the charge rate by the commit rate of the same store.

Without --dsn, PostgreSQL is an embedded one (pgserver) in the same temporary folder.
"""

from __future__ import annotations

import argparse
import multiprocessing
import secrets
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from accounting import (  # noqa: E402 - after the path, when run as a script
    Analyst,
    Charged,
    ChargeRequest,
    Ledger,
    ScramVerifier,
    SqliteLedger,
)
from accounting.postgres_ledger import PostgresLedger  # noqa: E402

SESSIONS = (1, 8, 32)
PROXIES = (1, 3)
# A session's operation: called with a sequence number, does one durable unit of work.
Operation = Callable[[int], None]
VERIFIER = ScramVerifier(b"salt", b"stored", b"server", 4096)


@dataclass(frozen=True)
class Store:
    """Where a ledger is: a SQLite file (`location` a path) or a PostgreSQL schema."""

    kind: str  # "sqlite" or "postgres"
    location: str
    schema: str = ""

    def open(self) -> Ledger:
        if self.kind == "sqlite":
            return SqliteLedger(self.location)
        return PostgresLedger(self.location, self.schema)


def measure(make_operation: Callable[[int], Operation], sessions: range,
            seconds: float, ready: Callable[[], None] | None = None) -> tuple[int, float]:
    """Operations done by one thread per session, and the seconds they ran.

    `ready` is called once every thread waits at the start (the other processes' cue)."""
    operations = [make_operation(index) for index in sessions]
    counts = [0] * len(operations)
    start = threading.Barrier(len(operations) + 1)
    stop = threading.Event()

    def run(slot: int) -> None:
        start.wait()
        while not stop.is_set():
            operations[slot](counts[slot])
            counts[slot] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(operations))]
    for thread in threads:
        thread.start()
    if ready is not None:
        ready()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return sum(counts), time.perf_counter() - began


def charging(store: Store, answer: bool) -> Callable[[int], Operation]:
    """Operations of session `index`: analyst{index} charging new questions."""
    ledger = store.open()

    def make(index: int) -> Operation:
        name = f"analyst{index}"
        tag = secrets.token_hex(4)  # a run's questions are new even on a reused ledger

        def charge(n: int) -> None:
            sql = f"SELECT count(*) FROM orders WHERE product_id = {n}"
            outcome = ledger.charge_or_repeat(ChargeRequest(
                name, sql, f"{name}:{tag}:{n}", 0.1, 0.0, "shifted_laplace", 1.0))
            if answer:
                assert isinstance(outcome, Charged)
                ledger.record_answer(outcome.charge_id, [[str(n)]])

        return charge

    return make


def proxy_process(store: Store, answer: bool, sessions: range, seconds: float,
                  barrier, results) -> None:  # type: ignore[no-untyped-def]
    """One proxy: its sessions' threads, started when every proxy is ready."""
    results.put(measure(charging(store, answer), sessions, seconds,
                        ready=barrier.wait))


def charges_per_second(store: Store, sessions: int, proxies: int, answer: bool,
                       seconds: float) -> float:
    """Charges per second of `sessions` sessions spread over `proxies` processes."""
    ledger = store.open()
    existing = {analyst.name for analyst in ledger.analysts()}
    for index in range(sessions):
        if f"analyst{index}" not in existing:
            ledger.add_analyst(Analyst(f"analyst{index}", VERIFIER, 1e12, 1.0, 0.0))
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(proxies), context.Queue()
    shares = [range(i, sessions, proxies) for i in range(proxies)]
    workers = [context.Process(target=proxy_process,
                               args=(store, answer, share, seconds, barrier, results))
               for share in shares]
    for worker in workers:
        worker.start()
    counted = [results.get(timeout=seconds + 120) for _ in workers]
    for worker in workers:
        worker.join()
    # The processes ran the same wall-clock window (they start together at the barrier).
    return sum(count for count, _ in counted) / max(elapsed for _, elapsed in counted)


def sqlite_commits(path: Path) -> Callable[[int], Operation]:
    """INSERT + COMMIT on a kept-open connection per session, WAL and synchronous=FULL."""
    with sqlite3.connect(path, isolation_level=None) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE IF NOT EXISTS t (session INTEGER, n INTEGER, at REAL)")

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


def postgres_commits(dsn: str, table: str) -> Callable[[int], Operation]:
    """INSERT + COMMIT (autocommit, synchronous_commit on) on one connection per session."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute(f"DROP TABLE IF EXISTS {table}")
        setup.execute(f"CREATE TABLE {table} (session int, n int, at timestamptz)")

    def make(index: int) -> Operation:
        connection = psycopg.connect(dsn, autocommit=True)

        def insert(n: int) -> None:
            connection.execute(f"INSERT INTO {table} VALUES (%s, %s, now())", (index, n))

        return insert

    return make


@dataclass
class Row:
    store: str
    sessions: int
    proxies: int
    charge: float
    answered: float
    commit: float


def measure_store(kind: str, directory: Path, dsn: str, seconds: float) -> list[Row]:
    rows = []
    for sessions in SESSIONS:
        if kind == "sqlite":
            commit_make = sqlite_commits(directory / f"plain-{sessions}.sqlite3")
        else:
            commit_make = postgres_commits(dsn, f"bench_plain_{sessions}")
        count, elapsed = measure(commit_make, range(sessions), seconds)
        commit = count / elapsed
        print(f"{kind:>8} {sessions:>2} sessions: commit {commit:,.0f}/s", flush=True)
        for proxies in PROXIES:
            if proxies > sessions:
                continue
            store = (Store("sqlite", str(directory / f"ledger-{sessions}-{proxies}.sqlite3"))
                     if kind == "sqlite" else
                     Store("postgres", dsn, f"bench_{sessions}_{proxies}_{secrets.token_hex(3)}"))
            charge = charges_per_second(store, sessions, proxies, False, seconds)
            answered = charges_per_second(store, sessions, proxies, True, seconds)
            print(f"{kind:>8} {sessions:>2} sessions, {proxies} proxies: charge "
                  f"{charge:,.0f}/s, charge+answer {answered:,.0f}/s", flush=True)
            rows.append(Row(kind, sessions, proxies, charge, answered, commit))
    return rows


def print_table(rows: list[Row]) -> None:
    print()
    print("| store | sessions | proxies | charge/s | charge+answer/s | commit/s of the store |"
          " charge ÷ commit |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row.store} | {row.sessions} | {row.proxies} | {row.charge:,.0f} | "
              f"{row.answered:,.0f} | {row.commit:,.0f} | {row.charge / row.commit:.2f} |")
    single = max((r.answered for r in rows if r.store == "sqlite" and r.proxies == 1),
                 default=0.0)
    shared = max((r.answered for r in rows if r.store == "postgres" and r.proxies == 3),
                 default=0.0)
    if single and shared:
        print(f"\nbest charge+answer/s: PostgreSQL ledger with 3 proxies {shared:,.0f}, "
              f"SQLite with 1 proxy {single:,.0f}: ratio {shared / single:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--dir", help="where the SQLite ledgers go (default: a temporary "
                        "folder); put it on the disk a real ledger would use")
    parser.add_argument("--dsn", help="a PostgreSQL for the shared ledger (default: an "
                        "embedded one in the temporary folder)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        directory = Path(folder)
        rows = measure_store("sqlite", directory, "", args.seconds)
        if not args.no_postgres:
            server = None
            if args.dsn is None:
                import pgserver

                print(f"starting an embedded PostgreSQL in {directory / 'pgdata'}", flush=True)
                server = pgserver.get_server(directory / "pgdata", cleanup_mode="stop")
            try:
                dsn = args.dsn or server.get_uri()
                rows += measure_store("postgres", directory, dsn, args.seconds)
            finally:
                if server is not None:
                    server.cleanup()
    print_table(rows)


if __name__ == "__main__":
    main()
