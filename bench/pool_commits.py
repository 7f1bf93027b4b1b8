"""Fresh private answers per second with a small reader pool: does a session's ledger
commit keep the others from PostgreSQL?

    .venv/bin/python bench/pool_commits.py --data-dir ~/.local/share/dpgate \
        [--sessions 8] [--pools 1,4] [--seconds 5] [--dpgate-root PATH]

In one process, SESSIONS analysts' engines (proxy/engine, as `dpgate serve` builds them)
ask fresh counts (`SELECT count(*) FROM orders WHERE product_id = P AND quantity >= Q`,
a new (P, Q) each time) for SECONDS against the demo database of a `dpgate demo` data
folder, sharing one reader pool of each size in POOLS and one SQLite ledger (WAL,
synchronous=FULL) in a temporary folder beside the data. It prints answers per second
per pool size. `--dpgate-root` measures another checkout's engine (for example the one
before the pool stopped being held across commits) with this same script.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def throughput(config, ledger, sessions: int, seconds: float) -> float:
    from accounting import Analyst, ScramVerifier
    from mechanisms.random_source import SecureRandomSource
    from proxy.engine.dispatch import Engine
    from proxy.engine.knowledge import Knowledge
    from proxy.engine.outcome import Answer
    from proxy.engine.plan_cache import PlanCache
    from proxy.engine.plan_check import PlanChecker
    from proxy.engine.planning import Planner
    from proxy.engine.workers import Workers
    from proxy.pgwire.backend import BackendPool, Endpoint
    from proxy.pgwire.running import Running

    pool = BackendPool(Endpoint.from_dsn(config.backend.dsn), config.backend.pool_size)
    workers = Workers()
    planner = Planner(config, Knowledge(ledger), PlanCache(), pool, workers)
    checker = PlanChecker(config.policy)
    questions = itertools.product(range(1, 1001), range(1, 11), range(10**6))
    answered = 0

    async def session(index: int) -> None:
        nonlocal answered
        name = f"bench{index}_{time.monotonic_ns()}"
        analyst = Analyst(name, ScramVerifier(b"s", b"k", b"k", 4096), 1e12, 1.0, 1.0)
        await asyncio.to_thread(ledger.add_analyst, analyst)
        engine = Engine(analyst, config, ledger, pool, SecureRandomSource(), planner,
                        checker, workers, Running())
        while time.monotonic() < deadline:
            product, quantity, extra = next(questions)
            sql = (f"SELECT count(*) FROM orders WHERE product_id = {product} "
                   f"AND quantity >= {quantity} AND order_id > {-extra}")
            [statement] = await engine.statements(sql)
            outcome = await engine.execute(sql, statement.plan)
            assert isinstance(outcome, Answer), outcome
            answered += 1

    # Warm the catalog and the plan shapes before timing.
    deadline = time.monotonic() + 1
    await session(-1)
    answered = 0
    started = time.monotonic()
    deadline = started + seconds
    try:
        await asyncio.gather(*(session(i) for i in range(sessions)))
    finally:
        pool.close()
        workers.close()
    return answered / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="a `dpgate demo` data folder")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--pools", default="1,4", help="reader pool sizes to measure")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--dpgate-root", type=Path, default=ROOT)
    args = parser.parse_args()
    sys.path.insert(0, str(args.dpgate_root.resolve()))

    from dataclasses import replace

    from psycopg.conninfo import make_conninfo

    from accounting import SqliteLedger
    from proxy.config import BackendSettings, Config, PrivacySettings, load_policy_file
    from proxy.demo.demo import (
        DEMO_DATABASE,
        DEMO_POLICY_FILE,
        start_embedded_postgres,
    )

    server, admin = start_embedded_postgres(Path(args.data_dir) / "pgdata")
    try:
        dsn = make_conninfo(admin, dbname=DEMO_DATABASE)
        print(f"engine of {args.dpgate_root.resolve()}; {args.sessions} sessions, "
              f"{args.seconds:g} s each")
        for size in (int(s) for s in args.pools.split(",")):
            config = replace(Config(), backend=BackendSettings(dsn=dsn, pool_size=size),
                             privacy=replace(PrivacySettings(), default_epsilon=0.01),
                             policy=load_policy_file(DEMO_POLICY_FILE))
            with tempfile.TemporaryDirectory(dir=args.data_dir) as folder:
                ledger = SqliteLedger(Path(folder) / "ledger.sqlite3")
                rate = asyncio.run(throughput(config, ledger, args.sessions, args.seconds))
            print(f"pool of {size}: {rate:7.1f} fresh answers/s")
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
