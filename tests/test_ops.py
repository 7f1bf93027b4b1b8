"""Operations end to end: Prometheus metrics scraped during a real session, the audit log,
the admin console (psql and psycopg). A proxy of the module's own, with analyst carol and
the operator account `ops`."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import DemoDatabase, add_analyst, dpgate_cli, free_port
from tests.proxies import PASSWORD, USER, OwnProxy, start_own_proxy

pytestmark = pytest.mark.end_to_end

OPERATOR, OPERATOR_PASSWORD = "ops", "ops-pw"


@dataclass
class Ops:
    proxy: OwnProxy
    metrics_port: int
    audit: Path
    config: Path

    def console_dsn(self, user: str = OPERATOR, password: str = OPERATOR_PASSWORD) -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.proxy.port}/dpgate"


@pytest.fixture(scope="module")
def ops(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Ops]:
    directory = tmp_path_factory.mktemp("ops")
    metrics_port = free_port()
    running = start_own_proxy(directory, demo_database, metrics_port=metrics_port,
                              audit_log="audit.jsonl", admin_users=OPERATOR)
    config = directory / "dpgate.toml"
    add_analyst(config, OPERATOR, OPERATOR_PASSWORD, 0.001)
    yield Ops(running, metrics_port, directory / "audit.jsonl", config)
    running.stop()


def scrape(ops: Ops) -> tuple[dict[tuple[str, tuple], float], str]:
    """Every sample of /metrics by (name, sorted labels), and the raw text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{ops.metrics_port}/metrics",
                                timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples, text


def statements(samples: dict, outcome: str, sqlstate: str = "", kind: str | None = None
               ) -> float:
    return sum(value for (name, labels), value in samples.items()
               if name == "dpgate_statements_total" and dict(labels)["outcome"] == outcome
               and dict(labels)["sqlstate"] == sqlstate
               and (kind is None or dict(labels)["kind"] == kind))


def test_metrics_move_with_a_real_session(ops: Ops):
    before, _ = scrape(ops)
    with psycopg.connect(ops.proxy.dsn(), autocommit=True) as connection:
        during, _ = scrape(ops)
        assert during[("dpgate_sessions_active", ())] == \
            before.get(("dpgate_sessions_active", ()), 0) + 1
        question = "SELECT count(*) FROM orders WHERE quantity > 3"
        connection.execute(question).fetchone()
        connection.execute(question).fetchone()  # the same question: repeated, free
        connection.execute("SELECT count(*) FROM products").fetchone()  # public: relayed
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            connection.execute("SELECT * FROM orders")
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            connection.execute("SET dp.epsilon = 100")
        after, text = scrape(ops)
    assert statements(after, "answered", kind="private") == \
        statements(before, "answered", kind="private") + 1
    assert statements(after, "repeated") == statements(before, "repeated") + 1
    assert statements(after, "relayed") >= statements(before, "relayed") + 1
    assert statements(after, "refused", "42501") == statements(before, "refused", "42501") + 1
    assert statements(after, "refused", "22023") == statements(before, "refused", "22023") + 1
    charged = ("dpgate_epsilon_charged_total", (("analyst", USER),))
    assert after[charged] == pytest.approx(before.get(charged, 0) + 0.1)
    # The budget gauges are the ledger's.
    budget = json.loads(dpgate_cli("user", "show", USER, "--json", "--config",
                                   str(ops.config)).stdout)
    assert after[("dpgate_budget_epsilon_left", (("analyst", USER),))] == \
        pytest.approx(budget["epsilon_left"])
    assert after[("dpgate_budget_epsilon_spent", (("analyst", USER),))] == \
        pytest.approx(budget["epsilon_spent"])
    latency = ("dpgate_statement_duration_seconds_count", (("kind", "private"),))
    assert after[latency] >= before.get(latency, 0) + 2
    assert "dpgate_backend_errors_total" in text and "dpgate_ledger_errors_total" in text
    final, _ = scrape(ops)
    assert final[("dpgate_sessions_active", ())] == during[("dpgate_sessions_active", ())] - 1


def _audit_lines(ops: Ops) -> list[dict]:
    return [json.loads(line) for line in ops.audit.read_text().splitlines()]


def test_the_audit_log_has_one_line_per_decision_and_no_value(ops: Ops):
    seen = len(_audit_lines(ops)) if ops.audit.exists() else 0
    with psycopg.connect(ops.proxy.dsn(), autocommit=True) as connection:
        released = connection.execute(
            "SELECT sum(order_cost) FROM orders WHERE order_cost > 1234.5").fetchone()[0]
        with pytest.raises(psycopg.errors.UndefinedColumn):
            connection.execute("SELECT count(*) FROM orders WHERE name = 'zebra-literal'")
        connection.execute("SELECT 1").fetchone()
    lines = _audit_lines(ops)[seen:]
    assert [line["outcome"] for line in lines] == ["answered", "refused", "relayed"]
    answered, refused, relayed = lines
    assert set(answered) == {"time", "analyst", "client", "kind", "fingerprint", "outcome",
                             "sqlstate", "epsilon", "delta", "duration_ms", "reason"}
    assert answered["analyst"] == USER and answered["kind"] == "private"
    assert answered["epsilon"] == pytest.approx(0.1) and answered["sqlstate"] is None
    assert re.fullmatch(r"127\.0\.0\.1:\d+", answered["client"])
    assert refused["sqlstate"] == "42703" and refused["epsilon"] == 0
    assert relayed["kind"] == "relay"
    # The fingerprint of a charge is the ledger's: the log joins `dpgate ledger export`.
    charges = json.loads(dpgate_cli("user", "show", USER, "--json", "--config",
                                    str(ops.config)).stdout)["charges"]
    assert answered["fingerprint"] == charges[-1]["fingerprint"]
    # psql speaks the simple protocol: the same decisions, one line each.
    simple = subprocess.run(["psql", ops.proxy.dsn(), "-c", "SELECT count(*) FROM orders "
                             "WHERE quantity = 9", "-c", "SELECT * FROM orders"],
                            capture_output=True, text=True, timeout=30, check=False)
    assert "only aggregates" in simple.stderr
    # A relayed statement PostgreSQL refuses: its own SQLSTATE (22012), read in passing.
    missing = subprocess.run(["psql", ops.proxy.dsn(), "-c", "SELECT 1 / 0"],
                             capture_output=True, text=True, timeout=30, check=False)
    assert "division by zero" in missing.stderr
    lines = _audit_lines(ops)[seen + 3:]
    assert [(line["kind"], line["outcome"], line["sqlstate"]) for line in lines] == [
        ("private", "answered", None), ("refused", "refused", "42501"),
        ("relay", "failed", "22012")]
    # Neither the released value nor what the analyst typed is in the log or the metrics.
    log = ops.audit.read_text()
    _, metrics = scrape(ops)
    for secret in (str(released), f"{released:.2f}", "zebra-literal", "1234.5"):
        assert secret not in log and secret not in metrics


def test_statements_relayed_the_fast_way_are_reported_like_the_others(ops: Ops):
    """The second time a relayed text comes it is relayed from the transports' callbacks
    (proxy/server/fast_relay.py): the same audit lines and metrics as the first time."""
    seen = len(_audit_lines(ops)) if ops.audit.exists() else 0
    before, _ = scrape(ops)
    commands = ["SELECT 42 AS answer", "SELECT 42 AS answer", "SELECT 2 / 0", "SELECT 2 / 0"]
    ran = subprocess.run(["psql", ops.proxy.dsn(), *(f"-c{c}" for c in commands)],
                         capture_output=True, text=True, timeout=30, check=False)
    assert ran.stdout.count(" 42") == 2 and "division by zero" in ran.stderr
    lines = _audit_lines(ops)[seen:]
    assert [(line["kind"], line["outcome"], line["sqlstate"]) for line in lines] == [
        ("relay", "relayed", None)] * 2 + [("relay", "failed", "22012")] * 2
    assert lines[0]["fingerprint"] == lines[1]["fingerprint"]
    after, _ = scrape(ops)
    assert statements(after, "failed", "22012") == statements(before, "failed", "22012") + 2
    latency = ("dpgate_statement_duration_seconds_count", (("kind", "relay"),))
    assert after[latency] >= before.get(latency, 0) + 4


def _psql(dsn: str, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["psql", dsn, "--csv", "-c", command], capture_output=True,
                          text=True, timeout=30, check=False)


def test_the_console_answers_psql_and_psycopg_from_the_ledger(ops: Ops):
    with psycopg.connect(ops.proxy.dsn(), autocommit=True) as analyst:
        analyst.execute("SELECT count(*) FROM orders WHERE quantity = 2").fetchone()
        # psql, simple protocol, while carol's session is open.
        shown = _psql(ops.console_dsn(), "SHOW ANALYSTS")
        assert shown.returncode == 0, shown.stderr
        rows = {row["analyst"]: row for row in csv.DictReader(io.StringIO(shown.stdout))}
        budget = json.loads(dpgate_cli("user", "show", USER, "--json", "--config",
                                       str(ops.config)).stdout)
        assert float(rows[USER]["epsilon_spent"]) == pytest.approx(budget["epsilon_spent"])
        assert float(rows[USER]["epsilon_left"]) == pytest.approx(budget["epsilon_left"])
        assert rows[USER]["sessions"] == "1" and rows[OPERATOR]["admin"] == "yes"
        sessions = _psql(ops.console_dsn(), "SHOW SESSIONS")
        assert [row["analyst"] for row in csv.DictReader(io.StringIO(sessions.stdout))
                ].count(USER) == 1
    # psycopg prepares its statements: the extended protocol.
    with psycopg.connect(ops.console_dsn(), autocommit=True) as console:
        charges = console.execute(f"SHOW CHARGES {USER}").fetchall()
        names = [column.name for column in console.execute("SHOW CHARGES").description]
        stats = {row[0]: row for row in console.execute("SHOW STATS").fetchall()}
        with pytest.raises(psycopg.errors.SyntaxError):
            console.execute("SELECT * FROM orders")
        global_spent = console.execute("SHOW GLOBAL").fetchone()[0]
    assert [row[0] for row in charges] == [charge["id"] for charge in budget["charges"]]
    assert names[:4] == ["id", "at", "analyst", "epsilon"]
    assert stats[USER][1] >= 1  # answered, counted since the proxy started
    assert global_spent == pytest.approx(budget["epsilon_spent"])  # carol alone spent


def test_only_operators_open_the_console_and_operators_cannot_read_data(ops: Ops):
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        psycopg.connect(ops.console_dsn(USER, PASSWORD))
    denied = _psql(ops.proxy.dsn().replace(f"{USER}:{PASSWORD}",
                                           f"{OPERATOR}:{OPERATOR_PASSWORD}"), "SELECT 1")
    assert denied.returncode != 0 and "permission denied" in denied.stderr
    # A wrong password fails like any other, before anyone learns who operates.
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(ops.console_dsn(OPERATOR, "wrong"))
