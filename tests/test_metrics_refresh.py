"""`dpgate metrics refresh` measures over an asyncpg pool (proxy/admin/metrics_refresh.py):
the same maxFreq as one psycopg query per column, whatever the number of connections,
every column reported once, and a failing measure is an error, not a partial store."""

from __future__ import annotations

import asyncio

import asyncpg
import psycopg
import pytest

from accounting import Metric
from proxy.admin.metrics_refresh import refresh_metrics
from tests.conftest import DemoDatabase, Postgres
from tests.unit_support import measured_metrics

pytestmark = pytest.mark.end_to_end

TABLES = ("public.orders", "public.customers", "public.recommendations")


@pytest.mark.parametrize("connections", [1, 4])
def test_every_column_is_measured_as_postgresql_counts_it(demo_database: DemoDatabase,
                                                          connections: int) -> None:
    expected = measured_metrics(demo_database.admin_dsn)
    reported: list[tuple[int, int, str]] = []

    def progress(done: int, total: int, metric: Metric, seconds: float) -> None:
        reported.append((done, total, f"{metric.table}.{metric.column}"))

    # A stored metric of a table outside the policy is measured again too.
    stored = [("public.products", "category")]
    measured = asyncio.run(refresh_metrics(demo_database.reader_dsn, TABLES, stored,
                                           progress, connections))
    wanted = sorted({(t, c) for t in TABLES for c in expected.columns[t]} | set(stored))
    assert [(m.table, m.column) for m in measured] == wanted
    assert {(m.table, m.column): m.max_freq for m in measured} == \
        {key: expected.max_freq[key] for key in wanted}
    assert [done for done, _, _ in reported] == list(range(1, len(wanted) + 1))
    assert {total for _, total, _ in reported} == {len(wanted)}
    assert sorted(name for _, _, name in reported) == sorted(f"{t}.{c}" for t, c in wanted)


def test_a_column_postgresql_cannot_group_fails_the_refresh(postgres: Postgres) -> None:
    dsn = postgres.create_database("dpgate_metrics_refresh")
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE events (id int, payload json)")
        connection.execute("INSERT INTO events VALUES (1, '{}'), (2, '{}')")
    with pytest.raises(asyncpg.PostgresError, match="equality operator"):
        asyncio.run(refresh_metrics(dsn, ["public.events"], [], lambda *_: None, 2))
