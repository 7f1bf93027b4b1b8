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
from dataclasses import dataclass, field

from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from ..errors import FEATURE_NOT_SUPPORTED, SYNTAX_ERROR, Refusal

_DIALECT = Postgres()
_COMMANDS = frozenset(Postgres.Tokenizer.COMMANDS)

_LETTER, _LETTERS = r"[A-Za-z_\x80-\U0010ffff]", r"[A-Za-z_0-9$\x80-\U0010ffff]*"
# The start of each lexeme, in PostgreSQL's order of preference; a string's prefix (E'…,
# U&'…) only where a word would start, since a word is read whole.
_NEXT = re.compile(
    r"(?P<space>[ \t\n\r\f\v]+)|(?P<line>--[^\n\r]*)|(?P<block>/\*)"
    r"|(?P<string>(?:[eEbBxXnN]|[uU]&)?')|(?P<name>(?:[uU]&)?\")|(?P<dollar>\$)"
    # digits, a fraction, an exponent, and letters after them (PostgreSQL 16's junk)
    rf"|(?P<number>(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?(?:{_LETTER}{_LETTERS})?)"
    rf"|(?P<word>{_LETTER}{_LETTERS})|(?P<char>.)", re.DOTALL)
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_\x80-\U0010ffff][A-Za-z_0-9\x80-\U0010ffff]*)?\$")
_PARAMETER = re.compile(r"\$\d+")
_COMMENT_MARK = re.compile(r"/\*|\*/")
# Bodies after the opening quote, up to and including the closing one.
_QUOTED = re.compile(r"(?:[^']|'')*'", re.DOTALL)  # '' is a quote: 'it''s'
_ESCAPED = re.compile(r"(?:[^'\\]|''|\\.)*'", re.DOTALL)  # E'…': \ escapes any character
_BITS = re.compile(r"[^']*'")  # B'…' and X'…' know no escapes
_QUOTED_NAME = re.compile(r'(?:[^"]|"")*"', re.DOTALL)
# What may separate the parts of one string: whitespace holding a newline, and -- comments
# after it (SQL's continuation, `'a'\n'b'` is 'ab'). One character per repetition: a
# nested + would backtrack exponentially on a long run of spaces.
_CONTINUATION = re.compile(
    r"(?:[ \t\f\v]|--[^\n\r]*)*[\n\r](?:[ \t\n\r\f\v]|--[^\n\r]*[\n\r])*'")
# The body each prefix of a string reads.
_BODIES = {"e": _ESCAPED, "b": _BITS, "x": _BITS, "n": _QUOTED, "u": _QUOTED, "": _QUOTED}

# What each character of the text is to PostgreSQL.
OPAQUE, CODE, SPACE = 0, 1, 2  # inside a literal, quoted name or comment; code; spaces
_COVERED = b"\3"  # (in _agree: where a sqlglot token covers the text)
# sqlglot's token types for a string literal.
_STRING_TOKENS = frozenset({
    TokenType.STRING, TokenType.BYTE_STRING, TokenType.NATIONAL_STRING,
    TokenType.HEREDOC_STRING, TokenType.UNICODE_STRING, TokenType.BIT_STRING,
    TokenType.HEX_STRING, TokenType.RAW_STRING,
})


@dataclass
class Reading:
    """PostgreSQL's reading of a text: what each character is (`kinds`, one byte each),
    where each literal and quoted name starts and ends (and whether it is a name), where
    each number, and where the semicolons that end statements are."""

    kinds: bytearray
    quoted: dict[tuple[int, int], bool] = field(default_factory=dict)
    numbers: list[tuple[int, int]] = field(default_factory=list)
    semicolons: set[int] = field(default_factory=set)
    # Strings continued across a newline ('a'\n'b'): (start, end, each part's body).
    continued: list[tuple[int, int, list[tuple[int, int]]]] = field(default_factory=list)


def scan(sql: str) -> Reading:
    """Read the text with PostgreSQL's rules.

    Raises Refusal (42601) where PostgreSQL's lexer fails: an unterminated string,
    quoted identifier, dollar quote or comment.
    """
    reading = Reading(bytearray([CODE]) * len(sql))
    kinds, at = reading.kinds, 0
    while at < len(sql):
        lexeme = _NEXT.match(sql, at)
        assert lexeme is not None  # (?P<char>.) matches anything
        kind, end = lexeme.lastgroup, lexeme.end()
        if kind == "space":
            kinds[at:end] = bytes([SPACE]) * (end - at)
        elif kind in ("line", "block"):
            end = _comment_end(sql, at) if kind == "block" else end
            kinds[at:end] = bytes(end - at)
        elif kind == "string":
            end = _string(sql, at, end, _BODIES[lexeme.group()[:-1][:1].lower()], reading)
        elif kind == "name":
            end = _body_end(_QUOTED_NAME, sql, end, "quoted identifier")
            reading.quoted[(at, end)] = True
            kinds[at:end] = bytes(end - at)
        elif kind == "dollar":
            end = _dollar(sql, at, reading)
        elif kind == "number":
            reading.numbers.append((at, end))
        elif kind == "char" and sql[at] == ";":
            reading.semicolons.add(at)
        at = end
    return reading


def _body_end(body: re.Pattern[str], sql: str, at: int, what: str) -> int:
    found = body.match(sql, at)
    if found is None:
        raise Refusal(SYNTAX_ERROR, f"unterminated {what}", position=at)
    return found.end()


def _string(sql: str, start: int, at: int, body: re.Pattern[str], reading: Reading) -> int:
    """A string from its prefix or opening quote; each further part (SQL's continuation
    across a newline, read with the same escapes) is a literal of its own, as sqlglot
    tokenizes it, and what separates the parts is opaque."""
    end = _body_end(body, sql, at, "quoted string")
    reading.quoted[(start, end)] = False
    bodies = [(at, end - 1)]
    while (more := _CONTINUATION.match(sql, end)) is not None:
        part = more.end() - 1
        end = _body_end(body, sql, part + 1, "quoted string")
        reading.quoted[(part, end)] = False
        bodies.append((part + 1, end - 1))
    if len(bodies) > 1:
        reading.continued.append((start, end, bodies))
    reading.kinds[start:end] = bytes(end - start)
    return end


def _comment_end(sql: str, at: int) -> int:
    """The end of a /* comment */, which nests: /* /* */ */ is one comment."""
    depth = 0
    for mark in _COMMENT_MARK.finditer(sql, at):
        depth += 1 if mark.group() == "/*" else -1
        if depth == 0:
            return mark.end()
    raise Refusal(SYNTAX_ERROR, "unterminated /* comment", position=at + 1)


def _dollar(sql: str, at: int, reading: Reading) -> int:
    """$tag$…$tag$ (a literal), a parameter $1, or a lone $."""
    tag = _DOLLAR_TAG.match(sql, at)
    if tag is not None:
        close = sql.find(tag.group(), tag.end())
        if close < 0:
            raise Refusal(SYNTAX_ERROR, "unterminated dollar-quoted string", position=at + 1)
        end = close + len(tag.group())
        reading.quoted[(at, end)] = False
        reading.kinds[at:end] = bytes(end - at)
        return end
    parameter = _PARAMETER.match(sql, at)
    return parameter.end() if parameter else at + 1


# PostgreSQL 16's numbers (scan.l): in flex's way, the longest match wins, and the rule
# written first among equals. `_` separates digits; 0x, 0o and 0b integers.
_DECIMAL = r"\d(?:_?\d)*"
_NUMERIC = rf"(?:{_DECIMAL}\.(?:{_DECIMAL})?|\.{_DECIMAL})"
_START = r"[A-Za-z_\x80-\U0010ffff]"
_PG_NUMBERS = [(kind, re.compile(pattern)) for kind, pattern in [
    ("integer", _DECIMAL),
    ("hex", r"0[xX](?:_?[0-9A-Fa-f])+"), ("oct", r"0[oO](?:_?[0-7])+"),
    ("bin", r"0[bB](?:_?[01])+"),
    ("invalid hexadecimal integer", r"0[xX]_?"), ("invalid octal integer", r"0[oO]_?"),
    ("invalid binary integer", r"0[bB]_?"),
    ("numeric", _NUMERIC), ("integer", rf"{_DECIMAL}(?=\.\.)"),  # 1..2: 1, then ..
    ("numeric", rf"(?:{_DECIMAL}|{_NUMERIC})[Ee][-+]?{_DECIMAL}"),
    ("junk", rf"(?:{_DECIMAL}|{_NUMERIC})[Ee][-+]"),
    *(("junk", rf"{number}{_START}") for number in (
        _DECIMAL, r"0[xX](?:_?[0-9A-Fa-f])+", r"0[oO](?:_?[0-7])+", r"0[bB](?:_?[01])+",
        _NUMERIC, rf"(?:{_DECIMAL}|{_NUMERIC})[Ee][-+]?{_DECIMAL}")),
]]
_BASES = {"hex": 16, "oct": 8, "bin": 2}
_AFTER_POINT = re.compile(rf"\.(?:{_DECIMAL}(?:[Ee][-+]?{_DECIMAL})?)?")
# Where such a number may be: a digit that starts a word, then a letter or `_` (a name
# such as a1_b does not start with its digit). Only then is the text scanned again.
_MAYBE_OTHER_NUMBER = re.compile(rf"(?<![A-Za-z_0-9$\x80-\U0010ffff])\d[\d_.]*{_START}")
# A quote, then spaces holding a newline, then a quote: a string may be continued.
_MAYBE_CONTINUED = re.compile("'" + _CONTINUATION.pattern)


def as_postgresql_reads(sql: str) -> str:
    """The text with PostgreSQL 16's other ways of writing a number (`1_000`, `0x1F`,
    `0o17`, `0b101`) written in decimal, and each string continued across a newline
    (`'a'\n'b'`) written as the one literal it is, each preceded by spaces to its length
    (so it ends where it did: a statement ending with one ends at the same character).
    sqlglot reads `1_000` as `1 AS _000`, writes `0x1F` back as a bit string and the
    parts of a string as two; so it and every position in the text agree with
    PostgreSQL. The same value in decimal is the same constant to PostgreSQL (int4, int8
    or numeric by its size), and the parts of a string share its prefix and escapes.

    Raises Refusal: 42601 where PostgreSQL's lexer fails (`123abc`, `0x`), 0A000 for a
    number whose decimal form is longer than the text (a long hexadecimal one).
    """
    if _MAYBE_OTHER_NUMBER.search(sql) is None and _MAYBE_CONTINUED.search(sql) is None:
        return sql
    reading = scan(sql)
    replaced: list[tuple[int, int, str]] = []
    for start, _ in reading.numbers:
        kind, text = _pg_number(sql, start)
        if kind == "junk" or kind.startswith("invalid"):
            what = "trailing junk after numeric literal" if kind == "junk" else kind
            raise Refusal(SYNTAX_ERROR, f'{what} at or near "{text}"', position=start + 1)
        if kind in _BASES or "_" in text:
            digits = text.replace("_", "")
            value = str(int(digits[2:], _BASES[kind])) if kind in _BASES else digits
            if len(value) > len(text):
                raise Refusal(FEATURE_NOT_SUPPORTED, f"{text} is longer in decimal: dpgate "
                              "reads numbers in decimal", hint=f"Write it as {value}.",
                              position=start + 1)
            if kind in _BASES and sql.startswith(".", start + len(text)):
                # PostgreSQL ends the integer there and fails at the point; in decimal
                # it would become a fraction.
                point = _AFTER_POINT.match(sql, start + len(text))
                near = point.group() if point else "."
                raise Refusal(SYNTAX_ERROR, f'syntax error at or near "{near}"',
                              position=start + len(text) + 1)
            replaced.append((start, start + len(text), value))
    for start, end, bodies in reading.continued:
        prefix = sql[start:bodies[0][0]]  # E', U&', B' … with its quote
        if prefix[0] in "eE" and any(_ends_in_open_escape(sql[a:b]) for a, b in bodies[:-1]):
            # PostgreSQL reads each part's escapes on their own: joined, an escape ending
            # one part (E'\x4') would take the next part's first digits.
            raise Refusal(FEATURE_NOT_SUPPORTED, "an E'…' string continued across a "
                          "newline with a backslash escape before its last part is not "
                          "supported", hint="Write it as one literal.", position=start + 1)
        replaced.append((start, end, prefix + "".join(sql[a:b] for a, b in bodies) + "'"))
    pieces, at = [], 0
    for start, end, text in sorted(replaced):
        pieces += [sql[at:start], text.rjust(end - start)]
        at = end
    return "".join(pieces) + sql[at:]


# An E'' escape that more digits would continue: \x4, \1, \12, \u00, \U0001.
_OPEN_ESCAPE = re.compile(r"\\(?:x[0-9A-Fa-f]?|[0-7]{1,2}|u[0-9A-Fa-f]{0,3}|U[0-9A-Fa-f]{0,7})")
_ANY_ESCAPE = re.compile(r"\\(?:x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|.)", re.DOTALL)


def _ends_in_open_escape(body: str) -> bool:
    """Whether the body of an E'' string ends in an escape that digits after it would
    continue (each escape read whole, as PostgreSQL reads them)."""
    at = 0
    while (slash := body.find("\\", at)) >= 0:
        if _OPEN_ESCAPE.fullmatch(body, slash):
            return True
        escape = _ANY_ESCAPE.match(body, slash)
        at = escape.end() if escape else slash + 1
    return False


def _pg_number(sql: str, at: int) -> tuple[str, str]:
    """(kind, text) of the number PostgreSQL's lexer reads at `at`."""
    best = ("", "")
    for kind, pattern in _PG_NUMBERS:
        found = pattern.match(sql, at)
        if found is not None and len(found.group()) > len(best[1]):
            best = (kind, found.group())
    return best


def tokenize(sql: str) -> list[Token]:
    """sqlglot's tokens of a query string, once they are known to read it as PostgreSQL
    does: the same literals and quoted names, from the same first to the same last
    character, the same code, the same numbers and the same semicolons.

    Raises Refusal: 42601 where either lexer fails, 0A000 where they disagree.
    """
    try:
        tokens = _DIALECT.tokenize(sql)
    except TokenError as error:
        raise Refusal(SYNTAX_ERROR, f"syntax error: {error}") from None
    _agree(sql, tokens, scan(sql))
    for before, token in zip(tokens, tokens[1:], strict=False):
        # sqlglot cannot write U&'…' UESCAPE '\' back (its regex breaks on the escape).
        if before.text.upper() == "UESCAPE" and token.text == "\\":
            raise Refusal(FEATURE_NOT_SUPPORTED, "UESCAPE '\\' is not supported",
                          hint="Leave UESCAPE out: \\ is the escape of U&'…' strings.",
                          position=before.start + 1)
    return tokens


def _agree(sql: str, tokens: list[Token], reading: Reading) -> None:
    kinds, quoted = reading.kinds, reading.quoted
    covered = bytearray(kinds)
    semicolons = {token.start for token in tokens if token.token_type == TokenType.SEMICOLON}
    numbers = {(token.start, token.end + 1) for token in tokens
               if token.token_type == TokenType.NUMBER}
    matched: set[tuple[int, int]] = set()
    # sqlglot reads the rest of EXPLAIN, SHOW… up to the next ; as one string.
    rests: list[tuple[int, int]] = []
    for before, token in zip([None, *tokens], tokens, strict=False):
        start, end = token.start, token.end + 1
        if before is not None and before.token_type in _COMMANDS and \
                token.token_type == TokenType.STRING:
            rest = min([at for at in semicolons if at > before.end] or [len(sql)])
            covered[before.end + 1:rest] = _COVERED * (rest - before.end - 1)
            matched |= {key for key in quoted if before.end < key[0] < rest}
            rests.append((before.end, rest))
        elif (start, end) in quoted:
            name = quoted[(start, end)]
            if name != (token.token_type == TokenType.IDENTIFIER) or \
                    (not name and token.token_type not in _STRING_TOKENS):
                raise _disagree(start)
            matched.add((start, end))
        # Code: code to PostgreSQL too (spaces inside, as in GROUP BY), from end to end.
        elif kinds[start] != CODE or kinds[end - 1] != CODE or OPAQUE in kinds[start:end]:
            raise _disagree(start)
        else:
            covered[start:end] = _COVERED * (end - start)
    if len(matched) != len(quoted):
        raise _disagree(min(start for start, _ in set(quoted) - matched))
    if CODE in covered:  # code to PostgreSQL that sqlglot skipped (as a comment, say)
        raise _disagree(covered.index(CODE))
    # A number is one number to both (sqlglot reads 1_000 as 1 AS _000, 0x1F as x'1F').
    for start, end in reading.numbers:
        if (start, end) not in numbers and not (sql[start] == "." and (start + 1, end) in numbers) \
                and not any(first < start < last for first, last in rests):
            raise _disagree(start)
    # Statements end where PostgreSQL ends them, and nowhere else.
    if semicolons != reading.semicolons:
        raise _disagree(min(semicolons ^ reading.semicolons))


def _disagree(at: int) -> Refusal:
    return Refusal(
        FEATURE_NOT_SUPPORTED,
        "dpgate cannot read this text exactly as PostgreSQL would, at the character "
        f"{at + 1}: where a string, quoted name or comment starts or ends",
        hint="Write the literal or the comment another way (one string per literal, "
        "comments without nesting, E'…' for backslash escapes).",
        position=at + 1)
