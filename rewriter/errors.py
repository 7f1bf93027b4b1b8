"""Typed refusals: what the client sees when a statement is not answered."""

from __future__ import annotations

from dataclasses import dataclass

from .sqlstate import SqlState

# The codes refusals use, under the names the rewriter's modules import (sqlstate.py is
# where each is defined).
INSUFFICIENT_PRIVILEGE = SqlState.INSUFFICIENT_PRIVILEGE
FEATURE_NOT_SUPPORTED = SqlState.FEATURE_NOT_SUPPORTED
SYNTAX_ERROR = SqlState.SYNTAX_ERROR
UNDEFINED_OBJECT = SqlState.UNDEFINED_OBJECT
UNDEFINED_COLUMN = SqlState.UNDEFINED_COLUMN
AMBIGUOUS_COLUMN = SqlState.AMBIGUOUS_COLUMN
DUPLICATE_ALIAS = SqlState.DUPLICATE_ALIAS
INVALID_COLUMN_REFERENCE = SqlState.INVALID_COLUMN_REFERENCE
INVALID_PARAMETER_VALUE = SqlState.INVALID_PARAMETER_VALUE
PROGRAM_LIMIT_EXCEEDED = SqlState.PROGRAM_LIMIT_EXCEEDED


@dataclass
class Refusal(Exception):
    """A statement dpgate will not run, with the SQLSTATE and text the client receives.

    `position` is a 1-based character offset into the statement, as PostgreSQL reports it.
    """

    sqlstate: str
    message: str
    hint: str | None = None
    position: int | None = None
    # For the operator (audit log, dashboard): why, in fixed words, naming the policy
    # setting that decided when one did; never what the analyst typed. The analyst's hint
    # says what they can do now instead.
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.sqlstate}: {self.message}"


def policy_refusal(message: str, hint: str | None = None, position: int | None = None,
                   reason: str = "") -> Refusal:
    return Refusal(INSUFFICIENT_PRIVILEGE, message, hint, position, reason)


def missing_setting(table: str, column: str, setting: str) -> str:
    """The operator's reason when a column's policy setting is missing."""
    return (f"no {setting} for {table}.{column}: policy setting "
            f"[tables.{table.split('.', 1)[1]}.columns.{column}] {setting}")


def unsupported(message: str, hint: str | None = None, position: int | None = None) -> Refusal:
    return Refusal(FEATURE_NOT_SUPPORTED, message, hint, position)
