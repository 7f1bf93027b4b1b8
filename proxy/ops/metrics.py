"""Prometheus metrics of one dpgate process (prometheus_client, a registry of its own).

Counters move with each statement decision; the budget gauges are read from the ledger
when Prometheus scrapes, so they are right across restarts and across proxies sharing a
ledger. Names are documented in the README (section Operations).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from accounting import AnalystBudget, GlobalLoss, as_written

from .decision import BACKEND_ERRORS, LEDGER_ERRORS

# Statement latencies from a catalog relay (~1 ms) to a long join (seconds).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0, 60.0)
STATEMENTS_HELP = ("Statements by kind, outcome (answered, repeated, relayed, refused, failed, "
                   "local) and SQLSTATE ('' when none)")
LATENCY_HELP = "Time from a statement's start to its decision, per kind"


class _Latency:
    """One kind's latency histogram: a count per bucket (not cumulated), their sum."""

    __slots__ = ("buckets", "total", "created")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last: above them all
        self.total = 0.0
        self.created = time.time()


class StatementCounts:
    """dpgate_statements and dpgate_statement_duration_seconds, counted in plain ints and
    published when Prometheus scrapes (a prometheus_client collector). Each statement
    moves both, relayed ones tens of thousands of times a second: prometheus_client's
    metrics take a lock per update, which made the report of a relayed statement cost
    ~3.6 µs. Updated and read on the event loop's thread only."""

    def __init__(self) -> None:
        # (kind, outcome, sqlstate) -> [statements, when the label set was first seen]
        self.counts: dict[tuple[str, str, str], list[int | float]] = {}
        self.latencies: dict[str, _Latency] = {}

    def observe(self, kind: str, outcome: str, sqlstate: str, seconds: float) -> None:
        key = (kind, outcome, sqlstate)
        count = self.counts.get(key)
        if count is None:
            count = self.counts[key] = [0, time.time()]
        count[0] += 1
        latency = self.latencies.get(kind)
        if latency is None:
            latency = self.latencies[kind] = _Latency()
        latency.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        latency.total += seconds

    def describe(self) -> list[Metric]:
        return []  # names are not checked against the registry's others: they are fixed

    def collect(self) -> Iterator[Metric]:
        statements = CounterMetricFamily("dpgate_statements", STATEMENTS_HELP,
                                         labels=["kind", "outcome", "sqlstate"])
        for key, (count, created) in list(self.counts.items()):
            statements.add_metric(key, count, created=created)
        yield statements
        durations = HistogramMetricFamily("dpgate_statement_duration_seconds", LATENCY_HELP,
                                          labels=["kind"])
        bounds = [floatToGoString(bound) for bound in (*LATENCY_BUCKETS, float("inf"))]
        for kind, latency in list(self.latencies.items()):
            cumulated, buckets = 0, []
            for bound, count in zip(bounds, latency.buckets, strict=True):
                cumulated += count
                buckets.append((bound, float(cumulated)))
            durations.add_metric([kind], buckets, latency.total)
            durations.samples.append(Sample("dpgate_statement_duration_seconds_created",
                                            {"kind": kind}, latency.created))
        yield durations


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.statements = StatementCounts()
        r.register(self.statements)
        self.epsilon = Counter("dpgate_epsilon_charged", "Epsilon charged, per analyst",
                               ["analyst"], registry=r)
        self.delta = Counter("dpgate_delta_charged", "Delta charged, per analyst",
                             ["analyst"], registry=r)
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

    def observe(self, analyst: str, kind: str, outcome: str, sqlstate: str, epsilon: float,
                delta: float, seconds: float) -> None:
        """Count one decision."""
        self.statements.observe(kind, outcome, sqlstate, seconds)
        if epsilon:
            self.epsilon.labels(analyst).inc(epsilon)
        if delta:
            self.delta.labels(analyst).inc(delta)
        if sqlstate in LEDGER_ERRORS:
            self.ledger_errors.inc()
        elif sqlstate in BACKEND_ERRORS:
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
