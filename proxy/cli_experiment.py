"""`dpgate experiment`: reproduce the seeds' analyses with the real samplers."""

from __future__ import annotations

import argparse


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register this module's subcommands on the `dpgate` parser."""
