"""Startup phase: protocol version negotiation, SSL/GSS requests without a certificate,
the authentication and idle timeouts. Raw sockets where a driver would hide the bytes."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import psycopg
import pytest
import scramp

from proxy.pgwire import wire
from tests.conftest import DemoDatabase
from tests.proxies import (
    PASSWORD,
    USER,
    OwnProxy,
    connect_raw,
    errors,
    login,
    read_message,
    read_until_closed,
    scram,
    send_startup,
    start_own_proxy,
    startup_message,
)

pytestmark = pytest.mark.end_to_end

IDLE_TIMEOUT = 1


@pytest.fixture(scope="module")
def own(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[OwnProxy]:
    running = start_own_proxy(tmp_path_factory.mktemp("startup"), demo_database,
                              idle_timeout=IDLE_TIMEOUT, auth_timeout=2)
    yield running
    running.stop()


def _packet(code: int, body: bytes = b"") -> bytes:
    return struct.pack("!ii", len(body) + 8, code) + body


@pytest.mark.parametrize(("minor", "options"), [
    (2, {}), (5, {"_pq_.compression": "on"}), (0, {"_pq_.a": "1", "_pq_.b": "2"})])
def test_newer_minor_or_protocol_options_get_negotiate_protocol_version(
        own: OwnProxy, minor: int, options: dict[str, str]):
    with connect_raw(own.port) as sock:
        parameters = {"user": USER, "database": "dpgate_e2e", **options}
        sock.sendall(startup_message(parameters, (3 << 16) + minor))
        kind, payload = read_message(sock)
        assert kind == b"v"
        newest, count = struct.unpack_from("!ii", payload)
        assert (newest, count) == (wire.PROTOCOL_3_0, len(options))
        assert payload[8:].split(b"\0")[:-1] == [name.encode() for name in options]
        kind, payload = read_message(sock)  # then authentication goes on in 3.0
        assert kind == b"R" and struct.unpack_from("!i", payload)[0] == 10


def test_libpq_18_asking_for_protocol_3_2_falls_back_to_3_0(own: OwnProxy):
    with psycopg.connect(own.dsn(max_protocol_version="3.2")) as connection:
        assert connection.execute("SELECT 1").fetchone() == (1,)
    # A client that insists on 3.2 learns from NegotiateProtocolVersion that it cannot.
    with pytest.raises(psycopg.OperationalError, match="protocol"):
        psycopg.connect(own.dsn(max_protocol_version="3.2", min_protocol_version="3.2"))


@pytest.mark.parametrize("version", [(2, 0), (4, 0), (1234, 1)])
def test_other_major_versions_are_refused_like_postgresql(own: OwnProxy, version):
    with connect_raw(own.port) as sock:
        sock.sendall(startup_message({"user": USER}, (version[0] << 16) + version[1]))
        (error,) = errors(read_until_closed(sock))
    assert (error["S"], error["C"]) == ("FATAL", "0A000")
    assert error["M"].startswith(f"unsupported frontend protocol {version[0]}.{version[1]}")


def test_gssenc_and_ssl_requests_are_declined_then_startup_goes_on(own: OwnProxy):
    with connect_raw(own.port) as sock:
        for request in (wire.GSSENC_REQUEST, wire.SSL_REQUEST):
            sock.sendall(_packet(request))
            assert sock.recv(1) == b"N"
        assert login(sock)[-1] == (b"Z", b"I")


def test_a_repeated_ssl_request_is_refused(own: OwnProxy):
    with connect_raw(own.port) as sock:
        sock.sendall(_packet(wire.SSL_REQUEST))
        assert sock.recv(1) == b"N"
        sock.sendall(_packet(wire.SSL_REQUEST))
        (error,) = errors(read_until_closed(sock))
    assert error["C"] == "0A000"


def test_plain_tcp_offers_only_scram_sha_256_and_accepts_the_y_flag(own: OwnProxy):
    with connect_raw(own.port) as sock:
        assert send_startup(sock) == ["SCRAM-SHA-256"]
        # 'y': the client could bind but believes the server cannot, which is true here.
        client = scramp.ScramClient(["SCRAM-SHA-256"], USER, PASSWORD,
                                    channel_binding=("tls-server-end-point", b"x" * 32))
        assert client.get_client_first().startswith("y,,")
        client = scramp.ScramClient(["SCRAM-SHA-256"], USER, PASSWORD,
                                    channel_binding=("tls-server-end-point", b"x" * 32))
        assert scram(sock, client)[-1] == (b"Z", b"I")


def test_a_startup_without_user_is_refused(own: OwnProxy):
    with connect_raw(own.port) as sock:
        sock.sendall(startup_message({"database": "dpgate_e2e"}))
        (error,) = errors(read_until_closed(sock))
    assert (error["C"], error["M"]) == ("28000",
                                        "no PostgreSQL user name specified in startup packet")


def test_a_client_that_never_authenticates_is_disconnected(own: OwnProxy):
    with connect_raw(own.port, timeout=30) as sock:
        sock.sendall(startup_message({"user": USER, "database": "dpgate_e2e"}))
        messages = read_until_closed(sock)  # the SASL request, then silence from us
    assert messages[0][0] == b"R"
    (error,) = errors(messages)
    assert (error["S"], error["C"]) == ("FATAL", "57014")


def test_an_idle_session_is_closed_with_57p05(own: OwnProxy):
    with connect_raw(own.port, timeout=30) as sock:
        assert login(sock)[-1] == (b"Z", b"I")
        (error,) = errors(read_until_closed(sock))
    assert (error["S"], error["C"]) == ("FATAL", "57P05")
    assert error["M"] == "terminating connection due to idle-session timeout"


def test_a_session_inside_a_transaction_is_not_closed_for_idleness(own: OwnProxy):
    with psycopg.connect(own.dsn()) as connection:
        connection.execute("SELECT 1")  # psycopg opened a transaction first
        time.sleep(IDLE_TIMEOUT * 2.5)
        assert connection.execute("SELECT 2").fetchone() == (2,)
        connection.rollback()
    with connect_raw(own.port) as other:  # the proxy itself is fine
        assert login(other)[-1] == (b"Z", b"I")
        other.sendall(wire.message(b"X"))
        assert other.recv(1) == b""


def test_statements_relayed_the_fast_way_keep_the_idle_timeout_right(own: OwnProxy):
    """Once its text is planned, a relayed statement is answered from the transports'
    callbacks (proxy/server/fast_relay.py) while the session waits for its client: that
    activity restarts the idle timeout, and a transaction opened that way suspends it."""

    def ask(sock: socket.socket, sql: str) -> bytes:
        sock.sendall(wire.message(b"Q", sql.encode() + b"\0"))
        while (message := read_message(sock))[0] != b"Z":
            assert message[0], "the proxy closed the connection"
        return message[1]

    with connect_raw(own.port, timeout=30) as sock:
        assert login(sock)[-1] == (b"Z", b"I")
        assert (ask(sock, "BEGIN"), ask(sock, "COMMIT")) == (b"T", b"I")  # planned now
        busy_until = time.monotonic() + IDLE_TIMEOUT * 2.5
        while time.monotonic() < busy_until:  # active for longer than the timeout
            assert ask(sock, "SELECT 1") == b"I"
            time.sleep(IDLE_TIMEOUT / 4)
        assert ask(sock, "BEGIN") == b"T"
        time.sleep(IDLE_TIMEOUT * 2.5)  # idle inside a transaction: not closed
        assert ask(sock, "COMMIT") == b"I"
        (error,) = errors(read_until_closed(sock))  # idle outside one: closed
    assert (error["S"], error["C"]) == ("FATAL", "57P05")


def test_an_unknown_database_is_refused(own: OwnProxy):
    with connect_raw(own.port) as sock:
        sock.sendall(startup_message({"user": USER, "database": "elsewhere"}))
        (error,) = errors(read_until_closed(sock))
    assert error["C"] == "3D000"


