"""`dpgate metrics refresh`'s measuring, before and after it moved to an asyncpg pool.

Measures maxFreq of every column of the demo's private tables (and products) three ways,
each `--runs` times, and prints the median wall time of each and their ratios:

- one column after the other over dpgate's own protocol client (BackendConnection), as
  `metrics refresh` did before;
- proxy/admin/metrics_refresh.py with an asyncpg pool of one connection;
- the same with `--connections` connections (default 4), as `metrics refresh` does now.

    .venv/bin/python bench/metrics_refresh.py --data-dir ~/.local/share/dpgate [--runs 5]
    .venv/bin/python bench/metrics_refresh.py --dsn postgresql://…/demo

With --data-dir it starts (or reuses) the embedded PostgreSQL of a `dpgate demo` data
folder. PostgreSQL's start and the ledger's write are not timed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.admin.metrics_refresh import refresh_metrics  # noqa: E402
from proxy.demo.demo import DEMO_DATABASE, PRIVATE_TABLES, PUBLIC_TABLES  # noqa: E402
from proxy.engine.knowledge import CATALOG_QUERY  # noqa: E402
from proxy.pgwire.backend import BackendConnection, Endpoint  # noqa: E402
from rewriter.sensitivity.metrics import max_freq_query  # noqa: E402


async def sequential(dsn: str, tables: set[str]) -> int:
    """The previous `metrics refresh`: one connection, one column after the other."""
    backend = await BackendConnection.connect(Endpoint.from_dsn(dsn))
    try:
        rows = (await backend.fetch(CATALOG_QUERY)).rows
        columns = sorted({(t.decode(), c.decode()) for t, c, *_ in rows
                          if t is not None and c is not None and t.decode() in tables})
        for table, column in columns:
            await backend.fetch(max_freq_query(table, column))
        return len(columns)
    finally:
        backend.close()


async def pooled(dsn: str, tables: set[str], connections: int) -> int:
    return len(await refresh_metrics(dsn, tables, [], lambda *_: None, connections))


def timed(make, runs: int) -> tuple[float, int]:
    seconds, count = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        count = asyncio.run(make())
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dsn", help="the demo database")
    source.add_argument("--data-dir", help="a `dpgate demo` data folder")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()
    server = None
    dsn = args.dsn
    if args.data_dir:
        from proxy.demo.demo import start_embedded_postgres

        server, admin = start_embedded_postgres(Path(args.data_dir) / "pgdata")
        dsn = make_conninfo(admin, dbname=DEMO_DATABASE)
    tables = {f"public.{t}" for t in (*PRIVATE_TABLES, *PUBLIC_TABLES)}
    try:
        timed(lambda: sequential(dsn, tables), 1)  # warm the caches once
        before, columns = timed(lambda: sequential(dsn, tables), args.runs)
        one, _ = timed(lambda: pooled(dsn, tables, 1), args.runs)
        many, _ = timed(lambda: pooled(dsn, tables, args.connections), args.runs)
    finally:
        if server is not None:
            server.cleanup()
    print(f"{columns} columns, median of {args.runs} runs")
    print(f"before: sequential, BackendConnection   {before * 1000:8.1f} ms")
    print(f"asyncpg pool, 1 connection              {one * 1000:8.1f} ms  "
          f"({before / one:.2f}× before)")
    print(f"asyncpg pool, {args.connections} connections             {many * 1000:8.1f} ms  "
          f"({before / many:.2f}× before)")


if __name__ == "__main__":
    main()
