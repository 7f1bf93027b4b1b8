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

    def __str__(self) -> str:
        return f"{self.sqlstate}: {self.message}"


def policy_refusal(message: str, hint: str | None = None, position: int | None = None) -> Refusal:
    return Refusal(INSUFFICIENT_PRIVILEGE, message, hint, position)


def unsupported(message: str, hint: str | None = None, position: int | None = None) -> Refusal:
    return Refusal(FEATURE_NOT_SUPPORTED, message, hint, position)
