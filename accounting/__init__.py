"""The privacy ledger: analysts, budgets, charges and stored answers."""

from .fingerprint import fingerprint
from .sqlite_ledger import SqliteLedger
from .store import (
    Analyst,
    Budget,
    BudgetExceeded,
    Charged,
    ChargeRecord,
    ChargeRequest,
    Ledger,
    Repeated,
    ScramVerifier,
    UnknownAnalyst,
)

__all__ = [
    "Analyst", "Budget", "BudgetExceeded", "ChargeRecord", "ChargeRequest", "Charged",
    "Ledger", "Repeated", "ScramVerifier", "SqliteLedger", "UnknownAnalyst", "fingerprint",
]
