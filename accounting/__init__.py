"""The privacy ledger: analysts, budgets, charges, stored answers and metrics."""

from .fingerprint import fingerprint
from .one_commit import (
    ShiftChanged,
    Standing,
    charge_answer,
    charge_failure,
    look_up,
    look_up_at_once,
)
from .sqlite_ledger import SqliteLedger
from .store import (
    Analyst,
    AnalystBudget,
    Budget,
    BudgetExceeded,
    Charged,
    ChargeRecord,
    ChargeRequest,
    GlobalLoss,
    Ledger,
    LedgerOutdated,
    LedgerUnavailable,
    Metric,
    Repeated,
    ScramVerifier,
    UnknownAnalyst,
    as_written,
)

__all__ = [
    "Analyst", "AnalystBudget", "Budget", "BudgetExceeded", "ChargeRecord", "ChargeRequest",
    "Charged", "GlobalLoss", "Ledger", "LedgerOutdated", "LedgerUnavailable",
    "Metric", "Repeated", "ScramVerifier", "ShiftChanged", "SqliteLedger", "Standing",
    "UnknownAnalyst", "as_written", "charge_answer", "charge_failure", "fingerprint",
    "look_up", "look_up_at_once",
]
