"""Running dpgate as a service: Prometheus metrics, the audit log, the admin console and
the data owner's dashboard. None of them ever sees a released or a private value: they
are told what was decided about a statement (kind, outcome, SQLSTATE, ε and δ charged,
time taken), never its answer, and read budgets and charges from the ledger."""

from .decision import Decision
from .hub import Operations, SessionOps

__all__ = ["Decision", "Operations", "SessionOps"]
