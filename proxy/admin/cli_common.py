"""Options every `dpgate` subcommand shares: where the configuration and the ledger are."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from ..config import Config, LedgerSettings, load_config


def add_config_arguments(sub: argparse.ArgumentParser, ledger: bool = True) -> None:
    """--config (and --ledger) for a subcommand; read them back with config_from_args."""
    sub.add_argument("--config", help="dpgate.toml (default: $DPGATE_CONFIG, else defaults)")
    if ledger:
        sub.add_argument("--ledger", help="ledger file (overrides the configuration)")


def config_from_args(args: argparse.Namespace) -> Config:
    config = load_config(args.config or os.environ.get("DPGATE_CONFIG"))
    if getattr(args, "ledger", None):
        config = replace(config, ledger=LedgerSettings(path=args.ledger))
    return config
