"""Which backend connection is running a client's statement now, for CancelRequest."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .backend import BackendConnection


class Running:
    """One client's statement in flight on the backend, if any. Whoever runs something on
    a backend connection for that client says so with `on`; a CancelRequest calls
    `cancel`."""

    def __init__(self) -> None:
        self._connection: BackendConnection | None = None

    @contextmanager
    def on(self, connection: BackendConnection) -> Iterator[None]:
        """While the block runs, a CancelRequest cancels what `connection` runs."""
        self._connection = connection
        try:
            yield
        finally:
            self._connection = None

    def set(self, connection: BackendConnection | None) -> None:
        """The same as `on`, for work that is not one block (the relay routine's)."""
        self._connection = connection

    async def cancel(self) -> None:
        """Ask PostgreSQL to cancel the statement in flight; nothing when there is none."""
        if self._connection is not None:
            await self._connection.cancel()
