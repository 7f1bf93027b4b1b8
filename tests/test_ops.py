"""Operations end to end: Prometheus metrics scraped during a real session, the audit log,
the admin console (psql and psycopg). A proxy of the module's own, with analyst carol and
the operator account `ops`."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import DemoDatabase, dpgate_cli, free_port
from tests.proxies import USER, OwnProxy, start_own_proxy

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
    added = dpgate_cli("user", "add", OPERATOR, "--epsilon", "0.001", "--config", str(config),
                       stdin=OPERATOR_PASSWORD + "\n")
    assert added.returncode == 0, added.stderr
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
