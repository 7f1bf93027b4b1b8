"""A stream protocol whose incoming bytes a hook may take before the stream sees them.

The proxy's sessions read their client and their relay connection as asyncio streams,
one task each. Each message read that way wakes that task, which costs more than the
rest of relaying a message; proxy/server/relay.py takes relayed answers, and
fast_relay.py the plain relayed statements, in the transports' callbacks instead, and
leave everything else to the streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class HookedStreamProtocol(asyncio.StreamReaderProtocol):
    """StreamReaderProtocol with `hook`: given the bytes that arrived, it returns those it
    did not take (fed to the stream as usual). `on_pause_writing` and `on_resume_writing`
    run when the transport's write buffer fills up and empties again, `on_closed` when the
    peer closed the connection or it was lost (either or both: it must be idempotent)."""

    def __init__(self, reader: asyncio.StreamReader, *args: object) -> None:
        super().__init__(reader, *args)  # type: ignore[arg-type]
        self.hook: Callable[[bytes], bytes] | None = None
        self.on_pause_writing: Callable[[], None] | None = None
        self.on_resume_writing: Callable[[], None] | None = None
        self.on_closed: Callable[[], None] | None = None

    def data_received(self, data: bytes) -> None:
        if self.hook is not None:
            data = self.hook(data)
            if not data:
                return
        super().data_received(data)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.on_pause_writing is not None:
            self.on_pause_writing()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.on_resume_writing is not None:
            self.on_resume_writing()

    def eof_received(self) -> bool | None:
        keep_open = super().eof_received()
        if self.on_closed is not None:  # the stream has its EOF; a hook may not read it
            self.on_closed()
        return keep_open

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.on_closed is not None:
            self.on_closed()
