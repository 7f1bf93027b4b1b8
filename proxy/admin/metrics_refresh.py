"""`dpgate metrics refresh`: maxFreq of every column measured again, several at a time.

The measure is FLEX's GROUP BY query per column (rewriter/sensitivity/metrics.py), each a full scan
of its table, so a refresh of a wide schema is many independent queries. They run over
an asyncpg pool of a few connections, so PostgreSQL works on several columns at once
(on as many cores as it has), and each column is reported when it is done. The proxy's
own on-demand measuring (engine/knowledge.py) stays on its reader pool: one column, when
a join first needs it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import asyncpg

from accounting import Metric
from rewriter.sensitivity.metrics import ColumnKey, max_freq_query

from ..engine.knowledge import CATALOG_QUERY
from ..pgwire.backend import Endpoint

# Connections measuring at once: more than PostgreSQL's cores only queue up there.
CONNECTIONS = 4
# Told of each column as it is measured: (done, total, metric, seconds its query took).
Progress = Callable[[int, int, Metric, float], None]


async def refresh_metrics(dsn: str, tables: Iterable[str], stored: Iterable[ColumnKey],
                          progress: Progress, connections: int = CONNECTIONS
                          ) -> list[Metric]:
    """maxFreq of every column of `tables` and of every `stored` metric's column, in
    column order; raises asyncpg.PostgresError if a measure fails."""
    endpoint = Endpoint.from_dsn(dsn)
    async with asyncpg.create_pool(
            host=endpoint.host, port=endpoint.port, user=endpoint.user,
            password=endpoint.password, database=endpoint.database,
            min_size=1, max_size=max(1, connections),
            server_settings={"application_name": "dpgate-metrics"}) as pool:
        catalog = await pool.fetch(CATALOG_QUERY)
        policy_tables = set(tables)
        wanted = set(stored) | {(row[0], row[1]) for row in catalog
                                if row[0] in policy_tables}
        return await measure_all(pool, sorted(wanted), progress)


async def measure_all(pool: asyncpg.Pool, columns: list[ColumnKey], progress: Progress
                      ) -> list[Metric]:
    """Every column's maxFreq, at most the pool's size at once; the first failure
    cancels the rest."""
    async def one(table: str, column: str) -> tuple[Metric, float]:
        async with pool.acquire() as connection:
            started = time.monotonic()
            value = await connection.fetchval(max_freq_query(table, column))
            seconds = time.monotonic() - started
        return Metric(table, column, int(value or 0),
                      datetime.now(UTC).isoformat(timespec="seconds")), seconds

    tasks = [asyncio.ensure_future(one(table, column)) for table, column in columns]
    measured: list[Metric] = []
    try:
        for done, finished in enumerate(asyncio.as_completed(tasks), start=1):
            metric, seconds = await finished
            measured.append(metric)
            progress(done, len(columns), metric, seconds)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    order = {key: index for index, key in enumerate(columns)}
    return sorted(measured, key=lambda m: order[(m.table, m.column)])
