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


def open_existing_ledger(config: Config) -> Ledger:
    """The configured ledger for a command that only reads or changes what is there: a
    SQLite file that does not exist is an error naming it, not a new empty ledger."""
    if not config.ledger.dsn and not os.path.exists(config.ledger.path):
        raise ValueError(f"no ledger at {config.ledger.path}: give --config (or "
                         "DPGATE_CONFIG) or --ledger; `dpgate user add` creates one")
    return open_configured_ledger(config)


def ledger_name(config: Config) -> str:
    """Where the ledger is, for messages (a PostgreSQL ledger by its schema, no password)."""
    return f"schema {config.ledger.schema} of ledger.dsn" if config.ledger.dsn \
        else config.ledger.path
