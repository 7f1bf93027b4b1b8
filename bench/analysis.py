"""How long dpgate's query analysis takes, beside the time PostgreSQL needs for the query.

    .venv/bin/python bench/analysis.py [--dsn postgresql://…] [--runs 300]

Measures, for a typical 3-way join with filters: the cold analysis (parse, FLEX analysis,
rewrite: `classify`), the calibration (smooth-sensitivity scan), the same through the
plan cache, and PostgreSQL running the rewritten query. Without --dsn it starts an embedded
PostgreSQL (pgserver) with the demo dataset in a temporary directory.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from proxy.config import load_policy_file
from proxy.engine.plan_cache import PlanCache, calibrate_cached
from rewriter.analysis.classify import classify
from rewriter.plan import PrivateAggregate
from rewriter.sensitivity.calibrate import calibrate
from rewriter.sensitivity.metrics import Metrics

POLICY = load_policy_file(Path(__file__).parents[1] / "tests" / "data" /
                          "reference_policy.toml")
QUERY = ("SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
         "JOIN recommendations r ON r.customer_id = c.customer_id "
         "WHERE o.quantity BETWEEN 2 AND 5 AND o.order_date >= '2024-06-01' "
         "AND lower(c.address) LIKE '%paris%'")


def median_seconds(work: Callable[[], object], runs: int) -> float:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def postgres_seconds(dsn: str, sql: str, runs: int) -> float:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(sql)  # warm the buffers
        return median_seconds(lambda: connection.execute(sql).fetchall(), runs)


def embedded_dsn(directory: str) -> tuple[object, str]:
    import pgserver

    from proxy.demo.demo_data import load_demo_dataset

    server = pgserver.get_server(Path(directory) / "pgdata", cleanup_mode="stop")
    print("loading the demo dataset into an embedded PostgreSQL…", flush=True)
    load_demo_dataset(server.get_uri())
    return server, server.get_uri()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="a PostgreSQL with the demo dataset (default: embedded)")
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()

    metrics = Metrics()
    (statement,) = classify(QUERY, POLICY, metrics)
    plan = statement.plan
    assert isinstance(plan, PrivateAggregate), plan
    cache = PlanCache()
    cache.put((QUERY, metrics.version), [statement])

    cold = median_seconds(lambda: classify(QUERY, POLICY, metrics), args.runs)
    calibration = median_seconds(lambda: calibrate(plan, 0.1, 1e-8), args.runs)
    calibrate_cached(plan, 0.1, 1e-8)
    warm = median_seconds(lambda: (cache.get((QUERY, metrics.version)),
                                   calibrate_cached(plan, 0.1, 1e-8)), args.runs * 10)

    with tempfile.TemporaryDirectory() as directory:
        server = None
        dsn = args.dsn
        if dsn is None:
            server, dsn = embedded_dsn(directory)
        try:
            database = postgres_seconds(dsn, plan.sql, max(10, args.runs // 10))
        finally:
            if server is not None:
                server.cleanup()  # type: ignore[attr-defined]

    print(f"\nquery: {QUERY}\n")
    print(f"{'step':<38} {'median µs':>12} {'vs PostgreSQL':>14}")
    for name, seconds in [("analysis, cold (parse+FLEX+rewrite)", cold),
                          ("calibration, cold (smooth scan)", calibration),
                          ("analysis+calibration, plan cache", warm),
                          ("PostgreSQL runs the rewritten query", database)]:
        print(f"{name:<38} {seconds * 1e6:>12.1f} {seconds / database:>13.3f}x")


if __name__ == "__main__":
    main()
