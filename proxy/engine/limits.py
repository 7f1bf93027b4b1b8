"""How much work one statement may ask of dpgate before any of it is done.

dpgate parses every query it relays or answers with sqlglot, in Python: the time grows
with the text and its nesting (a 600 KB `1+1+…+1` took 26 s, 200,000 nested parentheses
overflowed the stack). So a statement is measured first, cheaply, and refused with
PostgreSQL's own codes when it is too big (54000 program_limit_exceeded) or too deeply
nested (54001 statement_too_complex); an analysis that still runs too long is abandoned
(54000) and the client may ask again. Settings: server.max_statement_size,
server.max_nesting, server.analysis_timeout (README).
"""

from __future__ import annotations

from rewriter.sqlstate import SqlState

# Statements up to this size have their literals lifted (literals.py) on the event loop:
# one pass of the tokenizer, about 1 ms per KB. Their analysis, 3 ms for `SELECT 1` and
# 100 ms at 4 KB, always runs on a worker thread (planning.py).
INLINE_ANALYSIS_SIZE = 4096


class TooMuchWork(Exception):
    def __init__(self, sqlstate: str, message: str, hint: str):
        super().__init__(message)
        self.sqlstate, self.message, self.hint = sqlstate, message, hint


def check_statement(sql: str, max_size: int, max_nesting: int) -> None:
    """Raise TooMuchWork if the text is longer or nests deeper than allowed."""
    if len(sql) > max_size:
        raise TooMuchWork(SqlState.PROGRAM_LIMIT_EXCEEDED,
                          f"statement is too long for dpgate to analyse ({len(sql)} characters,"
                          f" at most {max_size})",
                          "Ask shorter statements: a long IN list can be a join with a table.")
    if nesting(sql) > max_nesting:
        raise TooMuchWork(SqlState.STATEMENT_TOO_COMPLEX,
                          f"statement is nested too deeply (more than {max_nesting} levels)",
                          "Remove redundant parentheses or split the statement.")


def nesting(sql: str) -> int:
    """The deepest parenthesis nesting outside string literals and quoted names."""
    depth = deepest = 0
    quote = ""
    for char in sql:
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest
