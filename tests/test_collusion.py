"""The collusion experiment (Theorem 3 of the multi-user shifted Laplace paper): the pure
simulation and `dpgate experiment collusion`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mechanisms.collusion import CollusionSetup, colluders_needed, run_collusion
from mechanisms.seeded_source import SeededRandomSource

pytestmark = pytest.mark.end_to_end

DPGATE = Path(sys.executable).parent / "dpgate"
# No DPGATE_* settings from the developer's shell: the command sees only its flags.
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("DPGATE_")}


def test_formula() -> None:
    # i = max(30, 18Δ²/(m²ε²)).
    assert colluders_needed(0.5, 1, 1) == 72
    assert colluders_needed(0.1, 1, 1) == 1800
    assert colluders_needed(1.0, 1, 2) == 30
    assert colluders_needed(0.1, 2, 5) == 288
    with pytest.raises(ValueError):
        colluders_needed(0, 1, 1)


def test_simulation_plain_converges_shifted_plateaus() -> None:
    setup = CollusionSetup(epsilon=0.5, sensitivity=1, margin=1, max_colluders=300,
                           trials=40, shift_interval=(0.5, 1.5), shift_unit="scale")
    calls = []
    result = run_collusion(setup, SeededRandomSource(1), lambda d, t: calls.append((d, t)))
    assert calls[-1] == (40, 40) and len(calls) == 40
    assert result.scale == 2 and result.mean_shift == 2.0 and result.formula_colluders == 72
    plain, shifted, informed = result.plain, result.shifted, result.informed
    assert len(plain.mean_error) == 300
    # Plain Laplace: the error of the average shrinks like b·sqrt(2/i).
    assert plain.mean_error[-1] < plain.mean_error[0] / 5
    assert plain.within_margin[71] >= 0.95
    # Shifted: it plateaus near |E[μ]| = 2, never within the margin.
    assert shifted.mean_error[-1] == pytest.approx(2.0, rel=0.15)
    assert shifted.within_margin[-1] == 0
    # Colluders who know the interval subtract E[μ] and converge again.
    assert informed.mean_error[-1] < 0.5


def test_simulation_validates() -> None:
    base = dict(epsilon=0.5, sensitivity=1, margin=1, max_colluders=3, trials=1,
                shift_unit="scale")
    with pytest.raises(ValueError):
        run_collusion(CollusionSetup(shift_interval=(1, 0), **base), SeededRandomSource(1))
    with pytest.raises(ValueError):
        run_collusion(CollusionSetup(shift_interval=(0, 1), **{**base, "shift_unit": "km"}),
                      SeededRandomSource(1))
    with pytest.raises(ValueError):
        run_collusion(CollusionSetup(shift_interval=(0, 1), **{**base, "trials": 0}),
                      SeededRandomSource(1))


def _table(stdout: str) -> dict[int, list[float]]:
    rows = {}
    for line in stdout.splitlines():
        cells = line.replace("<- formula", "").split()
        if cells and cells[0].isdigit() and len(cells) == 7:
            rows[int(cells[0])] = [float(c) for c in cells[1:]]
    return rows


def test_cli_collusion_prints_table_and_writes_plot(tmp_path: Path) -> None:
    plot = tmp_path / "collusion.png"
    done = subprocess.run(
        [str(DPGATE), "experiment", "collusion", "--epsilon", "0.5", "--sensitivity", "1",
         "--margin", "1", "--max-colluders", "200", "--trials", "30",
         "--shift-interval", "0.5,1.5", "--shift-unit", "scale", "--seed", "3",
         "--plot", str(plot)],
        capture_output=True, text=True, timeout=300, check=False,
        env=CLEAN_ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "SEEDED with 3" in done.stdout
    assert "formula i = max(30, 18*D^2/(m^2*eps^2)) = 72" in done.stdout
    assert "collusion: 30/30 trials" in done.stderr
    rows = _table(done.stdout)
    assert {1, 10, 72, 100, 200} <= set(rows)
    assert "<- formula" in next(line for line in done.stdout.splitlines()
                                if line.split() and line.split()[0] == "72")
    plain_first, plain_last = rows[1][0], rows[200][0]
    shifted_last = rows[200][2]
    assert plain_last < plain_first / 5  # plain error shrinks with i
    assert shifted_last == pytest.approx(2.0, rel=0.2)  # shifted plateaus near |E[μ]| = 2
    assert rows[200][4] < 0.6  # known mean: converges again
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot.stat().st_size > 10_000


def test_cli_collusion_uses_configured_shift(tmp_path: Path) -> None:
    config = tmp_path / "dpgate.toml"
    config.write_text('[privacy]\nshift_unit = "absolute"\nshift_interval = [3.0, 5.0]\n')
    done = subprocess.run(
        [str(DPGATE), "experiment", "collusion", "--config", str(config), "--max-colluders",
         "5", "--trials", "2", "--seed", "1"],
        capture_output=True, text=True, timeout=120, check=False, env=CLEAN_ENV)
    assert done.returncode == 0, done.stderr
    assert "shifts: uniform in [3, 5], mean shift 4" in done.stdout
