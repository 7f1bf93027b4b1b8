"""The small things a data owner meets in the first hour (issue 26), each as it happened:
setup-roles without a policy, `user show` without a ledger, `ledger export | head`, the
demo's port and second start, and the README's settings table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from accounting import ChargeRequest, SqliteLedger, fingerprint
from proxy.admin.cli import main
from proxy.config import _SECTIONS, PrivacySettings, load_config
from proxy.demo.analysts import create_analyst
from proxy.demo.demo import has_demo_data
from rewriter.policy.privacy_unit import UNIT_KEYS
from tests.conftest import DemoDatabase, Postgres

pytestmark = pytest.mark.end_to_end

ROOT = Path(__file__).resolve().parent.parent
DPGATE = str(Path(sys.executable).with_name("dpgate"))


def test_setup_roles_without_a_policy_grants_nothing_and_says_so(monkeypatch, capsys):
    monkeypatch.delenv("DPGATE_CONFIG", raising=False)
    monkeypatch.setenv("DPGATE_READER_PASSWORD", "r")
    monkeypatch.setenv("DPGATE_RELAY_PASSWORD", "l")
    # The DSN is never used: nothing would be granted, so nothing is done.
    assert main(["setup-roles", "--admin-dsn", "postgresql://nobody@127.0.0.1:1/x"]) == 2
    captured = capsys.readouterr()
    assert "are ready" not in captured.out
    assert "the policy names no table, so no grant would be made: give --config" in \
        captured.err


def test_user_show_without_a_ledger_names_it_and_creates_none(tmp_path):
    environment = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    environment.pop("DPGATE_CONFIG", None)
    environment.pop("DPGATE_LEDGER_PATH", None)
    result = subprocess.run([DPGATE, "user", "show", "alice"], env=environment, text=True,
                            capture_output=True, timeout=60, check=False)
    expected = tmp_path / "data" / "dpgate" / "ledger.sqlite3"
    assert result.returncode == 1
    assert f"dpgate: no ledger at {expected}: give --config" in result.stderr
    assert not expected.exists()


def test_user_show_of_an_unknown_analyst_names_the_ledger_read(tmp_path, capsys):
    path = tmp_path / "ledger.sqlite3"
    SqliteLedger(path)
    assert main(["user", "show", "alice", "--ledger", str(path)]) == 1
    assert f"no analyst named alice in the ledger {path}" in capsys.readouterr().err


def test_the_ledger_path_is_relative_to_the_config_file(tmp_path, monkeypatch):
    # Issue 26: `path = "ledger.sqlite3"` was read from the working directory, so
    # `dpgate user add` from one directory and `serve` from another used two ledgers.
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("DPGATE_LEDGER_PATH", raising=False)
    config = tmp_path / "etc" / "dpgate.toml"
    config.parent.mkdir()
    for written, expected in (("ledger.sqlite3", config.parent / "ledger.sqlite3"),
                              ("../var/l.sqlite3", config.parent / "../var/l.sqlite3"),
                              ("/srv/dpgate/l.sqlite3", Path("/srv/dpgate/l.sqlite3")),
                              ("~/l.sqlite3", home / "l.sqlite3")):
        config.write_text(f'[ledger]\npath = "{written}"\n')
        assert load_config(config).ledger.path == str(expected)
    # The CLI, run from elsewhere, writes the ledger beside the configuration file.
    config.write_text('[ledger]\npath = "ledger.sqlite3"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    environment = {**os.environ, "HOME": str(home)}
    environment.pop("DPGATE_LEDGER_PATH", None)
    result = subprocess.run([DPGATE, "user", "add", "ann", "--epsilon", "1", "--password-stdin",
                             "--config", str(config)], input="ann-pw\n", env=environment,
                            cwd=elsewhere, text=True, capture_output=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert SqliteLedger(config.parent / "ledger.sqlite3").analyst("ann") is not None
    assert not (elsewhere / "ledger.sqlite3").exists()


def test_ledger_export_into_head_ends_cleanly(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    ledger = SqliteLedger(path)
    create_analyst(ledger, "ann", "ann-pw", 100.0, 1e-6, PrivacySettings())
    padding = " ".join(["1"] * 400)  # long statements: far more than a pipe's buffer
    for n in range(300):
        sql = f"SELECT count(*) FROM orders WHERE product_id IN ({padding}, {n})"
        ledger.charge_or_repeat(ChargeRequest("ann", sql, fingerprint(sql, 0.1, 0.0, "laplace"),
                                              0.1, 0.0, "laplace", 1.0))
    result = subprocess.run(["bash", "-c", f"set -o pipefail; {DPGATE} ledger export "
                             f"--ledger {path} | head -1"], text=True, capture_output=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("id,at,analyst,statement")
    assert "Broken pipe" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("arguments", "port"), [([], "6432"), (["PORT=7432"], "7432")])
def test_make_demo_takes_a_port(arguments, port):
    result = subprocess.run(["make", "-n", "demo", *arguments], cwd=ROOT, text=True,
                            capture_output=True, timeout=60, check=True)
    assert f"dpgate demo --port {port}\n" in result.stdout


def test_a_second_demo_start_knows_its_data_is_there(demo_database: DemoDatabase,
                                                     postgres: Postgres):
    admin = make_conninfo(demo_database.admin_dsn, dbname="postgres")
    assert has_demo_data(admin, "dpgate_e2e")
    assert not has_demo_data(admin, "dpgate_no_such_database")
    postgres.create_database("dpgate_empty_demo")
    assert not has_demo_data(admin, "dpgate_empty_demo")


def _settings_table() -> str:
    """The first cell of every row of the README's settings tables."""
    return "\n".join(line.split("|")[1] for line in (ROOT / "README.md").read_text().splitlines()
                     if line.startswith("| `"))


def test_the_readme_settings_table_lists_every_setting():
    table = _settings_table()
    missing = [f"{section}.{f.name}" for section, kind in _SECTIONS.items()
               for f in fields(kind) if f"`{section}.{f.name}`" not in table]
    missing += [f"policy.{key}" for key in sorted(UNIT_KEYS | {"row_level", "file",
                                                                "default_schema", "max_cells"})
                if f"`policy.{key}`" not in table]
    missing += [key for key in ("`[policy.tables.NAME] unit`", "`[policy.tables.NAME] private`")
                if key not in table]
    assert missing == []


def test_the_example_configuration_is_what_the_readme_says():
    """dpgate.toml sets only settings the README lists, and the README says which of them
    differ from the defaults where it matters (metrics)."""
    example = (ROOT / "dpgate.toml").read_text()
    table = _settings_table()
    for section in _SECTIONS:
        body = example.split(f"[{section}]", 1)[1].split("\n[", 1)[0]
        for key in re.findall(r"^(\w+) =", body, re.MULTILINE):
            assert f"`{section}.{key}`" in table, f"{section}.{key}"
    if re.search(r"^metrics_port = [1-9]", example, re.MULTILINE):
        assert "off unless set, as in the example\n  `dpgate.toml`" in \
            (ROOT / "README.md").read_text()
