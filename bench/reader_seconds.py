"""What flooding the readers with statements that run to their timeout costs an analyst,
with and without the account of reader-seconds (proxy/engine/reader_time.py).

    .venv/bin/python -m bench.reader_seconds [--seconds 90] [--timeout 5]

Issue 24's attack: 6 sessions of one analyst looping on a legal 3-way self-join at
ε 0.001, which runs until backend.private_statement_timeout. For each setting of
backend.reader_seconds_per_minute (0: no account; 30: the default) on one embedded
PostgreSQL with the demo dataset, it prints what the attacker got in the run: statements
that held a reader to the timeout (22000), statements refused before taking one (53000),
the reader-seconds it held per minute, and the ε it spent.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import psycopg

from accounting import SqliteLedger
from bench.clients import demo_backend, start_dpgate
from bench.isolation import ATTACKER, dsn

SESSIONS = 6
SELF_JOIN = ("SELECT count(*) FROM orders a JOIN orders b ON a.customer_id = b.customer_id"
             " JOIN orders c ON b.customer_id = c.customer_id")


def attacker(port: int, sql: str, seconds: float, outcomes: Counter[str]) -> None:
    deadline = time.monotonic() + seconds
    with psycopg.connect(dsn(port, ATTACKER), autocommit=True) as connection:
        while time.monotonic() < deadline:
            try:
                connection.execute(sql)
                outcomes["answered"] += 1
            except psycopg.Error as error:
                outcomes[error.sqlstate or "?"] += 1
                if error.sqlstate == "53000":
                    time.sleep(0.5)  # as a client told to wait might; not required


def run(directory: Path, dsns: dict[str, str], per_minute: float, timeout: float,
        seconds: float) -> tuple[Counter[str], float]:
    with ExitStack() as stack:
        port, _ = start_dpgate(
            directory, dsns, stack, dict((ATTACKER,)), environment={
                "DPGATE_BACKEND_PRIVATE_STATEMENT_TIMEOUT": str(timeout),
                "DPGATE_BACKEND_READER_SECONDS_PER_MINUTE": str(per_minute)})
        outcomes: Counter[str] = Counter()
        sql = "SET dp.epsilon = 0.001; " + SELF_JOIN
        threads = [threading.Thread(target=attacker, args=(port, sql, seconds, outcomes))
                   for _ in range(SESSIONS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    # start_dpgate's ledger
    spent = SqliteLedger(directory / "ledger" / "ledger.sqlite3").budget(ATTACKER[0]).epsilon_spent
    return outcomes, spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90, help="attack length per setting")
    parser.add_argument("--timeout", type=float, default=5,
                        help="backend.private_statement_timeout for the run")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dpgate-reader-seconds-") as temporary, \
            ExitStack() as stack:
        directory = Path(temporary)
        _, dsns = demo_backend(directory, stack)
        for per_minute in (0.0, 30.0):
            print(f"reader_seconds_per_minute = {per_minute:g}…", flush=True)
            run_directory = directory / f"run-{per_minute:g}"
            run_directory.mkdir()
            rows.append((per_minute, *run(run_directory, dsns, per_minute, args.timeout,
                                          args.seconds)))
    print(f"\n{SESSIONS} attacker sessions for {args.seconds:g} s, private_statement_timeout "
          f"{args.timeout:g} s, 4 readers; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'per minute':>10}{'timed out':>11}{'refused':>9}{'answered':>10}"
          f"{'reader-s/min':>14}{'epsilon':>9}")
    for per_minute, outcomes, spent in rows:
        held = outcomes["22000"] * args.timeout / (args.seconds / 60)
        print(f"{per_minute:>10g}{outcomes['22000']:>11}{outcomes['53000']:>9}"
              f"{outcomes['answered']:>10}{held:>14.1f}{spent:>9.3f}")


if __name__ == "__main__":
    main()
