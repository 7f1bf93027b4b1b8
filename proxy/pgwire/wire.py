"""PostgreSQL v3 protocol: framing and the messages the proxy sends (pure functions)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rewriter.sqlstate import SqlState

from .codes import AuthRequest, Backend, ErrorField, Frontend, Severity, Target

PROTOCOL_3_0 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102

INT8_OID = 20
TEXT_OID = 25
FLOAT8_OID = 701
NUMERIC_OID = 1700
INTEGER_OIDS = frozenset({INT8_OID, 21, 23})  # int8, int2, int4
FLOAT_OIDS = frozenset({700, FLOAT8_OID})  # float4, float8
NUMBER_OIDS = INTEGER_OIDS | FLOAT_OIDS | {NUMERIC_OID}


class ProtocolError(Exception):
    """The peer broke the protocol; the connection is closed after telling it why."""


async def read_startup(reader: asyncio.StreamReader, max_size: int) -> tuple[int, bytes]:
    """Read one untyped startup-phase message: (code, payload after the code)."""
    header = await reader.readexactly(8)
    length, code = struct.unpack("!ii", header)
    if length < 8 or length > max_size:
        raise ProtocolError(f"invalid startup packet length {length}")
    return code, await reader.readexactly(length - 8)


async def read_message(reader: asyncio.StreamReader, max_size: int) -> tuple[bytes, bytes]:
    """Read one typed message: (type byte, payload)."""
    raw = buffered_message(reader, max_size)
    if raw is not None:
        return raw[:1], raw[5:]
    header = await reader.readexactly(5)
    kind, length = header[:1], _length(header, max_size)
    return kind, await reader.readexactly(length - 4)


async def read_raw_message(reader: asyncio.StreamReader, max_size: int) -> bytes:
    """Read one typed message as it came, header included (to pass it on unchanged)."""
    raw = buffered_message(reader, max_size)
    if raw is not None:
        return raw
    header = await reader.readexactly(5)
    return header + await reader.readexactly(_length(header, max_size) - 4)


def buffered_message(reader: asyncio.StreamReader, max_size: int) -> bytes | None:
    """The next typed message if the stream has received all of it, else None.

    Relayed traffic is small messages arriving whole; taking them from the stream's buffer
    directly skips two awaited reads per message (a third of the relay's CPU). asyncio's
    StreamReader has no peek, hence its private buffer, as ClientReader.pending reads it.
    """
    buffer: bytearray | None = getattr(reader, "_buffer", None)
    if buffer is None or len(buffer) < 5:
        return None
    length = _length(buffer, max_size)
    if len(buffer) <= length:
        return None
    raw = bytes(buffer[:length + 1])
    del buffer[:length + 1]
    reader._maybe_resume_transport()  # type: ignore[attr-defined]
    return raw


def _length(header: bytes | bytearray, max_size: int) -> int:
    (length,) = struct.unpack_from("!i", header, 1)
    if length < 4 or length > max_size:
        raise ProtocolError(f"invalid message length {length}")
    return length


def parse_startup_parameters(payload: bytes) -> dict[str, str]:
    parts = payload.split(b"\0")
    if len(parts) < 2 or parts[-1] != b"" or parts[-2] != b"":
        raise ProtocolError("malformed startup parameters")
    items = parts[:-2]
    if len(items) % 2:
        raise ProtocolError("malformed startup parameters")
    return {
        items[i].decode("utf-8", "replace"): items[i + 1].decode("utf-8", "replace")
        for i in range(0, len(items), 2)
    }


def cstring(payload: bytes, start: int = 0) -> tuple[str, int]:
    """Decode a NUL-terminated string; return it and the offset after the NUL."""
    end = payload.find(b"\0", start)
    if end < 0:
        raise ProtocolError("unterminated string in message")
    return payload[start:end].decode("utf-8", "replace"), end + 1


def message(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def authentication(code: int, data: bytes = b"") -> bytes:
    return message(Backend.AUTHENTICATION, struct.pack("!i", code) + data)


def authentication_sasl(mechanisms: Iterable[str]) -> bytes:
    return authentication(AuthRequest.SASL, b"".join(_cstr(m) for m in mechanisms) + b"\0")


def parameter_status(name: str, value: str) -> bytes:
    return message(Backend.PARAMETER_STATUS, _cstr(name) + _cstr(value))


def backend_key_data(pid: int, key: int) -> bytes:
    return message(Backend.BACKEND_KEY_DATA, struct.pack("!ii", pid, key))


def ready_for_query(status: bytes) -> bytes:
    return message(Backend.READY_FOR_QUERY, status)


def row_description(columns: Sequence[tuple[str, int]], formats: Sequence[int] = ()) -> bytes:
    """Columns as (name, type OID), no source table; text format unless `formats` says."""
    body = struct.pack("!h", len(columns))
    for index, (name, oid) in enumerate(columns):
        size = 8 if oid in (INT8_OID, FLOAT8_OID) else -1
        fmt = formats[index] if index < len(formats) else 0
        body += _cstr(name) + struct.pack("!ihihih", 0, 0, oid, size, -1, fmt)
    return message(Backend.ROW_DESCRIPTION, body)


def data_row(values: Sequence[str | bytes | None]) -> bytes:
    body = struct.pack("!h", len(values))
    for value in values:
        if value is None:
            body += struct.pack("!i", -1)
        else:
            encoded = value.encode() if isinstance(value, str) else value
            body += struct.pack("!i", len(encoded)) + encoded
    return message(Backend.DATA_ROW, body)


def command_complete(tag: str) -> bytes:
    return message(Backend.COMMAND_COMPLETE, _cstr(tag))


def empty_query_response() -> bytes:
    return message(Backend.EMPTY_QUERY_RESPONSE)


def _fields(
    severity: str, code: str, text: str, hint: str | None, position: int | None
) -> bytes:
    fields = {ErrorField.SEVERITY: severity, ErrorField.SEVERITY_NONLOCALIZED: severity,
              ErrorField.SQLSTATE: code, ErrorField.MESSAGE: text}
    if hint:
        fields[ErrorField.HINT] = hint
    if position:
        fields[ErrorField.POSITION] = str(position)
    return b"".join(field.encode() + _cstr(value) for field, value in fields.items()) + b"\0"


def error_response(
    code: str, text: str, hint: str | None = None, position: int | None = None,
    severity: str = Severity.ERROR,
) -> bytes:
    """An ErrorResponse: build it from a ClientError's to_response (proxy/pgwire/errors.py)."""
    return message(Backend.ERROR_RESPONSE, _fields(severity, code, text, hint, position))


def notice_response(text: str, hint: str | None = None) -> bytes:
    return message(Backend.NOTICE_RESPONSE,
                   _fields(Severity.NOTICE, SqlState.SUCCESSFUL_COMPLETION, text, hint, None))


def parse_error_fields(payload: bytes) -> dict[str, str]:
    """Fields of an ErrorResponse or NoticeResponse payload, keyed by their code letter."""
    fields: dict[str, str] = {}
    offset = 0
    while offset < len(payload) and payload[offset] != 0:
        code = chr(payload[offset])
        value, offset = cstring(payload, offset + 1)
        fields[code] = value
    return fields


def parse_row_description(payload: bytes) -> list[tuple[str, int]]:
    """(name, type OID) of each column of a RowDescription."""
    (count,) = struct.unpack_from("!h", payload)
    offset, columns = 2, []
    for _ in range(count):
        name, offset = cstring(payload, offset)
        (type_oid,) = struct.unpack_from("!i", payload, offset + 6)
        columns.append((name, type_oid))
        offset += 18
    return columns


def parse_data_row(payload: bytes) -> tuple[bytes | None, ...]:
    """A DataRow's values. A tuple, not a list: the garbage collector stops tracking a
    tuple of bytes, so 182,000 rows do not make it walk them all (a 30-50 ms pause of
    every thread, the event loop's included); lists of the same would."""
    (count,) = struct.unpack_from("!h", payload)
    offset, values = 2, list[bytes | None]()
    for _ in range(count):
        (length,) = struct.unpack_from("!i", payload, offset)
        offset += 4
        if length < 0:
            values.append(None)
        else:
            values.append(payload[offset:offset + length])
            offset += length
    return tuple(values)


# Extended query protocol: what clients send, decoded; what the proxy answers or forwards.

@dataclass(frozen=True)
class ParseMessage:
    statement: str
    query: str
    parameter_types: tuple[int, ...]


@dataclass(frozen=True)
class BindMessage:
    portal: str
    statement: str
    parameter_formats: tuple[int, ...]
    values: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]


class _Payload:
    """Reads the fields of one message; running off its end is a protocol error."""

    def __init__(self, payload: bytes):
        self.data = payload
        self.offset = 0

    def _unpack(self, fmt: str) -> tuple:
        try:
            values = struct.unpack_from(fmt, self.data, self.offset)
        except struct.error:
            raise ProtocolError("message too short for its contents") from None
        self.offset += struct.calcsize(fmt)
        return values

    def int16(self) -> int:
        return self._unpack("!h")[0]

    def int32(self) -> int:
        return self._unpack("!i")[0]

    def int16s(self) -> tuple[int, ...]:
        count = self.int16()
        if count < 0:
            raise ProtocolError("negative count in message")
        return self._unpack(f"!{count}h") if count else ()

    def string(self) -> str:
        value, self.offset = cstring(self.data, self.offset)
        return value

    def byte(self) -> bytes:
        if self.offset >= len(self.data):
            raise ProtocolError("message too short for its contents")
        self.offset += 1
        return self.data[self.offset - 1:self.offset]

    def value(self) -> bytes | None:
        length = self.int32()
        if length < -1 or self.offset + max(length, 0) > len(self.data):
            raise ProtocolError("invalid parameter length in message")
        if length == -1:
            return None
        self.offset += length
        return self.data[self.offset - length:self.offset]

    def end(self) -> None:
        if self.offset != len(self.data):
            raise ProtocolError("unexpected bytes at the end of a message")


def read_parse(payload: bytes) -> ParseMessage:
    fields = _Payload(payload)
    name, query = fields.string(), fields.string()
    count = fields.int16()
    if count < 0:
        raise ProtocolError("negative count in message")
    types = tuple(fields.int32() & 0xFFFFFFFF for _ in range(count))
    fields.end()
    return ParseMessage(name, query, types)


def read_bind(payload: bytes) -> BindMessage:
    fields = _Payload(payload)
    portal, statement = fields.string(), fields.string()
    formats = fields.int16s()
    count = fields.int16()
    if count < 0:
        raise ProtocolError("negative count in message")
    values = tuple(fields.value() for _ in range(count))
    result_formats = fields.int16s()
    fields.end()
    return BindMessage(portal, statement, formats, values, result_formats)


def bind_names(payload: bytes) -> tuple[str, str]:
    """Bind's (portal, statement) alone: all the proxy reads of a Bind it forwards
    (PostgreSQL checks the rest)."""
    portal, offset = cstring(payload)
    return portal, cstring(payload, offset)[0]


# Describe and Execute are read for every relayed prepared statement (fast_relay.py), so
# these two read their fields directly rather than through _Payload, with its errors.
_TARGETS = frozenset((Target.STATEMENT.value, Target.PORTAL.value))
_INT32 = struct.Struct("!i")


def read_target(payload: bytes) -> tuple[bytes, str]:
    """Describe and Close: (b"S" statement or b"P" portal, name)."""
    if not payload:
        raise ProtocolError("message too short for its contents")
    name, end = cstring(payload, 1)
    if end != len(payload):
        raise ProtocolError("unexpected bytes at the end of a message")
    kind = payload[:1]
    if kind not in _TARGETS:
        raise ProtocolError(f"invalid target type {kind!r}")
    return kind, name


def read_execute(payload: bytes) -> tuple[str, int]:
    """Execute: (portal, row limit; 0 means no limit)."""
    portal, end = cstring(payload)
    if len(payload) - end != _INT32.size:
        raise ProtocolError("message too short for its contents" if len(payload) - end < 4
                            else "unexpected bytes at the end of a message")
    return portal, max(_INT32.unpack_from(payload, end)[0], 0)


def parse_message(statement: str, query: str, types: Sequence[int]) -> bytes:
    body = _cstr(statement) + _cstr(query) + struct.pack(f"!h{len(types)}I", len(types), *types)
    return message(Frontend.PARSE, body)


def bind_message(portal: str, statement: str, formats: Sequence[int],
                 values: Sequence[bytes | None], result_formats: Sequence[int]) -> bytes:
    body = _cstr(portal) + _cstr(statement)
    body += struct.pack(f"!h{len(formats)}h", len(formats), *formats)
    body += struct.pack("!h", len(values))
    for value in values:
        body += struct.pack("!i", -1) if value is None else struct.pack("!i", len(value)) + value
    body += struct.pack(f"!h{len(result_formats)}h", len(result_formats), *result_formats)
    return message(Frontend.BIND, body)


def execute_message(portal: str, limit: int = 0) -> bytes:
    return message(Frontend.EXECUTE, _cstr(portal) + struct.pack("!i", limit))


def describe_message(kind: bytes, name: str) -> bytes:
    return message(Frontend.DESCRIBE, kind + _cstr(name))


def parameter_description(types: Sequence[int]) -> bytes:
    body = struct.pack(f"!h{len(types)}I", len(types), *types)
    return message(Backend.PARAMETER_DESCRIPTION, body)


def parse_parameter_description(payload: bytes) -> list[int]:
    (count,) = struct.unpack_from("!h", payload)
    return list(struct.unpack_from(f"!{count}I", payload, 2))


PARSE_COMPLETE = message(Backend.PARSE_COMPLETE)
BIND_COMPLETE = message(Backend.BIND_COMPLETE)
CLOSE_COMPLETE = message(Backend.CLOSE_COMPLETE)
NO_DATA = message(Backend.NO_DATA)
PORTAL_SUSPENDED = message(Backend.PORTAL_SUSPENDED)
SYNC = message(Frontend.SYNC)
FLUSH = message(Frontend.FLUSH)


def negotiate_protocol_version(version: int, unrecognized: Sequence[str]) -> bytes:
    """NegotiateProtocolVersion: the newest protocol version the proxy speaks for the major
    version the client asked (PostgreSQL sends it whole, major << 16 | minor, and libpq 18
    reads it so) and the `_pq_.*` startup options it does not know."""
    body = struct.pack("!ii", version, len(unrecognized))
    names = b"".join(_cstr(name) for name in unrecognized)
    return message(Backend.NEGOTIATE_PROTOCOL_VERSION, body + names)
