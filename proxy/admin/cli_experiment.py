"""`dpgate experiment`: reproduce the seeds' analyses with the real samplers."""

from __future__ import annotations

import argparse
import importlib.util
import sys

from mechanisms.collusion import CollusionResult, CollusionSetup, run_collusion
from mechanisms.random_source import RandomSource, SecureRandomSource
from mechanisms.seeded_source import SeededRandomSource

from .cli_common import add_config_arguments, config_from_args

_TABLE_SIZES = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300, 500, 1000, 2000, 5000, 10000)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register this module's subcommands on the `dpgate` parser."""
    experiment = commands.add_parser(
        "experiment", help="simulations of the privacy mechanisms").add_subparsers(
        dest="experiment_command", required=True)
    collusion = experiment.add_parser(
        "collusion", help="colluding analysts averaging answers: plain vs shifted Laplace",
        description="Theorem 3 of the multi-user shifted Laplace paper: i analysts ask the "
        "same count "
        "and average their answers. Prints, per coalition size, the mean error and the "
        "share of trials within the margin, for plain Laplace, per-analyst shifted Laplace, "
        "and shifted Laplace whose mean shift the colluders know and subtract, next to the "
        "formula i = max(30, 18*D^2/(m^2*eps^2)). Shifts come from the configured "
        "privacy.shift_interval unless --shift-interval is given. Docs: docs/mechanisms.md.")
    collusion.add_argument("--epsilon", type=float, default=0.5, help="epsilon of each "
                           "answer (default 0.5)")
    collusion.add_argument("--sensitivity", type=float, default=1.0,
                           help="sensitivity of the count (default 1)")
    collusion.add_argument("--margin", type=float, default=1.0,
                           help="m: the colluders want the answer within +-m (default 1)")
    collusion.add_argument("--max-colluders", type=int, default=1000,
                           help="largest coalition simulated (default 1000)")
    collusion.add_argument("--trials", type=int, default=200,
                           help="coalitions simulated per size (default 200)")
    collusion.add_argument("--shift-interval", type=_interval, metavar="LOW,HIGH",
                           help="draw interval of the shifts (default: the configuration's)")
    collusion.add_argument("--shift-unit", choices=("scale", "absolute"),
                           help="unit of the interval (default: the configuration's)")
    collusion.add_argument("--seed", type=int, help="reproducible simulation from a "
                           "predictable generator (experiments only; default: the CSPRNG)")
    collusion.add_argument("--plot", metavar="FILE", help="also write the curves as a PNG")
    add_config_arguments(collusion, ledger=False)
    collusion.set_defaults(func=cmd_collusion)


def _interval(text: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH, got {text!r}") from None
    return low, high


def _progress(done: int, total: int) -> None:
    # A terminal gets one line rewritten at each percent; a log gets a line every 10%.
    terminal = sys.stderr.isatty()
    every = 1 if terminal else 10
    if done != total and done * 100 // total // every == (done - 1) * 100 // total // every:
        return
    if terminal:
        print(f"\rcollusion: {done}/{total} trials", end="\n" if done == total else "",
              file=sys.stderr, flush=True)
    else:
        print(f"collusion: {done}/{total} trials", file=sys.stderr, flush=True)


def cmd_collusion(args: argparse.Namespace) -> int:
    privacy = config_from_args(args).privacy
    setup = CollusionSetup(
        epsilon=args.epsilon, sensitivity=args.sensitivity, margin=args.margin,
        max_colluders=args.max_colluders, trials=args.trials,
        shift_interval=args.shift_interval or privacy.shift_interval,
        shift_unit=args.shift_unit or privacy.shift_unit)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        # Checked before the simulation, which can take minutes.
        print("dpgate: --plot needs matplotlib: pip install 'dpgate[plot]'", file=sys.stderr)
        return 2
    rng: RandomSource = (SecureRandomSource() if args.seed is None
                         else SeededRandomSource(args.seed))
    result = run_collusion(setup, rng, _progress)
    source = ("the operating system's CSPRNG" if args.seed is None else
              f"SEEDED with {args.seed} (reproducible; such a source never noises releases)")
    print(_report(result, source))
    if args.plot:
        _plot(result, args.plot)
        print(f"plot written to {args.plot}")
    return 0


def _report(result: CollusionResult, source: str) -> str:
    setup = result.setup
    low, high = setup.shift_interval
    unit = " x b" if setup.shift_unit == "scale" else ""
    formula = result.formula_colluders
    lines = [
        "dpgate experiment collusion (colluders averaging one count; Theorem 3 of the "
        "multi-user shifted Laplace paper)",
        f"  epsilon {setup.epsilon:g}, sensitivity {setup.sensitivity:g}: Laplace scale "
        f"b = {float(result.scale):g}",
        f"  shifts: uniform in [{low:g}, {high:g}]{unit}, mean shift {result.mean_shift:g}",
        f"  margin m = {setup.margin:g}; formula i = max(30, 18*D^2/(m^2*eps^2)) = {formula}",
        f"  {setup.trials} trials; random source: {source}",
        "",
        "mean |error| of the averaged answer and share of trials within +-m: plain Laplace,",
        "shifted Laplace, and shifted with the mean shift known to the colluders and removed",
        "",
        f"{'colluders':>9}  {'plain':>7} {'<=m':>5}  {'shifted':>7} {'<=m':>5}  "
        f"{'known':>7} {'<=m':>5}",
    ]
    sizes = {s for s in _TABLE_SIZES if s <= setup.max_colluders} | {setup.max_colluders}
    if formula <= setup.max_colluders:
        sizes.add(formula)
    for size in sorted(sizes):
        cells = [f"{size:>9}"]
        for curve in (result.plain, result.shifted, result.informed):
            cells.append(f"{curve.mean_error[size - 1]:>7.3f} "
                         f"{curve.within_margin[size - 1]:>5.3f}")
        lines.append("  ".join(cells) + ("  <- formula" if size == formula else ""))
    return "\n".join(lines)


def _plot(result: CollusionResult, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    setup = result.setup
    sizes = range(1, setup.max_colluders + 1)
    figure, (errors, within) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    curves = ((result.plain, "plain Laplace"), (result.shifted, "per-analyst shifted Laplace"),
              (result.informed, "shifted, known mean shift subtracted"))
    for curve, label in curves:
        errors.plot(sizes, curve.mean_error, label=label)
        within.plot(sizes, curve.within_margin, label=label)
    errors.axhline(setup.margin, color="grey", linestyle="--", label=f"margin m = {setup.margin:g}")
    errors.axhline(abs(result.mean_shift), color="tab:orange", linestyle=":",
                   label=f"|mean shift| = {abs(result.mean_shift):g}")
    errors.set_ylabel("mean |average − true count|")
    errors.set_title(f"Colluders averaging one count: ε = {setup.epsilon:g}, "
                     f"Δ = {setup.sensitivity:g}, {setup.trials} trials")
    within.axhline(0.99, color="grey", linestyle="--", label="99%")
    within.set_ylabel(f"share within ±{setup.margin:g}")
    within.set_xlabel("colluding analysts i")
    for axes in (errors, within):
        axes.set_xscale("log")
        if result.formula_colluders <= setup.max_colluders:
            axes.axvline(result.formula_colluders, color="black", linestyle="-.",
                         label=f"formula i = {result.formula_colluders}")
        axes.legend(fontsize="small")
        axes.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
