"""Helpers of the startup, TLS and robustness tests: a proxy of a test's own with extra
[server] settings, a proxy with zero noise, and a raw-socket client that speaks the
protocol byte by byte."""

from __future__ import annotations

import socket
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import scramp

from proxy.pgwire import wire
from tests.conftest import (
    DemoDatabase,
    add_analyst,
    free_port,
    start_proxy,
    wait_for_port,
    write_config,
)

USER, PASSWORD = "carol", "carol-pw"


@dataclass
class OwnProxy:
    port: int
    process: subprocess.Popen

    def dsn(self, **options: str) -> str:
        extra = "".join(f"&{name}={value}" for name, value in options.items())
        return (f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/dpgate_e2e"
                f"?connect_timeout=10{extra}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def start_own_proxy(directory: Path, database: DemoDatabase, **server: object) -> OwnProxy:
    """A proxy on a free port with analyst carol and these extra [server] settings."""
    port = free_port()
    config_path = directory / "dpgate.toml"
    write_config(config_path, port, directory / "ledger.sqlite3", database)
    lines = [line for line in config_path.read_text().splitlines()
             if line.split(" = ")[0] not in server]  # the settings given here replace those
    extra = [f"{name} = {_toml(value)}" for name, value in server.items()]
    at = lines.index("[server]") + 1
    config_path.write_text("\n".join(lines[:at] + extra + lines[at:]) + "\n")
    add_analyst(config_path, USER, PASSWORD, 100)
    process = start_proxy(config_path)
    wait_for_port(port, process)
    return OwnProxy(port, process)


# Noise of scale sensitivity/ε: at 1e12 a row-level SUM over a semi-join (sensitivity near
# 1e6) drew noise beyond the six decimals compared in some runs; at 1e15 it stays below 1e-8.
EXACT_EPSILON = "1e15"


@contextmanager
def zero_noise_proxy(directory: Path, database: DemoDatabase, analyst: str, password: str
                     ) -> Iterator[str]:
    """The DSN of a proxy whose answers carry no noise (ε = EXACT_EPSILON, no shift), for
    `analyst`, so that they can be compared with PostgreSQL's own."""
    port = free_port()
    config = directory / "dpgate.toml"
    write_config(config, port, directory / "ledger.sqlite3", database)
    exact = (f"default_epsilon = {EXACT_EPSILON}\nmax_epsilon = {EXACT_EPSILON}\n"
             "shift_interval = [0.0, 0.0]")
    config.write_text(config.read_text().replace("default_epsilon = 0.1", exact))
    add_analyst(config, analyst, password, 1e18)
    process = start_proxy(config)
    try:
        wait_for_port(port, process)
        yield f"postgresql://{analyst}:{password}@127.0.0.1:{port}/dpgate_e2e"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


def connect_raw(port: int, timeout: float = 10) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def startup_message(parameters: dict[str, str], version: int = wire.PROTOCOL_3_0) -> bytes:
    body = struct.pack("!i", version)
    body += b"".join(f"{k}\0{v}\0".encode() for k, v in parameters.items()) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def read_message(sock: socket.socket) -> tuple[bytes, bytes]:
    """One server message; ('', b'') when the server closed the connection."""
    header = _read_exactly(sock, 5)
    if len(header) < 5:
        return b"", b""
    length = struct.unpack("!i", header[1:])[0]
    return header[:1], _read_exactly(sock, length - 4)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size and (chunk := sock.recv(size - len(data))):
        data += chunk
    return data


def read_until_closed(sock: socket.socket) -> list[tuple[bytes, bytes]]:
    """Every message up to the end of the connection (a socket timeout fails the test)."""
    messages = []
    while (message := read_message(sock))[0]:
        messages.append(message)
    return messages


def errors(messages: list[tuple[bytes, bytes]]) -> list[dict[str, str]]:
    return [wire.parse_error_fields(payload) for kind, payload in messages if kind == b"E"]


def send_startup(sock: socket.socket, user: str = USER) -> list[str]:
    """Start up as `user` (carol); return the SASL mechanisms the proxy offers."""
    sock.sendall(startup_message({"user": user, "database": "dpgate_e2e"}))
    kind, payload = read_message(sock)
    assert kind == b"R" and struct.unpack_from("!i", payload)[0] == 10, (kind, payload)
    return [name.decode() for name in payload[4:].split(b"\0") if name]


def scram(sock: socket.socket, client: scramp.ScramClient,
          mechanism: str = "SCRAM-SHA-256") -> list[tuple[bytes, bytes]]:
    """Run SCRAM after send_startup; return the messages that follow the client's first
    one, up to ReadyForQuery or the connection's end."""
    first = client.get_client_first().encode()
    sock.sendall(wire.message(b"p", mechanism.encode() + b"\0" + struct.pack("!i", len(first))
                              + first))
    kind, payload = read_message(sock)
    if kind != b"R":
        return [(kind, payload), *read_until_closed(sock)]
    client.set_server_first(payload[4:].decode())
    sock.sendall(wire.message(b"p", client.get_client_final().encode()))
    messages = []
    while (message := read_message(sock))[0] and message[0] != b"Z":
        messages.append(message)
    return [*messages, message]


def login(sock: socket.socket, user: str = USER, password: str = PASSWORD
          ) -> list[tuple[bytes, bytes]]:
    """Start up as `user` (carol) with plain SCRAM-SHA-256, up to ReadyForQuery."""
    send_startup(sock, user)
    return scram(sock, scramp.ScramClient(["SCRAM-SHA-256"], user, password))
