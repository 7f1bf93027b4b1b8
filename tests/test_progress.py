"""Progress of long operator commands: a bar on a terminal (a real pseudo-terminal here),
plain lines otherwise, and the data itself unchanged either way."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from accounting import ChargeRequest, SqliteLedger
from proxy.config import PrivacySettings
from proxy.demo.analysts import create_analyst
from proxy.ops.progress import Progress

pytestmark = pytest.mark.end_to_end

CHARGES = 40


def _ledger(path: Path) -> Path:
    ledger = SqliteLedger(path)
    create_analyst(ledger, "ann", "ann-pw", 100.0, 1e-6, PrivacySettings())
    for n in range(CHARGES):
        ledger.charge_or_repeat(ChargeRequest("ann", f"SELECT count(*) FROM t WHERE x = {n}",
                                              f"fp-{n}", 0.1, 0.0, "laplace", 1.0))
    return path


def _export(ledger: Path, output: Path, terminal: bool) -> tuple[int, str]:
    """`dpgate ledger export` with its stderr on a pseudo-terminal or on a pipe."""
    command = [sys.executable, "-m", "proxy", "ledger", "export", "--format", "json",
               "--ledger", str(ledger), "--output", str(output)]
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                              check=False)
        return done.returncode, done.stderr
    main, secondary = pty.openpty()
    # A terminal of 100 columns (a fresh pseudo-terminal has 0).
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=secondary)
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    return process.wait(timeout=60), seen.decode(errors="replace")


def test_ledger_export_shows_a_bar_on_a_terminal_and_lines_elsewhere(tmp_path: Path):
    ledger = _ledger(tmp_path / "ledger.sqlite3")
    code, terminal = _export(ledger, tmp_path / "a.json", terminal=True)
    assert code == 0
    assert "exporting charges" in terminal and "100%" in terminal and "\r" in terminal
    assert f"{CHARGES}/{CHARGES}" in terminal
    code, piped = _export(ledger, tmp_path / "b.json", terminal=False)
    assert code == 0
    assert "\r" not in piped and "%|" not in piped  # no bar in a log
    ours = [line for line in piped.splitlines() if "charges" in line]  # not warnings
    assert ours == [f"exporting charges: {CHARGES}/{CHARGES}",
                                  f"{CHARGES} charges written to {tmp_path / 'b.json'}"]
    exported = [json.loads((tmp_path / name).read_text()) for name in ("a.json", "b.json")]
    assert exported[0] == exported[1] and len(exported[0]) == CHARGES


def test_plain_lines_come_every_so_many_steps_and_at_the_end():
    out = io.StringIO()
    with Progress(25, "measuring", stream=out, every=10) as progress:
        for n in range(25):
            progress.step(f"step {n + 1}")
    assert out.getvalue().splitlines() == ["step 10", "step 20", "step 25"]
