"""The ledger's interface and its plain data. A SQLite store implements it today; a
PostgreSQL-backed store for several proxies would implement the same methods."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ScramVerifier:
    """What SCRAM-SHA-256 needs to check a password, never the password itself."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True)
class Analyst:
    name: str
    verifier: ScramVerifier
    epsilon_total: float
    delta_total: float
    shift: float  # secret location draw (seed 000), in the configured shift unit


@dataclass(frozen=True)
class Budget:
    epsilon_total: float
    epsilon_spent: float
    delta_total: float
    delta_spent: float
    queries: int

    @property
    def epsilon_left(self) -> float:
        return max(0.0, self.epsilon_total - self.epsilon_spent)

    @property
    def delta_left(self) -> float:
        return max(0.0, self.delta_total - self.delta_spent)


@dataclass(frozen=True)
class ChargeRequest:
    analyst: str
    statement: str
    fingerprint: str
    epsilon: float
    delta: float
    mechanism: str
    sensitivity: float


@dataclass(frozen=True)
class ChargeRecord:
    id: int
    at: str
    statement: str
    fingerprint: str
    epsilon: float
    delta: float
    mechanism: str
    sensitivity: float
    outcome: str


@dataclass(frozen=True)
class Charged:
    """The charge is durable; `budget` is the analyst's budget after it."""

    charge_id: int
    budget: Budget


@dataclass(frozen=True)
class Repeated:
    """The analyst asked this before: the stored answer, released again at no cost."""

    rows: list[list[object]]
    budget: Budget


class BudgetExceeded(Exception):
    def __init__(self, requested: float, budget: Budget):
        super().__init__(
            f"privacy budget exhausted: this query needs epsilon {requested:g}, "
            f"{budget.epsilon_left:g} of {budget.epsilon_total:g} is left"
        )
        self.requested = requested
        self.budget = budget


class UnknownAnalyst(Exception):
    pass


class Ledger(Protocol):
    def add_analyst(self, analyst: Analyst) -> None: ...
    def remove_analyst(self, name: str) -> None: ...
    def analyst(self, name: str) -> Analyst | None: ...
    def analysts(self) -> list[Analyst]: ...
    def budget(self, name: str) -> Budget: ...
    def charges(self, name: str) -> list[ChargeRecord]: ...
    def charge_or_repeat(self, request: ChargeRequest) -> Charged | Repeated: ...
    def record_answer(self, charge_id: int, rows: list[list[object]]) -> None: ...
    def record_failure(self, charge_id: int, outcome: str) -> None: ...
