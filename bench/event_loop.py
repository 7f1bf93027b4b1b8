"""Does one client's heavy private answer hold up another client? (issue 16: no CPU work
longer than 5 ms on the event loop.)

`bench/private_latency.py --parts stall` calls `measure` here. Its table, made in the
bench's own database by `create_table` and declared by `POLICY` (appended to the demo
policy the bench serves), has a private column with VALUES distinct values, so that a
quantile's exponential mechanism weighs ~182,000 candidates, and a key column with a
declared domain of BUCKETS keys, so that a histogram noises that many cells.

One session asks heavy questions, each fresh (a new WHERE literal; a new ε for the
Gaussian ones, so that its calibration runs too): median, percentile_cont, a histogram
over the whole domain, a Gaussian count and a Gaussian histogram. Meanwhile another
session pings: a relayed `SELECT 1` and a stored private answer (a repeated question, no
noise drawn), one after the other. Its latencies are compared with the same pings when
nothing else runs.

The event loop's blocks come from dpgate itself: started with DPGATE_LOOP_WATCH (see
proxy/server/loop_watch.py) it notes each time a 1 ms timer fires late, by how much, and
how much CPU time the loop's thread spent meanwhile, and each of the garbage collector's
full (and slow) passes, on which thread, and its CPU time. The delay is what every session
waited (a callback running long, the GIL held by a worker thread, or the shared machine
giving dpgate no CPU); the CPU time is the CPU work on the event loop, the issue's limit.
(py-spy cannot see this: it samples at most every millisecond and merges short turns into
one.) To see what ran, profile with `--profile FILE` (py-spy, collapsed stacks).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from proxy.demo.demo import DEMO_POLICY_FILE
from proxy.demo.roles import READER, RELAY
from proxy.server.loop_watch import (
    ENVIRONMENT,
    CollectorPass,
    LateTick,
    collector_file,
    read_late_ticks,
)

TABLE = "stall_values"
VALUES = 182_000  # distinct values of the private column: the quantile's candidates
BUCKETS = 10_000  # keys of the histogram's declared domain (the demo policy's max_cells)
ROWS_PER_UNIT = 10  # the demo policy's τ: contribution bounding keeps every row

POLICY = f"""
# bench/event_loop.py: a private table whose column has {VALUES:,} distinct values.
[tables.{TABLE}]
private = true
unit = "customer_id"

[tables.{TABLE}.columns.value]
bounds = [0, {VALUES}]

[tables.{TABLE}.columns.bucket]
domain = {{ range = [1, {BUCKETS}] }}
"""

# Heavy questions, {n} a fresh literal each time (a fresh question: noise is drawn).
QUANTILES = [
    ("median", f"SELECT median(value) FROM {TABLE} WHERE value >= {{n}}"),
    ("percentile_cont(0.9)", "SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY value) "
     f"FROM {TABLE} WHERE value >= {{n}}"),
    ("histogram", f"SELECT bucket, count(*) FROM {TABLE} WHERE value >= {{n}} GROUP BY bucket"),
]
# Asked with dp.mechanism = gaussian and a fresh dp.epsilon: calibration runs each time.
GAUSSIAN = [
    ("gaussian count", f"SELECT count(*) FROM {TABLE} WHERE value >= {{n}}"),
    ("gaussian histogram", f"SELECT bucket, count(*) FROM {TABLE} WHERE value >= {{n}} "
     "GROUP BY bucket"),
]
STORED = f"SELECT count(*) FROM {TABLE} WHERE bucket = 1"
PAUSE = 0.002  # between two pings: a client, not a load generator


def create_table(admin_dsn: str) -> None:
    """The stall table, in the database of `admin_dsn`, readable by dpgate's reader role
    and visible (REFERENCES only) to its relay role, as the demo's private tables are."""
    with psycopg.connect(admin_dsn, autocommit=True) as connection:
        table = sql.Identifier(TABLE)
        connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        connection.execute(sql.SQL(
            "CREATE TABLE {} (customer_id integer NOT NULL, value integer NOT NULL, "
            "bucket integer NOT NULL)").format(table))
        connection.execute(sql.SQL(
            "INSERT INTO {} SELECT i / %s + 1, i, i %% %s + 1 "
            "FROM generate_series(1, %s) AS i").format(table),
            (ROWS_PER_UNIT, BUCKETS, VALUES))
        connection.execute(sql.SQL("ANALYZE {}").format(table))
        connection.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(
            table, sql.Identifier(READER)))
        connection.execute(sql.SQL("GRANT REFERENCES ON {} TO {}").format(
            table, sql.Identifier(RELAY)))


def write_policy(path: Path) -> Path:
    """The demo policy with the stall table declared, written to `path`."""
    path.write_text(DEMO_POLICY_FILE.read_text() + POLICY)
    return path


@dataclass
class Pings:
    """Seconds per ping of each kind."""

    relayed: list[float] = field(default_factory=list)
    stored: list[float] = field(default_factory=list)
    # SELECT 1 straight to PostgreSQL: what the shared machine alone does to a ping.
    direct: list[float] = field(default_factory=list)

    @property
    def all(self) -> list[float]:
        """The pings through dpgate."""
        return self.relayed + self.stored


@dataclass
class StallResult:
    alone: Pings
    during: Pings
    heavy: list[tuple[str, float]]  # (question, seconds to its answer)
    # The loop watch's late ticks while the pings ran alone, then beside heavy answers;
    # None when the dpgate measured has no watch (an older checkout).
    ticks_alone: list[LateTick] | None
    ticks_during: list[LateTick] | None
    # The collector's full and slow passes beside heavy answers (the watch's `.gc` file);
    # None when the dpgate measured does not note them.
    passes_during: list[CollectorPass] | None = None

    def heavy_by_question(self) -> dict[str, list[float]]:
        """Seconds to each answer, per heavy question."""
        by: dict[str, list[float]] = {}
        for name, seconds in self.heavy:
            by.setdefault(name, []).append(seconds)
        return by


class Pinger:
    """A second analyst's session: relayed SELECT 1, then a stored private answer; and,
    for comparison, SELECT 1 on a connection straight to PostgreSQL."""

    def __init__(self, conninfo: str, direct: str):
        self.connection = psycopg.connect(conninfo, autocommit=True)
        self.connection.execute(STORED).fetchone()  # charged once; stored from now on
        self.direct = psycopg.connect(direct, autocommit=True)

    def ping(self, pings: Pings) -> None:
        for connection, statement, times in (
                (self.connection, "SELECT 1", pings.relayed),
                (self.connection, STORED, pings.stored),
                (self.direct, "SELECT 1", pings.direct)):
            started = time.perf_counter()
            connection.execute(statement).fetchone()
            times.append(time.perf_counter() - started)
            time.sleep(PAUSE)

    def close(self) -> None:
        self.connection.close()
        self.direct.close()

    def until(self, done: threading.Event) -> Pings:
        pings = Pings()
        while not done.is_set():
            self.ping(pings)
        return pings


def ask_heavy(conninfo: str, rounds: int, first: int) -> list[tuple[str, float]]:
    """Every heavy question `rounds` times, each fresh; seconds to each answer."""
    timings = []
    with psycopg.connect(conninfo, autocommit=True) as connection:
        for round_ in range(rounds):
            n = first + round_
            for name, text in QUANTILES:
                timings.append((name, _timed(connection, text.format(n=n))))
            connection.execute("SET dp.mechanism = gaussian")
            for index, (name, text) in enumerate(GAUSSIAN):
                # A fresh ε: its calibration is not cached yet.
                connection.execute(f"SET dp.epsilon = {0.5 + (n * 10 + index) * 1e-6!r}")
                timings.append((name, _timed(connection, text.format(n=n))))
            connection.execute("RESET dp.mechanism")
            connection.execute("RESET dp.epsilon")
    return timings


def _timed(connection: psycopg.Connection, statement: str) -> float:
    started = time.perf_counter()
    connection.execute(statement).fetchall()
    return time.perf_counter() - started


def watch_environment(directory: Path) -> dict[str, str]:
    """The environment that turns dpgate's loop watch on, into a file in `directory`."""
    return {ENVIRONMENT: str(directory / "late-ticks.txt")}


def measure(through: Callable[[str], str], direct: str, heavy: str, pinger: str,
            watched: Path, rounds: int, alone: int) -> StallResult:
    """`alone` pings of each kind with nothing else running, then pings for as long as
    `rounds` rounds of heavy questions run in another session (`through(analyst)` is a
    conninfo through dpgate, whose loop watch writes to `watched`; `direct` one straight
    to PostgreSQL)."""
    session = Pinger(through(pinger), direct)
    ask_heavy(through(heavy), 1, 0)  # warm: plans, metrics, the first calibrations
    quiet = Pings()
    began = time.time()
    for _ in range(alone):
        session.ping(quiet)
    done = threading.Event()
    timings: list[tuple[str, float]] = []

    def heavy_session() -> None:
        try:
            timings.extend(ask_heavy(through(heavy), rounds, 1))
        finally:
            done.set()

    started = time.time()
    worker = threading.Thread(target=heavy_session)
    worker.start()
    during = session.until(done)
    worker.join()
    ended = time.time()
    session.close()
    if not watched.exists():
        return StallResult(quiet, during, timings, None, None)
    ticks = read_late_ticks(watched)
    passes = collector_file(watched)
    return StallResult(quiet, during, timings,
                       [tick for tick in ticks if began <= tick.at <= started],
                       [tick for tick in ticks if started <= tick.at <= ended],
                       [done for done in CollectorPass.read(passes)
                        if started <= done.at <= ended] if passes.exists() else None)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[-1] if len(values) > 1 else max(values)


def summary(values: list[float]) -> str:
    """p50 / p99 / max in milliseconds."""
    return (f"{statistics.median(values) * 1e3:.2f} / {p99(values) * 1e3:.2f} / "
            f"{max(values) * 1e3:.2f}")
