"""What both stores (SQLite and PostgreSQL) read and write alike: the columns of an
analyst and of a charge, an analyst from its row, and the time a row is stamped with."""

from __future__ import annotations

from datetime import UTC, datetime

from .store import Analyst, ScramVerifier

ANALYST_COLUMNS = (
    "name, scram_salt, scram_stored_key, scram_server_key, scram_iterations,"
    " epsilon_total, delta_total, shift"
)
CHARGE_COLUMNS = (
    "id, at, analyst, statement, fingerprint, epsilon, delta, mechanism, sensitivity, outcome"
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def analyst_from_row(row: tuple) -> Analyst:
    """An analyst from the ANALYST_COLUMNS of its row (bytea arrives as bytes or memoryview)."""
    name, salt, stored_key, server_key, iterations, epsilon, delta, shift = row
    return Analyst(name, ScramVerifier(bytes(salt), bytes(stored_key), bytes(server_key),
                                       iterations), epsilon, delta, shift)
