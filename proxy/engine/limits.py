"""How much work one statement may ask of dpgate before any of it is done.

dpgate parses every query it relays or answers with sqlglot and analyses it in Python: the
time grows with the text, its tokens and the depth of its expression trees (`1+1+…+1`
with 65,000 terms is a tree 65,000 levels deep: minutes of analysis, and sqlglot's
compiled parser holds the GIL for 0.3 s on its 130,000 tokens, stalling every session).
So a statement is measured first, cheaply, and refused with PostgreSQL's own codes when it
is too long or has too many tokens (54000 program_limit_exceeded), or nests parentheses or
chains operators too deeply (54001 statement_too_complex). Within these bounds analysis
takes at most a few hundred milliseconds (docs/operations.md); one that still runs past
server.analysis_timeout is stopped, its worker thread freed (workers.py), and refused
with 54000. Settings: server.max_statement_size, max_statement_tokens, max_nesting,
max_expression_depth, analysis_timeout (README).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rewriter.sqlstate import SqlState

from ..config import ServerSettings

# Statements up to this size have their literals lifted (literals.py) on the event loop:
# one pass of the tokenizer, about 1 ms per KB. Their analysis, 3 ms for `SELECT 1` and
# 100 ms at 4 KB, always runs on a worker thread (planning.py).
INLINE_ANALYSIS_SIZE = 4096

# PostgreSQL's lexical items, roughly: enough to count tokens and follow nesting (a
# string or quoted name hides parentheses and operators; comments are not tokens). Where
# it errs, it must count more than PostgreSQL reads, never less: E'' strings end as
# PostgreSQL ends them (`E'\''` is one string) and dollar quotes hide what they quote.
_TOKEN = re.compile(r"""
    (?P<skip>--[^\n]*|/\*.*?\*/|\s+)
  | [eE]'(?:[^'\\]|\\.|'')*'? | \$(?P<tag>(?:[^\W\d]\w*)?)\$.*?\$(?P=tag)\$
  | '(?:[^']|'')*'? | "(?:[^"]|"")*"?
  | (?P<word>[^\W\d][\w$]*)
  | \d+\.?\d*(?:[eE][-+]?\d+)? | \.\d+
  | (?P<cast>::)
  | (?P<operator>[-+*/<>=~!@\#%^&|`?]+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)
# Words that join two operands into a tree one level deeper, as operators do.
_CHAINING_WORDS = frozenset({"AND", "OR"})
# Words that start a new expression at the same level (a clause, a CASE branch).
_RESTARTING_WORDS = frozenset({
    "SELECT", "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "ON", "JOIN",
    "WHEN", "THEN", "ELSE", "END", "UNION", "INTERSECT", "EXCEPT", "AS", "BY", "USING",
    "WINDOW", "RETURNING", "SET", "VALUES"})


@dataclass(frozen=True)
class Measure:
    """What the analysis of a text will have to walk: its tokens, its deepest nesting of
    parentheses, and its deepest expression (parentheses plus chained operators, each of
    which makes the syntax tree one level deeper)."""

    tokens: int
    nesting: int
    depth: int


class TooMuchWork(Exception):
    def __init__(self, sqlstate: str, message: str, hint: str):
        super().__init__(message)
        self.sqlstate, self.message, self.hint = sqlstate, message, hint


def check_size(sql: str, server: ServerSettings) -> None:
    """Raise TooMuchWork if the text is longer than allowed (a test of its length only,
    for the event loop; `check_statement` measures the rest on a worker thread)."""
    if len(sql) > server.max_statement_size:
        raise TooMuchWork(SqlState.PROGRAM_LIMIT_EXCEEDED,
                          f"statement is too long for dpgate to analyse ({len(sql)} characters,"
                          f" at most {server.max_statement_size})",
                          "Ask shorter statements: a long IN list can be a join with a table.")


def check_statement(sql: str, server: ServerSettings) -> None:
    """Raise TooMuchWork if the text is longer, has more tokens, or nests deeper than
    allowed. Linear in the text, in Python (so a worker thread running it gives the GIL
    back to the event loop as any other Python code)."""
    check_size(sql, server)
    # The scan stops past the token limit: what it saw of the nesting comes first (it
    # says more than "too many tokens" when the parentheses are what make them many).
    measure = measure_statement(sql, stop_after=server.max_statement_tokens)
    if measure.nesting > server.max_nesting:
        raise TooMuchWork(SqlState.STATEMENT_TOO_COMPLEX,
                          f"statement is nested too deeply (more than {server.max_nesting} "
                          "levels)", "Remove redundant parentheses or split the statement.")
    if measure.depth > server.max_expression_depth:
        raise TooMuchWork(SqlState.STATEMENT_TOO_COMPLEX,
                          f"an expression of the statement is too deep (more than "
                          f"{server.max_expression_depth} operators and parentheses "
                          "inside one another)", "Split long chains of operators: "
                          "x IN (…) instead of x = a OR x = b OR …, sum(…) of fewer terms.")
    if measure.tokens > server.max_statement_tokens:
        raise TooMuchWork(SqlState.PROGRAM_LIMIT_EXCEEDED,
                          "statement has too many tokens for dpgate to analyse (at most "
                          f"{server.max_statement_tokens})",
                          "Ask shorter statements: a long IN list can be a join with a table.")


def nesting(sql: str) -> int:
    """The deepest parenthesis nesting outside string literals, quoted names, comments."""
    return measure_statement(sql).nesting


def measure_statement(sql: str, stop_after: int = 0) -> Measure:
    """Count tokens (up to `stop_after` + 1 when given) and follow the nesting of
    parentheses and of operator chains, in one pass with constant work per token. At one
    level `a = 1 AND b = 2 AND …` is as deep as its chain of ANDs, `1+1+…` as its chain of
    operators: the deeper of the two chains counts."""
    tokens = nesting = deepest = chained = 0
    chains = [[0, 0]]  # operators and AND/OR chained so far at each open parenthesis
    for match in _TOKEN.finditer(sql):
        kind = match.lastgroup
        if kind == "skip":
            continue
        tokens += 1
        if tokens > stop_after > 0:
            break
        text = match.group()
        chain = chains[-1]
        if kind == "operator" or kind == "word" and text.upper() in _CHAINING_WORDS:
            before = max(chain)
            chain[kind == "word"] += 1
            chained += max(chain) - before
        elif kind == "word" and text.upper() in _RESTARTING_WORDS or text in (",", ";"):
            chained -= max(chain)
            chain[:] = [0, 0]
        elif text == "(":
            chains.append([0, 0])
            nesting = max(nesting, len(chains) - 1)
        elif text == ")" and len(chains) > 1:
            chained -= max(chains.pop())
        deepest = max(deepest, len(chains) - 1 + chained)
    return Measure(tokens, nesting, deepest)
