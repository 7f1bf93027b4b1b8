"""`dpgate ledger upgrade` and `dpgate ledger migrate`: the shared PostgreSQL ledger's
schema, and moving a SQLite ledger into it."""

from __future__ import annotations

import argparse
import sys

from accounting.ledger_copy import copy_sqlite_to_postgres
from accounting.opening import is_postgres
from accounting.postgres_ledger import DEFAULT_SCHEMA, PostgresLedger

from .cli_common import add_config_arguments, config_from_args


def add_commands(ledger: argparse._SubParsersAction) -> None:
    """Register `upgrade` and `migrate` under `dpgate ledger`."""
    upgrade = ledger.add_parser(
        "upgrade", help="create or upgrade the PostgreSQL ledger's schema",
        description="Apply the PostgreSQL ledger's pending schema migrations (ledger.dsn, "
        "ledger.schema). Proxies refuse to start on an older schema: stop them all, run "
        "this once, start them again.")
    add_config_arguments(upgrade)
    upgrade.set_defaults(func=cmd_ledger_upgrade)
    migrate = ledger.add_parser(
        "migrate", help="copy a SQLite ledger into an empty PostgreSQL ledger",
        description="Copy every analyst, charge, stored answer and metric of a SQLite ledger "
        "into an empty PostgreSQL ledger, as stored (ids, spend, shifts). Stop the proxy "
        "using the SQLite file first; check with `dpgate ledger export` on both.")
    migrate.add_argument("--from", dest="source", required=True, metavar="sqlite:PATH",
                         help="the SQLite ledger file")
    migrate.add_argument("--to", dest="target", required=True, metavar="postgresql://…",
                         help="the PostgreSQL database (the schema is created there)")
    migrate.add_argument("--schema", default=DEFAULT_SCHEMA,
                         help=f"schema of the PostgreSQL ledger (default {DEFAULT_SCHEMA})")
    migrate.set_defaults(func=cmd_ledger_migrate)


def cmd_ledger_upgrade(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if not config.ledger.dsn:
        print("dpgate: ledger.dsn is not set: a SQLite ledger is upgraded whenever dpgate "
              "opens it", file=sys.stderr)
        return 1
    ledger = PostgresLedger(config.ledger.dsn, config.ledger.schema, upgrade=True)
    print(f"ledger schema {ledger.schema} is at version {ledger.version()}")
    return 0


def cmd_ledger_migrate(args: argparse.Namespace) -> int:
    source = args.source.removeprefix("sqlite:")
    if not is_postgres(args.target):
        print("dpgate: --to must be a postgresql:// URL", file=sys.stderr)
        return 2
    target = PostgresLedger(args.target, args.schema)
    copied = copy_sqlite_to_postgres(source, target)
    counts = ", ".join(f"{count} {table}" for table, count in copied.counts.items())
    print(f"copied {counts} from {source} into schema {target.schema}")
    return 0
