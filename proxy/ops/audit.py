"""The audit log: one JSON line per statement decision, to a file or standard output.

A line holds the decision only (time, analyst, client address, statement fingerprint,
kind, ε and δ charged, outcome, SQLSTATE, duration): never the statement's text, its
answer or an error message, which may echo what an analyst typed or what PostgreSQL
read. Rotation is left to the platform (logrotate's copytruncate, or stdout to journald).
"""

from __future__ import annotations

import json
import logging
import sys

from .decision import Decision


class AuditLog:
    """Writes through the logging module: one lock per handler, so lines from several
    threads never interleave, and a file opened in append mode."""

    def __init__(self, target: str):
        self.logger = logging.Logger(f"dpgate.audit:{target}", logging.INFO)  # not global
        handler: logging.Handler
        if target == "-":
            handler = logging.StreamHandler(sys.stdout)
        else:
            handler = logging.FileHandler(target, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        self.logger.addHandler(handler)
        self.handler = handler

    def write(self, decision: Decision) -> None:
        """Append the decision's line (written and flushed at once)."""
        self.logger.info(json.dumps(decision.as_json(), separators=(",", ":")))

    def close(self) -> None:
        self.handler.close()
