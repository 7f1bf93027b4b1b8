"""The first packets of a connection, answered as PostgreSQL answers them: SSLRequest (TLS
upgrade or 'N'), GSSENCRequest ('N'), CancelRequest, and the StartupMessage with its
protocol version negotiation."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rewriter.sqlstate import SqlState

from . import wire
from .client_stream import ClientReader
from .codes import EncryptionAnswer
from .errors import FatalError
from .tls import ServerTls

MAX_STARTUP_PACKET = 10_000  # PostgreSQL's MAX_STARTUP_PACKET_LENGTH
NEWEST_MINOR = 0  # the proxy speaks protocol 3.0 only


@dataclass(frozen=True)
class Startup:
    parameters: dict[str, str]
    tls: bool


@dataclass(frozen=True)
class CancelRequest:
    payload: bytes


async def negotiate(reader: ClientReader, writer: asyncio.StreamWriter,
                    tls: ServerTls | None) -> Startup | CancelRequest:
    """Read packets up to the StartupMessage; upgrade to TLS on the way if asked and able."""
    ssl_done = gss_done = on_tls = False
    while True:
        code, payload = await wire.read_startup(reader, MAX_STARTUP_PACKET)
        if code == wire.CANCEL_REQUEST:
            return CancelRequest(payload)
        # Each request may come once, as in PostgreSQL; a repeat falls through to the
        # version check below and is refused as an unknown protocol.
        if code == wire.SSL_REQUEST and not ssl_done:
            ssl_done = True
            answer = EncryptionAnswer.DECLINE if tls is None else EncryptionAnswer.ACCEPT
            await _answer(reader, writer, answer, "SSL request")
            if tls is not None:
                await writer.start_tls(tls.context)
                on_tls = gss_done = True  # no GSS encryption inside TLS
            continue
        if code == wire.GSSENC_REQUEST and not gss_done:
            gss_done = True
            await _answer(reader, writer, EncryptionAnswer.DECLINE, "GSSAPI encryption request")
            continue
        break
    major, minor = code >> 16, code & 0xFFFF
    if major != 3:
        raise FatalError(SqlState.FEATURE_NOT_SUPPORTED,
                         f"unsupported frontend protocol {major}.{minor}: "
                         f"server supports 3.0 to 3.{NEWEST_MINOR}")
    parameters = wire.parse_startup_parameters(payload)
    if not parameters.get("user"):
        raise FatalError(SqlState.INVALID_AUTHORIZATION,
                         "no PostgreSQL user name specified in startup packet")
    unknown = [name for name in parameters if name.startswith("_pq_.")]
    if minor > NEWEST_MINOR or unknown:
        writer.write(wire.negotiate_protocol_version((3 << 16) + NEWEST_MINOR, unknown))
    return Startup({k: v for k, v in parameters.items() if k not in unknown}, on_tls)


async def _answer(reader: ClientReader, writer: asyncio.StreamWriter, answer: bytes,
                  request: str) -> None:
    # Bytes already here were sent without waiting for the answer; after 'S' they would be
    # read as if they had come encrypted (CVE-2021-23214). PostgreSQL refuses them too.
    if reader.pending():
        raise wire.ProtocolError(f"received unencrypted data after {request}")
    writer.write(answer)
    await writer.drain()
