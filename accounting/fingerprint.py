"""Fingerprints: equal fingerprints mean the same question asked the same way."""

from __future__ import annotations

import hashlib
import json


def fingerprint(normalized_sql: str, epsilon: float, delta: float, mechanism: str) -> str:
    """A stable hash of the normalized statement and the parameters of its release."""
    payload = json.dumps([normalized_sql, repr(epsilon), repr(delta), mechanism])
    return hashlib.sha256(payload.encode()).hexdigest()
