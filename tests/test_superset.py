"""Apache Superset through dpgate (slow): Superset's own SQLAlchemy model connects to the
test proxy, lists the tables and runs the SQL it generates for a bar chart of orders per
product and a monthly time series of order counts (examples/superset/check.py, run with
Superset's Python, which lives in a virtualenv of its own)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import date
from pathlib import Path

import pytest

from tests.conftest import RunningProxy

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
