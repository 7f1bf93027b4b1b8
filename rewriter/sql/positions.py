"""Map sqlglot nodes back to 1-based character positions in the client's text."""

from __future__ import annotations

from sqlglot import exp


def position_of(node: exp.Expr, offset: int = 0) -> int | None:
    """The 1-based position of the node's first token, as PostgreSQL reports positions."""
    for candidate in node.walk():
        start = candidate.meta.get("start") if candidate.meta else None
        if start is not None:
            return offset + int(start) + 1
    return None
