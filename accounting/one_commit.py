"""A fresh answer's ledger work in one durable commit: look up, then charge with the answer.

The proxy runs the rewritten query first and only then charges: the budget check, the
charge and the stored answer are one transaction (one fsync), written before anything is
sent. A failure that can depend on the data is charged the same way, in one transaction.

A store may implement `look_up`, `charge_answer` and `charge_failure` itself (the SQLite
ledger does); for any other store the functions here compose the same result from the
`Ledger` interface's own calls (two transactions instead of one), so every store keeps
working unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .store import Budget, Charged, ChargeRequest, Ledger, Repeated


@dataclass(frozen=True)
class Standing:
    """Where a fresh question starts: the analyst's secret shift and, when the store can
    read it cheaply, their budget, read (not locked) before the query runs. The charge
    checks the budget again in its commit."""

    budget: Budget | None
    shift: float


@dataclass(frozen=True)
class ShiftChanged:
    """The analyst's shift was rotated since `look_up`: nothing was written; noise the
    answer again with `shift` and charge again."""

    shift: float


@dataclass(frozen=True)
class AnswerCharge:
    """A fresh answer to charge and store: `charge_answer`'s arguments."""

    request: ChargeRequest
    shift: float
    rows: list[list[Any]]  # as released: text or None from the proxy


@dataclass(frozen=True)
class FailureCharge:
    """A failed question to charge: `charge_failure`'s arguments."""

    request: ChargeRequest
    outcome: str


def look_up(ledger: Ledger, analyst: str, fingerprint: str, shift: float
            ) -> Repeated | Standing:
    """The stored answer to a repeated question, or the analyst's budget and shift.

    `shift` is the one the session knows (from its login or its last charge): a store
    without its own look-up costs no round trip here, and its charge finds repeats."""
    own = getattr(ledger, "look_up", None)
    if own is not None:
        return own(analyst, fingerprint)
    return Standing(None, shift)


def look_up_at_once(ledger: Ledger, analyst: str, fingerprint: str
                    ) -> Repeated | Standing | None:
    """`look_up` where the store can answer without waiting (a local SQLite read), else
    None: then `look_up` must run where waiting is allowed (a worker thread)."""
    own = getattr(ledger, "look_up_at_once", None)
    return None if own is None else own(analyst, fingerprint)


def charge_answer(ledger: Ledger, request: ChargeRequest, shift: float,
                  rows: list[list[object]]) -> Charged | Repeated | ShiftChanged:
    """Charge `request` and store `rows` (noised with `shift`) durably, or return the
    stored answer if the question was answered meanwhile. Raises BudgetExceeded.

    Composed from the Ledger interface, a shift rotated since the session learnt it is
    noticed only in the charge: that answer keeps the shift it was noised with (the
    shift is data-independent, so the guarantee is the same), and the Charged result
    carries the new one for the session's next answers."""
    own = getattr(ledger, "charge_answer", None)
    if own is not None:
        return own(request, shift, rows)
    outcome = ledger.charge_or_repeat(request)
    if isinstance(outcome, Charged):
        ledger.record_answer(outcome.charge_id, rows)
    return outcome


def charge_failure(ledger: Ledger, request: ChargeRequest, outcome: str
                   ) -> Charged | Repeated:
    """Charge a question whose answer failed in a way that may depend on the data, with
    `outcome` recorded. Raises BudgetExceeded: then the failure is not reported."""
    own = getattr(ledger, "charge_failure", None)
    if own is not None:
        return own(request, outcome)
    result = ledger.charge_or_repeat(request)
    if isinstance(result, Charged):
        ledger.record_failure(result.charge_id, outcome)
    return result


def charge(ledger: Ledger, item: AnswerCharge | FailureCharge
           ) -> Charged | Repeated | ShiftChanged:
    """charge_answer or charge_failure, as `item` says."""
    if isinstance(item, AnswerCharge):
        return charge_answer(ledger, item.request, item.shift, item.rows)
    return charge_failure(ledger, item.request, item.outcome)


def charge_together(ledger: Ledger, items: list[AnswerCharge | FailureCharge]
                    ) -> list[tuple[object, BaseException | None]]:
    """`charge` of each item, called from one thread: each one's (result, None) or
    (None, exception), in order. A store that can commits them together (SQLite: one
    transaction, one fsync); any other charges them one after the other."""
    own = getattr(ledger, "charge_together", None)
    if own is not None:
        return own(items)
    outcomes: list[tuple[object, BaseException | None]] = []
    for item in items:
        try:
            outcomes.append((charge(ledger, item), None))
        except Exception as error:  # this item's: the others go on
            outcomes.append((None, error))
    return outcomes


def prepare_thread(ledger: Ledger) -> None:
    """Open the calling thread's connection to the store and make its first commit, if the
    store has such a step (SQLite: that commit also syncs the ledger's folder, an fsync
    that would otherwise fall on the first answer the thread commits)."""
    own = getattr(ledger, "prepare_thread", None)
    if own is not None:
        own()
