"""Apache Superset through dpgate (slow): Superset's own SQLAlchemy model connects to the
test proxy, lists the tables and runs the SQL it generates for a bar chart of orders per
product and a monthly time series of order counts (examples/superset/check.py, run with
Superset's Python, which lives in a virtualenv of its own); and Superset's web UI in
headless Chromium (examples/superset/browser_check.py): connecting, typed columns, SQL Lab
answers and errors, a chart, virtual datasets saved without a charge."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from tests.conftest import RunningProxy, free_port

ROOT = Path(__file__).resolve().parent.parent
SUPERSET_PYTHON = Path(os.environ.get("DPGATE_SUPERSET_PYTHON",
                                      "/tmp/superset-venv/bin/python"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.end_to_end,
    pytest.mark.skipif(not SUPERSET_PYTHON.exists(), reason=(
        f"no Superset virtualenv at {SUPERSET_PYTHON}: run examples/superset/install.sh "
        "(about 1.5 minutes, not part of CI) or set DPGATE_SUPERSET_PYTHON")),
]


def test_superset_lists_tables_and_runs_its_chart_queries_through_dpgate(
        proxy: RunningProxy, tmp_path: Path):
    uri = proxy.dsn("bob").replace("postgresql://", "postgresql+psycopg2://")
    report = tmp_path / "report.json"
    env = {**os.environ, "SUPERSET_HOME": str(tmp_path),
           "SUPERSET_CONFIG_PATH": str(ROOT / "examples/superset/superset_config.py")}
    done = subprocess.run([str(SUPERSET_PYTHON), str(ROOT / "examples/superset/check.py"),
                           uri, str(report)], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(report.read_text())
    assert {"customers", "orders", "products", "recommendations"} <= set(result["tables"])
    assert {"order_date", "product_id", "quantity"} <= set(result["orders_columns"])

    bars = result["charts"]["orders_per_product"]
    assert "GROUP BY product_id" in bars["sql"] and "ORDER BY count DESC" in bars["sql"]
    assert bars["columns"] == ["product_id", "count"] and len(bars["rows"]) == 10
    counts = [count for _, count in bars["rows"]]
    assert counts == sorted(counts, reverse=True)  # ordered by the noisy counts

    months = result["charts"]["orders_per_month"]
    assert "DATE_TRUNC('month', order_date)" in months["sql"]
    assert months["columns"] == ["order_date", "count"]
    firsts = [date.fromisoformat(when[:10]) for when, _ in months["rows"]]
    assert firsts == sorted(firsts) and all(day.day == 1 for day in firsts)
    in_2024 = [count for when, count in months["rows"] if when.startswith("2024")]
    # ~100,000 orders over two years: thousands a month, far beyond the noise at ε = 0.1.
    assert len(in_2024) == 12 and all(count > 1000 for count in in_2024)

    charges = json.loads(proxy.cli("user", "show", "bob", "--json").stdout)["charges"]
    # Each chart's query was charged once (Superset re-spells DATE_TRUNC('MONTH', …)
    # when it runs the query, hence the comparison in upper case).
    charged = [_normal(charge["statement"]) for charge in charges]
    for chart in (bars, months):
        assert charged.count(_normal(chart["sql"])) == 1


def _normal(sql: str) -> str:
    return " ".join(sql.split()).rstrip(";").upper()


CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture
def superset(tmp_path: Path) -> Iterator[str]:
    """A Superset web server of its own (metadata in tmp_path, admin/admin): its URL."""
    superset = str(SUPERSET_PYTHON.parent / "superset")
    env = {**os.environ, "SUPERSET_HOME": str(tmp_path),
           "SUPERSET_CONFIG_PATH": str(ROOT / "examples/superset/superset_config.py")}
    for command in (["db", "upgrade"], ["fab", "create-admin", "--username", "admin",
                                        "--firstname", "a", "--lastname", "b",
                                        "--email", "admin@example.com", "--password", "admin"],
                    ["init"]):
        subprocess.run([superset, *command], env=env, cwd=tmp_path, check=True,
                       capture_output=True, timeout=600)
    port = free_port()
    log = (tmp_path / "superset.log").open("w")
    server = subprocess.Popen([superset, "run", "-h", "127.0.0.1", "-p", str(port),
                               "--with-threads"], env=env, cwd=tmp_path, stdout=log,
                              stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5):
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, \
                    (tmp_path / "superset.log").read_text()[-3000:]
                time.sleep(1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason=(
    "headless Chromium and its driver are not installed (apt-get install chromium "
    "chromium-driver)"))
def test_superset_in_chromium_connects_answers_charts_and_saves_datasets(
        proxy: RunningProxy, superset: str, tmp_path: Path):
    uri = proxy.dsn("alice").replace("postgresql://", "postgresql+psycopg2://")
    report_path = tmp_path / "shots" / "browser.json"
    report_path.parent.mkdir()
    done = subprocess.run([str(SUPERSET_PYTHON), str(ROOT / "examples/superset/browser_check.py"),
                           superset, uri, str(report_path)], capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(report_path.read_text())

    # Connecting: "Test connection" and the saved database, listed in the UI.
    assert report["test_connection"] == 200 and "dpgate" in report["databases_page"]
    # Typed columns from dpgate's relayed catalogs, listed in Explore.
    assert report["orders"]["columns"]["order_date"] == "DATE"
    assert report["orders"]["columns"]["quantity"] == "INTEGER"
    assert "order_date" in report["explore_orders"]
    # SQL Lab: a noisy answer, and dpgate's refusal in its own words (not "Fatal error").
    assert "10 rows" in report["sql_lab_answer"]
    # Its error bars, which SQL Lab cannot show as a NOTICE.
    assert "column_name" in report["sql_lab_last_answers"]
    assert "±" in report["sql_lab_last_answers"]
    assert "only aggregates of private tables are answered" in report["sql_lab_error"]
    assert "Ask for an aggregate such as count(*)" in report["sql_lab_error"]
    # A chart drawn from a noisy answer.
    assert "10 rows" in report["chart"]

    # Virtual datasets: Superset runs their SQL with LIMIT 1 to learn the columns.
    rows, aggregate, refused = (report[name] for name in (
        "rows_dataset", "aggregate_dataset", "refused_dataset"))
    assert rows["status"] == 201, rows["message"]
    assert rows["columns"] == {"order_date": "DATE", "quantity": "INTEGER",
                               "category": "STRING"}
    assert aggregate["status"] == 201 and set(aggregate["columns"]) == {"category", "orders"}
    assert refused["status"] == 201 and set(refused["columns"]) == {"customer_id", "total"}
    # A chart over the dataset of rows (a join wrapped as virtual_table): answered.
    assert "Books" in report["chart_over_rows"], report["chart_over_rows"][-2000:]
    # A chart over the refused dataset: dpgate's refusal in Explore, not "Fatal error".
    over_refused = report["chart_over_refused"]
    assert "Fatal error" not in over_refused
    assert "SUM(order_id) needs declared bounds" in over_refused, over_refused[-2000:]
    # The Samples tab: its raw rows refused in dpgate's words.
    assert "only aggregates of private tables are answered" in report["samples"]

    # Saving the aggregate dataset charged nothing: SQL Lab's run (LIMIT 1001) is its one
    # charge; the save's two LIMIT 1 runs took that answer's first row.
    charges = json.loads(proxy.cli("user", "show", "alice", "--json").stdout)["charges"]
    per_category = [c for c in charges if "GROUP BY P.CATEGORY" in _normal(c["statement"])]
    assert len(per_category) == 1 and _normal(per_category[0]["statement"]).endswith(
        "LIMIT 1001"), per_category
