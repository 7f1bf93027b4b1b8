"""Helpers of the privacy-unit tests and bench/accuracy.py: metrics measured on a real
PostgreSQL (as the proxy measures them) and the demo policy with or without its unit."""

from __future__ import annotations

import dataclasses

import psycopg

from proxy.config import load_policy_file
from proxy.demo.demo import DEMO_POLICY_FILE
from rewriter.policy.model import Policy
from rewriter.sensitivity.metrics import Metrics, max_freq_query


def measured_metrics(conninfo: str, schema: str = "public") -> Metrics:
    """Column names, types and maxFreq of every column of the schema's tables."""
    with psycopg.connect(conninfo) as connection:
        rows = connection.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s ORDER BY table_name, ordinal_position", (schema,)
        ).fetchall()
        columns: dict[str, list[str]] = {}
        types = {}
        max_freq = {}
        for table, column, kind in rows:
            key = f"{schema}.{table}"
            columns.setdefault(key, []).append(column)
            types[(key, column)] = kind
            (value,) = connection.execute(max_freq_query(key, column)).fetchone()
            max_freq[(key, column)] = int(value)
    return Metrics(max_freq, {t: tuple(c) for t, c in columns.items()}, types)


def demo_policy(unit: bool = True, shape_times_total: bool = False) -> Policy:
    """The shipped demo policy: customers as the privacy unit, or row-level (unit=False);
    with `shape_times_total`, the policy's opt-in of that histogram estimator."""
    policy = load_policy_file(DEMO_POLICY_FILE)
    if not unit:
        return dataclasses.replace(policy, unit=None)
    assert policy.unit is not None
    return dataclasses.replace(policy, unit=dataclasses.replace(
        policy.unit, shape_times_total=shape_times_total))
