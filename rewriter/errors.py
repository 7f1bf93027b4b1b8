"""Typed refusals: what the client sees when a statement is not answered."""

from __future__ import annotations

from dataclasses import dataclass

INSUFFICIENT_PRIVILEGE = "42501"
FEATURE_NOT_SUPPORTED = "0A000"
SYNTAX_ERROR = "42601"
UNDEFINED_OBJECT = "42704"
UNDEFINED_COLUMN = "42703"
AMBIGUOUS_COLUMN = "42702"
DUPLICATE_ALIAS = "42712"
INVALID_COLUMN_REFERENCE = "42P10"
INVALID_PARAMETER_VALUE = "22023"
PROGRAM_LIMIT_EXCEEDED = "54000"


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
