"""The asyncio server: accepts clients, has them log in (login.py) and serves their
sessions' messages; holds what every session shares, and shuts them all down.

Each client is one task; whatever goes wrong in it (a malformed message, a dropped
socket, a bug) ends that client's connection only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
import struct
from dataclasses import dataclass, field

from accounting import Analyst, Ledger
from mechanisms.random_source import RandomSource, SecureRandomSource
from rewriter.sql.lexical import READER_PINNED
from rewriter.sqlstate import SqlState

from ..config import Config
from ..engine.charge_batches import ChargeBatches
from ..engine.dispatch import Engine
from ..engine.fair import FairShares
from ..engine.knowledge import Knowledge
from ..engine.plan_cache import PlanCache
from ..engine.plan_check import PlanChecker
from ..engine.planning import Planner
from ..engine.private_query import ChargeReport
from ..engine.reader_time import reader_time
from ..engine.recent import RecentAnswers
from ..engine.workers import Workers
from ..ops import Operations
from ..ops.console import CONSOLE_DATABASE
from ..ops.dashboard import dashboard_app
from ..ops.web import metrics_app, start_site
from ..pgwire import wire
from ..pgwire.backend import BackendPool, Endpoint
from ..pgwire.client_stream import ClientReader, IdleTimeout, ShuttingDown
from ..pgwire.codes import Frontend, TransactionStatus
from ..pgwire.errors import FatalError, StatementError
from ..pgwire.hooked import HookedStreamProtocol
from ..pgwire.outbox import Outbox
from ..pgwire.running import Running
from ..pgwire.tls import ServerTls
from .extended import ExtendedProtocol
from .fast_relay import FastRelay
from .login import Login
from .session import Phase, Session

log = logging.getLogger("dpgate.server")

EXTENDED_PROTOCOL = frozenset({Frontend.PARSE, Frontend.BIND, Frontend.DESCRIBE,
                               Frontend.EXECUTE, Frontend.CLOSE, Frontend.SYNC,
                               Frontend.FLUSH})
# CopyData, CopyDone, CopyFail outside a COPY: ignored, as PostgreSQL does.
COPY_MESSAGES = frozenset({Frontend.COPY_DATA, Frontend.COPY_DONE, Frontend.COPY_FAIL})


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
        if not self.config.backend.relay_dsn:
            log.warning("backend.relay_dsn is not set: relayed statements and the SQL over "
                        "released values run as the reader role, guarded by the classifier "
                        "alone")
        if self.relay_endpoint.database == CONSOLE_DATABASE:
            raise ValueError(f'the database behind dpgate may not be named "{CONSOLE_DATABASE}"'
                             ": that name is the admin console's")
        backend = self.config.backend
        self.pool = BackendPool(self.reader_endpoint, backend.pool_size,
                                backend.private_statement_timeout, pinned=READER_PINNED)
        # SQL over released values and the probes of their types: as the relay role, which
        # cannot read private tables, on connections reset before each use.
        self.released = BackendPool(self.relay_endpoint, backend.pool_size,
                                    backend.private_statement_timeout,
                                    application_name="dpgate-released", reset=True,
                                    pinned=READER_PINNED)
        self.knowledge = Knowledge(self.ledger)
        self.plans = PlanCache(max_bytes=self.config.server.plan_cache_bytes)
        self.checker = PlanChecker(self.config.policy)
        self.workers = Workers(cpu_per_analyst=self.config.server.analyses_per_analyst)
        # Every session's fair shares of the reader connections (engine/fair.py).
        self.readers = FairShares(self.config.backend.pool_size,
                                  self.config.backend.private_statements_per_analyst)
        self.reader_seconds = reader_time(self.config.backend)  # and how long they hold them
        self.charges = ChargeBatches(self.ledger, self.workers, prepare=True)  # every session's
        self.recent = RecentAnswers()  # SHOW dp.last_answers, every session's
        self.planner = Planner(self.config, self.knowledge, self.plans, self.pool, self.workers)
        server = self.config.server
        self.tls = ServerTls.load(server.tls_cert, server.tls_key) if server.tls_cert else None
        # Every client's task and the stream it reads from.
        self.clients: dict[asyncio.Task, ClientReader] = {}
        self.stopping = False
        # Metrics, audit log, console and dashboard (proxy/ops), and their HTTP sites.
        self.ops = Operations(server.audit_log, server.admin_users)
        self.sites: list = []
        self.login = Login(self.config, self.ledger, self.ops, self.workers, self.tls,
                           self.relay_endpoint, self.engine, self._cancel)

    def engine(self, analyst: Analyst, running: Running, report_charge: ChargeReport
               ) -> Engine:
        """A new session's engine, over what every session shares: the pools, the plan
        cache and checker, the workers, fair shares, reader-seconds, charge batches and
        recent answers."""
        return Engine(analyst, self.config, self.ledger, self.pool, self.rng, self.planner,
                      self.checker, self.workers, running, report_charge=report_charge,
                      charges=self.charges, readers=self.readers, released=self.released,
                      recent=self.recent, reader_seconds=self.reader_seconds)

    async def start(self) -> asyncio.Server:
        server = self.config.server
        if server.metrics_port:
            if not server.metrics_token and not _loopback(server.metrics_host):
                log.warning("metrics on %s name analysts and their spend to anyone who "
                            "can reach them: set server.metrics_token", server.metrics_host)
            self.sites.append(await start_site(
                metrics_app(self.ops, self.ledger, self.workers, server.metrics_token),
                server.metrics_host,
                server.metrics_port))
        if server.dashboard_port:
            self.sites.append(await start_site(
                dashboard_app(self.ops, self.ledger, self.workers), server.dashboard_host,
                server.dashboard_port))
        loop = asyncio.get_running_loop()
        # asyncio.start_server, but with our reader, which knows when a client is idle,
        # and a protocol fast_relay can hook into.
        return await loop.create_server(self._client_protocol, server.listen_host,
                                        server.listen_port)

    def _client_protocol(self) -> HookedStreamProtocol:
        reader = ClientReader()
        # The callback gets the reader given here, a ClientReader.
        reader.protocol = HookedStreamProtocol(reader, self._accept)
        return reader.protocol

    async def close(self) -> None:
        """Stop every client, then the backend pool. Call it after the listening server
        is closed. Statements running get server.shutdown_grace seconds to finish; every
        client is then told FATAL 57P01 and disconnected."""
        self.stopping = True
        for task, reader in list(self.clients.items()):
            reader.stopping = True  # a busy session ends when it next waits for its client
            if reader.waiting and not reader.relaying():
                task.cancel()  # nothing in flight: end it now
        if self.clients:
            await asyncio.wait(set(self.clients), timeout=self.config.server.shutdown_grace)
        for task in list(self.clients):
            task.cancel()
        await asyncio.gather(*self.clients, return_exceptions=True)
        for site in self.sites:
            await site.cleanup()
        self.ops.close()
        self.pool.close()
        self.released.close()
        self.workers.close()

    async def _accept(self, reader: ClientReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.clients[task] = reader
        try:
            if self.stopping:
                raise ShuttingDown
            await self._client(reader, writer)
        except (ShuttingDown, asyncio.CancelledError):
            if self.stopping:
                _try_write(writer, FatalError(
                    SqlState.ADMIN_SHUTDOWN,
                    "terminating connection due to administrator command").to_response())
        except IdleTimeout:
            _try_write(writer, FatalError(
                SqlState.IDLE_SESSION_TIMEOUT,
                "terminating connection due to idle-session timeout").to_response())
        except FatalError as error:
            _try_write(writer, error.to_response())
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except ssl.SSLError as error:
            log.info("TLS handshake with a client failed: %s", error)
        except wire.ProtocolError as error:
            _try_write(writer, FatalError(SqlState.PROTOCOL_VIOLATION, str(error)).to_response())
        except Exception:
            log.exception("internal error in a client session")
            _try_write(writer, FatalError(SqlState.INTERNAL_ERROR,
                                          "dpgate internal error").to_response())
        finally:
            del self.clients[task]
            writer.close()

    async def _client(self, reader: ClientReader, writer: asyncio.StreamWriter) -> None:
        settings = self.config.server
        outbox = Outbox(writer)  # the session's messages, written once per batch
        try:
            startup = await asyncio.wait_for(self.login.session(reader, writer, outbox),
                                             settings.auth_timeout)
        except TimeoutError:
            _try_write(writer, FatalError(
                SqlState.QUERY_CANCELED, "canceling authentication due to timeout").to_response())
            return
        if startup is None:
            return
        session, key = startup
        self.sessions[key] = session
        reader.watch(settings.idle_timeout,
                     lambda: session.relay.status != TransactionStatus.IDLE,
                     lambda: session.phase is Phase.RELAYING)
        try:
            await self._serve(session, reader, outbox)
        finally:
            self.sessions.pop(key, None)
            self.ops.closed(session.ops.info)
            self.login.leave(session.analyst.name)
            session.close()

    async def _serve(self, session: Session, reader: ClientReader, outbox: Outbox) -> None:
        max_size = self.config.server.max_message_size
        extended = ExtendedProtocol(session)
        fast = FastRelay(session, extended, max_size)
        try:
            await self._messages(session, reader, outbox, extended)
        finally:
            fast.close()

    async def _messages(self, session: Session, reader: ClientReader, outbox: Outbox,
                        extended: ExtendedProtocol) -> None:
        """The session's message loop, for whatever fast_relay did not take."""
        max_size = self.config.server.max_message_size
        while True:
            kind, payload = await wire.read_message(reader, max_size)
            await session.begin()  # after the answers of what fast_relay relayed before
            if kind == Frontend.TERMINATE:
                return
            if kind in EXTENDED_PROTOCOL:
                await extended.handle(kind, payload)
            elif extended.skipping or kind in COPY_MESSAGES:
                pass  # skipped until Sync, or left over from a COPY that never started
            elif kind == Frontend.QUERY:
                sql, _ = wire.cstring(payload)
                if extended.pending:
                    await extended.settle()
                await session.simple_query(sql)
            elif kind == Frontend.FUNCTION_CALL:
                session.send(StatementError(
                    SqlState.FEATURE_NOT_SUPPORTED, "the function call protocol is refused",
                    hint="Call functions in a SELECT statement.").to_response())
                session.send(session.ready_for_query())
            else:
                raise wire.ProtocolError(f"unexpected message type {kind!r}")
            if outbox.parts:  # a message forwarded to the backend has nothing to send yet
                await outbox.flush()
            session.end(batch_open=extended.batch_open)

    async def _cancel(self, payload: bytes) -> None:
        if len(payload) != 8:
            return
        session = self.sessions.get(struct.unpack("!ii", payload))
        if session is not None:
            await session.running.cancel()


def _try_write(writer: asyncio.StreamWriter, data: bytes) -> None:
    try:
        if not writer.is_closing():
            writer.write(data)
    except (ConnectionError, RuntimeError):
        pass


def _loopback(host: str) -> bool:
    """Whether `host` is a loopback address or name (only this machine reaches it)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
