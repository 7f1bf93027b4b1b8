"""The PostgreSQL v3 protocol's codes as enums: message types each way, transaction
status, authentication requests, the targets of Describe and Close.

Members are bytes (or ints) themselves, so they compare and hash like the raw codes read
from a socket: `kind == Frontend.QUERY` holds for `kind = b"Q"`.
"""

from __future__ import annotations

from enum import Enum, IntEnum, StrEnum


class Frontend(bytes, Enum):
    """Message types a client (or dpgate, as the backend's client) sends."""

    QUERY = b"Q"
    PARSE = b"P"
    BIND = b"B"
    DESCRIBE = b"D"
    EXECUTE = b"E"
    CLOSE = b"C"
    SYNC = b"S"
    FLUSH = b"H"
    TERMINATE = b"X"
    FUNCTION_CALL = b"F"
    PASSWORD = b"p"  # also SASLInitialResponse and SASLResponse
    COPY_DATA = b"d"
    COPY_DONE = b"c"
    COPY_FAIL = b"f"


class Backend(bytes, Enum):
    """Message types a server (PostgreSQL, or dpgate to its clients) sends."""

    AUTHENTICATION = b"R"
    PARAMETER_STATUS = b"S"
    BACKEND_KEY_DATA = b"K"
    READY_FOR_QUERY = b"Z"
    ROW_DESCRIPTION = b"T"
    DATA_ROW = b"D"
    COMMAND_COMPLETE = b"C"
    EMPTY_QUERY_RESPONSE = b"I"
    ERROR_RESPONSE = b"E"
    NOTICE_RESPONSE = b"N"
    PARSE_COMPLETE = b"1"
    BIND_COMPLETE = b"2"
    CLOSE_COMPLETE = b"3"
    NO_DATA = b"n"
    PORTAL_SUSPENDED = b"s"
    PARAMETER_DESCRIPTION = b"t"
    NEGOTIATE_PROTOCOL_VERSION = b"v"


class TransactionStatus(bytes, Enum):
    """ReadyForQuery's status byte."""

    IDLE = b"I"
    IN_TRANSACTION = b"T"
    FAILED = b"E"  # in a failed transaction: only ROLLBACK (or to a savepoint) runs


class Target(bytes, Enum):
    """What Describe and Close name."""

    STATEMENT = b"S"
    PORTAL = b"P"


class EncryptionAnswer(bytes, Enum):
    """The one-byte answer to SSLRequest or GSSENCRequest."""

    ACCEPT = b"S"
    DECLINE = b"N"


class ErrorField(StrEnum):
    """The code letter of a field of ErrorResponse and NoticeResponse."""

    SEVERITY = "S"
    SEVERITY_NONLOCALIZED = "V"
    SQLSTATE = "C"
    MESSAGE = "M"
    HINT = "H"
    POSITION = "P"


class Severity(StrEnum):
    """The severity of an ErrorResponse or NoticeResponse that dpgate sends."""

    ERROR = "ERROR"
    FATAL = "FATAL"
    NOTICE = "NOTICE"


class AuthRequest(IntEnum):
    """The code of an Authentication message."""

    OK = 0
    CLEARTEXT_PASSWORD = 3
    MD5_PASSWORD = 5
    SASL = 10
    SASL_CONTINUE = 11
    SASL_FINAL = 12
