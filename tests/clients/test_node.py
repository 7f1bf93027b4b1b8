"""node-postgres (`pg` from npm, pinned by tests/clients/node/package-lock.json) through
dpgate: a small script driven by pytest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.clients.conftest import DEMO_TABLES, Analyst, assert_noisy

pytestmark = pytest.mark.end_to_end

NODE_DIR = Path(__file__).with_name("node")


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """`npm ci` from the lock file, once (.ci/run also runs it on a fresh machine)."""
    assert shutil.which("node") and shutil.which("npm"), "install nodejs and npm (.ci/run does)"
    installed = NODE_DIR / "node_modules" / ".package-lock.json"
    lock = NODE_DIR / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True,
                       capture_output=True, timeout=300)
    return NODE_DIR / "node_modules"


def test_node_postgres(node_modules: Path, analyst: Analyst, true_count):
    product = 171
    result = subprocess.run(
        ["node", str(NODE_DIR / "client_check.js")], capture_output=True, text=True,
        timeout=120, check=False,
        env={**os.environ, "DPGATE_URL": analyst.dsn, "PRODUCT_ID": str(product)})
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert DEMO_TABLES <= set(seen["tables"])
    assert seen["columns"][:3] == ["order_id", "customer_id", "product_id"]
    assert_noisy(int(seen["count"]), true_count(product))  # pg returns int8 as a string
    assert len(seen["prices"]) == 3 and seen["prices"][0] == seen["prices"][2]
    assert seen["refused"] == "42501" and seen["refused_extended"] == "42501"
    assert seen["after_refusal"] == 42
    assert seen["pool"] == [1, 1, 1]
