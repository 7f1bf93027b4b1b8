"""The privacy ledger: analysts, budgets, charges, stored answers and metrics.

- the interface: `store` (the Ledger protocol and its plain data), `rows` (what both
  stores read and write alike), `opening` (which store a configuration names).
- the stores: `sqlite_ledger` (one file, WAL) with `sqlite_schema`, `sqlite_connection`
  (a connection per thread, the write lock), `group_commit` and `wal_restart` (one fsync
  per answer); `postgres_ledger` (shared by several proxies) with `postgres_schema` and
  `postgres_connection` (a connection per thread, transactions, retries); `ledger_copy`
  (SQLite into PostgreSQL).
- answering: `one_commit` (look up, then charge with the answer in one commit),
  `fingerprint` (the same question asked the same way).
"""

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
