"""Literals lifted out of a statement as parameters, so that statements differing only in
constants share one plan (BI tools send `WHERE product_id = 17` with a new number each time).

The statement `SELECT count(*) FROM orders WHERE product_id = 17 AND quantity >= 2.5`
becomes `… WHERE product_id = $1 AND quantity >= $2` with the values 17 (int4) and 2.5
(numeric): the plan of that text is cached by text, and the answer runs the way the
extended protocol runs a prepared statement with parameters, whose analysis cannot depend
on the values because it never sees them.

Only what cannot change the meaning is lifted (correctness and privacy before speed):

- a plain number (digits, optionally one decimal point) that is the right operand of a
  comparison (`=`, `<>`, `!=`, `<`, `<=`, `>`, `>=`) whose left operand ends with a column
  name, a bound of `column BETWEEN n AND m`, or an item of `column IN (n, m, …)` whose
  items are all plain numbers; and the operand ends there (followed by AND, OR, `)`, the
  end of WHERE);
- in the WHERE clause of a statement with one SELECT (no subqueries, CTEs or set
  operations, whose literals may choose domains or grouping) and no parameters of its own;
- each value is typed as PostgreSQL types that literal (int4, int8 if it does not fit,
  numeric for a decimal or a larger integer), so comparisons resolve exactly as written.

Literals anywhere else — the select list, GROUP BY, HAVING, LIMIT, function arguments such
as `date_trunc('month', …)` or `percentile_cont(0.5)`, CASE, strings, dates — stay in the
text and in the cache key. The caller classifies the lifted text, and uses it only when the
plan needs no values before the query runs (see `usable`), or relays the original text
when the lifted one would be relayed unchanged (`relayed_as_written`); otherwise the
original text gets its own analysis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from rewriter.analysis.classify import Statement
from rewriter.plan import Composite, PrivateAggregate, Relay

from ..pgwire.backend import Parameters

INT4_OID, INT8_OID, NUMERIC_OID = 23, 20, 1700
_TOKENIZER = Postgres().tokenizer_class()
_NUMBER = re.compile(r"\d+(?:\.\d*)?")
_COMPARISONS = frozenset({TokenType.EQ, TokenType.NEQ, TokenType.LT, TokenType.LTE,
                          TokenType.GT, TokenType.GTE})
_COLUMN_ENDS = frozenset({TokenType.VAR, TokenType.IDENTIFIER})
_OPERAND_ENDS = frozenset({TokenType.AND, TokenType.OR, TokenType.R_PAREN})
# What ends a WHERE clause at depth 0.
_CLAUSE_ENDS = frozenset({TokenType.GROUP_BY, TokenType.HAVING, TokenType.ORDER_BY,
                          TokenType.LIMIT, TokenType.OFFSET, TokenType.WINDOW,
                          TokenType.FETCH, TokenType.SEMICOLON})
# Anything that brings a second query or a value dpgate does not see into the text.
_NOT_LIFTED = frozenset({TokenType.WITH, TokenType.UNION, TokenType.EXCEPT,
                         TokenType.INTERSECT, TokenType.PARAMETER, TokenType.PLACEHOLDER})


@dataclass(frozen=True)
class LiftedParameters(Parameters):
    """Values that were literals of the statement `original`: valid for their types by
    construction, so PostgreSQL's plan check may be remembered per types rather than per
    values; the ledger records `original`, the text the analyst wrote."""

    original: str = ""


@dataclass(frozen=True)
class Lifted:
    """A statement with its number literals replaced by $1…$n, and their values."""

    text: str
    parameters: LiftedParameters

    @property
    def original(self) -> str:
        return self.parameters.original


@dataclass(frozen=True)
class LiftedStatement(Statement):
    """A statement to answer with the plan of its lifted text and these parameters."""

    parameters: LiftedParameters = LiftedParameters((), (), ())


class LiftFailed(Exception):
    """A lifted statement failed before its charge: answer the text as written."""


def lift(sql: str) -> Lifted | None:
    """The statement with its liftable literals as parameters, or None if none is."""
    if "$" in sql or "?" in sql:
        return None
    try:
        # sqlglot's tokens as they come: the lifted text differs only in plain numbers,
        # and its classification checks them against PostgreSQL's reading (lexer.py).
        tokens = _TOKENIZER.tokenize(sql)
    except (TokenError, ValueError):
        return None
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    if not tokens or tokens[0].token_type != TokenType.SELECT:
        return None
    if any(t.token_type in _NOT_LIFTED or t.token_type == TokenType.SEMICOLON
           for t in tokens) or sum(t.token_type == TokenType.SELECT for t in tokens) != 1:
        return None
    chosen = [i for i in _where_clause(tokens) if _liftable(tokens, i, sql)]
    if not chosen:
        return None
    pieces, types, values, at = [], [], [], 0
    for number, i in enumerate(chosen, start=1):
        token = tokens[i]
        pieces += [sql[at:token.start], f"${number}"]
        types.append(_type_of(token.text))
        values.append(token.text.encode())
        at = token.end + 1
    pieces.append(sql[at:])
    return Lifted("".join(pieces), LiftedParameters(tuple(types), (0,) * len(types),
                                                    tuple(values), sql))


def usable(statements: list[Statement]) -> bool:
    """Whether the lifted text's plan can answer with parameters: one private aggregate
    (or a Composite of them, each bound to all the parameters) whose SQL PostgreSQL runs
    with them, nothing computed or counted before it (those run without parameters) and
    no post-processing (which runs over released values)."""
    if len(statements) != 1:
        return False
    plan = statements[0].plan
    if isinstance(plan, Composite):
        plans = [branch.plan for branch in plan.branches]
    elif isinstance(plan, PrivateAggregate):
        plans = [plan]
    else:
        return False
    return all(not p.constants and p.checks.cells_sql is None and p.computed is None
               and p.outer is None for p in plans)


def relayed_as_written(statements: list[Statement], lifted: Lifted) -> Statement | None:
    """The original text's statement, relayed, if the lifted text is relayed to
    PostgreSQL exactly as written (a plain SELECT over public tables or catalogs): then
    so is the original. A relay that rewrites the text (neutralise.py hides row counts)
    or does anything else is not taken for the shape (None), and the original text gets
    its own analysis."""
    if len(statements) != 1 or not isinstance(statements[0].plan, Relay):
        return None
    statement = statements[0]
    if statement.plan != Relay(statement.text):
        return None
    # What follows the statement (a semicolon, a comment) was not lifted: it ends the
    # original too, and what precedes it is the same in both.
    after = len(lifted.text) - statement.offset - len(statement.text)
    text = lifted.original[statement.offset:len(lifted.original) - after]
    return Statement(text, statement.offset, Relay(text))


def _where_clause(tokens: list[Token]) -> range:
    """Indexes of the tokens of the top-level WHERE clause (empty without one)."""
    depth, start = 0, None
    for i, token in enumerate(tokens):
        kind = token.token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and kind == TokenType.WHERE:
            start = i + 1
        elif depth == 0 and start is not None and kind in _CLAUSE_ENDS:
            return range(start, i)
    return range(start, len(tokens)) if start is not None else range(0)


def _liftable(tokens: list[Token], i: int, sql: str) -> bool:
    """Whether tokens[i] is a plain number in one of the places lifting leaves the
    meaning as it is (the module's docstring)."""
    if not _plain_number(tokens, i, sql):
        return False
    return _compared(tokens, i) or _between_bound(tokens, i, sql) or \
        _in_list_item(tokens, i, sql)


def _plain_number(tokens: list[Token], i: int, sql: str) -> bool:
    if not 0 <= i < len(tokens) or tokens[i].token_type != TokenType.NUMBER:
        return False
    token = tokens[i]
    return sql[token.start:token.end + 1] == token.text and bool(_NUMBER.fullmatch(token.text))


def _kind(tokens: list[Token], i: int) -> TokenType | None:
    return tokens[i].token_type if 0 <= i < len(tokens) else None


def _ends_operand(tokens: list[Token], i: int) -> bool:
    """Whether the operand before tokens[i] ends there (nothing binds to it after)."""
    following = _kind(tokens, i)
    return following is None or following in _OPERAND_ENDS or following in _CLAUSE_ENDS


def _compared(tokens: list[Token], i: int) -> bool:
    """column <op> number"""
    return (_kind(tokens, i - 1) in _COMPARISONS and _kind(tokens, i - 2) in _COLUMN_ENDS
            and i >= 2 and _ends_operand(tokens, i + 1))


def _between_bound(tokens: list[Token], i: int, sql: str) -> bool:
    """column BETWEEN number AND number (not NOT BETWEEN, not SYMMETRIC)"""
    if _kind(tokens, i - 1) == TokenType.BETWEEN and i >= 2:  # the low bound
        return (_kind(tokens, i - 2) in _COLUMN_ENDS and _kind(tokens, i + 1) == TokenType.AND
                and _plain_number(tokens, i + 2, sql) and _ends_operand(tokens, i + 3))
    if _kind(tokens, i - 1) == TokenType.AND and i >= 4:  # the high bound
        return (_plain_number(tokens, i - 2, sql) and _kind(tokens, i - 3) == TokenType.BETWEEN
                and _kind(tokens, i - 4) in _COLUMN_ENDS and _ends_operand(tokens, i + 1))
    return False


def _in_list_item(tokens: list[Token], i: int, sql: str) -> bool:
    """column IN (number, number, …), every item a plain number (not NOT IN)"""
    start = i
    while _kind(tokens, start - 1) == TokenType.COMMA and _plain_number(tokens, start - 2, sql):
        start -= 2
    if not (start >= 3 and _kind(tokens, start - 1) == TokenType.L_PAREN
            and _kind(tokens, start - 2) == TokenType.IN
            and _kind(tokens, start - 3) in _COLUMN_ENDS):
        return False
    end = i
    while _kind(tokens, end + 1) == TokenType.COMMA and _plain_number(tokens, end + 2, sql):
        end += 2
    return _kind(tokens, end + 1) == TokenType.R_PAREN and _ends_operand(tokens, end + 2)


def _type_of(text: str) -> int:
    """The type PostgreSQL gives a number literal."""
    if "." in text:
        return NUMERIC_OID
    value = int(text)
    if value < 2**31:
        return INT4_OID
    return INT8_OID if value < 2**63 else NUMERIC_OID
