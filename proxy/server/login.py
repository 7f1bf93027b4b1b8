"""A client's way in, from its first message to an open session.

The startup negotiation (TLS, or a cancel request), the database asked for, SCRAM against
the ledger's credentials, the admin console for operators or the data for analysts (never
both), admission (server.max_clients, and each analyst's share of it), then the session:
its relay connection with the client's startup settings, its engine, and the messages
PostgreSQL sends after a login (ParameterStatus, BackendKeyData, ReadyForQuery). Every
refusal here is a FatalError (or, for a wrong database or password, one written at once).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable

from accounting import Analyst, Ledger, LedgerUnavailable
from rewriter.errors import Refusal
from rewriter.sql.lexical import PINNED, startup_settings
from rewriter.sqlstate import SqlState

from ..config import Config
from ..engine.dispatch import Engine
from ..engine.private_query import ChargeReport
from ..engine.workers import Workers
from ..ops import Operations
from ..ops.console import CONSOLE_DATABASE, Console, serve_console
from ..pgwire import wire
from ..pgwire.auth import AuthenticationFailed, authenticate
from ..pgwire.backend import BackendConnection, BackendError, Endpoint
from ..pgwire.client_stream import ClientReader
from ..pgwire.errors import FatalError
from ..pgwire.outbox import Outbox
from ..pgwire.running import Running
from ..pgwire.startup import CancelRequest, negotiate
from ..pgwire.tls import ServerTls
from .prepared import PreparedStatements
from .session import Session

log = logging.getLogger("dpgate.server")

# A session's engine over what every session shares (Proxy.engine).
EngineFactory = Callable[[Analyst, Running, ChargeReport], Engine]


class Login:
    """Logs clients in and opens their sessions; counts each analyst's sessions."""

    def __init__(self, config: Config, ledger: Ledger, ops: Operations, workers: Workers,
                 tls: ServerTls | None, relay_endpoint: Endpoint, engine: EngineFactory,
                 cancel: Callable[[bytes], Awaitable[None]]):
        self.config = config
        self.ledger = ledger
        self.ops = ops
        self.workers = workers  # the console's ledger calls
        self.tls = tls
        self.relay_endpoint = relay_endpoint
        self.engine = engine
        self.cancel = cancel  # a CancelRequest's payload, for the session it names
        # Sessions per analyst, counted from admission (before the relay connects).
        self.admitted: Counter[str] = Counter()

    async def session(self, reader: ClientReader, writer: asyncio.StreamWriter,
                      outbox: Outbox) -> tuple[Session, tuple[int, int]] | None:
        """The client's session and its cancel key, or None when the client is done
        (a cancel request, a console session, a refused login already told)."""
        settings = self.config.server
        startup = await negotiate(reader, writer, self.tls)
        if isinstance(startup, CancelRequest):
            await self.cancel(startup.payload)
            return None
        if self.tls and settings.require_tls_for_password and not startup.tls:
            raise FatalError(SqlState.INVALID_AUTHORIZATION,
                             "password authentication over an unencrypted connection is refused",
                             hint="Connect with TLS, e.g. sslmode=verify-full (or require).")
        params = startup.parameters
        user = params["user"]
        database = params.get("database") or user
        console = database == CONSOLE_DATABASE
        if not console and database != self.relay_endpoint.database:
            self.ops.login_refused(user, _peer(writer), "database",
                                   SqlState.INVALID_CATALOG_NAME)
            writer.write(FatalError(
                SqlState.INVALID_CATALOG_NAME, f'database "{database}" does not exist',
                hint=f'dpgate serves the database "{self.relay_endpoint.database}".'
            ).to_response())
            return None
        try:
            analyst = await authenticate(user, self.ledger.analyst, reader, writer,
                                         settings.max_message_size,
                                         self.tls.end_point if self.tls and startup.tls
                                         else None)
        except AuthenticationFailed:
            self.ops.login_refused(user, _peer(writer), "password", SqlState.INVALID_PASSWORD)
            writer.write(FatalError(
                SqlState.INVALID_PASSWORD, f'password authentication failed for user "{user}"'
            ).to_response())
            return None
        except LedgerUnavailable as error:  # credentials live in the ledger
            log.error("login of %s: privacy ledger unreachable: %s", user, error)
            raise FatalError(SqlState.CANNOT_CONNECT_NOW, "dpgate cannot reach its privacy ledger",
                             hint="Try again in a moment.") from None
        if console != (analyst.name in self.ops.admins):
            # Operators see every analyst's spend, analysts see the data: never both.
            self.ops.login_refused(user, _peer(writer), "console",
                                   SqlState.INSUFFICIENT_PRIVILEGE)
            raise FatalError(SqlState.INSUFFICIENT_PRIVILEGE, f'permission denied for database '
                             f'"{database}"', hint="The console database \"dpgate\" is for "
                             "the accounts of server.admin_users, the data for the others.")
        if console:
            await self._console(analyst.name, params, reader, writer)
            return None
        self._admit(analyst.name)
        try:
            return await self._open_session(analyst, params, reader, writer, outbox)
        except BaseException:
            self.leave(analyst.name)
            raise

    def _admit(self, analyst: str) -> None:
        """Take a session slot, or refuse beyond server.max_clients or beyond the analyst's
        share: one analyst's flood must leave room for the others to log in."""
        settings = self.config.server
        if sum(self.admitted.values()) >= settings.max_clients:
            raise FatalError(SqlState.TOO_MANY_CONNECTIONS, "sorry, too many clients already",
                             hint=f"dpgate serves at most {settings.max_clients} sessions "
                             "(server.max_clients).")
        if self.admitted[analyst] and sum(self.admitted.values()) >= \
                settings.max_clients - settings.reserved_clients:
            raise FatalError(SqlState.TOO_MANY_CONNECTIONS, f"too many connections for analyst "
                             f'"{analyst}": the remaining sessions are kept for analysts '
                             "with none open", hint=f"dpgate keeps {settings.reserved_clients}"
                             " of its sessions for analysts logging in for the first time "
                             "(server.reserved_clients); close some first.")
        if self.admitted[analyst] >= settings.max_clients_per_analyst:
            raise FatalError(SqlState.TOO_MANY_CONNECTIONS, f'too many connections for analyst '
                             f'"{analyst}"', hint=f"Each analyst may open at most "
                             f"{settings.max_clients_per_analyst} sessions "
                             "(server.max_clients_per_analyst); close some first.")
        self.admitted[analyst] += 1

    def leave(self, analyst: str) -> None:
        """Give back the slot of a session that ended."""
        self.admitted[analyst] -= 1
        if not self.admitted[analyst]:
            del self.admitted[analyst]

    async def _console(self, name: str, params: dict[str, str], reader: ClientReader,
                       writer: asyncio.StreamWriter) -> None:
        """An operator's admin console session, until the client leaves."""
        ops = self.ops.session(name, _peer(writer), CONSOLE_DATABASE,
                               params.get("application_name", ""))
        self.ops.metrics.console_sessions.inc()
        try:
            await serve_console(Console(self.ops, self.ledger, self.workers, writer.write),
                                reader, writer.drain, self.config.server.max_message_size)
        finally:
            self.ops.metrics.console_sessions.dec()
            self.ops.closed(ops.info)

    async def _open_session(self, analyst: Analyst, params: dict[str, str],
                            reader: ClientReader, writer: asyncio.StreamWriter, outbox: Outbox
                            ) -> tuple[Session, tuple[int, int]]:
        """The relay connection and the session of an authenticated, admitted analyst."""
        try:
            settings = startup_settings(params)
        except Refusal as refusal:
            raise FatalError(refusal.sqlstate, refusal.message, hint=refusal.hint) from None
        pinned = {name: settings.pop(name) for name in PINNED}
        options = {"application_name": params.get("application_name", "") or "dpgate",
                   **settings}
        try:
            relay = await BackendConnection.connect(self.relay_endpoint, pinned, **options)
        except BackendError as error:
            self.ops.metrics.backend_errors.inc()
            log.error("the backend refused a relay connection: %s", error)
            if error.sqlstate == SqlState.TOO_MANY_CONNECTIONS:  # PostgreSQL's own slots are full
                raise FatalError(SqlState.TOO_MANY_CONNECTIONS, "the database behind dpgate has no "
                                 "connection slot left", hint="Try again later; the data "
                                 "owner can lower server.max_clients.") from None
            raise FatalError(SqlState.CONNECTION_FAILURE,
                             "dpgate cannot reach its database") from None
        except OSError as error:
            self.ops.metrics.backend_errors.inc()
            log.error("cannot connect to the backend: %s", error)
            raise FatalError(SqlState.CONNECTION_FAILURE,
                             "dpgate cannot reach its database") from None
        key = (secrets.randbits(31), secrets.randbits(31))
        running = Running()
        ops = self.ops.session(analyst.name, _peer(writer), self.relay_endpoint.database,
                               options["application_name"])
        session = Session(analyst, self.engine(analyst, running, ops.charge), relay,
                          reconnect=lambda: BackendConnection.connect(self.relay_endpoint, pinned,
                                                                      **options),
                          reader=reader, writer=writer, outbox=outbox,
                          prepared=PreparedStatements(), running=running, ops=ops)
        for name, value in relay.parameters.items():
            writer.write(wire.parameter_status(name, value))
        writer.write(wire.backend_key_data(*key))
        writer.write(wire.ready_for_query(relay.status))
        try:
            await writer.drain()
        except BaseException:
            self.ops.closed(ops.info)  # the client left before its session began
            session.close()
            raise
        return session, key


def _peer(writer: asyncio.StreamWriter) -> str:
    """The client's address as host:port (a Unix socket has none)."""
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer or "")
