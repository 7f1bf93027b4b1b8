"""The asyncio server: accepts clients, authenticates them and runs their sessions.

Each client is one task; whatever goes wrong in it (a malformed message, a dropped
socket, a bug) ends that client's connection only.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import struct
from dataclasses import dataclass, field

from accounting import Ledger
from mechanisms.random_source import RandomSource, SecureRandomSource

from . import wire
from .auth import AuthenticationFailed, authenticate
from .backend import BackendConnection, BackendError, BackendPool, Endpoint
from .config import Config
from .extended import ExtendedProtocol
from .knowledge import Knowledge
from .plan_cache import PlanCache
from .session import Session

log = logging.getLogger("dpgate.server")

PROTOCOL_VIOLATION = "08P01"
INVALID_PASSWORD = "28P01"
INVALID_CATALOG = "3D000"
CANNOT_CONNECT = "08006"
FEATURE_NOT_SUPPORTED = "0A000"
EXTENDED_PROTOCOL = frozenset({b"P", b"B", b"D", b"E", b"C", b"S", b"H"})
# CopyData, CopyDone, CopyFail outside a COPY: ignored, as PostgreSQL does.
COPY_MESSAGES = frozenset({b"d", b"c", b"f"})


@dataclass
class Proxy:
    config: Config
    ledger: Ledger
    rng: RandomSource = field(default_factory=SecureRandomSource)
    sessions: dict[tuple[int, int], Session] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.config.backend.dsn:
            raise ValueError("backend.dsn is not set: dpgate needs a PostgreSQL to protect")
        self.reader_endpoint = Endpoint.from_dsn(self.config.backend.dsn)
        self.relay_endpoint = Endpoint.from_dsn(
            self.config.backend.relay_dsn or self.config.backend.dsn
        )
        self.pool = BackendPool(self.reader_endpoint, self.config.backend.pool_size)
        self.knowledge = Knowledge(self.ledger)
        self.plans = PlanCache()
        self.tasks: set[asyncio.Task] = set()

    async def start(self) -> asyncio.Server:
        server = self.config.server
        return await asyncio.start_server(self._accept, server.listen_host, server.listen_port)

    async def close(self) -> None:
        """Close every client connection and the backend pool."""
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.pool.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            await self._client(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        except wire.ProtocolError as error:
            _try_write(writer, wire.error_response(PROTOCOL_VIOLATION, str(error),
                                                   severity="FATAL"))
        except Exception:
            log.exception("internal error in a client session")
            _try_write(writer, wire.error_response("XX000", "dpgate internal error",
                                                   severity="FATAL"))
        finally:
            self.tasks.discard(task)
            writer.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        settings = self.config.server
        try:
            startup = await asyncio.wait_for(self._startup(reader, writer), settings.auth_timeout)
        except TimeoutError:
            _try_write(writer, wire.error_response(PROTOCOL_VIOLATION,
                                                   "authentication timed out", severity="FATAL"))
            return
        if startup is None:
            return
        session, key = startup
        self.sessions[key] = session
        try:
            await self._serve(session, reader, writer)
        finally:
            self.sessions.pop(key, None)
            session.relay.close()

    async def _startup(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[Session, tuple[int, int]] | None:
        max_size = self.config.server.max_message_size
        while True:
            code, payload = await wire.read_startup(reader, 10_000)
            if code in (wire.SSL_REQUEST, wire.GSSENC_REQUEST):
                writer.write(b"N")  # no TLS yet: the client decides whether to go on
                await writer.drain()
                continue
            if code == wire.CANCEL_REQUEST:
                await self._cancel(payload)
                return None
            if code >> 16 != 3:
                version = f"{code >> 16}.{code & 0xFFFF}"
                raise wire.ProtocolError(f"unsupported frontend protocol {version}")
            break
        params = wire.parse_startup_parameters(payload)
        user = params.get("user", "")
        database = params.get("database") or user
        if database != self.relay_endpoint.database:
            writer.write(wire.error_response(
                INVALID_CATALOG, f'database "{database}" does not exist',
                hint=f'dpgate serves the database "{self.relay_endpoint.database}".',
                severity="FATAL"))
            return None
        try:
            analyst = await authenticate(user, self.ledger.analyst, reader, writer, max_size)
        except AuthenticationFailed:
            writer.write(wire.error_response(
                INVALID_PASSWORD, f'password authentication failed for user "{user}"',
                severity="FATAL"))
            return None
        options = {"application_name": params.get("application_name", "") or "dpgate"}
        for name in ("client_encoding", "DateStyle", "TimeZone", "search_path"):
            if name in params:
                options[name] = params[name]
        try:
            relay = await BackendConnection.connect(self.relay_endpoint, **options)
        except (OSError, BackendError) as error:
            log.error("cannot connect to the backend: %s", error)
            writer.write(wire.error_response(CANNOT_CONNECT, "dpgate cannot reach its database",
                                             severity="FATAL"))
            return None
        key = (secrets.randbits(31), secrets.randbits(31))
        session = Session(analyst=analyst, config=self.config, ledger=self.ledger, relay=relay,
                          pool=self.pool, rng=self.rng, send=writer.write,
                          knowledge=self.knowledge, plans=self.plans)
        for name, value in relay.parameters.items():
            writer.write(wire.parameter_status(name, value))
        writer.write(wire.backend_key_data(*key))
        writer.write(wire.ready_for_query(relay.status))
        await writer.drain()
        return session, key

    async def _serve(self, session: Session, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        max_size = self.config.server.max_message_size
        extended = ExtendedProtocol(session)
        while True:
            kind, payload = await wire.read_message(reader, max_size)
            if kind == b"X":
                return
            if kind in EXTENDED_PROTOCOL:
                await extended.handle(kind, payload)
            elif extended.skipping or kind in COPY_MESSAGES:
                pass  # skipped until Sync, or left over from a COPY that never started
            elif kind == b"Q":
                sql, _ = wire.cstring(payload)
                await extended.settle()
                await session.simple_query(sql)
            elif kind == b"F":
                writer.write(wire.error_response(
                    FEATURE_NOT_SUPPORTED, "the function call protocol is refused",
                    hint="Call functions in a SELECT statement."))
                writer.write(wire.ready_for_query(session.relay.status))
            else:
                raise wire.ProtocolError(f"unexpected message type {kind!r}")
            await writer.drain()

    async def _cancel(self, payload: bytes) -> None:
        if len(payload) != 8:
            return
        session = self.sessions.get(struct.unpack("!ii", payload))
        if session is not None and session.running is not None:
            await session.running.cancel()


def _try_write(writer: asyncio.StreamWriter, data: bytes) -> None:
    try:
        if not writer.is_closing():
            writer.write(data)
    except (ConnectionError, RuntimeError):
        pass
