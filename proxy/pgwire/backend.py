"""A minimal PostgreSQL client at the protocol level, for the proxy's backend connections.

The proxy needs the backend's messages as bytes (to relay catalog answers with their
exact type OIDs and formats), which drivers hide; so it speaks the protocol itself.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import struct
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import overload

from psycopg.conninfo import conninfo_to_dict

from rewriter.sqlstate import SqlState

from . import wire
from .backend_login import PasswordExchange, UnsupportedAuthentication, startup_message
from .codes import Backend, ErrorField, Frontend, Target, TransactionStatus
from .hooked import HookedStreamProtocol

MAX_BACKEND_MESSAGE = 1 << 30
_STREAM_LIMIT = 2 ** 16  # asyncio.open_connection's default
# One row of a result: its values in text format (None for NULL).
Row = tuple[bytes | None, ...]
# Rows kept together in one tuple of a RowList (about 0.05 ms to free).
ROWS_PER_CHUNK = 1024
# Messages read (and parsed) before the event loop gets a turn: about 0.3 ms of work,
# so that a long result never holds other sessions up for more.
MESSAGES_PER_TURN = 64


class BackendError(Exception):
    """An ErrorResponse from PostgreSQL, with its fields (C = SQLSTATE, M = message)."""

    def __init__(self, fields: dict[str, str]):
        super().__init__(fields.get(ErrorField.MESSAGE, "backend error"))
        self.fields = fields

    @property
    def sqlstate(self) -> str:
        return self.fields.get(ErrorField.SQLSTATE, SqlState.INTERNAL_ERROR)


class NotExecuted(BackendError):
    """An ErrorResponse that came before BindComplete: PostgreSQL refused the statement at
    Parse or Bind (a misspelt column, a parameter value its type does not accept, a
    constant folded by the planner), so the statement never started reading rows."""


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom to connect, from a libpq DSN."""

    host: str
    port: int
    user: str
    password: str | None
    database: str

    @classmethod
    def from_dsn(cls, dsn: str) -> Endpoint:
        params = conninfo_to_dict(dsn)
        return cls(
            host=str(params.get("host") or "localhost"),
            port=int(params.get("port") or 5432),
            user=str(params.get("user") or "postgres"),
            password=str(params["password"]) if params.get("password") else None,
            database=str(params.get("dbname") or params.get("user") or "postgres"),
        )


@dataclass(frozen=True)
class Parameters:
    """Values bound to $1…$n as a client sent them: one type OID, one format code and
    the raw bytes of each."""

    types: tuple[int, ...]
    formats: tuple[int, ...]
    values: tuple[bytes | None, ...]


@dataclass
class Described:
    """What Parse + Describe tell of a statement: parameter type OIDs, result columns."""

    parameters: list[int]
    columns: list[tuple[str, int]]


class RowList(Sequence[Row]):
    """A result's rows as read, kept in tuples of ROWS_PER_CHUNK.

    The garbage collector stops tracking a tuple of untracked tuples (rows of bytes), so
    its full passes, each of which holds every thread, the event loop's included, walk
    one entry per chunk. A list of 182,000 rows is walked entry by entry: 8-16 ms per
    full pass while a long answer is read or released (bench/event_loop.py).
    """

    __slots__ = ("_chunks", "_tail")

    def __init__(self) -> None:
        self._chunks: list[tuple[Row, ...]] = []
        self._tail: list[Row] = []

    def append(self, row: Row) -> None:
        self._tail.append(row)
        if len(self._tail) == ROWS_PER_CHUNK:
            self._chunks.append(tuple(self._tail))
            self._tail.clear()

    def __len__(self) -> int:
        return len(self._chunks) * ROWS_PER_CHUNK + len(self._tail)

    def __iter__(self) -> Iterator[Row]:
        return itertools.chain(itertools.chain.from_iterable(self._chunks), self._tail)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | Sequence[Row]:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("row index out of range")
        chunk, at = divmod(index, ROWS_PER_CHUNK)
        return self._chunks[chunk][at] if chunk < len(self._chunks) else self._tail[at]

    def drop_chunk(self) -> bool:
        """Forget the last chunk of rows (a long answer is freed a piece at a time, off
        the event loop: workers.py); whether rows are left."""
        if self._tail:
            self._tail.clear()
        elif self._chunks:
            self._chunks.pop()
        return bool(self._chunks)


@dataclass
class Rows:
    """A result in text format, with each column's (name, type OID)."""

    columns: list[tuple[str, int]]
    rows: RowList

    def keep(self, kind: bytes, payload: bytes) -> None:
        """Take one message of the answer: a row or the columns (parsed as read)."""
        if kind == Backend.DATA_ROW:
            self.rows.append(wire.parse_data_row(payload))
        elif kind == Backend.ROW_DESCRIPTION:
            self.columns[:] = wire.parse_row_description(payload)


class BackendConnection:
    """One authenticated connection to PostgreSQL."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.parameters: dict[str, str] = {}
        self.pid = 0
        self.secret = 0
        self.status: bytes = TransactionStatus.IDLE
        self.endpoint: Endpoint | None = None
        self.pinned: dict[str, str] = {}  # lower-case names, see connect
        # Pinned settings PostgreSQL now reports with another value (kept as settings are
        # reported: `alive` is asked before every relayed statement).
        self._drifted: set[str] = set()
        self._outgoing: list[bytes] = []
        protocol = writer.transport.get_protocol()
        # Where the relay routine hooks in (connections opened by _open have one).
        self.protocol = protocol if isinstance(protocol, HookedStreamProtocol) else None

    @classmethod
    async def connect(cls, endpoint: Endpoint, pinned: Mapping[str, str] | None = None,
                      **options: str) -> BackendConnection:
        """A connection with these startup settings; those `pinned` are sent too, and
        must come back in ParameterStatus as sent (a database or role default that
        overrode them would change how PostgreSQL reads text)."""
        reader, writer = await _open(endpoint)
        connection = cls(reader, writer)
        connection.endpoint = endpoint
        try:
            await connection._startup(endpoint, {**(pinned or {}), **options})
            connection.check_reported(pinned or {})
            connection.pinned = {name.lower(): value for name, value in (pinned or {}).items()}
        except BaseException:
            connection.close()
            raise
        return connection

    def check_reported(self, expected: Mapping[str, str]) -> None:
        """Raise BackendError unless PostgreSQL reported each setting it reports
        (ParameterStatus) with the value expected: a startup option it did not apply."""
        reported = {name.lower(): value for name, value in self.parameters.items()}
        for name, value in expected.items():
            if reported.get(name.lower(), value) != value:
                raise BackendError({ErrorField.SQLSTATE: SqlState.INVALID_PARAMETER_VALUE,
                                    ErrorField.MESSAGE: f"the backend reports {name} = "
                                    f"{reported[name.lower()]!r}, not {value!r}"})

    async def _startup(self, endpoint: Endpoint, options: dict[str, str]) -> None:
        self.writer.write(startup_message(
            {"user": endpoint.user, "database": endpoint.database, **options}))
        exchange = PasswordExchange(endpoint.user, endpoint.password or "")
        while True:
            kind, payload = await self.read()
            if kind == Backend.AUTHENTICATION:
                try:
                    answer = exchange.answer(payload)
                except UnsupportedAuthentication as error:
                    raise BackendError({ErrorField.SQLSTATE: SqlState.INVALID_AUTHORIZATION,
                                        ErrorField.MESSAGE: str(error)}) from None
                if answer is not None:
                    self.send(answer)
                    await self.flush()
            elif kind == Backend.BACKEND_KEY_DATA:
                self.pid, self.secret = struct.unpack("!ii", payload)
            elif kind == Backend.ERROR_RESPONSE:
                raise BackendError(wire.parse_error_fields(payload))
            elif kind == Backend.READY_FOR_QUERY:
                return

    def send(self, data: bytes) -> None:
        """Queue a message; `flush` writes the queue in one system call."""
        self._outgoing.append(data)

    def push(self, last: bytes = b"") -> None:
        """Hand the queue, and `last` after it, to the transport in one write, without
        waiting (a transport callback cannot)."""
        if self._outgoing:
            if last:
                self._outgoing.append(last)
            self.writer.transport.write(b"".join(self._outgoing))
            self._outgoing.clear()
        elif last:  # a relayed statement alone: no list to join
            self.writer.transport.write(last)

    async def flush(self) -> None:
        """Write the queue; wait only while the socket has not taken all of it (a lost
        connection shows on the next read)."""
        self.push()
        if self.writer.transport.get_write_buffer_size():
            await self.writer.drain()

    async def read(self) -> tuple[bytes, bytes]:
        """One message: (type byte, payload)."""
        raw = await self.read_raw()
        return raw[:1], raw[5:]

    async def read_raw(self) -> bytes:
        """One message as it came, header included. The transaction status
        (ReadyForQuery) and the server's settings (ParameterStatus) are kept up to date
        whoever reads."""
        return self.take() or self._track(
            await wire.read_raw_message(self.reader, MAX_BACKEND_MESSAGE))

    def take(self) -> bytes | None:
        """The next message as read_raw gives it if it has arrived whole, else None:
        loops over an answer's messages call this first and await only when it is None."""
        raw = wire.buffered_message(self.reader, MAX_BACKEND_MESSAGE)
        return None if raw is None else self._track(raw)

    def _track(self, raw: bytes) -> bytes:
        kind = raw[:1]
        if kind == Backend.READY_FOR_QUERY:
            self.status = raw[5:6]
        elif kind == Backend.PARAMETER_STATUS:
            self.reported(raw, 0)
        return raw

    def reported(self, data: bytes, at: int) -> None:
        """Keep the setting of the ParameterStatus message at `at` (its header)."""
        name, offset = wire.cstring(data, at + 5)
        value = self.parameters[name] = wire.cstring(data, offset)[0]
        pinned = self.pinned.get(name.lower(), value)
        if pinned != value:
            self._drifted.add(name)
        elif self._drifted:
            self._drifted.discard(name)

    @property
    def drifted(self) -> bool:
        """Whether PostgreSQL reports a pinned setting with another value than at connect."""
        return bool(self._drifted)

    @property
    def alive(self) -> bool:
        """False once PostgreSQL closed the connection or said anything unasked (the FATAL
        of a terminated backend): an idle connection has nothing to read. False too once
        it reports a pinned setting changed, by whatever route: the next statement goes
        to a fresh connection, which reads text as dpgate does."""
        return not (self.writer.transport.is_closing() or self.reader.at_eof()
                    or len(self.reader._buffer)  # type: ignore[attr-defined]  # no peek
                    or self._drifted)

    async def fetch(self, sql: str, parameters: Parameters | None = None) -> Rows:
        """Run one statement and return its rows in text format; raise BackendError.

        With `parameters` the statement goes through Parse/Bind/Execute (fetch_bound), so
        the values travel apart from the SQL text exactly as the client sent them.
        """
        if parameters is not None:
            return await self.fetch_bound(sql, parameters)
        self.send(wire.message(Frontend.QUERY, sql.encode() + b"\0"))
        rows = Rows([], RowList())
        await self._until_ready(rows.keep)
        return rows

    async def fetch_bound(self, sql: str, parameters: Parameters) -> Rows:
        """`fetch` with parameters: Parse/Bind/Execute/Sync in one round trip. An error
        PostgreSQL reports before BindComplete raises NotExecuted (a BackendError): it came
        from the statement's text or the values' input conversion, never from the rows read."""
        self.send(wire.parse_message("", sql, parameters.types)
                  + wire.bind_message("", "", parameters.formats, parameters.values, ())
                  + wire.execute_message("") + wire.SYNC)
        rows = Rows([], RowList())
        bound = False  # BindComplete seen: from here an error is the execution's

        def keep(kind: bytes, payload: bytes) -> None:  # parsed as read, in turns
            nonlocal bound
            rows.keep(kind, payload)
            if kind == Backend.BIND_COMPLETE:
                bound = True
        try:
            await self._until_ready(keep)
        except BackendError as error:
            # After an error PostgreSQL skips to Sync: no BindComplete comes after it.
            if not bound:
                raise NotExecuted(error.fields) from None
            raise
        return rows

    async def describe(self, sql: str, types: tuple[int, ...] = (),
                       parameters: Parameters | None = None) -> Described:
        """Parse and describe a statement without running it; with `parameters`, also
        bind them (their input conversion runs, the statement does not).

        Raises BackendError for what PostgreSQL refuses at parse or bind time (a misspelt
        column, a parameter that is not a number).
        """
        batch = wire.parse_message("", sql, types) + wire.describe_message(Target.STATEMENT, "")
        if parameters is not None:
            batch += wire.bind_message("", "", parameters.formats, parameters.values, ())
        self.send(batch + wire.SYNC)
        described = Described([], [])
        for kind, payload in await self._until_ready():
            if kind == Backend.PARAMETER_DESCRIPTION:
                described.parameters[:] = wire.parse_parameter_description(payload)
            elif kind == Backend.ROW_DESCRIPTION:
                described.columns[:] = wire.parse_row_description(payload)
        return described

    async def encode(self, rows: list[list[str | None]], types: list[int],
                     formats: list[int]) -> list[bytes]:
        """DataRow messages of `rows` (text values) in the requested result `formats`.

        PostgreSQL itself does the encoding: `SELECT $1, $2, …` with the columns' types
        as parameter types gives columns of exactly those types, in any format and for
        any type (numeric, date, enums…), in one round trip for all rows.
        """
        select = "SELECT " + ", ".join(f"${i + 1}" for i in range(len(types)))
        batch = [wire.parse_message("", select, types)]
        for number, row in enumerate(rows, 1):
            values = [None if v is None else v.encode() for v in row]
            batch.append(wire.bind_message("", "", (), values, formats))
            batch.append(wire.execute_message(""))
            if number % MESSAGES_PER_TURN == 0:
                await asyncio.sleep(0)  # 10,000 rows take ~30 ms to write out: in turns
        self.send(b"".join(batch) + wire.SYNC)
        data_rows: list[bytes] = []

        def keep(kind: bytes, payload: bytes) -> None:
            if kind == Backend.DATA_ROW:
                data_rows.append(wire.message(kind, payload))
        await self._until_ready(keep)
        return data_rows

    async def _until_ready(self, keep: Callable[[bytes, bytes], None] | None = None
                           ) -> list[tuple[bytes, bytes]]:
        """Every message up to ReadyForQuery (given to `keep` instead, if any, as each
        is read); raise the first ErrorResponse after it."""
        await self.flush()
        messages: list[tuple[bytes, bytes]] = []
        error: BackendError | None = None
        read = 0
        while True:
            kind, payload = await self.read()
            if kind == Backend.READY_FOR_QUERY:
                if error is not None:
                    raise error
                return messages
            if kind == Backend.ERROR_RESPONSE and error is None:
                error = BackendError(wire.parse_error_fields(payload))
            if keep is None:
                messages.append((kind, payload))
            else:
                keep(kind, payload)
            read += 1
            if read % MESSAGES_PER_TURN == 0:
                # Buffered messages are read without a pause: a result of 182,000 rows
                # would hold the event loop for a second. Other sessions get a turn.
                await asyncio.sleep(0)

    async def cancel(self) -> None:
        """Ask PostgreSQL to cancel whatever this connection is running."""
        if self.endpoint is None:
            return
        _, writer = await _open(self.endpoint)
        writer.write(struct.pack("!iiii", 16, wire.CANCEL_REQUEST, self.pid, self.secret))
        await writer.drain()
        writer.close()

    def close(self) -> None:
        if not self.writer.is_closing():
            try:
                self.writer.write(wire.message(Frontend.TERMINATE))
            except (ConnectionError, RuntimeError):
                pass
            self.writer.close()


async def _open(endpoint: Endpoint) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """asyncio.open_connection (or its Unix socket form), with a HookedStreamProtocol."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_STREAM_LIMIT)
    protocol = HookedStreamProtocol(reader)
    if endpoint.host.startswith("/"):
        transport, _ = await loop.create_unix_connection(
            lambda: protocol, f"{endpoint.host}/.s.PGSQL.{endpoint.port}")
    else:
        transport, _ = await loop.create_connection(lambda: protocol, endpoint.host,
                                                    endpoint.port)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


# What DISCARD ALL does, which PostgreSQL refuses in a string of several statements, and
# a seed for random() (setseed's state survives DISCARD ALL): a session as if just
# started, its startup settings kept, in one round trip.
RESET_SESSION = ("CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; DEALLOCATE ALL; "
                 "UNLISTEN *; SELECT pg_advisory_unlock_all(); DISCARD PLANS; "
                 "DISCARD SEQUENCES; DISCARD TEMP; ")


async def _reset(connection: BackendConnection) -> BackendConnection | None:
    """`connection` with its session state reset, or None (closed) if that failed."""
    seed = secrets.randbelow(2_000_001) / 1_000_000 - 1
    try:
        await connection.fetch(f"{RESET_SESSION}SELECT setseed({seed})")
        return connection
    except (OSError, EOFError, wire.ProtocolError, BackendError):
        connection.close()
        return None
    except asyncio.CancelledError:
        connection.close()
        raise


class BackendPool:
    """A few reusable connections: the reader role's for private aggregates, or (with
    `reset`) the relay role's for SQL over released values, each lent with no state left
    by its last use."""

    def __init__(self, endpoint: Endpoint, size: int, statement_timeout: float = 0,
                 application_name: str = "dpgate-private", reset: bool = False,
                 pinned: Mapping[str, str] | None = None):
        self.endpoint = endpoint
        # Settings the connections must have, checked against what PostgreSQL reports.
        self.pinned = dict(pinned or {})
        # Startup settings of every connection (PostgreSQL takes any setting there).
        self.options = {"application_name": application_name,
                        "statement_timeout": f"{round(statement_timeout * 1000)}"}
        self.reset = reset
        self._idle: asyncio.LifoQueue[BackendConnection] = asyncio.LifoQueue()
        self._slots = asyncio.Semaphore(size)
        self._lent = 0

    @property
    def lent(self) -> int:
        """How many connections are out on loan now (tests check that none is held while
        the ledger commits)."""
        return self._lent

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[BackendConnection]:
        """Lend a connection; it goes back to the pool unless it broke."""
        async with self._slots:
            connection = None
            while connection is None and not self._idle.empty():
                connection = self._idle.get_nowait()
                if not connection.alive:  # terminated or restarted since it was idle
                    connection.close()
                    connection = None
            if connection is not None and self.reset:
                connection = await _reset(connection)
            if connection is None:
                connection = await BackendConnection.connect(self.endpoint, self.pinned,
                                                             **self.options)
            self._lent += 1
            try:
                yield connection
            except (OSError, EOFError, wire.ProtocolError, asyncio.CancelledError):
                connection.close()
                raise
            finally:
                self._lent -= 1
                idle = connection.status == TransactionStatus.IDLE
                if idle and not connection.writer.is_closing():
                    self._idle.put_nowait(connection)
                else:
                    connection.close()

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get_nowait().close()
