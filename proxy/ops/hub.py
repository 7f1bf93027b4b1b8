"""Where sessions report their statement decisions, and what the operator's views read.

`Operations` is one per proxy process: it feeds the metrics and the audit log and keeps
the open sessions and the recent decisions (for the console and the dashboard). Each
session holds a `SessionOps`, through which it reports; a proxy without operations
settings still keeps these in memory (the console needs them), which costs little.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from rewriter.errors import Refusal
from rewriter.plan import Plan
from rewriter.sqlstate import SqlState

from .audit import AuditLog
from .decision import (
    ANSWERED,
    FAILED,
    LOCAL,
    REFUSED,
    RELAYED,
    REPEATED,
    Decision,
    DecisionRow,
    now,
    plan_kind,
    statement_fingerprint,
)
from .metrics import Metrics

# Decisions kept in memory for the dashboard (recent refusals, answers per minute), those
# of relayed statements that succeeded left out (Operations.needs_decision).
RECENT_DECISIONS = 10_000


@dataclass
class SessionInfo:
    """One open session as the console shows it."""

    analyst: str
    client: str
    database: str
    application: str
    connected_at: datetime = field(default_factory=now)
    statements: int = 0
    epsilon: float = 0.0
    delta: float = 0.0
    active: bool = False  # a statement is running


@dataclass
class Tracker:
    """A statement in flight: what the session reports of its charge."""

    epsilon: float = 0.0
    delta: float = 0.0
    fingerprint: str = ""
    repeated: bool = False
    charged: bool = False
    skipped: bool = False  # never ran (the protocol skipped it after an earlier error)

    def charge(self, fingerprint: str, epsilon: float, delta: float, repeated: bool) -> None:
        """The ledger charged (or, repeated, did not charge) this statement."""
        self.fingerprint, self.repeated, self.charged = fingerprint, repeated, True
        if not repeated:
            self.epsilon, self.delta = epsilon, delta


_UNCHARGED = Tracker()  # what a relayed statement reports (read, never changed)


class Operations:
    def __init__(self, audit_log: str = "", admin_users: str = ""):
        self.metrics = Metrics()
        self.audit = AuditLog(audit_log) if audit_log else None
        self.admins = frozenset(name.strip() for name in admin_users.split(",")
                                if name.strip())
        self.sessions: list[SessionInfo] = []
        self._recent: deque[DecisionRow] = deque(maxlen=RECENT_DECISIONS)
        # Since this process started, per analyst: outcome -> statements, and charges.
        self.counts: dict[str, Counter[str]] = {}
        self.charged: dict[str, list[float]] = {}
        self.seconds: dict[str, float] = {}
        self.started = now()

    def session(self, analyst: str, client: str, database: str, application: str
                ) -> SessionOps:
        """A new session opened: its handle for reporting (call `closed` at its end)."""
        info = SessionInfo(analyst, client, database, application)
        self.sessions.append(info)
        self.metrics.sessions.inc()
        return SessionOps(self, info)

    def closed(self, info: SessionInfo) -> None:
        self.sessions.remove(info)
        self.metrics.sessions.dec()

    def login_refused(self, user: str, client: str, reason: str, sqlstate: str) -> None:
        """A login refused: counted by reason and audited (kind "login"). Not kept per
        user for the views: the name is only the client's claim."""
        self.metrics.login_failures.labels(reason).inc()
        if self.audit is not None:
            self.audit.write(Decision(now(), user, client, "login", REFUSED, sqlstate, 0.0, 0.0,
                                      "", 0.0))

    def record(self, decision: Decision) -> None:
        """One statement decided (a Decision is made only where `needs_decision` says so): count
        it, log it, keep it for the views as a plain row."""
        self.count(decision.analyst, decision.kind, decision.outcome, decision.sqlstate,
                   decision.epsilon, decision.delta, decision.seconds)
        if self.audit is not None:
            self.audit.write(decision)
        if decision.outcome != RELAYED:
            self._recent.append(decision.row())

    def needs_decision(self, outcome: str) -> bool:
        """Whether `record` needs a Decision, or `count` is all it does: the views
        show private answers, refusals and failures, and relayed statements, tens of
        thousands a second under load, would push the dashboard's hour out of those kept."""
        return self.audit is not None or outcome != RELAYED

    def count(self, analyst: str, kind: str, outcome: str, sqlstate: str, epsilon: float,
              delta: float, seconds: float) -> None:
        """A decision in the metrics and the per-analyst totals (SHOW STATS)."""
        self.metrics.observe(analyst, kind, outcome, sqlstate, epsilon, delta, seconds)
        counts = self.counts.get(analyst)
        if counts is None:
            counts = self.counts[analyst] = Counter()
            self.charged[analyst] = [0.0, 0.0]
        counts[outcome] += 1
        if epsilon or delta:
            totals = self.charged[analyst]
            totals[0] += epsilon
            totals[1] += delta
        self.seconds[analyst] = self.seconds.get(analyst, 0.0) + seconds

    def recent(self) -> list[Decision]:
        """The last RECENT_DECISIONS decisions, oldest first."""
        return [Decision(*row) for row in self._recent]

    def close(self) -> None:
        if self.audit is not None:
            self.audit.close()


class SessionOps:
    """A session's line to Operations. `Operations` may be None (a session made in a test
    without a proxy): then nothing is recorded."""

    def __init__(self, operations: Operations | None = None, info: SessionInfo | None = None):
        self.operations = operations
        self.info = info or SessionInfo("", "", "", "")
        self.tracker = Tracker()

    def charge(self, fingerprint: str, epsilon: float, delta: float, repeated: bool) -> None:
        """The engine's report of the ledger's charge of the statement in flight."""
        self.tracker.charge(fingerprint, epsilon, delta, repeated)

    def statement(self, plan: Plan | Refusal | None, text: str) -> StatementReport:
        """Around running one statement (`with`, giving its Tracker): its decision is
        recorded when it ends, a StatementError (anything with `sqlstate`) being a refusal
        or a failure."""
        return StatementReport(self, plan, text)

    @contextmanager
    def refusals(self, text: str) -> Iterator[None]:
        """Around a step that can only refuse (Parse): records refusals, nothing else."""
        try:
            yield
        except Exception as error:
            sqlstate = getattr(error, "sqlstate", "")
            if sqlstate:
                self.refused(text, sqlstate)
            raise

    def relayed(self, plan: Plan, text: str, sqlstate: str | None, seconds: float) -> None:
        """A relayed statement, at its end (proxy/server/relay.py), with PostgreSQL's
        SQLSTATE if it failed."""
        self._record(plan, text, _UNCHARGED, sqlstate, seconds)

    def refused(self, text: str, sqlstate: str) -> None:
        """A statement refused before it was planned (too long, unparsable…)."""
        self._record(None, text, Tracker(), sqlstate, 0.0)

    def _record(self, plan: Plan | Refusal | None, text: str, tracker: Tracker,
                sqlstate: str | None, seconds: float) -> None:
        if tracker.skipped:
            return
        kind = plan_kind(plan)
        if sqlstate is not None:
            outcome = FAILED if tracker.charged or kind == "relay" else REFUSED
        elif tracker.charged:
            outcome = REPEATED if tracker.repeated else ANSWERED
        elif kind == "relay":
            outcome = RELAYED
        else:
            outcome = ANSWERED if kind == "private" else LOCAL  # free domain keys
        info = self.info
        info.statements += 1
        info.epsilon += tracker.epsilon
        info.delta += tracker.delta
        operations = self.operations
        if operations is None:
            return
        if not operations.needs_decision(outcome):  # no time, fingerprint or Decision to make
            operations.count(info.analyst, kind, outcome, sqlstate or "", tracker.epsilon,
                             tracker.delta, seconds)
            return
        operations.record(Decision(
            at=now(), analyst=info.analyst, client=info.client, kind=kind, outcome=outcome,
            sqlstate=sqlstate or "", epsilon=tracker.epsilon, delta=tracker.delta,
            fingerprint=tracker.fingerprint or statement_fingerprint(text), seconds=seconds,
            reason=plan.reason if isinstance(plan, Refusal) and sqlstate else ""))


class StatementReport:
    """SessionOps.statement's context manager (a class: it runs for every statement, and
    a generator-based one costs several times more)."""

    __slots__ = ("ops", "plan", "text", "tracker", "started")

    def __init__(self, ops: SessionOps, plan: Plan | Refusal | None, text: str):
        self.ops, self.plan, self.text, self.started = ops, plan, text, 0.0
        self.tracker = Tracker()

    def __enter__(self) -> Tracker:
        self.ops.tracker = self.tracker
        self.ops.info.active = True
        self.started = time.perf_counter()
        return self.tracker

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: object) -> None:
        sqlstate: str | None = None
        if isinstance(error, asyncio.CancelledError):
            sqlstate = SqlState.ADMIN_SHUTDOWN  # the session was ended while it ran
        elif isinstance(error, Exception):
            # A relayed statement's error is PostgreSQL's, passed on as it came ("").
            sqlstate = getattr(error, "sqlstate", SqlState.INTERNAL_ERROR)
        ops = self.ops
        ops.info.active = False
        ops._record(self.plan, self.text, self.tracker, sqlstate,
                    time.perf_counter() - self.started)
