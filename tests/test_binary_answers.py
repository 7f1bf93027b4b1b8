"""Answers in binary result format are encoded by dpgate for the common types
(proxy/engine/binary.py) and must be PostgreSQL's bytes exactly: each value here is
encoded both ways, by binary.py and by PostgreSQL's own send functions (backend.encode),
and a text PostgreSQL would read otherwise, or refuse, is left to PostgreSQL."""

from __future__ import annotations

import asyncio
import random

import pytest

from proxy.engine.binary import binary_rows
from proxy.pgwire.backend import BackendConnection, Endpoint
from tests.conftest import Postgres

pytestmark = pytest.mark.end_to_end

BOOL, INT2, INT4, INT8, FLOAT8, NUMERIC = 16, 21, 23, 20, 701, 1700
TEXT, BPCHAR, VARCHAR, DATE, TIMESTAMP = 25, 1042, 1043, 1082, 1114

_random = random.Random(27)
VALUES: dict[int, list[str]] = {
    BOOL: ["t", "f"],
    INT2: ["0", "-1", "32767", "-32768", "007"],
    INT4: ["0", "2147483647", "-2147483648", "51498"],
    INT8: ["0", "-5", "9223372036854775807", "-9223372036854775808"]
    + [str(_random.randint(-2 ** 63, 2 ** 63 - 1)) for _ in range(20)],
    FLOAT8: ["0", "-0", "1.5", "1e-05", "3.141592653589793", "1e300", "-1.7976931348623157e+308",
             "Infinity", "-Infinity", "NaN", "2.2250738585072014e-308", "5e-324", "0.1",
             ".5", "5.", "1E10", "455.8372569662879"]
    + [repr(_random.uniform(-1e6, 1e6)) for _ in range(20)],
    NUMERIC: ["0", "0.00", "-0.5", "1.50", "123456789.123456789", "10000", "0.0001",
              "-0.00010", "99999999", "100000000", "34.8387283070081719", "000123.4000",
              "1" + "0" * 100, "0." + "0" * 30 + "7", "-9999.9999"]
    + [f"{_random.randint(-10 ** 12, 10 ** 12)}.{_random.randint(0, 10 ** 8):08d}"
       for _ in range(20)],
    TEXT: ["", "héllo", "a'b", "United States"],
    BPCHAR: ["ab  ", "x"],
    VARCHAR: ["naïve"],
    DATE: ["2000-01-01", "1999-12-31", "2024-02-29", "0001-01-01", "9999-12-31", "1970-01-01"],
    TIMESTAMP: ["2000-01-01 00:00:00", "2024-03-01 12:34:56.789", "1970-01-01 00:00:00.000001",
                "1900-06-30 23:59:59.5", "0001-01-01 00:00:00", "2025-01-01 00:00:00"],
}
# Texts binary.py must leave to PostgreSQL: another spelling, or out of the type's range.
LEFT_TO_POSTGRESQL = [(INT2, "32768"), (INT4, " 1"), (INT8, "1_000"), (INT8, "+1"),
                      (FLOAT8, "1e400"), (FLOAT8, "1e-400"), (FLOAT8, "inf"),
                      (FLOAT8, "1_0.5"), (NUMERIC, "NaN"), (NUMERIC, "1e3"),
                      (BOOL, "true"), (DATE, "2024-02-30"), (DATE, "infinity"),
                      (DATE, "0044-03-15 BC"), (TIMESTAMP, "2024-01-01T00:00:00"),
                      (1184, "2024-01-01 00:00:00+00"), (700, "1.5")]


def _encode(postgres: Postgres, rows: list[list[str | None]], types: list[int],
            formats: list[int]) -> list[bytes]:
    async def run() -> list[bytes]:
        backend = await BackendConnection.connect(Endpoint.from_dsn(postgres.admin_dsn))
        try:
            return await backend.encode(rows, types, formats)
        finally:
            backend.close()
    return asyncio.run(run())


@pytest.mark.parametrize("type_oid", sorted(VALUES))
def test_each_value_is_postgresqls_bytes(postgres: Postgres, type_oid: int) -> None:
    rows: list[list[str | None]] = [[value] for value in VALUES[type_oid]] + [[None]]
    ours = binary_rows(rows, [type_oid], [1])
    assert ours is not None
    assert ours == _encode(postgres, rows, [type_oid], [1])


def test_mixed_formats_per_column(postgres: Postgres) -> None:
    rows: list[list[str | None]] = [["2024-01-01", "12", "3.5"], [None, "-7", "0.25"]]
    types, formats = [DATE, INT8, NUMERIC], [1, 0, 1]
    ours = binary_rows(rows, types, formats)
    assert ours is not None
    assert ours == _encode(postgres, rows, types, formats)


@pytest.mark.unit
@pytest.mark.parametrize("type_oid, text", LEFT_TO_POSTGRESQL)
def test_texts_read_otherwise_are_left_to_postgresql(type_oid: int, text: str) -> None:
    assert binary_rows([["1"], [text]], [type_oid], [1]) is None
    assert binary_rows([[text]], [type_oid], [0]) is not None  # text format: as it is
