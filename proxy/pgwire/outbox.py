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

    async def flush(self) -> None:
        """Write what is queued; wait only if the socket did not take all of it."""
        self.write()
        if self.writer.transport.get_write_buffer_size():
            await self.writer.drain()

    def write(self) -> None:
        """Hand what is queued to the transport (before a drain, or before closing)."""
        if self.parts:
            if self.writer.is_closing():
                # The client went away (uvloop raises RuntimeError on such a write): its
                # session ends as any lost client's, not as dpgate's internal error.
                raise ConnectionResetError("the client's connection is closed")
            self.writer.write(b"".join(self.parts))
            self.parts.clear()
            self.size = 0
