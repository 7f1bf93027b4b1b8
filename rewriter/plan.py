"""What the rewriter decides for one statement. Plain data, consumed by the proxy."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Relay:
    """Harmless catalog or session statement: send the original text to the backend.

    `resets_dp` marks RESET ALL / DISCARD ALL, which also reset the session's dp.* settings.
    """

    text: str
    resets_dp: bool = False


@dataclass(frozen=True)
class SetDpSetting:
    """SET dp.NAME = value (value None: RESET dp.NAME)."""

    name: str
    value: str | None


@dataclass(frozen=True)
class ShowDpSetting:
    name: str


@dataclass(frozen=True)
class NoisyColumn:
    """One released aggregate: its output name and L1 sensitivity for one changed row."""

    name: str
    aggregate: str
    sensitivity: float


@dataclass(frozen=True)
class PrivateAggregate:
    """A query over private tables, rewritten to return true aggregates for noising.

    `fingerprint_text` is the normalized statement: equal texts mean the same question.
    """

    sql: str
    columns: tuple[NoisyColumn, ...]
    fingerprint_text: str
    tables: tuple[str, ...]


@dataclass(frozen=True)
class EmptyStatement:
    pass


Plan = Relay | SetDpSetting | ShowDpSetting | PrivateAggregate | EmptyStatement
