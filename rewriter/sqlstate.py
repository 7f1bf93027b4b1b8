"""Every SQLSTATE dpgate sends, in one place (PostgreSQL's Appendix A names).

A StrEnum: members are the five-character strings themselves, so they go into an
ErrorResponse, compare with what PostgreSQL sends, and print as the code.

It lives in the lowest package that every other imports, and imports nothing: the
protocol layer (proxy/pgwire) may import it and nothing else of dpgate.
"""

from __future__ import annotations

from enum import StrEnum


class SqlState(StrEnum):
    SUCCESSFUL_COMPLETION = "00000"
    CONNECTION_FAILURE = "08006"
    PROTOCOL_VIOLATION = "08P01"
    FEATURE_NOT_SUPPORTED = "0A000"
    CARDINALITY_VIOLATION = "21000"
    DATA_EXCEPTION = "22000"
    INVALID_PARAMETER_VALUE = "22023"
    IN_FAILED_SQL_TRANSACTION = "25P02"
    INVALID_SQL_STATEMENT_NAME = "26000"
    INVALID_AUTHORIZATION = "28000"
    INVALID_PASSWORD = "28P01"
    INVALID_CURSOR_NAME = "34000"
    INVALID_CATALOG_NAME = "3D000"
    INSUFFICIENT_PRIVILEGE = "42501"
    SYNTAX_ERROR = "42601"
    AMBIGUOUS_COLUMN = "42702"
    UNDEFINED_COLUMN = "42703"
    UNDEFINED_OBJECT = "42704"
    DUPLICATE_ALIAS = "42712"
    UNDEFINED_FUNCTION = "42883"
    DUPLICATE_CURSOR = "42P03"
    DUPLICATE_PREPARED_STATEMENT = "42P05"
    INVALID_COLUMN_REFERENCE = "42P10"
    INSUFFICIENT_RESOURCES = "53000"
    DISK_FULL = "53100"
    TOO_MANY_CONNECTIONS = "53300"
    # PostgreSQL's configuration_limit_exceeded: dpgate's "privacy budget exhausted".
    BUDGET_EXHAUSTED = "53400"
    PROGRAM_LIMIT_EXCEEDED = "54000"
    STATEMENT_TOO_COMPLEX = "54001"
    OBJECT_NOT_IN_PREREQUISITE_STATE = "55000"
    QUERY_CANCELED = "57014"
    ADMIN_SHUTDOWN = "57P01"
    CANNOT_CONNECT_NOW = "57P03"
    IDLE_SESSION_TIMEOUT = "57P05"
    IO_ERROR = "58030"
    INTERNAL_ERROR = "XX000"
