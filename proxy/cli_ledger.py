"""`dpgate budget` and `dpgate ledger`: what the data owner sees of the privacy ledger."""

from __future__ import annotations

import argparse


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register this module's subcommands on the `dpgate` parser."""
