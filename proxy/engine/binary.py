"""Answers in binary result format, encoded here for the types answers mostly have, so
that a client asking for binary results (asyncpg always, pgjdbc once a statement is
prepared) costs no second round trip after the private query.

Each encoder writes what PostgreSQL's own send function writes for the value its input
function reads from the text (tests/test_binary_answers.py compares them byte for byte
with PostgreSQL's). A text it cannot read exactly as PostgreSQL would (another spelling,
a value out of range, NaN of numeric, a type not listed) makes `binary_rows` return None,
and the whole answer is encoded by PostgreSQL instead (backend.encode): the bytes are
PostgreSQL's either way.
"""

from __future__ import annotations

import datetime
import math
import re
import struct
from collections.abc import Callable, Sequence

from ..pgwire import wire

_INTEGER = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"(-?)(\d+)(?:\.(\d+))?")
_FLOAT = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_FLOAT_WORDS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
_DATE = re.compile(r"(\d{4})-(\d\d)-(\d\d)")
_TIMESTAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_EPOCH = datetime.datetime(2000, 1, 1)  # PostgreSQL's dates and timestamps count from here
_NUMERIC_NEGATIVE = 0x4000


class _Unencodable(Exception):
    """A value this module does not encode exactly as PostgreSQL would."""


def _integer(low: int, high: int, fmt: str) -> Callable[[str], bytes]:
    def encode(text: str) -> bytes:
        if not _INTEGER.fullmatch(text):
            raise _Unencodable
        value = int(text)
        if not low <= value <= high:
            raise _Unencodable  # PostgreSQL: out of range for the type
        return struct.pack(fmt, value)
    return encode


def _float8(text: str) -> bytes:
    value = _FLOAT_WORDS.get(text)
    if value is None:
        if not _FLOAT.fullmatch(text):
            raise _Unencodable
        value = float(text)
        # PostgreSQL refuses what overflows to infinity or underflows to zero.
        if math.isinf(value) or (value == 0.0 and any(c in "123456789" for c in
                                                      text.split("e")[0].split("E")[0])):
            raise _Unencodable
    return struct.pack("!d", value)


def _numeric(text: str) -> bytes:
    """numeric_send of numeric_in's value: base-10000 digits without leading or trailing
    zero groups, the weight of the first, the sign and the scale written."""
    match = _DECIMAL.fullmatch(text)
    if match is None:
        raise _Unencodable  # NaN, Infinity: left to PostgreSQL
    sign, whole, fraction = match.group(1), match.group(2), match.group(3) or ""
    whole = whole.lstrip("0")
    whole = "0" * (-len(whole) % 4) + whole
    padded = fraction + "0" * (-len(fraction) % 4)
    groups = [int(whole[i:i + 4]) for i in range(0, len(whole), 4)] + \
        [int(padded[i:i + 4]) for i in range(0, len(padded), 4)]
    weight = len(whole) // 4 - 1
    start = 0
    while start < len(groups) and groups[start] == 0:
        start += 1
        weight -= 1
    end = len(groups)
    while end > start and groups[end - 1] == 0:
        end -= 1
    digits = groups[start:end]
    if not digits:
        weight, sign = 0, ""
    return struct.pack(f"!hhHH{len(digits)}H", len(digits), weight,
                       _NUMERIC_NEGATIVE if sign else 0, len(fraction), *digits)


def _bool(text: str) -> bytes:
    if text not in ("t", "f"):
        raise _Unencodable
    return b"\x01" if text == "t" else b"\x00"


def _date(text: str) -> bytes:
    match = _DATE.fullmatch(text)
    if match is None:
        raise _Unencodable  # BC, infinity: left to PostgreSQL
    try:
        day = datetime.date(*map(int, match.groups()))
    except ValueError:
        raise _Unencodable from None
    return struct.pack("!i", (day - _EPOCH.date()).days)


def _timestamp(text: str) -> bytes:
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise _Unencodable
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        moment = datetime.datetime(int(year), int(month), int(day), int(hour), int(minute),
                                   int(second))
    except ValueError:
        raise _Unencodable from None
    micro = int((fraction or "").ljust(6, "0"))
    delta = moment - _EPOCH
    return struct.pack("!q", (delta.days * 86400 + delta.seconds) * 1_000_000 + micro)


def _text(text: str) -> bytes:
    return text.encode()


# Type OID -> its send function over the text PostgreSQL (or dpgate's release) wrote.
_ENCODERS: dict[int, Callable[[str], bytes]] = {
    16: _bool,
    21: _integer(-2 ** 15, 2 ** 15 - 1, "!h"),
    23: _integer(-2 ** 31, 2 ** 31 - 1, "!i"),
    wire.INT8_OID: _integer(-2 ** 63, 2 ** 63 - 1, "!q"),
    wire.FLOAT8_OID: _float8,
    wire.NUMERIC_OID: _numeric,
    wire.TEXT_OID: _text,
    1042: _text,  # bpchar (without a length, as a result column has none)
    1043: _text,  # varchar
    1082: _date,
    1114: _timestamp,
}


def binary_rows(rows: Sequence[Sequence[str | None]], types: Sequence[int],
                formats: Sequence[int]) -> list[bytes] | None:
    """DataRow messages of text `rows` in the result `formats` (one per column, or one
    for all), or None when a value must be encoded by PostgreSQL."""
    encoders: list[Callable[[str], bytes]] = []
    for index, type_oid in enumerate(types):
        binary = formats[index if len(formats) > 1 else 0] if formats else 0
        encoder = _ENCODERS.get(type_oid) if binary else _text
        if encoder is None:
            return None
        encoders.append(encoder)
    try:
        return [wire.data_row([None if value is None else encode(value)
                               for encode, value in zip(encoders, row, strict=True)])
                for row in rows]
    except _Unencodable:
        return None
