"""Options every `dpgate` subcommand shares: where the configuration and the ledger are."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from accounting import Ledger
from accounting.opening import is_postgres, open_ledger

from ..config import Config, LedgerSettings, load_config


def add_config_arguments(sub: argparse.ArgumentParser, ledger: bool = True) -> None:
    """--config (and --ledger) for a subcommand; read them back with config_from_args."""
    sub.add_argument("--config", help="dpgate.toml (default: $DPGATE_CONFIG, else defaults)")
    if ledger:
        sub.add_argument("--ledger", help="ledger file, or a postgresql:// URL (overrides "
                         "the configuration)")


def config_from_args(args: argparse.Namespace) -> Config:
    config = load_config(args.config or os.environ.get("DPGATE_CONFIG"))
    if getattr(args, "ledger", None):
        given = (LedgerSettings(dsn=args.ledger, schema=config.ledger.schema)
                 if is_postgres(args.ledger) else LedgerSettings(path=args.ledger))
        config = replace(config, ledger=given)
    return config


def open_configured_ledger(config: Config, upgrade: bool = False) -> Ledger:
    """The ledger the configuration names: PostgreSQL if ledger.dsn is set, else SQLite."""
    return open_ledger(config.ledger.path, config.ledger.dsn, config.ledger.schema,
                       upgrade=upgrade)
