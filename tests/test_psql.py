"""psql's meta-commands through dpgate: schema browsing works, \\copy is refused cleanly."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import RunningProxy

pytestmark = pytest.mark.end_to_end


def psql(proxy: RunningProxy, *commands: str) -> subprocess.CompletedProcess:
    args = ["psql", proxy.dsn("alice"), "-X", "-v", "ON_ERROR_STOP=1"]
    for command in commands:
        args += ["-c", command]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(("command", "expected"), [
    (r"\l", "dpgate_e2e"),
    (r"\dt", "recommendations"),
    (r"\d orders", "orders_customer_id_fkey"),
    (r"\d+ orders", "order_cost"),
    (r"\dn", "public"),
    (r"\df now", "timestamp with time zone"),
    (r"\di", "orders_pkey"),
    (r"\dt+", "customers"),  # sizes come back NULL: they would reveal row counts
    (r"\l+", "dpgate_e2e"),
    (r"\dp orders", "dpgate_relay"),
    (r"\conninfo", 'database "dpgate_e2e" as user "alice"'),
])
def test_schema_browsing_meta_commands(proxy: RunningProxy, command: str, expected: str):
    result = psql(proxy, command)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def test_expanded_display_of_a_private_count(proxy: RunningProxy):
    result = psql(proxy, r"\x", "SELECT count(*) FROM orders WHERE product_id = 70")
    assert result.returncode == 0, result.stderr
    assert "-[ RECORD 1 ]" in result.stdout and "count |" in result.stdout


@pytest.mark.parametrize("command", [
    r"\copy orders to stdout",
    r"\copy (select count(*) from orders) to stdout",
    r"\copy products from stdin",
])
def test_copy_is_refused_cleanly_and_psql_goes_on(proxy: RunningProxy, command: str):
    args = ["psql", proxy.dsn("alice"), "-X", "-c", command, "-c", "SELECT 42 AS after"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False,
                            input="")
    assert "COPY is refused" in result.stderr
    assert "42" in result.stdout  # the session survived the refusal
