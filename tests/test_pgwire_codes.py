"""The protocol's codes as enums behave as the raw bytes the code compares them with."""

from __future__ import annotations

import asyncio
import re

import pytest

from proxy.pgwire import wire
from proxy.pgwire.codes import AuthRequest, Backend, Frontend, Target, TransactionStatus
from rewriter.sqlstate import SqlState

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("codes", [Frontend, Backend, TransactionStatus, Target])
def test_members_are_their_byte_and_unique(codes) -> None:
    values = [member.value for member in codes]
    assert len(set(values)) == len(values)
    for member in codes:
        assert member == member.value and hash(member) == hash(member.value)
        assert {member.value: True}[member]  # raw bytes from a socket find enum keys
        assert len(member) == 1


def test_a_message_read_from_a_stream_matches_its_enum() -> None:
    async def read() -> tuple[bytes, bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(wire.message(Frontend.QUERY, b"SELECT 1\0"))
        return await wire.read_message(reader, 1 << 20)

    kind, payload = asyncio.run(read())
    assert kind == Frontend.QUERY and type(kind) is bytes and payload == b"SELECT 1\0"


def test_built_messages_carry_the_codes() -> None:
    assert wire.ready_for_query(TransactionStatus.IDLE) == b"Z\0\0\0\x05I"
    assert wire.authentication(AuthRequest.OK) == b"R\0\0\0\x08\0\0\0\0"
    error = wire.error_response(SqlState.PROTOCOL_VIOLATION, "bad")
    assert error[:1] == Backend.ERROR_RESPONSE
    assert wire.parse_error_fields(error[5:])["C"] == "08P01"


def test_sqlstates_are_five_characters_and_unique() -> None:
    values = [state.value for state in SqlState]
    assert len(set(values)) == len(values)
    assert all(re.fullmatch(r"[0-9A-Z]{5}", value) for value in values)
    assert f"{SqlState.SYNTAX_ERROR}" == "42601"


@pytest.mark.parametrize("target", list(Target))
def test_describe_and_execute_read_back_what_was_written(target) -> None:
    """read_target and read_execute read their fields directly (they run for every
    relayed prepared statement): what the builders wrote, and a protocol error for any
    message that is cut short, too long or names no target."""
    assert wire.read_target(wire.describe_message(target, "p1")[5:]) == (target, "p1")
    assert wire.read_execute(wire.execute_message("p1", 7)[5:]) == ("p1", 7)
    assert wire.read_execute(wire.execute_message("", -3)[5:]) == ("", 0)
    for broken in (b"", target.value, target.value + b"p1\0x", b"Xp1\0"):
        with pytest.raises(wire.ProtocolError):
            wire.read_target(broken)
    for broken in (b"", b"p1", b"p1\0\0\0\0", b"p1\0\0\0\0\0\0"):
        with pytest.raises(wire.ProtocolError):
            wire.read_execute(broken)
