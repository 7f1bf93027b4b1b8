"""Prometheus metrics of one dpgate process (prometheus_client, a registry of its own).

Counters move with each statement decision; the budget gauges are read from the ledger
when Prometheus scrapes, so they are right across restarts and across proxies sharing a
ledger. Names are documented in the README (section Operations).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from accounting import AnalystBudget, GlobalLoss, as_written

from .decision import BACKEND_ERRORS, LEDGER_ERRORS, Decision

# Statement latencies from a catalog relay (~1 ms) to a long join (seconds).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0, 60.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.statements = Counter(
            "dpgate_statements", "Statements by kind, outcome (answered, repeated, relayed, "
            "refused, failed, local) and SQLSTATE ('' when none)",
            ["kind", "outcome", "sqlstate"], registry=r)
        self.epsilon = Counter("dpgate_epsilon_charged", "Epsilon charged, per analyst",
                               ["analyst"], registry=r)
        self.delta = Counter("dpgate_delta_charged", "Delta charged, per analyst",
                             ["analyst"], registry=r)
        self.latency = Histogram("dpgate_statement_duration_seconds",
                                 "Time from a statement's start to its decision, per kind",
                                 ["kind"], buckets=LATENCY_BUCKETS, registry=r)
        self.sessions = Gauge("dpgate_sessions_active", "Analyst sessions open now",
                              registry=r)
        self.console_sessions = Gauge("dpgate_console_sessions_active",
                                      "Admin console sessions open now", registry=r)
        self.backend_errors = Counter(
            "dpgate_backend_errors", "Failures of the PostgreSQL behind dpgate (connections "
            "refused or lost, private queries failed after their charge)", registry=r)
        self.ledger_errors = Counter("dpgate_ledger_errors",
                                     "Privacy ledger reads or writes that failed", registry=r)
        self.login_failures = Counter(
            "dpgate_login_failures", "Logins refused, by reason: password (wrong, or no such "
            "account), database (not the one served), console (an analyst at the admin "
            "console, or an operator at the data)", ["reason"], registry=r)
        self.epsilon_left = Gauge("dpgate_budget_epsilon_left", "Epsilon left, per analyst "
                                  "(from the ledger)", ["analyst"], registry=r)
        self.epsilon_spent = Gauge("dpgate_budget_epsilon_spent", "Epsilon spent, per analyst "
                                   "(from the ledger)", ["analyst"], registry=r)
        self.delta_left = Gauge("dpgate_budget_delta_left", "Delta left, per analyst (from "
                                "the ledger)", ["analyst"], registry=r)
        self.global_epsilon = Gauge("dpgate_global_epsilon_spent", "Epsilon all analysts "
                                    "spent together: the loss if they all collude",
                                    registry=r)
        self._statement_counters: dict[tuple[str, str, str], Any] = {}
        self._latencies: dict[str, Any] = {}

    def observe(self, decision: Decision) -> None:
        """Count one decision."""
        key = (decision.kind, decision.outcome, decision.sqlstate)
        counter = self._statement_counters.get(key)
        if counter is None:  # labels() validates and locks: once per label set is enough
            counter = self._statement_counters[key] = self.statements.labels(*key)
            self._latencies.setdefault(decision.kind, self.latency.labels(decision.kind))
        counter.inc()
        self._latencies[decision.kind].observe(decision.seconds)
        if decision.epsilon:
            self.epsilon.labels(decision.analyst).inc(decision.epsilon)
        if decision.delta:
            self.delta.labels(decision.analyst).inc(decision.delta)
        if decision.sqlstate in LEDGER_ERRORS:
            self.ledger_errors.inc()
        elif decision.sqlstate in BACKEND_ERRORS:
            self.backend_errors.inc()

    def set_budgets(self, budgets: list[AnalystBudget]) -> None:
        """The ledger's budgets as gauges; removed analysts drop out."""
        for gauge in (self.epsilon_left, self.epsilon_spent, self.delta_left):
            gauge.clear()
        for entry in budgets:
            if entry.active:
                # As written (1.6, not 1.5999999999999999), like every other view.
                self.epsilon_left.labels(entry.name).set(as_written(entry.budget.epsilon_left))
                self.epsilon_spent.labels(entry.name).set(as_written(entry.budget.epsilon_spent))
                self.delta_left.labels(entry.name).set(as_written(entry.budget.delta_left))
        self.global_epsilon.set(as_written(GlobalLoss.of(budgets).epsilon_spent))

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)
