"""The privacy ledger: analysts, budgets, charges, stored answers and metrics."""

from .fingerprint import fingerprint
from .one_commit import (
    AnswerCharge,
    FailureCharge,
    ShiftChanged,
    Standing,
    charge,
    charge_answer,
    charge_failure,
    charge_together,
    look_up,
    look_up_at_once,
    prepare_thread,
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
    as_text,
    as_written,
)

__all__ = [
    "AnswerCharge", "FailureCharge", "charge", "charge_together", "prepare_thread",
    "Analyst", "AnalystBudget", "Budget", "BudgetExceeded", "ChargeRecord", "ChargeRequest",
    "Charged", "GlobalLoss", "Ledger", "LedgerOutdated", "LedgerUnavailable",
    "Metric", "Repeated", "ScramVerifier", "ShiftChanged", "SqliteLedger", "Standing",
    "UnknownAnalyst", "as_text", "as_written", "charge_answer", "charge_failure", "fingerprint",
    "look_up", "look_up_at_once",
]
