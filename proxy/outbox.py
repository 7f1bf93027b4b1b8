"""Messages for one client, written in one system call per batch instead of one each."""

from __future__ import annotations

import asyncio

# A long answer goes out in pieces of about this size rather than all at the end.
PIECE = 1 << 16


class Outbox:
    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.parts: list[bytes] = []
        self.size = 0

    def send(self, data: bytes) -> None:
        self.parts.append(data)
        self.size += len(data)
        if self.size >= PIECE:
            self.write()

    def write(self) -> None:
        """Hand what is queued to the transport (before a drain, or before closing)."""
        if self.parts:
            self.writer.write(b"".join(self.parts))
            self.parts.clear()
            self.size = 0
