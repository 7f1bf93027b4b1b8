"""The ledger's interface and its plain data. Two stores implement it: a SQLite file (one
proxy, the default) and PostgreSQL (several proxies sharing one ledger)."""

from __future__ import annotations

from collections.abc import Mapping
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
    shift: float  # secret location draw (shifted Laplace), in the configured shift unit


# Sums of many small float charges drift by a few ulps. A slack relative to the total lets
# the last charge that exactly fits through (0.1 + 0.1 + 0.1 > 0.3 in floats); being
# relative, it stays negligible for a delta of 1e-8 as for an epsilon of 10.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Budget:
    epsilon_total: float
    epsilon_spent: float
    delta_total: float
    delta_spent: float
    queries: int

    @property
    def epsilon_left(self) -> float:
        return _left(self.epsilon_total, self.epsilon_spent)

    @property
    def delta_left(self) -> float:
        return _left(self.delta_total, self.delta_spent)

    def fits(self, epsilon: float, delta: float) -> bool:
        """Whether a charge of (epsilon, delta) stays within both totals."""
        return (self.epsilon_spent + epsilon <= self.epsilon_total * (1 + TOLERANCE)
                and self.delta_spent + delta <= self.delta_total * (1 + TOLERANCE))


def as_written(value: float) -> float:
    """A budget figure as a person writes it: a sum of decimal charges in binary floats
    is off in the 16th digit (8.299999999999999 for 8.3); 12 significant digits are kept."""
    return float(f"{value:.12g}")


def as_text(value: float) -> str:
    """A budget figure as the CLI, the console, the metrics and the dashboard all print it:
    decimal, without float noise (4.0 and 0.3, not 4.000000000000001 or 0.30000000000000004)."""
    return repr(as_written(value))


def _left(total: float, spent: float) -> float:
    # What the tolerance forgives is not shown as budget left (no "1.1e-16 left").
    left = total - spent
    return left if left > total * TOLERANCE else 0.0


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
    analyst: str
    statement: str
    fingerprint: str
    epsilon: float
    delta: float
    mechanism: str
    sensitivity: float
    outcome: str


@dataclass(frozen=True)
class Charged:
    """The charge is durable; `budget` is the analyst's budget after it, `shift` their
    secret location as it is now (a rotation applies to sessions already open)."""

    charge_id: int
    budget: Budget
    shift: float


@dataclass(frozen=True)
class Repeated:
    """The analyst asked this before: the stored answer, released again at no cost."""

    rows: list[list[object]]
    budget: Budget


@dataclass(frozen=True)
class AnalystBudget:
    """One name's allocation and spend. `active` is False for a removed analyst: nothing is
    allocated any more, but what they were answered still counts for the global loss."""

    name: str
    budget: Budget
    active: bool


@dataclass(frozen=True)
class GlobalLoss:
    """What all analysts together could learn if they colluded (sequential composition)."""

    epsilon_spent: float
    delta_spent: float
    epsilon_allocated: float
    delta_allocated: float

    @classmethod
    def of(cls, budgets: list[AnalystBudget]) -> GlobalLoss:
        """Sum the spend of every name (removed ones too) and the allocation of active ones."""
        active = [entry.budget for entry in budgets if entry.active]
        return cls(
            epsilon_spent=sum(entry.budget.epsilon_spent for entry in budgets),
            delta_spent=sum(entry.budget.delta_spent for entry in budgets),
            epsilon_allocated=sum(budget.epsilon_total for budget in active),
            delta_allocated=sum(budget.delta_total for budget in active),
        )


@dataclass(frozen=True)
class Metric:
    """maxFreq of a join column (FLEX's metric), measured on the data at `measured_at`.

    `table` is "schema.name" in lower case, `column` the column's name.
    """

    table: str
    column: str
    max_freq: int
    measured_at: str


class BudgetExceeded(Exception):
    """The charge would take epsilon or delta past the analyst's total; nothing was charged."""

    def __init__(self, requested: float, budget: Budget, requested_delta: float = 0.0):
        super().__init__(
            f"privacy budget exhausted: this query needs epsilon {requested:g} and delta "
            f"{requested_delta:g}; epsilon {budget.epsilon_left:g} of "
            f"{budget.epsilon_total:g} is left, delta {budget.delta_left:g} of "
            f"{budget.delta_total:g} is left"
        )
        self.requested = requested
        self.requested_delta = requested_delta
        self.budget = budget


class UnknownAnalyst(Exception):
    """No analyst of that name (or names, comma-separated) is in the ledger."""


class LedgerUnavailable(Exception):
    """The ledger's store cannot be reached (or failed mid-transaction): nothing was
    charged or released by the call that raised it, as far as this proxy knows."""


class LedgerOutdated(Exception):
    """The ledger's schema is older (or newer) than this dpgate's; the message says which
    command brings it up to date. Raised when the ledger is opened, before serving."""


class Ledger(Protocol):
    def add_analyst(self, analyst: Analyst) -> None: ...
    def remove_analyst(self, name: str) -> None: ...
    def analyst(self, name: str) -> Analyst | None: ...
    def analysts(self) -> list[Analyst]: ...
    def rotate_shift(self, name: str, shift: float) -> None: ...
    def set_budgets(self, epsilon_totals: Mapping[str, float]) -> None: ...
    def budget(self, name: str) -> Budget: ...
    def budgets(self) -> list[AnalystBudget]: ...
    def charges(self, name: str | None = None) -> list[ChargeRecord]: ...
    def charge_or_repeat(self, request: ChargeRequest) -> Charged | Repeated: ...
    def record_answer(self, charge_id: int, rows: list[list[object]]) -> None: ...
    def record_failure(self, charge_id: int, outcome: str) -> None: ...
    def forget_answers(self, name: str | None = None) -> int: ...
    def metrics(self) -> list[Metric]: ...
    def store_metrics(self, metrics: list[Metric]) -> None: ...
    def ping(self) -> None: ...
