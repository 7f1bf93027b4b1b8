"""The stream a client's messages are read from; it knows when the proxy waits on the client.

That is where the idle timeout runs and where a session stops once the proxy is shutting
down, whatever message loop reads from it: a session is idle exactly when the proxy needs
more bytes from the client while no transaction is open.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .hooked import HookedStreamProtocol


class IdleTimeout(Exception):
    """The client stayed idle outside a transaction longer than server.idle_timeout."""


class ShuttingDown(Exception):
    """The proxy is stopping and this session has finished what it was doing."""


class ClientReader(asyncio.StreamReader):
    def __init__(self, limit: int = 2 ** 16) -> None:
        super().__init__(limit=limit)
        self.waiting = False  # suspended until the client sends more
        self.stopping = False
        self.idle_timeout = 0.0
        self.in_transaction: Callable[[], bool] = lambda: True
        # Whether statements relayed while the session waits (fast_relay) are in flight.
        self.relaying: Callable[[], bool] = lambda: False
        self.protocol: HookedStreamProtocol | None = None  # the server's, feeding this stream
        self._timer: asyncio.Timeout | None = None

    def pending(self) -> int:
        """Bytes received and not read yet."""
        return len(self._buffer)  # type: ignore[attr-defined]  # asyncio has no peek

    def watch(self, idle_timeout: float, in_transaction: Callable[[], bool],
              relaying: Callable[[], bool]) -> None:
        """From now on, waits outside a transaction end after `idle_timeout` seconds (0:
        never); `relaying` tells whether the session is busy while it waits."""
        self.idle_timeout = idle_timeout
        self.in_transaction = in_transaction
        self.relaying = relaying

    def at_rest(self) -> bool:
        """Whether the session waits for the client at a message boundary (nothing read
        in part) and the proxy is not stopping."""
        return self.waiting and not self._buffer and not self.stopping  # type: ignore[attr-defined]

    async def readexactly(self, n: int) -> bytes:
        if self.pending() >= n:
            return await super().readexactly(n)
        # The message loop would wait for the client: a stopping proxy ends the session
        # here, between statements, rather than in the middle of one.
        if self.stopping:
            raise ShuttingDown
        self.waiting = True
        try:
            if not self.idle_timeout:  # most proxies: no timer to arm
                return await super().readexactly(n)
            async with asyncio.timeout(None) as self._timer:
                self.touch(self.in_transaction())
                return await super().readexactly(n)
        except TimeoutError:
            raise IdleTimeout from None
        finally:
            self.waiting = False
            self._timer = None

    def touch(self, in_transaction: bool) -> None:
        """The client was active while the session waited (fast_relay answered it): the
        idle timeout counts from now, and not at all inside a transaction."""
        if self._timer is not None:
            self._timer.reschedule(None if in_transaction else
                                   asyncio.get_running_loop().time() + self.idle_timeout)
