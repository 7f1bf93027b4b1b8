"""Tests for proxy.demo.demo_data against a real (embedded) PostgreSQL server."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from proxy.demo.demo_data import COUNTRIES, DEMO_TABLES, load_demo_dataset
from tests.conftest import Postgres

pytestmark = pytest.mark.end_to_end

EXPECTED_COUNTS = {"customers": 10_000, "products": 1_000, "orders": 100_000}


@dataclass(frozen=True)
class LoadedDemo:
    """A database the demo dataset was loaded into, with how that first load went."""

    uri: str
    first_result: bool
    seconds: float


@pytest.fixture(scope="module")
def demo_db(postgres: Postgres) -> LoadedDemo:
    """A fresh database `demo_test` with the demo dataset loaded once."""
    uri = postgres.create_database("demo_test")
    start = time.perf_counter()
    first_result = load_demo_dataset(uri)
    return LoadedDemo(uri, first_result, time.perf_counter() - start)


def _scalar(uri: str, sql: str) -> Any:
    with psycopg.connect(uri) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


def _counts(uri: str) -> dict[str, int]:
    return {table: _scalar(uri, f"SELECT count(*) FROM public.{table}") for table in DEMO_TABLES}


def _checksums(uri: str) -> list[tuple[Any, ...] | None]:
    queries = (
        (
            "SELECT sum(customer_id::bigint * product_id), sum(order_id::bigint * quantity), "
            "sum(order_cost), md5(string_agg(order_date::text, ',' ORDER BY order_id)) FROM orders"
        ),
        "SELECT md5(string_agg(name || address, ',' ORDER BY customer_id)) FROM customers",
        "SELECT md5(string_agg(name || category || price, ',' ORDER BY product_id)) FROM products",
        "SELECT count(*), sum(customer_id::bigint * product_id) FROM recommendations",
    )
    with psycopg.connect(uri) as conn:
        return [conn.execute(query).fetchone() for query in queries]


def test_first_load_reports_loaded_and_is_fast(demo_db: LoadedDemo) -> None:
    assert demo_db.first_result is True
    assert demo_db.seconds < 15, f"loading took {demo_db.seconds:.1f}s"


def test_row_counts(demo_db: LoadedDemo) -> None:
    counts = _counts(demo_db.uri)
    for table, expected in EXPECTED_COUNTS.items():
        assert counts[table] == expected, table
    assert 25_000 <= counts["recommendations"] <= 35_000


def test_ids_are_dense(demo_db: LoadedDemo) -> None:
    with psycopg.connect(demo_db.uri) as conn:
        for table, column, expected in (
            ("customers", "customer_id", 10_000),
            ("products", "product_id", 1_000),
            ("orders", "order_id", 100_000),
        ):
            sql = f"SELECT min({column}), max({column}), count(DISTINCT {column}) FROM {table}"
            assert conn.execute(sql).fetchone() == (1, expected, expected), table


def test_orders_per_customer_capped_at_exactly_50(demo_db: LoadedDemo) -> None:
    per_customer = (
        "SELECT c.customer_id, count(o.order_id) AS n FROM customers c "
        "LEFT JOIN orders o USING (customer_id) GROUP BY c.customer_id"
    )
    assert _scalar(demo_db.uri, f"SELECT max(n) FROM ({per_customer}) t") == 50
    zero = _scalar(demo_db.uri, f"SELECT count(*) FROM ({per_customer}) t WHERE n = 0")
    assert 100 <= zero <= 1_000


def test_product_1_order_count(demo_db: LoadedDemo) -> None:
    assert 100 <= _scalar(demo_db.uri, "SELECT count(*) FROM orders WHERE product_id = 1") <= 400


def test_product_popularity_is_skewed(demo_db: LoadedDemo) -> None:
    top = _scalar(
        demo_db.uri,
        "SELECT max(n) FROM (SELECT count(*) AS n FROM orders GROUP BY product_id) t",
    )
    # Uniform popularity would give about 100 orders per product.
    assert top > 1_000


def test_order_values(demo_db: LoadedDemo) -> None:
    bad = _scalar(
        demo_db.uri,
        "SELECT count(*) FROM orders o JOIN products p USING (product_id) "
        "WHERE o.order_cost <> o.quantity * p.price OR o.quantity NOT BETWEEN 1 AND 10 "
        "OR o.order_date NOT BETWEEN '2024-01-01' AND '2025-12-31'",
    )
    assert bad == 0


def test_addresses_end_in_a_country(demo_db: LoadedDemo) -> None:
    with psycopg.connect(demo_db.uri) as conn:
        addresses = [row[0] for row in conn.execute("SELECT address FROM customers")]
    assert all(address.endswith(tuple(f", {c}" for c in COUNTRIES)) for address in addresses)
    us_share = sum(address.endswith("United States") for address in addresses) / len(addresses)
    assert 0.30 <= us_share <= 0.37
    # The other countries are all represented too.
    assert {address.rsplit(", ", 1)[1] for address in addresses} == set(COUNTRIES)


def test_constraints_and_indexes(demo_db: LoadedDemo) -> None:
    with psycopg.connect(demo_db.uri) as conn:
        indexed = {
            row[0]
            for row in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' "
                "AND tablename = 'orders'"
            )
        }
        foreign_keys = conn.execute(
            "SELECT count(*) FROM pg_constraint WHERE contype = 'f' "
            "AND connamespace = 'public'::regnamespace"
        ).fetchone()
    assert any(d.endswith("(customer_id)") for d in indexed)
    assert any(d.endswith("(product_id)") for d in indexed)
    assert any(d.endswith("(order_id)") for d in indexed)
    assert foreign_keys == (4,)


def test_second_load_is_a_noop(demo_db: LoadedDemo) -> None:
    before = _counts(demo_db.uri)
    assert load_demo_dataset(demo_db.uri) is False
    assert _counts(demo_db.uri) == before


def test_load_is_deterministic(postgres: Postgres, demo_db: LoadedDemo) -> None:
    other_uri = postgres.create_database("demo_test_copy")
    assert load_demo_dataset(other_uri) is True
    assert _checksums(other_uri) == _checksums(demo_db.uri)


def test_partial_schema_fails_without_changes(postgres: Postgres) -> None:
    uri = postgres.create_database("demo_test_partial")
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id integer)")
    with pytest.raises(psycopg.errors.DuplicateTable):
        load_demo_dataset(uri)
    # The failed load rolled back as a whole: only the pre-existing table is there.
    tables = _scalar(
        uri, "SELECT array_agg(tablename::text) FROM pg_tables WHERE schemaname = 'public'"
    )
    assert tables == ["customers"]
