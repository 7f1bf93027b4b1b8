"""PostgreSQL's generic plan of a statement with parameters: one plan check for all values.

EXPLAIN with bound values shows the custom plan for those values, in which the planner has
folded them: `$1 = 5 OR x IN (SELECT …)` loses its subquery when $1 is 5 and keeps it for
6. A verdict on one value's plan therefore says nothing about the next value's. The
generic plan (`EXPLAIN (GENERIC_PLAN)`, PostgreSQL 16 and later) is planned without any
value, so it keeps every node some value's plan may have (a custom plan is the generic
one with values folded in and partitions pruned: nodes go, none come), and a verdict on it
holds for every value of the parameters' types. Older servers keep checking per value.
"""

from __future__ import annotations

import re

from sqlglot.dialects.postgres import Postgres
from sqlglot.tokens import TokenType

from ..pgwire.backend import BackendConnection

_TOKENIZER = Postgres().tokenizer_class()
# The first major version whose EXPLAIN takes GENERIC_PLAN.
GENERIC_PLAN_VERSION = 16


def has_generic_plans(backend: BackendConnection) -> bool:
    """Whether the connection's server explains generic plans (from its server_version)."""
    major = re.match(r"\d+", backend.parameters.get("server_version", ""))
    return major is not None and int(major.group()) >= GENERIC_PLAN_VERSION


def generic_explain(sql: str, type_names: list[str]) -> str:
    """`EXPLAIN (GENERIC_PLAN, VERBOSE, FORMAT JSON)` of `sql`, each $n written as
    `($n::type)` with the type the client's Parse gave it: sent as a simple query, with no
    values bound, PostgreSQL would otherwise infer the types from the context, and another
    type can resolve another operator or function."""
    tokens = _TOKENIZER.tokenize(sql)
    pieces, at = [], 0
    for parameter, number in zip(tokens, tokens[1:], strict=False):
        if parameter.token_type != TokenType.PARAMETER or \
                number.token_type != TokenType.NUMBER or number.start != parameter.end + 1:
            continue
        index = int(number.text) - 1
        if not 0 <= index < len(type_names):
            raise ValueError(f"${number.text} has no type")
        pieces += [sql[at:parameter.start], f"(${number.text}::{type_names[index]})"]
        at = number.end + 1
    pieces.append(sql[at:])
    return "EXPLAIN (GENERIC_PLAN, VERBOSE, FORMAT JSON) " + "".join(pieces)


async def type_names(backend: BackendConnection, oids: list[int]) -> list[str]:
    """PostgreSQL's names of types (format_type), to cast values to them."""
    if not oids:
        return []
    names = await backend.fetch("SELECT " + ", ".join(f"format_type({oid}, NULL)"
                                                      for oid in oids))
    return [name.decode() if name else "text" for name in names.rows[0]]
