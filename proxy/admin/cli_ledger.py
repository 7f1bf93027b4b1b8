"""`dpgate budget` and `dpgate ledger`: what the data owner sees of the privacy ledger."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from accounting import (
    AnalystBudget,
    ChargeRecord,
    GlobalLoss,
    Ledger,
    UnknownAnalyst,
    as_text,
    as_written,
)
from mechanisms.budget_plan import (
    TIE_BREAK,
    Alpha,
    ExponentialAlpha,
    TableAlpha,
    Verification,
    alpha_from_json,
    plan_budgets,
    verify,
)

from . import cli_ledger_store
from .cli_common import add_config_arguments, config_from_args, open_existing_ledger

EXPORT_FIELDS = [field.name for field in dataclasses.fields(ChargeRecord)]
# Without a terminal, an export reports progress every this many rows at least.
EXPORT_PROGRESS_ROWS = 10_000


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register this module's subcommands on the `dpgate` parser."""
    budget = commands.add_parser(
        "budget", help="budgets: spend and global loss, risk-based distribution"
    ).add_subparsers(dest="budget_command", required=True)
    _add_budget_show(budget)
    _add_budget_plan(budget)
    _add_budget_apply(budget)
    ledger = commands.add_parser(
        "ledger", help="the ledger's charges and stored answers"
    ).add_subparsers(dest="ledger_command", required=True)
    _add_ledger_export(ledger)
    _add_forget_answers(ledger)
    cli_ledger_store.add_commands(ledger)


def _add_budget_show(budget: argparse._SubParsersAction) -> None:
    show = budget.add_parser(
        "show", help="every analyst's allocation and spend, and the global loss",
        description="Every analyst's epsilon and delta (allocated, spent, left) and query "
        "count; removed analysts still count for the global loss, the sum over everyone "
        "(what all analysts together could learn if they colluded).")
    show.add_argument("--json", action="store_true", help="one JSON object")
    add_config_arguments(show)
    show.set_defaults(func=cmd_budget_show)


def _add_budget_plan(budget: argparse._SubParsersAction) -> None:
    plan = budget.add_parser(
        "plan", help="distribute epsilon by disclosure risk (Bkakria, Cuppens & Cuppens)",
        description="Compute each analyst's epsilon from their probability P of disclosing "
        "what they learn: the optimal alpha-risky, monotone distribution, with the tie-break "
        f"{TIE_BREAK}. Prints the budgets and the checks; --apply writes them.")
    who = plan.add_mutually_exclusive_group(required=True)
    who.add_argument("--analysts", metavar="FILE", help="one NAME=P per line (# starts a "
                     "comment), or a .json file {\"NAME\": P, ...}")
    who.add_argument("--analyst", metavar="NAME=P", action="append",
                     help="an analyst and their disclosure probability, 0 < P <= 1 (repeat)")
    alpha = plan.add_mutually_exclusive_group(required=True)
    alpha.add_argument("--epsilon", type=float, metavar="E", help="alpha(x) = 1 for x <= E, "
                       "10^(-(x-E)/E) beyond (the paper's example); any number of analysts")
    alpha.add_argument("--alpha-table", metavar="FILE", help="lines TOTAL,PROBABILITY: "
                       "log10 alpha linear between points, 0 beyond the last; at most 20 "
                       "analysts")
    plan.add_argument("--apply", action="store_true",
                      help="set these epsilon totals in the ledger (all analysts must exist)")
    plan.add_argument("--json", action="store_true", help="print JSON (input of budget apply)")
    add_config_arguments(plan)
    plan.set_defaults(func=cmd_budget_plan)


def _add_budget_apply(budget: argparse._SubParsersAction) -> None:
    apply = budget.add_parser(
        "apply", help="set epsilon totals from the output of `budget plan --json`",
        description="Check the plan again (alpha-risky, monotone, positive) and set every "
        "analyst's epsilon total, all or none.")
    apply.add_argument("file", help="JSON written by `dpgate budget plan --json`")
    add_config_arguments(apply)
    apply.set_defaults(func=cmd_budget_apply)


def _add_ledger_export(ledger: argparse._SubParsersAction) -> None:
    export = ledger.add_parser("export", help="every charge, as CSV or JSON",
                               description=f"Write every charge ({', '.join(EXPORT_FIELDS)}), "
                               "removed analysts' too, in the order they were made.")
    export.add_argument("--format", choices=("csv", "json"), default="csv")
    export.add_argument("--output", metavar="FILE", help="default: standard output")
    export.add_argument("--analyst", metavar="NAME", help="only this analyst's charges")
    add_config_arguments(export)
    export.set_defaults(func=cmd_ledger_export)


def _add_forget_answers(ledger: argparse._SubParsersAction) -> None:
    forget = ledger.add_parser(
        "forget-answers", help="drop stored answers (after the data changed)",
        description="Drop the stored answers, so that a repeated question is answered "
        "from the current data and charged as a new one. Run it after the data changed.")
    forget.add_argument("--analyst", metavar="NAME", help="only this analyst's answers")
    add_config_arguments(forget)
    forget.set_defaults(func=cmd_ledger_forget_answers)


def _ledger(args: argparse.Namespace) -> Ledger:
    return open_existing_ledger(config_from_args(args))


# budget show

def cmd_budget_show(args: argparse.Namespace) -> int:
    budgets = _ledger(args).budgets()
    loss = GlobalLoss.of(budgets)
    if args.json:
        print(json.dumps({"analysts": [_budget_json(entry) for entry in budgets],
                          "global": _figures(dataclasses.asdict(loss))}, indent=2))
        return 0
    print(f"{'analyst':<24} {'epsilon':>9} {'spent':>9} {'left':>9} {'delta':>9} "
          f"{'spent':>9} {'queries':>8}")
    for entry in budgets:
        print(_budget_line(entry))
    print(f"global loss if all analysts collude: epsilon {as_text(loss.epsilon_spent)} spent "
          f"(allocated {as_text(loss.epsilon_allocated)}), delta {as_text(loss.delta_spent)} "
          f"spent (allocated {as_text(loss.delta_allocated)})")
    return 0


def _budget_json(entry: AnalystBudget) -> dict[str, Any]:
    budget = entry.budget
    return {"name": entry.name, "active": entry.active, **_figures({
        **dataclasses.asdict(budget), "epsilon_left": budget.epsilon_left,
        "delta_left": budget.delta_left})}


def _figures(values: dict[str, Any]) -> dict[str, Any]:
    return {k: as_written(v) if isinstance(v, float) else v for k, v in values.items()}


def _budget_line(entry: AnalystBudget) -> str:
    budget = entry.budget
    if entry.active:
        return (f"{entry.name:<24} {as_text(budget.epsilon_total):>9} "
                f"{as_text(budget.epsilon_spent):>9} {as_text(budget.epsilon_left):>9} "
                f"{as_text(budget.delta_total):>9} {as_text(budget.delta_spent):>9} "
                f"{budget.queries:>8}")
    name = f"{entry.name} (removed)"
    return (f"{name:<24} {'-':>9} {as_text(budget.epsilon_spent):>9} {'-':>9} {'-':>9} "
            f"{as_text(budget.delta_spent):>9} {budget.queries:>8}")


# budget plan and apply

def cmd_budget_plan(args: argparse.Namespace) -> int:
    risks = read_risks(args.analysts) if args.analysts else parse_risks(args.analyst)
    alpha = ExponentialAlpha(args.epsilon) if args.alpha_table is None else TableAlpha(
        read_alpha_table(args.alpha_table))
    budgets = plan_budgets(risks, alpha)
    checks = verify(risks, budgets, alpha)
    if args.json:
        print(json.dumps(plan_json(risks, budgets, alpha, checks), indent=2))
    else:
        _print_plan(risks, budgets, alpha, checks)
    if not all(check.ok for check in checks):
        print("dpgate: the plan failed its checks; nothing applied", file=sys.stderr)
        return 1
    return _apply(args, budgets) if args.apply else 0


def cmd_budget_apply(args: argparse.Namespace) -> int:
    risks, budgets, alpha = read_plan(args.file)
    # The file may have been edited since it was planned: never apply what fails a check.
    failed = [check for check in verify(risks, budgets, alpha) if not check.ok]
    if failed:
        print(f"dpgate: {args.file} fails its checks ({_check_line(failed[0])}); "
              "nothing applied", file=sys.stderr)
        return 1
    return _apply(args, budgets)


def read_plan(path: str) -> tuple[dict[str, float], dict[str, float], Alpha]:
    """Risks, budgets and α from the output of `budget plan --json`."""
    plan = json.loads(Path(path).read_text())
    try:
        risks = {entry["name"]: float(entry["p"]) for entry in plan["analysts"]}
        budgets = {entry["name"]: float(entry["epsilon"]) for entry in plan["analysts"]}
        return risks, budgets, alpha_from_json(plan["alpha"])
    except (KeyError, TypeError) as error:
        raise ValueError(f"{path} is not the output of `dpgate budget plan --json` "
                         f"({error!r} is missing or wrong)") from None


def _apply(args: argparse.Namespace, budgets: Mapping[str, float]) -> int:
    try:
        _ledger(args).set_budgets(budgets)
    except UnknownAnalyst as missing:
        print(f"dpgate: no analyst named {missing} in the ledger; add them first "
              "(nothing applied)", file=sys.stderr)
        return 1
    print(f"epsilon totals set for {len(budgets)} analysts", file=sys.stderr)
    return 0


def plan_json(risks: Mapping[str, float], budgets: Mapping[str, float], alpha: Alpha,
              checks: list[Verification]) -> dict[str, Any]:
    """The plan as `budget plan --json` prints it and `budget apply` reads it."""
    return {
        "alpha": alpha.to_json(),
        "tie_break": TIE_BREAK,
        "analysts": [{"name": name, "p": risks[name], "epsilon": budgets[name]}
                     for name in _by_budget(budgets)],
        "epsilon_sum": sum(budgets.values()),
        "checks": [dataclasses.asdict(check) | {"ok": check.ok} for check in checks],
    }


def _by_budget(budgets: Mapping[str, float]) -> list[str]:
    return sorted(budgets, key=lambda name: (budgets[name], name))


def _print_plan(risks: Mapping[str, float], budgets: Mapping[str, float], alpha: Alpha,
                checks: list[Verification]) -> None:
    print(f"{'analyst':<24} {'p':>12} {'epsilon':>12}")
    for name in _by_budget(budgets):
        print(f"{name:<24} {risks[name]:>12g} {budgets[name]:>12.6g}")
    print(f"sum of budgets: {sum(budgets.values()):.6g}")
    print(f"alpha: {_describe_alpha(alpha)}")
    print(f"tie-break: {TIE_BREAK}")
    for check in checks:
        print(f"check: {_check_line(check)}")


def _describe_alpha(alpha: Alpha) -> str:
    if isinstance(alpha, ExponentialAlpha):
        e = alpha.epsilon
        return f"1 up to a total of {e:g}, then 10^(-(x - {e:g}) / {e:g})"
    points = ", ".join(f"({x:g}, {a:g})" for x, a in alpha.points)
    return f"table {points}; log-linear between points, 0 beyond the last"


def _check_line(check: Verification) -> str:
    def yes(flag: bool) -> str:
        return "yes" if flag else "NO"

    groups = f"{check.groups_checked} group{'s' if check.groups_checked != 1 else ''}"
    return (f"{check.method} ({groups}): alpha-risky "
            f"{yes(check.alpha_risky)} (tightest group: {', '.join(check.tightest) or 'none'};"
            f" margin {check.margin:.3g} in log10 probability), monotone "
            f"{yes(check.monotone)}, every budget positive {yes(check.positive)}")


def read_risks(path: str) -> dict[str, float]:
    """Disclosure probabilities from a file: a JSON object, or NAME=P lines."""
    text = Path(path).read_text()
    if path.endswith(".json"):
        return {str(name): float(p) for name, p in json.loads(text).items()}
    return parse_risks(_content_lines(text))


def parse_risks(items: Iterable[str]) -> dict[str, float]:
    """NAME=P items (P a number in (0, 1]); a name given twice is an error."""
    risks: dict[str, float] = {}
    for item in items:
        name, equals, value = item.rpartition("=")
        name = name.strip()
        if not equals or not name:
            raise ValueError(f"expected NAME=P, not {item!r}")
        if name in risks:
            raise ValueError(f"analyst {name} is given twice")
        risks[name] = float(value)
    return risks


def read_alpha_table(path: str) -> tuple[tuple[float, float], ...]:
    """Points TOTAL,PROBABILITY, one per line; a first line that is not numbers is a header."""
    points = []
    for number, line in enumerate(_content_lines(Path(path).read_text())):
        fields = line.replace(",", " ").split()
        try:
            x, a = (float(field) for field in fields)
        except ValueError:
            if number == 0:
                continue
            raise ValueError(f"{path}: expected TOTAL,PROBABILITY, not {line!r}") from None
        points.append((x, a))
    return tuple(points)


def _content_lines(text: str) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


# ledger export and forget-answers

def cmd_ledger_export(args: argparse.Namespace) -> int:
    from ..ops.progress import Progress  # proxy.ops imports the rewriter: only when needed

    ledger = _ledger(args)
    charges = ledger.charges(args.analyst)
    if args.analyst is not None and not charges and ledger.analyst(args.analyst) is None:
        print(f"dpgate: no analyst named {args.analyst}", file=sys.stderr)
        return 1
    # Progress on stderr (the charges may be on stdout): a bar on a terminal, else a
    # line every tenth of a large export.
    with Progress(len(charges), "exporting charges",
                  every=max(EXPORT_PROGRESS_ROWS, len(charges) // 10)) as progress:
        if args.output:
            with open(args.output, "w", newline="", encoding="utf-8") as out:
                write_charges(charges, args.format, out, progress.step)
            print(f"{len(charges)} charges written to {args.output}", file=sys.stderr)
        else:
            try:
                write_charges(charges, args.format, sys.stdout, progress.step)
                sys.stdout.flush()
            except BrokenPipeError:
                # The reader stopped (`| head`): what it wanted is written. Python would
                # flush stdout again at exit and fail, so stdout now goes nowhere.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def write_charges(charges: list[ChargeRecord], form: str, out: TextIO,
                  done: Callable[[], None] = lambda: None) -> None:
    """Every charge as CSV (with a header) or as a JSON list of objects (what
    json.dump(…, indent=2) writes), one at a time, calling `done` after each."""
    if form == "json":
        out.write("[" if charges else "[]")
        for index, charge in enumerate(charges):
            item = json.dumps(dataclasses.asdict(charge), indent=2)
            out.write(("," if index else "") + "\n" + textwrap.indent(item, "  "))
            done()
        out.write("\n]\n" if charges else "\n")
        return
    writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS)
    writer.writeheader()
    for charge in charges:
        writer.writerow(dataclasses.asdict(charge))
        done()


def cmd_ledger_forget_answers(args: argparse.Namespace) -> int:
    try:
        forgotten = _ledger(args).forget_answers(args.analyst)
    except UnknownAnalyst:
        print(f"dpgate: no analyst named {args.analyst}", file=sys.stderr)
        return 1
    whose = f"of {args.analyst}" if args.analyst else "of every analyst"
    print(f"{forgotten} stored answers {whose} forgotten; a repeated question is now "
          "answered from the current data and charged")
    return 0
