"""matplotlib draws the dashboard and the collusion experiment's `--plot`, and is loaded
only there: without it `--plot` says how to install it, before any simulation, and the
server, the engine and the command line still import (the dashboard's drawing process
is the only part of the server that loads it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proxy.admin.cli import main

pytestmark = pytest.mark.end_to_end

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.unit
def test_plot_without_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what find_spec sees when absent
    plot = tmp_path / "collusion.png"
    code = main(["experiment", "collusion", "--trials", "100000", "--plot", str(plot)])
    assert code == 2
    assert "pip install 'dpgate[plot]'" in capsys.readouterr().err
    assert not plot.exists()


def test_serving_code_imports_without_matplotlib() -> None:
    # A fresh interpreter where importing matplotlib fails: the server, the engine and
    # the command line still import.
    program = ("import sys; sys.modules['matplotlib'] = None\n"
               "import proxy.admin.cli, proxy.server.server, proxy.demo.demo\n"
               "print('ok')")
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.stdout.strip() == "ok", done.stderr
