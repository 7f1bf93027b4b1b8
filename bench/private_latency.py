"""Issue 16's targets in one run: private answers against direct PostgreSQL, a durable
SQLite commit and PgBouncer, each printed with its ratio and whether it is met.

    .venv/bin/python -m bench.private_latency [--runs 300] [--seconds 5] [--sessions 16]
        [--parts latency,concurrency,fsync,passthrough,stall] [--dpgate-root PATH]
        [--against PATH] [--rounds N] [--profile FILE]

Run from the repository root (`-m`, so that this checkout's code is measured; or the one
`--dpgate-root` names). It starts an embedded PostgreSQL (pgserver) with the demo dataset,
dpgate (`dpgate serve`, a subprocess) and PgBouncer, all on loopback in a temporary
directory, and measures:

- latency: `SELECT count(*) FROM orders WHERE product_id = P AND quantity >= Q`, a new
  (P, Q) every time, straight to PostgreSQL (literals; parameters, prepared), one durable
  SQLite commit (WAL, synchronous=FULL, the ledger's settings and folder) and through
  dpgate (literals, simple protocol; parameters, extended and prepared), taking turns
  question by question so that all see the same moments of a shared machine;
- concurrency: SESSIONS sessions of different analysts asking fresh counts for SECONDS,
  beside SESSIONS threads doing plain durable SQLite commits, and dpgate's CPU meanwhile;
- fsync: `strace -f -e trace=fsync,fdatasync` attached to dpgate during fresh answers
  (one session, then SESSIONS): per answer, by the threads that commit answers and by
  the ledger's checkpoint thread;
- passthrough: pgbench select-only on a public table, 4 clients, `-M simple` against
  PgBouncer in transaction pooling, `-M prepared` against PgBouncer in session pooling
  (PgBouncer 1.18 cannot keep prepared statements in transaction pooling) and beside a
  blind relay in Python on uvloop (bench/bare_relay.py: the floor of relaying in Python),
  and the CPU each proxy process spent per transaction (and the part of it in user mode); with
  `--against PATH` (repeatable) that checkout's dpgate runs beside this one and they all
  take turns, `--rounds` times, each round printed with the load average;
- stall: another analyst's latency (a relayed SELECT 1, a stored private answer) alone,
  then while one session asks heavy private questions (quantiles over 182,000 distinct
  values, a 10,000-key histogram, Gaussian answers with a fresh ε), and the event loop's
  longest block meanwhile, sampled by py-spy (bench/event_loop.py).

Nothing here asserts: the last table prints each target, the measured value, the limit,
the ratio and pass/MISS. Needs pgbench, pgbouncer and strace on the PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from accounting import SqliteLedger
from bench import event_loop
from bench.clients import (
    DATABASE,
    SCRIPT,
    free_port,
    start_dpgate,
    start_pgbouncer,
    stop,
    wait_for_port,
)
from proxy.demo.demo import DEMO_POLICY_FILE, prepare_database, start_embedded_postgres

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = "bench-pw"
SESSION_DATABASE = "bench_session"  # PgBouncer's alias of DATABASE in session pooling
LITERALS = "SELECT count(*) FROM orders WHERE product_id = {} AND quantity >= {}"
PARAMETERS = "SELECT count(*) FROM orders WHERE product_id = %s AND quantity >= %s"


def question(number: int) -> tuple[int, int]:
    """The number-th distinct (product, quantity) pair: 10,000 of them."""
    return number % 1000 + 1, number // 1000 % 10 + 1


class Asker:
    """One connection asking fresh counts, with literals or with parameters."""

    def __init__(self, conninfo: str, extended: bool):
        self.connection = psycopg.connect(conninfo, autocommit=True)
        self.extended = extended

    def ask(self, number: int) -> float:
        """Seconds to answer the number-th question."""
        started = time.perf_counter()
        if self.extended:
            self.connection.execute(PARAMETERS, question(number), prepare=True).fetchone()
        else:
            self.connection.execute(LITERALS.format(*question(number))).fetchone()
        return time.perf_counter() - started


class Committer:
    """INSERT + COMMIT, WAL and synchronous=FULL, as the ledger commits."""

    def __init__(self, path: Path):
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER, at REAL)")

    def ask(self, number: int) -> float:
        started = time.perf_counter()
        self.connection.execute("BEGIN IMMEDIATE")
        self.connection.execute("INSERT INTO t VALUES (?, ?)", (number, started))
        self.connection.execute("COMMIT")
        return time.perf_counter() - started


def interleaved(askers: dict[str, Asker | Committer], numbers: range) -> dict[str, list[float]]:
    """Seconds per question of each asker, taking turns question by question, so that all
    see the same moments of a shared machine's disk and CPUs; one warm-up each first."""
    for asker in askers.values():
        asker.ask(numbers.stop)
    timings: dict[str, list[float]] = {name: [] for name in askers}
    for number in numbers:
        for name, asker in askers.items():
            timings[name].append(asker.ask(number))
    return timings


Operation = tuple[Callable[[int], None], Callable[[], None]]  # (do the n-th, close)


def in_threads(setup: Callable[[int], Operation], threads: int,
               seconds: float) -> tuple[int, float]:
    """Operations completed by `threads` threads for about `seconds`, and the seconds
    taken. Each thread runs setup(index) first (connecting is not measured), then its
    operation until the time is up."""
    stop_event, counts = threading.Event(), [0] * threads
    ready = threading.Barrier(threads + 1)

    def run(index: int) -> None:
        operation, close = setup(index)
        ready.wait()
        done = 0
        while not stop_event.is_set():
            operation(done)
            done += 1
        counts[index] = done
        close()

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    time.sleep(seconds)
    stop_event.set()
    for thread in pool:
        thread.join()
    return sum(counts), time.perf_counter() - started


def analyst_work(port: int, analysts: list[str], first: int) -> Callable[[int], Operation]:
    """Each thread one analyst asking fresh counts (numbers from `first` on)."""
    def setup(index: int) -> Operation:
        conninfo = f"postgresql://{analysts[index]}:{PASSWORD}@127.0.0.1:{port}/{DATABASE}"
        connection = psycopg.connect(conninfo, autocommit=True)
        return (lambda n: connection.execute(LITERALS.format(*question(first + n))).fetchone(),
                connection.close)
    return setup


def sqlite_work(directory: Path) -> Callable[[int], Operation]:
    """Each thread INSERT + COMMIT on its own connection to one WAL file (FULL sync)."""
    path = directory / "writers.sqlite3"
    with sqlite3.connect(path, isolation_level=None) as setup_connection:
        setup_connection.execute("PRAGMA journal_mode=WAL")
        setup_connection.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER, at REAL)")

    def setup(index: int) -> Operation:
        connection = sqlite3.connect(path, timeout=60, isolation_level=None,
                                     check_same_thread=False)
        connection.execute("PRAGMA synchronous=FULL")

        def insert(n: int) -> None:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO t VALUES (?, ?)", (index, n))
            connection.execute("COMMIT")
        return insert, connection.close
    return setup


class FsyncCounter:
    """strace attached to every thread of a process, logging fsync and fdatasync calls
    with the thread that made them."""

    def __init__(self, pid: int, directory: Path):
        self.pid = pid
        self.output = directory / f"strace-{time.monotonic_ns()}.txt"
        self.process = subprocess.Popen(
            ["strace", "-f", "-e", "trace=fsync,fdatasync", "-o", str(self.output),
             "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # strace attaches to each thread in turn

    def stop(self) -> tuple[int, int]:
        """(fsyncs by the threads that commit answers, fsyncs by the ledger's
        checkpoint thread)."""
        checkpoint = {task.name for task in Path(f"/proc/{self.pid}/task").iterdir()
                      if (task / "comm").read_text().strip() == "dpgate-ckpt"}
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=30)
        answering = background = 0
        for match in re.finditer(r"^(\d+)\s+f(?:data)?sync\(", self.output.read_text(),
                                 re.MULTILINE):
            if match.group(1) in checkpoint:
                background += 1
            else:
                answering += 1
        return answering, background


def pgbench_tps(host: str, port: str | None, user: str, password: str, database: str,
                mode: str, seconds: int, script: Path) -> float:
    command = ["pgbench", "-n", "-M", mode, "-c", "4", "-j", "2", "-T", str(seconds),
               "-f", str(script), "-h", host, "-U", user]
    if port:
        command += ["-p", port]
    result = subprocess.run([*command, database], capture_output=True, text=True,
                            env={**os.environ, "PGPASSWORD": password}, check=False)
    match = re.search(r"tps = ([\d.]+)", result.stdout)
    if result.returncode != 0 or not match:
        raise RuntimeError(f"pgbench failed against {host}:{port}:\n{result.stderr[-2000:]}")
    return float(match.group(1))


def p50(values: list[float]) -> float:
    return statistics.median(values)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[-1]


@dataclass
class Run:
    """What every measurement needs, and the tables they fill."""

    args: argparse.Namespace
    directory: Path
    admin_dsn: str
    admin: dict[str, str]
    server: object  # pgserver's PostgresServer
    port: int
    dpgate: subprocess.Popen
    analysts: list[str]
    stack: ExitStack
    # --against's dpgates: name (the checkout's folder), port, process
    against: list[tuple[str, int, subprocess.Popen]] = field(default_factory=list)
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # what, unit, value
    # (target, measured, limit, "<=" or ">=")
    targets: list[tuple[str, float, float, str]] = field(default_factory=list)

    def through(self, name: str) -> str:
        return f"postgresql://{name}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"


def measure_latencies(run: Run) -> None:
    """Direct, one commit and dpgate latencies, with literals and with parameters, taking
    turns question by question."""
    runs, analysts = run.args.runs, run.analysts
    print(f"latencies: {runs} fresh counts each, interleaved…", flush=True)
    timings = interleaved({
        "direct PostgreSQL, literals (simple)": Asker(run.admin_dsn, extended=False),
        "direct PostgreSQL, parameters (extended)": Asker(run.admin_dsn, extended=True),
        "durable SQLite commit": Committer(run.directory / "ledger" / "commits.sqlite3"),
        "dpgate, literals (simple)": Asker(run.through(analysts[0]), extended=False),
        "dpgate, parameters (extended)": Asker(run.through(analysts[1]), extended=True),
    }, range(runs))
    # Each answer must have been a fresh, charged question, or the timings say nothing.
    ledger = SqliteLedger(run.directory / "ledger" / "ledger.sqlite3")
    charged = [len(ledger.charges(name)) for name in analysts[:2]]
    run.rows.append(("charges of the simple / extended runs", "count",
                     f"{charged[0]} / {charged[1]} (of {runs + 1} each)"))
    for what, values in timings.items():
        run.rows.append((what, "p50 / p99 ms", f"{p50(values) * 1e3:.2f} / "
                         f"{p99(values) * 1e3:.2f}"))
    direct, direct_x, commit, simple, extended = timings.values()
    limit = p50(direct) + p50(commit) + 0.5e-3
    run.targets.append(("simple p50 ≤ direct + commit + 0.5 ms (ms)", p50(simple) * 1e3,
                        limit * 1e3, "<="))
    run.targets.append(("simple p99 ≤ 3 × p50 (ms)", p99(simple) * 1e3, 3e3 * p50(simple),
                        "<="))
    limit = p50(direct_x) + p50(commit) + 0.3e-3
    run.targets.append(("extended p50 ≤ direct + commit + 0.3 ms (ms)", p50(extended) * 1e3,
                        limit * 1e3, "<="))


def measure_concurrency(run: Run) -> None:
    """SESSIONS analysts' fresh answers per second beside SESSIONS SQLite writers."""
    sessions, seconds = run.args.sessions, run.args.seconds
    print(f"{sessions} analysts for {seconds} s, then {sessions} SQLite writers…", flush=True)
    before = cpu_seconds(run.dpgate.pid)
    answers, elapsed = in_threads(analyst_work(run.port, run.analysts[2:], 2000), sessions,
                                  seconds)
    busy = (cpu_seconds(run.dpgate.pid) - before) / elapsed
    commits, elapsed_commits = in_threads(sqlite_work(run.directory / "ledger"), sessions,
                                          seconds)
    rate, commit_rate = answers / elapsed, commits / elapsed_commits
    run.rows.append((f"{sessions} analysts' fresh answers", "per second", f"{rate:,.0f}"))
    run.rows.append(("dpgate's CPU meanwhile", "cores busy", f"{busy:.2f}"))
    # What a loaded machine disturbs least: CPU time per answer rather than answers/s.
    run.rows.append(("dpgate's CPU per fresh answer", "ms", f"{busy / rate * 1e3:.2f}"))
    run.rows.append((f"{sessions} SQLite writers' commits", "per second", f"{commit_rate:,.0f}"))
    run.targets.append((f"{sessions} analysts ≥ 0.8 × SQLite commits (answers/s)", rate,
                        0.8 * commit_rate, ">="))


def measure_fsyncs(run: Run) -> None:
    """fsync + fdatasync calls of the dpgate process per fresh answer, under strace: by
    the threads that commit answers, and by the ledger's checkpoint thread."""
    print("counting fsyncs under strace…", flush=True)
    asker = Asker(run.through(run.analysts[0]), extended=False)
    counter = FsyncCounter(run.dpgate.pid, run.directory)
    traced = range(4000, 4000 + run.args.runs)
    for number in traced:
        asker.ask(number)
    report(run, "1 session", counter.stop(), len(traced))
    counter = FsyncCounter(run.dpgate.pid, run.directory)
    done, _ = in_threads(analyst_work(run.port, run.analysts[2:], 6000), run.args.sessions,
                         run.args.seconds)
    report(run, f"{run.args.sessions} sessions", counter.stop(), done)


def report(run: Run, what: str, fsyncs: tuple[int, int], answers: int) -> None:
    answering, background = fsyncs
    run.rows.append((f"fsyncs per fresh answer, {what}", "commit / ckpt",
                     f"{answering / answers:.3f} / {background / answers:.3f} "
                     f"({answers} answers)"))
    run.targets.append((f"fsyncs per answer on its path, {what}", answering / answers, 1.0,
                        "<="))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads) so far."""
    return sum(cpu_times(pid))


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU time of a process (all its threads) so far: the process's own
    work (Python, uvloop), and the kernel's on its behalf (system calls, loopback TCP)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK"), int(fields[12]) / os.sysconf(
        "SC_CLK_TCK")


def measure_passthrough(run: Run) -> None:
    """pgbench select-only on a public table: direct, PgBouncer, the bare relay, dpgate
    (and the dpgate of `--against`). Besides tps, the CPU time each proxy process spent
    per transaction, which other work on a shared machine disturbs far less than
    throughput. With `--rounds N` the proxies take turns N times (all but PgBouncer in
    rotating order), each round printed with the load average; the rows are the medians
    over rounds."""
    bouncer, bouncer_process = start_pgbouncer(run.directory, run.admin,
                                               run.server.system_user, run.stack,
                                               SESSION_DATABASE)
    bare, bare_process = start_bare_relay(run.admin, run.stack)
    script = run.directory / "select.sql"
    script.write_text(SCRIPT)
    host, user, seconds = run.admin["host"], run.admin["user"], run.args.seconds
    dpgates = [("dpgate", run.port, run.dpgate.pid)] + [
        (name, port, process.pid) for name, port, process in run.against]
    for mode, pooled in (("simple", DATABASE), ("prepared", SESSION_DATABASE)):
        print(f"pgbench -M {mode}, {seconds} s each, {run.args.rounds} round(s)…", flush=True)
        direct = pgbench_tps(host, None, user, "", DATABASE, mode, seconds, script)
        proxies = [("pgbouncer", bouncer, user, "", pooled, bouncer_process.pid),
                   ("bare relay", bare, user, "", DATABASE, bare_process.pid)] + [
            (name, port, run.analysts[0], PASSWORD, DATABASE, pid)
            for name, port, pid in dpgates]
        for _, port, who, password, database, _ in proxies:
            # One second first, so that each proxy has met the 1,000 statements: the
            # steady state is measured, not dpgate's first analysis of each text.
            pgbench_tps("127.0.0.1", str(port), who, password, database, mode, 1, script)
        tps: dict[str, list[float]] = {name: [] for name, *_ in proxies}
        cpu: dict[str, list[float]] = {name: [] for name, *_ in proxies}
        own: dict[str, list[float]] = {name: [] for name, *_ in proxies}
        for round_ in range(run.args.rounds):
            turn = round_ % (len(proxies) - 1)  # who goes first after PgBouncer rotates
            order = proxies[:1] + proxies[1 + turn:] + proxies[1:1 + turn]
            for name, port, who, password, database, pid in order:
                before = cpu_times(pid)
                value = pgbench_tps("127.0.0.1", str(port), who, password, database, mode,
                                    seconds, script)
                after = cpu_times(pid)
                tps[name].append(value)
                cpu[name].append((sum(after) - sum(before)) / (value * seconds) * 1e6)
                own[name].append((after[0] - before[0]) / (value * seconds) * 1e6)
            print(f"  round {round_ + 1}, load average {os.getloadavg()[0]:.1f}: " + ", ".join(
                f"{name} {tps[name][-1]:,.0f} tps {cpu[name][-1]:.1f} µs/txn "
                f"(user {own[name][-1]:.1f})" for name, *_ in proxies), flush=True)
        run.rows.append((f"pgbench -M {mode}, direct", "tps", f"{direct:,.0f}"))
        for name, values in tps.items():
            run.rows.append((f"pgbench -M {mode}, {name}", "tps", f"{p50(values):,.0f}"))
        for name, values in cpu.items():
            run.rows.append((f"pgbench -M {mode}, {name} CPU", "µs per txn",
                             f"{p50(values):,.1f} (user {p50(own[name]):,.1f})"))
        for name in [name for name in tps if name != "pgbouncer"]:
            run.rows.append((f"pgbench -M {mode}, {name} / pgbouncer", "tps, CPU", (
                f"{p50([d / b for d, b in zip(tps[name], tps['pgbouncer'], strict=True)]):.2f}×, "
                f"{p50([d / b for d, b in zip(cpu[name], cpu['pgbouncer'], strict=True)]):.2f}×")))
        share = 0.9 if mode == "simple" else 0.7
        run.targets.append((f"passthrough -M {mode} ≥ {share} × PgBouncer (tps)",
                            p50(tps["dpgate"]), share * p50(tps["pgbouncer"]), ">="))


def start_bare_relay(admin: dict[str, str], stack: ExitStack) -> tuple[int, subprocess.Popen]:
    """bench/bare_relay.py in front of PostgreSQL: the least a relay in Python on uvloop
    costs, to set dpgate's CPU per transaction beside."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.bare_relay", str(port), admin["host"],
         admin.get("port", "5432")], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    stack.callback(stop, process)
    wait_for_port(port, process, "bare relay")
    return port, process


def measure_stall(run: Run) -> None:
    """Another analyst's pings alone and while heavy answers run; the loop's longest block."""
    rounds = max(1, run.args.runs // 100)
    print(f"stall: pings alone, then beside {rounds} rounds of heavy answers (py-spy)…",
          flush=True)
    heavy, pinger = run.analysts[-2:]
    watched = Path(event_loop.watch_environment(run.directory)[event_loop.ENVIRONMENT])
    result = event_loop.measure(run.through, run.admin_dsn, heavy, pinger, watched, rounds,
                                alone=run.args.runs)
    for what, pings in (("alone", result.alone), ("beside heavy", result.during)):
        run.rows.append((f"other client's SELECT 1, {what}", "p50/p99/max ms",
                         event_loop.summary(pings.relayed)))
        run.rows.append((f"other client's stored answer, {what}", "p50/p99/max ms",
                         event_loop.summary(pings.stored)))
        run.rows.append((f"direct PostgreSQL SELECT 1, {what}", "p50/p99/max ms",
                         event_loop.summary(pings.direct)))
    for name, seconds in result.heavy_by_question().items():
        run.rows.append((f"heavy: {name}", "p50/max ms",
                         f"{statistics.median(seconds) * 1e3:.0f} / {max(seconds) * 1e3:.0f}"))
    alone, during = result.alone.all, result.during.all
    run.targets.append(("other client's p99 beside heavy ≤ alone + 5 ms (ms)",
                        event_loop.p99(during) * 1e3, event_loop.p99(alone) * 1e3 + 5, "<="))
    if result.ticks_alone is None or result.ticks_during is None:
        run.rows.append(("event loop's late ticks", "", "not measured: this dpgate has no "
                         "DPGATE_LOOP_WATCH"))
        return
    for what, ticks in (("alone", result.ticks_alone), ("beside heavy", result.ticks_during)):
        run.rows.append((f"loop ticks > 5 ms late, {what}", "count / max ms",
                         f"{sum(t.late > 5e-3 for t in ticks)} / "
                         f"{max((t.late for t in ticks), default=0) * 1e3:.1f}"))
    cpu = sorted((t.cpu for t in result.ticks_during), reverse=True)
    for what, values in (("CPU work on the loop in one late tick", cpu),
                         ("the loop's wait for a CPU in one tick",
                          sorted((t.queued for t in result.ticks_during), reverse=True)),
                         ("the rest (the GIL) in one late tick",
                          sorted((t.other for t in result.ticks_during), reverse=True))):
        run.rows.append((what, "ms, longest",
                         ", ".join(f"{v * 1e3:.1f}" for v in values[:5]) or "none"))
    if result.passes_during is None:
        run.rows.append(("gc's passes", "", "not noted: this dpgate's loop watch is older"))
    else:
        report_passes(run, result.passes_during)
    run.targets.append(("CPU work on the event loop ≤ 5 ms (ms, longest)",
                        cpu[0] * 1e3 if cpu else 0.0, 5.0, "<="))


def report_passes(run: Run, passes: list[event_loop.CollectorPass]) -> None:
    """The collector's full passes, and its young ones of 0.5 ms or more, beside heavy
    answers: how many, the longest, and those on the event loop's thread."""
    for what, chosen in (("full", [p for p in passes if p.generation == 2]),
                         ("young ≥ 0.5 ms", [p for p in passes if p.generation < 2])):
        on_loop = [p.cpu for p in chosen if p.on_loop]
        run.rows.append((f"gc's {what} passes beside heavy", "n / longest ms",
                         f"{len(chosen)} / {max((p.cpu for p in chosen), default=0) * 1e3:.1f}"
                         f" (on the loop: {len(on_loop)} / "
                         f"{max(on_loop, default=0) * 1e3:.1f})"))


PARTS = {"latency": measure_latencies, "concurrency": measure_concurrency,
         "fsync": measure_fsyncs, "passthrough": measure_passthrough,
         "stall": measure_stall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="fresh counts per latency row")
    parser.add_argument("--seconds", type=int, default=5, help="duration of throughput runs")
    parser.add_argument("--sessions", type=int, default=16, help="concurrent analysts")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="measurements to make, comma-separated (default: all)")
    parser.add_argument("--dpgate-root", type=Path, default=ROOT,
                        help="the checkout whose dpgate is measured (default: this one), "
                        "to compare before and after a change in one machine's conditions")
    parser.add_argument("--against", type=Path, action="append", default=[],
                        help="another checkout whose dpgate is started beside it and "
                        "measured in turn with it (passthrough only; may be repeated)")
    parser.add_argument("--rounds", type=int, default=1, help="passthrough: times the "
                        "proxies take turns")
    parser.add_argument("--profile", type=Path, help="py-spy record dpgate during the "
                        "measurements into this file (collapsed stacks)")
    args = parser.parse_args()
    args.runs = min(args.runs, 2000)
    parts = [PARTS[name] for name in args.parts.split(",")]
    needed = ["pgbench", "pgbouncer"] * (measure_passthrough in parts) + ["strace"] * (
        measure_fsyncs in parts)
    for tool in needed:
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not on the PATH (apt-get install postgresql-client pgbouncer "
                     "strace)")
    # Two per latency row, one per concurrent session, and the stall part's two.
    analysts = [f"analyst{i}" for i in range(args.sessions + 4)]

    with tempfile.TemporaryDirectory(prefix="dpgate-bench-") as temporary, ExitStack() as stack:
        directory = Path(temporary)
        directory.chmod(0o755)
        print("starting an embedded PostgreSQL and loading the demo dataset…", flush=True)
        server, admin_uri = start_embedded_postgres(directory / "pgdata")
        stack.callback(server.cleanup)
        dsns = prepare_database(admin_uri, DATABASE)
        admin_dsn = make_conninfo(admin_uri, dbname=DATABASE)
        policy = DEMO_POLICY_FILE
        if measure_stall in parts:
            print(f"creating {event_loop.TABLE} ({event_loop.VALUES:,} distinct values)…",
                  flush=True)
            event_loop.create_table(admin_dsn)
            policy = event_loop.write_policy(directory / "policy.toml")
        with psycopg.connect(admin_dsn, autocommit=True) as connection:
            connection.execute("VACUUM ANALYZE")
        loop = os.environ.get("DPGATE_EVENT_LOOP", "uvloop if installed")
        print(f"starting dpgate (event loop: {loop})…", flush=True)
        port, dpgate = start_dpgate(directory, dsns, stack,
                                    {name: PASSWORD for name in analysts},
                                    root=args.dpgate_root, policy=policy,
                                    environment=event_loop.watch_environment(directory)
                                    if measure_stall in parts else None)
        run = Run(args, directory, admin_dsn, conninfo_to_dict(admin_uri), server, port,
                  dpgate, analysts, stack)
        for number, root in enumerate(args.against if measure_passthrough in parts else []):
            (directory / f"against{number}").mkdir()
            run.against.append((root.resolve().name, *start_dpgate(
                directory / f"against{number}", dsns, stack, {analysts[0]: PASSWORD},
                root=root, policy=policy)))
        profiler = None if args.profile is None else subprocess.Popen(
            [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw",
             "--rate", "500", "--nonblocking", "-o", str(args.profile), "-p",
             str(dpgate.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for part in parts:
            part(run)
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(timeout=60)
    print_tables(run)


def print_tables(run: Run) -> None:
    print("\nmeasured")
    for what, unit, value in run.rows:
        print(f"  {what:<44}{unit:>14}  {value}")
    print("\ntargets (issues 16 and 27)")
    print(f"  {'target':<52}{'measured':>10}{'limit':>10}{'ratio':>8}  verdict")
    for what, value, limit, sense in run.targets:
        met = value <= limit if sense == "<=" else value >= limit
        ratio = value / limit if limit else float("inf")
        print(f"  {what:<52}{value:>10.2f}{limit:>10.2f}{ratio:>8.2f}  "
              f"{'pass' if met else 'MISS'}")


if __name__ == "__main__":
    main()
