"""`dpgate explain` and `dpgate metrics`: the query analysis, from the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import (
    BackendSettings,
    Config,
    LedgerSettings,
    PrivacySettings,
    default_data_dir,
    load_policy_file,
)
from ..demo.demo import DEMO_POLICY_FILE
from .cli_common import add_config_arguments, config_from_args, open_configured_ledger

if TYPE_CHECKING:
    from rewriter.policy.model import Policy
    from rewriter.sensitivity.metrics import Metrics

# The analysis (sqlglot, numpy) and asyncpg are imported by the commands that use them, so
# that registering these commands costs every other `dpgate` command nothing.


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register this module's subcommands on the `dpgate` parser."""
    explain_parser = commands.add_parser(
        "explain", help="print the sensitivity analysis of one query as JSON",
        description="Analyse one SQL statement as the proxy would and print one JSON object: "
        "per column the elastic and smooth sensitivity and the noise scale, or why it is "
        "refused. With --policy it needs no database and no ledger.")
    explain_parser.add_argument("sql", help="the statement")
    source = explain_parser.add_mutually_exclusive_group()
    source.add_argument("--policy", help="a TOML policy file ([tables.NAME] …); no database "
                        "needed: join columns need a declared max_freq")
    source.add_argument("--config", help="dpgate.toml: its policy and the ledger's metrics "
                        "(default: $DPGATE_CONFIG, else the policy `dpgate demo` serves)")
    explain_parser.add_argument("--ledger", help="ledger file (overrides the configuration)")
    explain_parser.add_argument("--epsilon", type=float, help="default: the configured "
                                "default_epsilon")
    explain_parser.add_argument("--delta", type=float, help="default: the configured "
                                "default_delta")
    explain_parser.add_argument("--k", type=int, default=0, help="report ES(k) at this "
                                "distance k (default 0)")
    explain_parser.set_defaults(func=cmd_explain)

    metrics = commands.add_parser("metrics", help="FLEX metrics of the data").add_subparsers(
        dest="metrics_command", required=True)
    refresh = metrics.add_parser(
        "refresh", help="measure maxFreq of every column of the policy's tables again",
        description="Without --config or $DPGATE_CONFIG: the database of `dpgate demo` "
        "(its embedded PostgreSQL in --data-dir) and its ledger.")
    add_config_arguments(refresh)
    refresh.add_argument("--data-dir", default=str(default_data_dir()),
                         help="the demo's data folder (default: %(default)s)")
    refresh.set_defaults(func=cmd_metrics_refresh)
    show = metrics.add_parser("show", help="the metrics stored in the ledger")
    add_config_arguments(show)
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_metrics_show)


def cmd_explain(args: argparse.Namespace) -> int:
    from rewriter.release.explain import explain
    from rewriter.sensitivity.metrics import Metrics

    from ..engine.knowledge import Knowledge

    if args.policy:
        config, metrics = Config(), Metrics()
        policy, source = load_policy_file(args.policy), args.policy
    else:
        config = config_from_args(args)
        policy, source = config.policy, args.config or os.environ.get("DPGATE_CONFIG")
        if source is None:  # no configuration: what `dpgate demo` serves, and its ledger
            policy, source = load_policy_file(DEMO_POLICY_FILE), str(DEMO_POLICY_FILE)
        metrics = Knowledge(open_configured_ledger(config)).metrics
    from rewriter.policy.session import with_session_noise

    # Planned as a session with the default noise plans it (a histogram's SQL depends on it).
    policy = with_session_noise(policy, config.privacy.default_mechanism)
    epsilon = args.epsilon if args.epsilon is not None else config.privacy.default_epsilon
    delta = args.delta if args.delta is not None else config.privacy.default_delta
    share = config.privacy.sum_count_share
    if config.backend.dsn and not args.policy:
        report = explain_on_database(args.sql, policy, metrics, config.backend.dsn, epsilon,
                                     delta, args.k, share)
    else:
        report = explain(args.sql, policy, metrics, epsilon, delta, args.k,
                         sum_count_share=share)
    print(json.dumps({**report, "policy": source}, indent=2))
    return 0


def explain_on_database(sql: str, policy: Policy, metrics: Metrics, dsn: str,
                        epsilon: float, delta: float, k: int = 0,
                        sum_count_share: float = PrivacySettings.sum_count_share,
                        ) -> dict[str, Any]:
    """explain() with the inputs the proxy's planner has (planning.py): the backend's
    column catalog (unqualified columns, USING joins), and maxFreq measured, as the reader
    role, for a join column met for the first time (not stored: explain writes nothing)."""
    import psycopg

    from rewriter.release.explain import explain
    from rewriter.sensitivity.metrics import max_freq_query

    from ..engine.knowledge import CATALOG_QUERY, catalog

    with psycopg.connect(dsn, autocommit=True) as connection:
        columns, types, enums = catalog(connection.execute(CATALOG_QUERY).fetchall())
        metrics = replace(metrics, columns=columns, column_types=types, enum_types=enums)
        for _ in range(3):
            report = explain(sql, policy, metrics, epsilon, delta, k,
                             sum_count_share=sum_count_share)
            missing = report.pop("missing_metrics", None)
            if not missing:
                return report
            measured = {}
            for table, column in missing:
                row = connection.execute(max_freq_query(table, column)).fetchone()
                measured[(table, column)] = int(row[0]) if row and row[0] is not None else 0
            metrics = replace(metrics, max_freq={**metrics.max_freq, **measured})
    return report


def cmd_metrics_refresh(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if not config.backend.dsn and not (args.config or os.environ.get("DPGATE_CONFIG")):
        return _refresh_demo(args)
    if not config.backend.dsn:
        print("dpgate: backend.dsn is not set", file=sys.stderr)
        return 2
    return _refresh(config)


def _refresh_demo(args: argparse.Namespace) -> int:
    """The demo's database, as the superuser of its embedded PostgreSQL (which keeps
    running if `dpgate demo` uses it)."""
    from psycopg.conninfo import make_conninfo

    from ..demo.demo import DEMO_DATABASE, start_embedded_postgres

    data_dir = Path(args.data_dir)
    if not (data_dir / "pgdata").is_dir():
        print(f"dpgate: no demo database in {data_dir} (run `dpgate demo` first, or give "
              "--config)", file=sys.stderr)
        return 2
    server, admin = start_embedded_postgres(data_dir / "pgdata")
    try:
        dsn = make_conninfo(admin, dbname=DEMO_DATABASE)
        return _refresh(replace(
            Config(), backend=BackendSettings(dsn=dsn),
            ledger=LedgerSettings(path=args.ledger or str(data_dir / "ledger.sqlite3")),
            policy=load_policy_file(DEMO_POLICY_FILE)))
    finally:
        server.cleanup()


def _refresh(config: Config) -> int:
    import asyncpg

    from ..ops.progress import Progress
    from .metrics_refresh import refresh_metrics

    ledger = open_configured_ledger(config)

    bars: list[Progress] = []  # made at the first column, when the total is known

    def progress(index: int, total: int, metric: Any, seconds: float) -> None:
        if not bars:
            bars.append(Progress(total, "measuring maxFreq", lines=sys.stdout))
        bars[0].step(f"[{index}/{total}] {metric.table}.{metric.column}: max_freq "
                     f"{metric.max_freq} ({seconds:.2f} s)")

    async def run() -> int:
        try:
            measured = await refresh_metrics(
                config.backend.dsn, config.policy.tables,
                [(m.table, m.column) for m in ledger.metrics()], progress)
        except asyncpg.PostgresError as error:
            print(f"dpgate: measuring maxFreq failed: {error}", file=sys.stderr)
            return 1
        finally:
            for bar in bars:
                bar.close()
        ledger.store_metrics(measured)
        where = (f"the PostgreSQL ledger (schema {config.ledger.schema})" if config.ledger.dsn
                 else config.ledger.path)
        print(f"{len(measured)} metrics stored in {where}")
        return 0

    return asyncio.run(run())


def cmd_metrics_show(args: argparse.Namespace) -> int:
    metrics = open_configured_ledger(config_from_args(args)).metrics()
    if args.json:
        print(json.dumps([m.__dict__ for m in metrics], indent=2))
        return 0
    print(f"{'column':<40} {'max_freq':>10}  measured")
    for metric in metrics:
        print(f"{metric.table + '.' + metric.column:<40} {metric.max_freq:>10}  "
              f"{metric.measured_at}")
    return 0
