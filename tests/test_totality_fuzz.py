"""The list of expressions dpgate evaluates on private rows is proven total, not asserted.

A bounded, seeded run of bench/totality_fuzz.py (the long one: `make fuzz`): generated
expressions whose operands differ on one row only, planned by dpgate and run on
PostgreSQL over a table of extreme values. None that dpgate accepts may fail there.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from bench.totality_fuzz import (
    STRUCTURAL,
    TEMPLATES,
    Report,
    covered_nodes,
    create_table,
    fuzz,
)
from rewriter.sql.functions import ROW_SAFE_NODES
from tests.conftest import Postgres

pytestmark = pytest.mark.end_to_end


@pytest.fixture(scope="module")
def fuzz_database(postgres: Postgres) -> Iterator[psycopg.Connection]:
    with psycopg.connect(postgres.create_database("dpgate_fuzz"), autocommit=True) as connection:
        connection.execute("SET statement_timeout = '5s'")
        create_table(connection)
        yield connection


@pytest.fixture(scope="module")
def report(fuzz_database: psycopg.Connection) -> Report:
    return fuzz(fuzz_database, count=4 * len(TEMPLATES), seed=23)


def test_every_node_on_the_list_has_a_generator():
    missing = set(ROW_SAFE_NODES) - covered_nodes() - STRUCTURAL
    assert not missing, f"add a template to bench/totality_fuzz.py for {missing}"


def test_nothing_dpgate_accepts_fails_on_postgresql(report: Report):
    print("\n".join(report.lines()))
    assert report.accepted > report.expressions // 3  # the fuzzer reaches PostgreSQL
    assert not report.failures, "\n".join(report.lines())


def test_the_fuzzer_finds_what_postgresql_fails_on(report: Report):
    """Without dpgate the same expressions fail: arrays of other shapes, date_trunc at the
    ends of its range, casts to numeric(p, s) of larger values. A fuzzer that found nothing
    here would prove nothing above."""
    for node in ("Array", "DPipe", "TimestampTrunc", "Cast"):
        assert report.raw_failed[node] > 0, node
