"""SQL text read as PostgreSQL's lexer (scan.l) reads it, and sqlglot's tokens checked
against that reading.

dpgate decides what a statement is from sqlglot's tokens, then relays the text or runs
its own. If sqlglot ended a string, a comment or a statement where PostgreSQL does not,
PostgreSQL would run code dpgate never saw (`/*/* */ ' */, reltuples …--'` is a comment
and code to PostgreSQL, a comment and a string to sqlglot). So every query string is also
scanned here, with PostgreSQL's rules under the settings dpgate pins (lexical.py:
standard_conforming_strings on, UTF-8 text), and used only if sqlglot's tokens cover the
same code and the same literals, to the character. Otherwise the string is refused.

Only boundaries are read here, not values: where each string, quoted identifier and
comment starts and ends, and which characters are code. Text is a Python string, so a
character above U+007F stands for the bytes of its UTF-8 form, every one of which
PostgreSQL takes as a letter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from .errors import FEATURE_NOT_SUPPORTED, SYNTAX_ERROR, Refusal

_DIALECT = Postgres()
_COMMANDS = frozenset(Postgres.Tokenizer.COMMANDS)

_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")
_IDENTIFIER = re.compile(r"[A-Za-z_\x80-\U0010ffff][A-Za-z_0-9$\x80-\U0010ffff]*")
_NUMBER = re.compile(r"(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?"
                     r"(?:[A-Za-z_\x80-\U0010ffff][A-Za-z_0-9$\x80-\U0010ffff]*)?")
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_\x80-\U0010ffff][A-Za-z_0-9\x80-\U0010ffff]*)?\$")
_PARAMETER = re.compile(r"\$\d+")
_COMMENT_MARK = re.compile(r"/\*|\*/")
_NEWLINE = re.compile(r"[\n\r]")
# Bodies after the opening quote, up to and including the closing one.
_QUOTED = re.compile(r"(?:[^']|'')*'", re.DOTALL)  # '' is a quote: 'it''s'
_ESCAPED = re.compile(r"(?:[^'\\]|''|\\.)*'", re.DOTALL)  # E'…': \ escapes any character
_BITS = re.compile(r"[^']*'")  # B'…' and X'…' know no escapes
_QUOTED_NAME = re.compile(r'(?:[^"]|"")*"', re.DOTALL)
# What may separate the parts of one string: whitespace holding a newline, and -- comments
# after it (SQL's continuation, `'a'\n'b'` is 'ab').
_CONTINUATION = re.compile(r"(?:[ \t\f\v]|--[^\n\r]*)*[\n\r](?:[ \t\n\r\f\v]+|--[^\n\r]*[\n\r])*'")
# One-letter prefixes of strings and the body each reads.
_PREFIXED = {"e": _ESCAPED, "b": _BITS, "x": _BITS, "n": _QUOTED}

CODE, NUMBER, LITERAL, NAME, COMMENT, SPACE = (
    "code", "number", "literal", "name", "comment", "space")
# sqlglot's token types for a string literal and for a quoted identifier.
_STRING_TOKENS = frozenset({
    TokenType.STRING, TokenType.BYTE_STRING, TokenType.NATIONAL_STRING,
    TokenType.HEREDOC_STRING, TokenType.UNICODE_STRING, TokenType.BIT_STRING,
    TokenType.HEX_STRING, TokenType.RAW_STRING,
})


@dataclass(frozen=True)
class Span:
    """Characters start … end - 1 of the text, and what PostgreSQL reads them as."""

    start: int
    end: int
    kind: str


def scan(sql: str) -> list[Span]:
    """PostgreSQL's reading of the text, as consecutive spans (spaces included).

    Raises Refusal (42601) where PostgreSQL's lexer fails: an unterminated string,
    quoted identifier, dollar quote or comment.
    """
    spans: list[Span] = []
    while (at := spans[-1].end if spans else 0) < len(sql):
        spans += _next(sql, at)
    return spans


def _next(sql: str, at: int) -> list[Span]:
    char, two = sql[at], sql[at:at + 2]
    if (space := _WHITESPACE.match(sql, at)) is not None:
        return [Span(at, space.end(), SPACE)]
    if two == "--":
        newline = _NEWLINE.search(sql, at)
        return [Span(at, newline.start() if newline else len(sql), COMMENT)]
    if two == "/*":
        return [Span(at, _comment_end(sql, at), COMMENT)]
    if char == "'":
        return _string(sql, at, at + 1, _QUOTED)
    if char == '"':
        return [Span(at, _body_end(_QUOTED_NAME, sql, at + 1, "quoted identifier"), NAME)]
    if char == "$":
        return [_dollar(sql, at)]
    if (name := _IDENTIFIER.match(sql, at)) is not None:
        word, after = name.group().lower(), name.end()
        if word in _PREFIXED and sql.startswith("'", after):
            return _string(sql, at, after + 1, _PREFIXED[word])
        if word == "u" and sql.startswith("&'", after):
            return _string(sql, at, after + 2, _QUOTED)
        if word == "u" and sql.startswith('&"', after):
            return [Span(at, _body_end(_QUOTED_NAME, sql, after + 2, "quoted identifier"),
                         NAME)]
        return [Span(at, after, CODE)]
    if (number := _NUMBER.match(sql, at)) is not None:
        return [Span(at, number.end(), NUMBER)]
    return [Span(at, at + 1, CODE)]


def _body_end(body: re.Pattern[str], sql: str, at: int, what: str) -> int:
    found = body.match(sql, at)
    if found is None:
        raise Refusal(SYNTAX_ERROR, f"unterminated {what}", position=at)
    return found.end()


def _string(sql: str, start: int, at: int, body: re.Pattern[str]) -> list[Span]:
    """A string from its prefix or opening quote; each further part (SQL's continuation
    across a newline, read with the same escapes) is a literal of its own, as sqlglot
    tokenizes it, and what separates the parts is a comment."""
    end = _body_end(body, sql, at, "quoted string")
    spans = [Span(start, end, LITERAL)]
    while (more := _CONTINUATION.match(sql, end)) is not None:
        part = more.end() - 1
        spans.append(Span(end, part, COMMENT))
        end = _body_end(body, sql, part + 1, "quoted string")
        spans.append(Span(part, end, LITERAL))
    return spans


def _comment_end(sql: str, at: int) -> int:
    """The end of a /* comment */, which nests: /* /* */ */ is one comment."""
    depth = 0
    for mark in _COMMENT_MARK.finditer(sql, at):
        depth += 1 if mark.group() == "/*" else -1
        if depth == 0:
            return mark.end()
    raise Refusal(SYNTAX_ERROR, "unterminated /* comment", position=at + 1)


def _dollar(sql: str, at: int) -> Span:
    """$tag$…$tag$, a parameter $1, or a lone $."""
    tag = _DOLLAR_TAG.match(sql, at)
    if tag is not None:
        close = sql.find(tag.group(), tag.end())
        if close < 0:
            raise Refusal(SYNTAX_ERROR, "unterminated dollar-quoted string", position=at + 1)
        return Span(at, close + len(tag.group()), LITERAL)
    parameter = _PARAMETER.match(sql, at)
    return Span(at, parameter.end() if parameter else at + 1, CODE)


def tokenize(sql: str) -> list[Token]:
    """sqlglot's tokens of a query string, once they are known to read it as PostgreSQL
    does: the same literals and quoted names, from the same first to the same last
    character, the same code, and the same semicolons.

    Raises Refusal: 42601 where either lexer fails, 0A000 where they disagree.
    """
    try:
        tokens = _DIALECT.tokenize(sql)
    except TokenError as error:
        raise Refusal(SYNTAX_ERROR, f"syntax error: {error}") from None
    _agree(sql, tokens, scan(sql))
    for before, token in zip(tokens, tokens[1:], strict=False):
        # sqlglot cannot write U&'…' UESCAPE '\\' back (its regex breaks on the escape).
        if before.text.upper() == "UESCAPE" and token.text == "\\":
            raise Refusal(FEATURE_NOT_SUPPORTED, "UESCAPE '\\' is not supported",
                          hint="Leave UESCAPE out: \\ is the escape of U&'…' strings.",
                          position=before.start + 1)
    return tokens


def _agree(sql: str, tokens: list[Token], spans: list[Span]) -> None:
    quoted = {(span.start, span.end): span.kind for span in spans
              if span.kind in (LITERAL, NAME)}
    code = bytearray(len(sql))  # 1 where PostgreSQL reads code, 2 where it reads spaces
    for span in spans:
        if span.kind in (CODE, NUMBER, SPACE):
            mark = b"\2" if span.kind == SPACE else b"\1"
            code[span.start:span.end] = mark * (span.end - span.start)
    covered = bytearray(len(sql))
    semicolons = {token.start for token in tokens if token.token_type == TokenType.SEMICOLON}
    matched: set[tuple[int, int]] = set()
    # sqlglot reads the rest of EXPLAIN, SHOW… up to the next ; as one string.
    rests: list[tuple[int, int]] = []
    for before, token in zip([None, *tokens], tokens, strict=False):
        start, end = token.start, token.end + 1
        if before is not None and before.token_type in _COMMANDS and \
                token.token_type == TokenType.STRING:
            rest = min([at for at in semicolons if at > before.end] or [len(sql)])
            covered[before.end + 1:rest] = b"\1" * (rest - before.end - 1)
            matched |= {key for key in quoted if before.end < key[0] < rest}
            rests.append((before.end, rest))
            continue
        kind = quoted.get((start, end))
        if kind is not None:
            if (kind == NAME) != (token.token_type == TokenType.IDENTIFIER) or \
                    (kind == LITERAL and token.token_type not in _STRING_TOKENS):
                raise _disagree(start)
            matched.add((start, end))
            continue
        # Code: code to PostgreSQL too (spaces inside, as in GROUP BY), from end to end.
        if code[start] != 1 or code[end - 1] != 1 or 0 in code[start:end]:
            raise _disagree(start)
        covered[start:end] = b"\1" * (end - start)
    if len(matched) != len(quoted):
        raise _disagree(min(start for start, end in set(quoted) - matched))
    for span in spans:
        if span.kind in (CODE, NUMBER) and 0 in covered[span.start:span.end]:
            raise _disagree(span.start)
    # A number is one number to both (sqlglot reads 1_000 as 1 AS _000, 0x1F as x'1F').
    numbers = {(token.start, token.end + 1) for token in tokens
               if token.token_type == TokenType.NUMBER}
    for span in spans:
        if span.kind == NUMBER and (span.start, span.end) not in numbers and not (
                sql[span.start] == "." and (span.start + 1, span.end) in numbers) and \
                not any(start < span.start < end for start, end in rests):
            raise _disagree(span.start)
    # Statements end where PostgreSQL ends them, and nowhere else.
    ends = {span.start for span in spans if span.kind == CODE and sql[span.start] == ";"}
    if semicolons != ends:
        raise _disagree(min(semicolons ^ ends))


def _disagree(at: int) -> Refusal:
    return Refusal(
        FEATURE_NOT_SUPPORTED,
        "dpgate cannot read this text exactly as PostgreSQL would, at the character "
        f"{at + 1}: where a string, quoted name or comment starts or ends",
        hint="Write the literal or the comment another way (one string per literal, "
        "comments without nesting, E'…' for backslash escapes).",
        position=at + 1)
