"""Another analyst's latency while one analyst misbehaves, idle and attacked in one run.

    .venv/bin/python -m bench.isolation [--runs 60] [--seconds 15] [--only NAME]

It starts an embedded PostgreSQL with the demo dataset and dpgate (as bench/clients.py
does; backend.private_statement_timeout 10 s so that a held reader frees in a bounded
time), then, for each attack, measures a victim analyst's p50/p99 with nothing else
running, then while an attacker (another analyst, one or several sessions) does the bad
thing in a loop, then how long after the attacker stopped the victim is back to idle (five
answers in a row within 2 × idle p99 + 5 ms, at most 60 s), and the proxy's RSS before the
attack and once back to idle. The attacks, issue 14's first:

- a statement too long to analyse (200 KB; refused 54000),
- a statement nested too deeply (5,000 parentheses; refused 54001),
- a long analysis under the size limit (an IN list of 9,000 numbers over a private table),
- a flood of logins (as many sessions as the attacker is allowed, then refused 53300),
- a stream of charges, while the victim reads SHOW dp.budget;

then issue 24's:

- 8 sessions looping on `order_id <> 1+1+…+1` (65,000 terms, just under
  max_statement_size), while the victim asks counts of new shapes (each analysed);
- 6 sessions of legal 3-way self-joins on the unit, which run until the statement timeout,
  while the victim asks counts that run on the same reader connections;
- distinct 130 KB relayed statements (the caches keyed by statement text).

Victim latencies count errors too (an error is not an answer: it never counts as idle).
The machine's load average is printed with the table: the figures mean little without it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.clients import DATABASE, demo_backend, start_dpgate

ATTACKER, VICTIM = ("mallory", "mallory-pw"), ("victim", "victim-pw")
# The victim's statements: a count whose plan is cached (its literal is lifted), a count
# of a new shape each time (the alias differs: analysed every time), its budget.
CACHED = "SELECT count(*) FROM orders WHERE product_id = {k}"
NEW_SHAPE = "SELECT count(*) AS n{k} FROM orders WHERE product_id = 1"
BUDGET = "SHOW dp.budget"
RECOVERY_CAP = 60.0  # seconds
PRIVATE_TIMEOUT = 10  # backend.private_statement_timeout for the run, seconds


@dataclass
class Attack:
    name: str
    attack: Callable[[str, threading.Event], None] | None
    victim: str
    sessions: int = 1


@dataclass
class Row:
    name: str
    idle: list[float]
    attacked: list[float]
    errors: int
    recovery: float
    rss_before: int
    rss_after: int


def start(directory: Path, dsns: dict[str, str], stack: ExitStack) -> tuple[int, int]:
    port, process = start_dpgate(
        directory, dsns, stack, dict((ATTACKER, VICTIM)), "max_message_size = 1048576\n",
        environment={"DPGATE_BACKEND_PRIVATE_STATEMENT_TIMEOUT": str(PRIVATE_TIMEOUT)})
    return port, process.pid


def dsn(port: int, who: tuple[str, str]) -> str:
    return f"postgresql://{who[0]}:{who[1]}@127.0.0.1:{port}/{DATABASE}"


_numbers = itertools.count(1)


def victim_run(connection: psycopg.Connection, statement: str) -> float | None:
    """One victim request's seconds, or None when it failed."""
    started = time.perf_counter()
    try:
        connection.execute(statement.format(k=next(_numbers))).fetchone()
    except psycopg.Error:
        return None
    return time.perf_counter() - started


def victim_latencies(connection: psycopg.Connection, statement: str, runs: int,
                     seconds: float) -> tuple[list[float], int]:
    """Up to `runs` requests within about `seconds`: their latencies and the errors."""
    timings: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    while len(timings) + errors < runs and time.monotonic() < deadline:
        took = victim_run(connection, statement)
        if took is None:
            errors += 1
            time.sleep(0.01)
        else:
            timings.append(took)
    return timings, errors


def back_to_idle(connection: psycopg.Connection, statement: str, bound: float) -> float:
    """Seconds until five answers in a row come within `bound` (RECOVERY_CAP at most)."""
    started = time.monotonic()
    good = 0
    while good < 5:
        took = victim_run(connection, statement)
        good = good + 1 if took is not None and took <= bound else 0
        if time.monotonic() - started > RECOVERY_CAP:
            return float("inf")
        if took is None:
            time.sleep(0.01)
    return time.monotonic() - started


def attacking(port: int, attack: Callable[[str, threading.Event], None], sessions: int
              ) -> Callable[[], None]:
    """Start `sessions` loops of `attack` on threads; return the function that stops
    them (it returns when each attacker's last statement has returned)."""
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            try:
                attack(dsn(port, ATTACKER), stopping)
            except psycopg.Error:
                time.sleep(0.01)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(sessions)]
    for thread in threads:
        thread.start()

    def halt() -> None:
        stopping.set()
        for thread in threads:
            thread.join(timeout=120)
    return halt


def ask(sql: str | Callable[[], str], times: int = 1
        ) -> Callable[[str, threading.Event], None]:
    """An attack: one session asking `sql` (a text, or a function giving one) `times`,
    until told to stop."""
    def attack(conninfo: str, stopping: threading.Event) -> None:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            for _ in range(times):
                if stopping.is_set():
                    return
                try:
                    connection.execute(sql() if callable(sql) else sql)
                except psycopg.Error:
                    pass
    return attack


def flood(conninfo: str, stopping: threading.Event) -> None:
    held = []
    try:
        for _ in range(40):
            held.append(psycopg.connect(conninfo, autocommit=True))
    except psycopg.Error:
        pass
    time.sleep(0.5)
    for connection in held:
        connection.close()


def charges(conninfo: str, stopping: threading.Event) -> None:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        for index in range(50):
            if stopping.is_set():
                return
            connection.execute(f"SELECT count(*) FROM orders WHERE order_id > {index} "
                               f"AND quantity > {time.perf_counter_ns() % 10}")


def distinct_long_relayed() -> str:
    """A relayed statement of about 130 KB never asked before."""
    return f"SELECT length('{next(_numbers)}{'x' * 130_000}')"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss(pid: int) -> int:
    """The process's resident set in bytes (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def attacks() -> list[Attack]:
    self_join = ("SELECT count(*) FROM orders a JOIN orders b ON a.customer_id = b.customer_id"
                 " JOIN orders c ON b.customer_id = c.customer_id")
    return [
        Attack("200 KB statement (54000)", ask("SELECT count(*) FROM orders WHERE quantity = "
                                               + "+".join(["1"] * 100_000)), CACHED),
        Attack("5,000 nested parentheses (54001)", ask(
            "SELECT count(*) FROM orders WHERE " + "(" * 5000 + "quantity = 1"
            + ")" * 5000), CACHED),
        Attack("IN list of 9,000 numbers", ask(
            "SELECT count(*) FROM orders WHERE order_id IN ("
            + ", ".join(str(n) for n in range(9000)) + ")"), NEW_SHAPE),
        Attack("login flood (53300)", flood, CACHED),
        Attack("charges; victim: SHOW dp.budget", charges, BUDGET),
        Attack("8 × 65,000-term analyses", ask(
            "SELECT count(*) FROM orders WHERE order_id <> " + "+".join(["1"] * 65_000),
            times=1000), NEW_SHAPE, sessions=8),
        Attack("6 × 3-way self-joins (readers)", ask(
            "SET dp.epsilon = 0.001; " + self_join, times=1000), CACHED, sessions=6),
        Attack("distinct 130 KB relayed statements", ask(distinct_long_relayed, times=100000),
               CACHED, sessions=2),
    ]


def measure(port: int, pid: int, attack: Attack, runs: int, seconds: float) -> Row:
    with psycopg.connect(dsn(port, VICTIM), autocommit=True) as victim:
        for _ in range(5):  # warm: the victim's first plans, the attacker's nothing
            victim_run(victim, attack.victim)
        idle, idle_errors = victim_latencies(victim, attack.victim, runs, seconds)
        rss_before = rss(pid)
        assert attack.attack is not None
        halt = attacking(port, attack.attack, attack.sessions)
        time.sleep(0.5)
        attacked, errors = victim_latencies(victim, attack.victim, runs, seconds)
        halt()
        bound = 2 * percentile(idle, 0.99) + 0.005
        recovery = back_to_idle(victim, attack.victim, bound)
        return Row(attack.name, idle, attacked, errors + idle_errors, recovery, rss_before,
                   rss(pid))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="victim requests per phase")
    parser.add_argument("--seconds", type=float, default=15,
                        help="longest victim phase (idle or attacked), seconds")
    parser.add_argument("--only", default="", help="run the attacks whose name contains this")
    args = parser.parse_args()
    chosen = [a for a in attacks() if args.only.lower() in a.name.lower()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="dpgate-isolation-") as temporary, \
            ExitStack() as stack:
        directory = Path(temporary)
        port, pid = start(directory, demo_backend(directory, stack)[1], stack)
        for attack in chosen:
            print(f"{attack.name}…", flush=True)
            rows.append(measure(port, pid, attack, args.runs, args.seconds))
    print(f"\nvictim: up to {args.runs} requests per phase (at most {args.seconds:g} s); "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'attack':<36}{'victim':>8}{'idle p50/p99 ms':>18}{'attacked p50/p99 ms':>22}"
          f"{'p99 ratio':>10}{'errors':>8}{'idle in s':>10}{'RSS MB before→after':>22}")
    for attack, row in zip(chosen, rows, strict=True):
        kind = {CACHED: "cached", NEW_SHAPE: "new", BUDGET: "budget"}[attack.victim]
        idle = f"{statistics.median(row.idle) * 1e3:.1f}/{percentile(row.idle, .99) * 1e3:.1f}"
        attacked = (f"{statistics.median(row.attacked) * 1e3:.1f}/"
                    f"{percentile(row.attacked, .99) * 1e3:.1f}") if row.attacked else "none"
        ratio = percentile(row.attacked, .99) / percentile(row.idle, .99)
        recovery = f">{RECOVERY_CAP:g}" if row.recovery == float("inf") else \
            f"{row.recovery:.2f}"
        print(f"{row.name:<36}{kind:>8}{idle:>18}{attacked:>22}{ratio:>10.1f}{row.errors:>8}"
              f"{recovery:>10}{row.rss_before / 2**20:>12.0f}→{row.rss_after / 2**20:<9.0f}")


if __name__ == "__main__":
    main()
