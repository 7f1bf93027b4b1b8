"""docs/onboarding.md, run as written: every `sh` block, in order, in one bash, on the
clinic schema (tests/data/clinic.sql) in a PostgreSQL of its own, up to an answered query.

The `sh setup` blocks (install, where the database is) differ per machine: this checkout's
virtualenv and the variables below stand in for them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.clinic import Clinic, clinic_server
from tests.conftest import free_port

pytestmark = pytest.mark.end_to_end

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "onboarding.md"
BLOCK = re.compile(r"^```sh( setup)?\n(.*?)^```", re.MULTILINE | re.DOTALL)


def guide_blocks() -> tuple[list[str], list[str]]:
    """The guide's run blocks and its setup blocks, in order."""
    run, setup = [], []
    for match in BLOCK.finditer(GUIDE.read_text()):
        (setup if match.group(1) else run).append(match.group(2))
    return run, setup


@pytest.fixture(scope="module")
def clinic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clinic]:
    # Roles not granted: the guide's own `dpgate setup-roles` does it.
    yield from clinic_server(tmp_path_factory.mktemp("onboarding-pg"), roles=False)


def test_the_setup_blocks_set_what_the_test_stands_in_for():
    _, setup = guide_blocks()
    assert len(setup) == 2
    exported = set(re.findall(r"^export (\w+)=", setup[1], re.MULTILINE))
    assert exported == {"DB", "OWNER_DSN", "DPGATE_SERVER_LISTEN_PORT"}
    assert "pip install" in setup[0] and "PATH=" in setup[0]


def test_the_guide_reaches_a_first_answered_query(clinic: Clinic, tmp_path: Path):
    run, _ = guide_blocks()
    params = {k: v for k, v in conninfo_to_dict(clinic.owner_dsn).items()
              if k not in ("user", "password")}
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DB": make_conninfo(**params),
        "OWNER_DSN": clinic.owner_dsn,
        "DPGATE_SERVER_LISTEN_PORT": str(free_port()),
    }
    environment.pop("DPGATE_CONFIG", None)
    script = "set -euo pipefail\n" + "\n".join(run)
    started = time.monotonic()
    try:
        result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=environment,
                                capture_output=True, text=True, timeout=300, check=False)
    finally:
        pid = tmp_path / "dpgate-clinic" / "dpgate.pid"
        if pid.exists():  # the guide stops it; a failure half-way may not have
            try:
                os.kill(int(pid.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
    seconds = time.monotonic() - started
    print(f"the guide's path took {seconds:.1f} s")  # reported, never asserted
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "policy check passed" in output
    assert "roles dpgate_reader and dpgate_relay are ready" in output
    assert "analyst alice added with epsilon 1.0" in output
    assert re.search(r"dpgate listening on 127\.0\.0\.1:\d+\nLedger: ledger\.sqlite3", output)
    # Two answers, each charged and told so, with the kinds the policy's domain lists.
    assert output.count("NOTICE:  dpgate: charged epsilon 0.1") == 2, output
    for kind in ("checkup", "emergency", "follow-up"):
        assert re.search(rf"^ {kind} +\| +\d+$", output, re.MULTILINE), output
    assert re.search(r"^ +avg\s*\n-+\n +\d+(\.\d+)?$", output, re.MULTILINE), output
    assert "analyst alice: epsilon 0.2 spent of 1.0 (0.8 left)" in output
