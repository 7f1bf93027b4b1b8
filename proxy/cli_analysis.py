"""`dpgate explain` and `dpgate metrics`: the query analysis, from the command line."""

from __future__ import annotations

import argparse


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register this module's subcommands on the `dpgate` parser."""
