"""Operations that tell the whole story (issue 26): `serve` prints where everything is,
refused logins are audited and counted, and budgets print as written in every view."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from accounting import AnalystBudget, Budget, ChargeRequest, SqliteLedger, fingerprint
from proxy.admin.cli import main
from proxy.config import PrivacySettings
from proxy.demo.analysts import create_analyst
from proxy.ops.dashboard import reason
from proxy.ops.decision import Decision, now
from proxy.ops.metrics import Metrics
from tests.conftest import DemoDatabase, free_port
from tests.proxies import PASSWORD, USER, OwnProxy, start_own_proxy

pytestmark = pytest.mark.end_to_end

OPERATOR = "ops"


@pytest.fixture(scope="module")
def served(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[OwnProxy, Path, int]]:
    directory = tmp_path_factory.mktemp("story")
    metrics_port = free_port()
    running = start_own_proxy(directory, demo_database, metrics_port=metrics_port,
                              audit_log="audit.jsonl", admin_users=OPERATOR)
    yield running, directory, metrics_port
    running.stop()


def test_serve_prints_its_endpoints(served):
    running, directory, metrics_port = served
    log = running.process.log_path.read_text()  # type: ignore[attr-defined]
    assert f"dpgate listening on 127.0.0.1:{running.port}\n" in log
    assert f"Ledger: {directory / 'ledger.sqlite3'}\n" in log
    assert (f'Admin console: psql "postgresql://ADMIN@127.0.0.1:{running.port}/dpgate" '
            '-c "SHOW ANALYSTS"\n') in log
    assert f"Metrics: http://127.0.0.1:{metrics_port}/metrics\n" in log
    assert f"Audit log: {directory / 'audit.jsonl'}\n" in log


def test_refused_logins_are_audited_and_counted(served):
    running, directory, metrics_port = served
    attempts = {  # reason: (DSN, SQLSTATE)
        "password": (f"postgresql://{USER}:wrong@127.0.0.1:{running.port}/dpgate_e2e", "28P01"),
        "database": (f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{running.port}/other", "3D000"),
        "console": (f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{running.port}/dpgate", "42501"),
    }
    for dsn, _ in attempts.values():
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(dsn, connect_timeout=10)
    lines = [json.loads(line) for line in (directory / "audit.jsonl").read_text().splitlines()]
    logins = [(line["analyst"], line["sqlstate"]) for line in lines
              if line["kind"] == "login" and line["outcome"] == "refused"]
    assert sorted(logins) == sorted((USER, sqlstate) for _, sqlstate in attempts.values())
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                timeout=10) as response:
        families = text_string_to_metric_families(response.read().decode())
    failures = {sample.labels["reason"]: sample.value for family in families
                for sample in family.samples if sample.name == "dpgate_login_failures_total"}
    assert failures == {"password": 1.0, "database": 1.0, "console": 1.0}


def test_budgets_print_as_written_in_the_cli_and_the_metrics(tmp_path, capsys):
    path = tmp_path / "ledger.sqlite3"
    ledger = SqliteLedger(path)
    create_analyst(ledger, "ann", "ann-pw", 4.0, 1e-6, PrivacySettings())
    for n in range(16):  # sixteen charges of 0.1: 1.6000000000000003 as floats add
        sql = f"SELECT count(*) FROM orders WHERE product_id = {n}"
        ledger.charge_or_repeat(ChargeRequest("ann", sql, fingerprint(sql, 0.1, 0.0, "laplace"),
                                              0.1, 0.0, "laplace", 1.0))
    spent = ledger.budget("ann").epsilon_spent
    assert repr(spent) != "1.6"  # the float noise this test is about
    for command in (["budget", "show"], ["user", "list"], ["user", "show", "ann"]):
        assert main([*command, "--ledger", str(path)]) == 0
        out = capsys.readouterr().out
        assert "1.6" in out and "2.4" in out and "1.60000" not in out, out
        assert "4.0" in out and "4.001" not in out, out
    metrics = Metrics()
    metrics.set_budgets([AnalystBudget("ann", Budget(4.0, spent, 1e-6, 0.0, 16), True)])
    text = metrics.exposition().decode()
    assert 'dpgate_budget_epsilon_spent{analyst="ann"} 1.6\n' in text
    assert 'dpgate_budget_epsilon_left{analyst="ann"} 2.4\n' in text
    assert "dpgate_global_epsilon_spent 1.6\n" in text


REFUSALS = {  # statement: (what the operator reads, what the analyst's hint offers)
    "SELECT * FROM customers": ("rows of a private table asked without an aggregate",
                                "Ask for an aggregate such as count(*)."),
    "SELECT address, count(*) FROM customers GROUP BY address": (
        "no domain for public.customers.address: policy setting "
        "[tables.customers.columns.address] domain (or key_selection)",
        "ask the data owner for a domain or key selection on public.customers.address"),
    "SELECT sum(customer_id) FROM customers": (
        "no bounds for public.customers.customer_id: policy setting "
        "[tables.customers.columns.customer_id] bounds",
        "count(…) needs no bounds; for SUM, ask the data owner for bounds of "
        "public.customers.customer_id"),
    "DELETE FROM orders": ("DELETE: a write (dpgate is read-only)", None),
}


def test_a_refusal_tells_the_analyst_what_to_do_and_the_operator_why(served):
    running, directory, _ = served
    hints = {}
    with psycopg.connect(running.dsn(), autocommit=True) as connection:
        for statement in REFUSALS:
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as raised:
                connection.execute(statement)
            hints[statement] = raised.value.diag.message_hint
    for statement, (_, hint) in REFUSALS.items():
        assert hint is None or hint in (hints[statement] or ""), hints[statement]
        # Not "Declare one: [policy.tables…]": only the data owner can edit the policy.
        assert not re.search(r"\[(policy|tables)|\bdeclare\b", hints[statement] or "", re.I)
    lines = [json.loads(line) for line in (directory / "audit.jsonl").read_text().splitlines()]
    reasons = [line["reason"] for line in lines if line["outcome"] == "refused"
               and line["kind"] == "refused"]
    assert [reason for reason, _ in REFUSALS.values()] == reasons[-len(REFUSALS):]
    # The dashboard groups by these words; without a reason, by the SQLSTATE's in words.
    refused = Decision(now(), "carol", "", "private", "refused", "53400", 0.0, 0.0, "", 0.0)
    assert reason(refused) == "configuration limit exceeded (53400)"
