"""How a statement's decision is told from what happened to it (proxy/ops/hub.py), in
process: real plans from the rewriter, the audit log in a temporary file, the counters
read back from the Prometheus registry."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from proxy.config import load_policy_file
from proxy.demo.demo import DEMO_POLICY_FILE
from proxy.ops import Operations
from proxy.ops.metrics import LATENCY_BUCKETS, LATENCY_HELP, STATEMENTS_HELP, Metrics
from rewriter.analysis.classify import classify

pytestmark = pytest.mark.unit

POLICY = load_policy_file(DEMO_POLICY_FILE)
PRIVATE = "SELECT count(*) FROM orders"
RELAY = "SELECT 1"


class Failed(Exception):
    def __init__(self, sqlstate: str):
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def plan(sql: str):
    return classify(sql, POLICY)[0].plan


@pytest.fixture
def ops(tmp_path: Path) -> Iterator[Operations]:
    operations = Operations(str(tmp_path / "audit.jsonl"), "ops")
    yield operations
    operations.close()


def lines(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


def counted(ops: Operations, outcome: str, sqlstate: str = "") -> float:
    value = ops.metrics.registry.get_sample_value(
        "dpgate_statements_total", {"kind": "private", "outcome": outcome,
                                    "sqlstate": sqlstate})
    return value or 0.0


def test_answered_repeated_and_relayed(ops: Operations, tmp_path: Path):
    session = ops.session("ann", "10.0.0.1:5000", "demo", "psql")
    with session.statement(plan(PRIVATE), PRIVATE) as tracker:
        tracker.charge("ledger-fp", 0.5, 1e-8, repeated=False)
    with session.statement(plan(PRIVATE), PRIVATE) as tracker:
        tracker.charge("ledger-fp", 0.5, 1e-8, repeated=True)
    with session.statement(plan(RELAY), RELAY):
        pass
    assert [(line["kind"], line["outcome"], line["epsilon"]) for line in lines(tmp_path)] == [
        ("private", "answered", 0.5), ("private", "repeated", 0.0), ("relay", "relayed", 0.0)]
    assert lines(tmp_path)[0]["fingerprint"] == "ledger-fp"
    assert lines(tmp_path)[0]["client"] == "10.0.0.1:5000"
    assert counted(ops, "answered") == counted(ops, "repeated") == 1
    assert ops.metrics.registry.get_sample_value(
        "dpgate_epsilon_charged_total", {"analyst": "ann"}) == 0.5
    assert session.info.statements == 3 and session.info.epsilon == 0.5


def test_refusals_and_failures_keep_their_sqlstate_and_charge(ops: Operations,
                                                              tmp_path: Path):
    session = ops.session("ann", "", "demo", "")
    with pytest.raises(Failed), session.statement(plan(PRIVATE), PRIVATE):
        raise Failed("53400")  # budget exhausted: nothing charged
    with pytest.raises(Failed), session.statement(plan(PRIVATE), PRIVATE) as tracker:
        tracker.charge("fp", 0.1, 0.0, repeated=False)
        raise Failed("22000")  # failed after its charge: the charge stays
    with pytest.raises(Failed), session.statement(plan(PRIVATE), PRIVATE):
        raise Failed("58030")  # the ledger could not be written
    recorded = [(line["outcome"], line["sqlstate"], line["epsilon"])
                for line in lines(tmp_path)]
    assert recorded == [("refused", "53400", 0.0), ("failed", "22000", 0.1),
                        ("refused", "58030", 0.0)]
    registry = ops.metrics.registry
    assert registry.get_sample_value("dpgate_backend_errors_total") == 1
    assert registry.get_sample_value("dpgate_ledger_errors_total") == 1
    assert counted(ops, "refused", "53400") == 1


def test_skipped_statements_and_bugs(ops: Operations, tmp_path: Path):
    session = ops.session("ann", "", "demo", "")
    with pytest.raises(ValueError), session.statement(plan(PRIVATE), PRIVATE) as tracker:
        tracker.skipped = True  # the protocol skipped it after an earlier error
        raise ValueError
    with pytest.raises(KeyError), session.statement(plan(RELAY), RELAY):
        raise KeyError("a bug")  # no SQLSTATE: reported as XX000
    with pytest.raises(asyncio.CancelledError), session.statement(plan(RELAY), RELAY):
        raise asyncio.CancelledError
    session.refused("SELECT " + "(" * 300, "54001")
    assert [(line["kind"], line["outcome"], line["sqlstate"]) for line in lines(tmp_path)] == [
        ("relay", "failed", "XX000"), ("relay", "failed", "57P01"),
        ("refused", "refused", "54001")]


def test_sessions_are_counted_while_open(ops: Operations):
    first = ops.session("ann", "", "demo", "")
    ops.session("bob", "", "demo", "")
    assert ops.metrics.registry.get_sample_value("dpgate_sessions_active") == 2
    ops.closed(first.info)
    assert [info.analyst for info in ops.sessions] == ["bob"]
    assert ops.metrics.registry.get_sample_value("dpgate_sessions_active") == 1


def test_statement_counts_are_exposed_as_prometheus_clients_own_metrics_were():
    """The statement counter and latency histogram are plain numbers published at scrape
    time (metrics.StatementCounts): the same families, samples and values as
    prometheus_client's Counter and Histogram given the same observations."""
    ours = Metrics()
    reference = CollectorRegistry()
    counter = Counter("dpgate_statements", STATEMENTS_HELP,
                      ["kind", "outcome", "sqlstate"], registry=reference)
    histogram = Histogram("dpgate_statement_duration_seconds", LATENCY_HELP, ["kind"],
                          buckets=LATENCY_BUCKETS, registry=reference)
    observed = [("relay", "relayed", "", 0.0004), ("relay", "relayed", "", 0.001),
                ("relay", "failed", "22012", 0.0025), ("private", "answered", "", 61.0),
                ("private", "refused", "53400", 0.0), ("relay", "relayed", "", 0.3)]
    for kind, outcome, sqlstate, seconds in observed:
        ours.observe("ann", kind, outcome, sqlstate, 0.0, 0.0, seconds)
        counter.labels(kind, outcome, sqlstate).inc()
        histogram.labels(kind).observe(seconds)

    def samples(text: str, family: str) -> dict:
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) if f.name == family
                for s in f.samples if not s.name.endswith("_created")}

    def created(text: str) -> set:
        return {(s.name, tuple(sorted(s.labels.items())))
                for f in text_string_to_metric_families(text) for s in f.samples
                if s.name.startswith(("dpgate_statements_created",
                                      "dpgate_statement_duration_seconds_created"))}

    ours_text = ours.exposition().decode()
    reference_text = generate_latest(reference).decode()
    for family in ("dpgate_statements", "dpgate_statement_duration_seconds"):
        assert samples(ours_text, family) == samples(reference_text, family)
        assert samples(ours_text, family)  # not two empty sets
    assert created(ours_text) == created(reference_text)


def test_relayed_statements_are_counted_without_a_row_when_nothing_keeps_it():
    """Without an audit log a relayed statement that succeeded is only counted (no time,
    fingerprint or row is made for it); its failure is kept for the dashboard."""
    operations = Operations()
    session = operations.session("ann", "", "demo", "")
    relay = plan(RELAY)
    session.relayed(relay, RELAY, None, 0.002)
    session.relayed(relay, RELAY, "22012", 0.001)
    registry = operations.metrics.registry
    assert registry.get_sample_value("dpgate_statements_total", {
        "kind": "relay", "outcome": "relayed", "sqlstate": ""}) == 1
    assert registry.get_sample_value("dpgate_statement_duration_seconds_count",
                                     {"kind": "relay"}) == 2
    assert operations.counts["ann"] == {"relayed": 1, "failed": 1}
    assert operations.seconds["ann"] == pytest.approx(0.003)
    assert [(d.outcome, d.sqlstate) for d in operations.recent()] == [("failed", "22012")]
    assert session.info.statements == 2
