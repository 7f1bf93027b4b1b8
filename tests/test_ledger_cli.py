"""The data owner's ledger commands: `dpgate budget …`, `dpgate ledger …`,
`dpgate user rotate-shift`, run through the real `dpgate` entry point on a real ledger."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from accounting import Charged, ChargeRequest, SqliteLedger, fingerprint
from proxy.admin.cli import main
from proxy.config import PrivacySettings
from proxy.demo.analysts import create_analyst

pytestmark = pytest.mark.end_to_end


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    """A ledger with analysts ann (ε 1) and bo (ε 2), ann with two answered questions."""
    path = tmp_path / "ledger.sqlite3"
    ledger = SqliteLedger(path)
    for name, epsilon in (("ann", 1.0), ("bo", 2.0)):
        create_analyst(ledger, name, f"{name}-pw", epsilon, 1e-6, PrivacySettings())
    for n in (1, 2):
        charged = ledger.charge_or_repeat(question("ann", n))
        assert isinstance(charged, Charged)
        ledger.record_answer(charged.charge_id, [[n * 10]])
    return path


def question(analyst: str, n: int, epsilon: float = 0.1) -> ChargeRequest:
    sql = f"SELECT count(*) FROM orders WHERE product_id = {n}"
    return ChargeRequest(analyst, sql, fingerprint(sql, epsilon, 0.0, "shifted_laplace"),
                         epsilon, 0.0, "shifted_laplace", 1.0)


def dpgate(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_rotate_shift_draws_a_new_shift_and_forgets_answers(ledger_path, capsys):
    ledger = SqliteLedger(ledger_path)
    before = ledger.analyst("ann").shift
    code, out, _ = dpgate(capsys, "user", "rotate-shift", "ann", "--ledger", str(ledger_path))
    assert code == 0 and "new secret shift" in out
    after = ledger.analyst("ann").shift
    low, high = PrivacySettings().shift_interval
    assert after != before and low <= after <= high  # the configured interval
    assert str(after) not in out  # the shift is secret
    assert isinstance(ledger.charge_or_repeat(question("ann", 1)), Charged)
    code, _, err = dpgate(capsys, "user", "rotate-shift", "zed", "--ledger", str(ledger_path))
    assert code == 1 and "no analyst named zed" in err


def test_user_show_still_prints_the_history(ledger_path, capsys):
    code, out, _ = dpgate(capsys, "user", "show", "ann", "--ledger", str(ledger_path))
    assert code == 0 and "2 queries" in out and "product_id = 2" in out
    code, out, _ = dpgate(capsys, "user", "show", "ann", "--json", "--ledger", str(ledger_path))
    shown = json.loads(out)
    assert [c["outcome"] for c in shown["charges"]] == ["answered", "answered"]


def test_forget_answers_makes_repeats_charged_again(ledger_path, capsys):
    ledger = SqliteLedger(ledger_path)
    code, out, _ = dpgate(capsys, "ledger", "forget-answers", "--analyst", "bo",
                          "--ledger", str(ledger_path))
    assert code == 0 and out.startswith("0 stored answers of bo")
    assert ledger.charge_or_repeat(question("ann", 1)).rows == [[10]]  # still stored
    code, out, _ = dpgate(capsys, "ledger", "forget-answers", "--ledger", str(ledger_path))
    assert code == 0 and out.startswith("2 stored answers of every analyst forgotten")
    assert isinstance(ledger.charge_or_repeat(question("ann", 1)), Charged)
    code, _, err = dpgate(capsys, "ledger", "forget-answers", "--analyst", "zed",
                          "--ledger", str(ledger_path))
    assert code == 1 and "zed" in err


def test_export_writes_every_charge_as_csv_or_json(ledger_path, tmp_path, capsys):
    ledger = SqliteLedger(ledger_path)
    ledger.charge_or_repeat(question("bo", 7, epsilon=0.25))
    ledger.remove_analyst("bo")  # removed analysts' charges are exported too
    code, out, _ = dpgate(capsys, "ledger", "export", "--ledger", str(ledger_path))
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and list(rows[0]) == [
        "id", "at", "analyst", "statement", "fingerprint", "epsilon", "delta", "mechanism",
        "sensitivity", "outcome"]
    assert [(r["analyst"], r["epsilon"], r["outcome"]) for r in rows] == [
        ("ann", "0.1", "answered"), ("ann", "0.1", "answered"), ("bo", "0.25", "charged")]
    assert rows[2]["statement"] == "SELECT count(*) FROM orders WHERE product_id = 7"
    target = tmp_path / "ann.json"
    code, _, err = dpgate(capsys, "ledger", "export", "--format", "json", "--analyst", "ann",
                          "--output", str(target), "--ledger", str(ledger_path))
    exported = json.loads(target.read_text())
    assert code == 0 and "2 charges written" in err
    assert [c["statement"][-1] for c in exported] == ["1", "2"]
    assert exported[0]["fingerprint"] == question("ann", 1).fingerprint
    code, _, err = dpgate(capsys, "ledger", "export", "--analyst", "zed",
                          "--ledger", str(ledger_path))
    assert code == 1 and "zed" in err


def test_budget_show_lists_spend_and_the_global_loss(ledger_path, capsys):
    ledger = SqliteLedger(ledger_path)
    create_analyst(ledger, "cy", "cy-pw", 4.0, 1e-5, PrivacySettings())
    ledger.charge_or_repeat(question("cy", 1, epsilon=0.5))
    ledger.remove_analyst("cy")
    code, out, _ = dpgate(capsys, "budget", "show", "--json", "--ledger", str(ledger_path))
    shown = json.loads(out)
    assert code == 0
    assert [(a["name"], a["active"], a["queries"]) for a in shown["analysts"]] == [
        ("ann", True, 2), ("bo", True, 0), ("cy", False, 1)]
    assert shown["analysts"][0]["epsilon_left"] == pytest.approx(0.8)
    assert shown["global"]["epsilon_spent"] == pytest.approx(0.7)
    assert shown["global"]["epsilon_allocated"] == pytest.approx(3.0)
    assert shown["global"]["delta_allocated"] == pytest.approx(2e-6)
    code, out, _ = dpgate(capsys, "budget", "show", "--ledger", str(ledger_path))
    assert "cy (removed)" in out
    assert "global loss if all analysts collude: epsilon 0.7 spent (allocated 3.0)" in out


def test_budget_plan_prints_budgets_checks_and_tie_break(capsys):
    code, out, _ = dpgate(capsys, "budget", "plan", "--analyst", "researcher=1",
                          "--analyst", "insurance=0.1", "--analyst", "hospital=0.01",
                          "--epsilon", "1")
    assert code == 0
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:4]}
    assert lines == {"insurance": ["0.1", "1"], "researcher": ["1", "1"],
                     "hospital": ["0.01", "2"]}
    assert "tie-break: leximin" in out
    assert "tightest group of the exponential alpha (1 group): alpha-risky yes" in out
    assert "every group (7 groups): alpha-risky yes" in out and "NO" not in out


def test_budget_plan_reads_files_and_applies(ledger_path, tmp_path, capsys):
    risks = tmp_path / "analysts.txt"
    risks.write_text("# who may disclose\nann=0.5\nbo = 0.02  # partner lab\n")
    table = tmp_path / "alpha.csv"
    table.write_text("total,probability\n1,1\n3,0.01\n")
    code, out, _ = dpgate(capsys, "budget", "plan", "--analysts", str(risks), "--alpha-table",
                          str(table), "--json", "--apply", "--ledger", str(ledger_path))
    plan = json.loads(out)
    assert code == 0 and all(check["ok"] for check in plan["checks"])
    planned = {a["name"]: a["epsilon"] for a in plan["analysts"]}
    ledger = SqliteLedger(ledger_path)
    assert ledger.budget("ann").epsilon_total == pytest.approx(planned["ann"])
    assert ledger.budget("bo").epsilon_total == pytest.approx(planned["bo"])
    assert planned["bo"] > planned["ann"] > 0


def test_budget_apply_rechecks_the_plan_and_needs_every_analyst(ledger_path, tmp_path, capsys):
    plan_file = tmp_path / "plan.json"
    code, out, _ = dpgate(capsys, "budget", "plan", "--analyst", "ann=0.1", "--analyst",
                          "bo=0.1", "--epsilon", "0.5", "--json")
    plan = json.loads(out)
    plan_file.write_text(out)
    assert dpgate(capsys, "budget", "apply", str(plan_file), "--ledger", str(ledger_path))[0] == 0
    ledger = SqliteLedger(ledger_path)
    assert ledger.budget("ann").epsilon_total == pytest.approx(0.75)  # ε·max(w, L) = 0.5·1.5
    # An edited plan that breaks α is refused, and nothing changes.
    plan["analysts"][0]["epsilon"] = 5.0
    plan_file.write_text(json.dumps(plan))
    code, _, err = dpgate(capsys, "budget", "apply", str(plan_file), "--ledger",
                          str(ledger_path))
    assert code == 1 and "fails its checks" in err and "alpha-risky NO" in err
    assert ledger.budget("ann").epsilon_total == pytest.approx(0.75)
    code, _, err = dpgate(capsys, "budget", "plan", "--analyst", "ann=0.1", "--analyst",
                          "zed=0.2", "--analyst", "yan=0.3", "--epsilon", "1", "--apply",
                          "--ledger", str(ledger_path))
    assert code == 1 and "no analyst named yan, zed" in err
    assert ledger.budget("ann").epsilon_total == pytest.approx(0.75)


def test_budget_apply_refuses_a_file_that_is_not_a_plan(ledger_path, tmp_path, capsys):
    not_a_plan = tmp_path / "plan.json"
    not_a_plan.write_text(json.dumps({"analysts": [{"name": "ann", "epsilon": 3}]}))
    code, _, err = dpgate(capsys, "budget", "apply", str(not_a_plan), "--ledger",
                          str(ledger_path))
    assert code == 1 and "not the output of `dpgate budget plan --json`" in err
    assert SqliteLedger(ledger_path).budget("ann").epsilon_total == 1.0


def test_budget_plan_input_errors_are_reported(capsys, tmp_path):
    code, _, err = dpgate(capsys, "budget", "plan", "--analyst", "ann", "--epsilon", "1")
    assert code == 1 and "expected NAME=P" in err
    code, _, err = dpgate(capsys, "budget", "plan", "--analyst", "ann=2", "--epsilon", "1")
    assert code == 1 and "(0, 1]" in err
    risks = tmp_path / "risks.json"
    risks.write_text(json.dumps({f"u{i}": 0.5 for i in range(21)}))
    table = tmp_path / "alpha.csv"
    table.write_text("1,1\n2,0.1\n")
    code, _, err = dpgate(capsys, "budget", "plan", "--analysts", str(risks),
                          "--alpha-table", str(table))
    assert code == 1 and "up to 20 analysts" in err


def test_adding_an_analyst_imports_neither_the_server_nor_the_rewriter(tmp_path):
    # `dpgate user add` is what scripts and the tests run most: it must not pay for the
    # server's imports (aiohttp, sqlglot, the engine).
    probe = ("import sys\nfrom proxy.admin.cli import main\n"
             "code = main(['user', 'add', 'ann', '--epsilon', '1', '--ledger', sys.argv[1]])\n"
             "heavy = [m for m in ('sqlglot', 'aiohttp', 'proxy.server.server', "
             "'proxy.engine.dispatch') if m in sys.modules]\n"
             "print(code, heavy)\n")
    result = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "ledger.sqlite3")],
                            input="ann-pw\n", capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.stdout.splitlines()[-1] == "0 []", result.stderr
