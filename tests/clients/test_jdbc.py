"""pgjdbc (the PostgreSQL JDBC driver of DBeaver, Metabase and most Java tools) through
dpgate: a small Java program in single-file source mode, driven by pytest."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.clients.conftest import DEMO_TABLES, Analyst, assert_noisy

pytestmark = pytest.mark.end_to_end

JAVA_DIR = Path(__file__).with_name("java")
PGJDBC_JAR = Path("/usr/share/java/postgresql.jar")  # Debian's libpostgresql-jdbc-java


def run_java(program: str, analyst: Analyst, *args: str, stdin: str | None = None
             ) -> subprocess.CompletedProcess:
    assert PGJDBC_JAR.exists(), "apt-get install libpostgresql-jdbc-java (.ci/run does)"
    result = subprocess.run(
        ["java", "-cp", str(PGJDBC_JAR), str(JAVA_DIR / program), analyst.jdbc_url,
         analyst.name, analyst.password, *args],
        input=stdin, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_pgjdbc_metadata_prepared_statements_fetch_size_and_errors(analyst: Analyst,
                                                                    true_count):
    product = 161
    output = run_java("ClientCheck.java", analyst, str(product)).stdout
    checks = dict(line.split("=", 1) for line in output.splitlines())
    assert checks["product"].startswith("PostgreSQL ")
    assert DEMO_TABLES <= set(checks["tables"].split(","))
    assert checks["columns"].split(",") == ["order_id", "customer_id", "product_id",
                                            "quantity", "order_cost", "order_date"]
    assert checks["primary_key"] == "order_id"
    counts = [int(value) for value in checks["counts"].split(",")]
    assert len(counts) == 7
    assert_noisy(counts[0], true_count(product))
    assert set(counts) == {counts[0]}  # the same question gets the stored answer
    assert checks["refused"] == "42501"
    assert checks["after_refusal"] == "42"
    assert checks["fetched"] == f"1000,{sum(range(1, 1001))}"
