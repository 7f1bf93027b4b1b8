"""What the operations side learns of one statement: the decision, never the answer."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import assert_never

from rewriter.errors import Refusal
from rewriter.plan import (
    ColumnProbe,
    Composite,
    EmptyStatement,
    Plan,
    PrivateAggregate,
    Relay,
    SetDpSetting,
    ShowDpSetting,
)
from rewriter.sqlstate import SqlState

# Outcomes of a statement.
ANSWERED = "answered"  # a fresh private answer, charged
REPEATED = "repeated"  # a stored private answer returned again, free
RELAYED = "relayed"  # passed to PostgreSQL as is (catalog, session, public tables)
REFUSED = "refused"  # dpgate's (or PostgreSQL's) error before anything was released
FAILED = "failed"  # an error after the charge (the charge stays) or from the backend
LOCAL = "local"  # SET/SHOW dp.*, empty statements: answered by dpgate, nothing released

# SQLSTATEs that say the ledger or the backend failed (counted as errors of the service).
LEDGER_ERRORS = frozenset({SqlState.DISK_FULL, SqlState.IO_ERROR})
BACKEND_ERRORS = frozenset({SqlState.CONNECTION_FAILURE, SqlState.DATA_EXCEPTION})


def plan_kind(plan: Plan | Refusal | None) -> str:
    """A short name for what the rewriter made of a statement (a metric label)."""
    match plan:
        case PrivateAggregate() | Composite():
            return "private"
        case Relay():
            return "relay"
        case SetDpSetting() | ShowDpSetting():
            return "setting"
        case EmptyStatement():
            return "empty"
        case ColumnProbe():
            return "probe"
        case Refusal() | None:
            return "refused"
        case _:
            assert_never(plan)


# Texts up to this long have their hash remembered (relayed statements come again and
# again): the cache then holds at most 4,096 of them, 16 MiB. A longer text is hashed each
# time, in well under a millisecond even at server.max_statement_size: 5,000 distinct
# 130 KB statements once grew a cache keyed by the whole text by 530 MB.
REMEMBERED_TEXT = 4096


def statement_fingerprint(text: str) -> str:
    """A stable hash of a statement's text: lets an operator see that the same statement
    came again without the log holding the text (or the literals an analyst typed)."""
    return _remembered_fingerprint(text) if len(text) <= REMEMBERED_TEXT else \
        _fingerprint(text)


def _fingerprint(text: str) -> str:
    normal = " ".join(text.split()).lower()
    return hashlib.sha256(normal.encode()).hexdigest()[:16]


_remembered_fingerprint = functools.lru_cache(maxsize=4096)(_fingerprint)


DecisionRow = tuple[datetime, str, str, str, str, str, float, float, str, float, str]


@dataclass(slots=True)  # not frozen: one is made per statement, and frozen ones are slow
class Decision:
    """One statement's fate. `fingerprint` is the ledger's for charged statements (so the
    audit log joins `dpgate ledger export`), the text's hash otherwise."""

    at: datetime
    analyst: str
    client: str
    kind: str
    outcome: str
    sqlstate: str
    epsilon: float
    delta: float
    fingerprint: str
    seconds: float
    # A refusal's reason in the operator's words (Refusal.reason: the policy setting that
    # decided); "" when dpgate has none beyond the SQLSTATE.
    reason: str = ""

    def row(self) -> DecisionRow:
        """Its fields as a plain tuple (`Decision(*row)` makes it again). Thousands are kept
        (Operations.recent): a tuple of strings, numbers and times is left out of the
        garbage collector's passes, which hold every thread; a Decision is walked by each
        full pass (bench/event_loop.py)."""
        return (self.at, self.analyst, self.client, self.kind, self.outcome, self.sqlstate,
                self.epsilon, self.delta, self.fingerprint, self.seconds, self.reason)

    def as_json(self) -> dict[str, object]:
        """The audit log's record: every field, times in UTC ISO 8601."""
        return {"time": self.at.astimezone(UTC).isoformat(timespec="milliseconds"),
                "analyst": self.analyst, "client": self.client, "kind": self.kind,
                "fingerprint": self.fingerprint, "outcome": self.outcome,
                "sqlstate": self.sqlstate or None, "epsilon": self.epsilon,
                "delta": self.delta, "duration_ms": round(self.seconds * 1000, 3),
                "reason": self.reason or None}


def now() -> datetime:
    return datetime.now(UTC)
