"""Small reads of sqlglot nodes shared by the passes: wrappers stripped, output names as
PostgreSQL gives them, number literals."""

from __future__ import annotations

from sqlglot import exp


def unalias(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


def unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def number(node: exp.Expression) -> float | None:
    """The value of a number literal, negated or not; None for anything else."""
    if isinstance(node, exp.Neg):
        inner = number(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    return None


def name_of(projection: exp.Expression) -> str:
    if isinstance(projection, exp.Alias):
        return projection.alias
    return default_name(projection)


def default_name(node: exp.Expression) -> str:
    """The column name PostgreSQL gives an unaliased output."""
    if isinstance(node, exp.WithinGroup):  # mode() WITHIN GROUP (…) is named "mode"
        node = node.this
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return "?column?"
