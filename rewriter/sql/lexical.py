"""Settings that change how PostgreSQL reads SQL text, held where dpgate reads it too.

dpgate reads every statement once (lexer.py) and PostgreSQL reads it again. The two
readings agree only under the settings lexer.py is written for, so those are pinned on
every backend connection (startup options, which RESET and DISCARD ALL return to, and
which outrank the data owner's ALTER DATABASE/ROLE defaults), and an analyst may set
them only to the pinned value, on any route: SET, set_config(), startup parameters and
`options=-c …`.

- standard_conforming_strings: off makes \\ an escape in '…': `'a\\', ' --'` is one
  string to PostgreSQL and two to a reader that assumes on.
- backslash_quote: whether \\' may stand for a quote; with safe_encoding PostgreSQL
  refuses it where a client encoding could hide a \\ in a character.
- client_encoding: SJIS, BIG5, GBK, UHC, GB18030 and JOHAB have characters whose second
  byte is \\ or another ASCII character, so the bytes dpgate reads as one character end a
  string to PostgreSQL. dpgate reads UTF-8; SQL_ASCII, which PostgreSQL does not convert,
  is accepted at startup (psql under LANG=C asks for it).

A relay or reader connection that reports a pinned setting changed all the same is
replaced before its next statement (BackendConnection.alive).

escape_string_warning changes only warnings and stays free. Two settings change how
literal values (not boundaries) are read, and private statements run on dpgate's reader
connections, which pin the default: DateStyle's field order (01/02/2024) and
IntervalStyle sql_standard (a leading minus sign). Where the analyst's session would read
a private literal differently from the reader, the setting is refused rather than
answered under another reading.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from ..errors import FEATURE_NOT_SUPPORTED, Refusal

_TRUE = frozenset({"on", "true", "yes", "1", "t", "tr", "tru", "y", "ye"})
# The encodings dpgate reads: its own UTF-8, and SQL_ASCII, which PostgreSQL does not convert.
ENCODINGS = {"utf8": "UTF8", "unicode": "UTF8", "sqlascii": "SQL_ASCII"}
_DAY_FIRST = frozenset({"dmy", "ymd", "euro", "european"})
_MONTH_FIRST = frozenset({"mdy", "us", "noneuro", "noneuropean"})

# Startup settings of every backend connection dpgate opens.
PINNED = {"standard_conforming_strings": "on", "backslash_quote": "safe_encoding",
          "client_encoding": "UTF8"}
# dpgate's reader connections also pin how literal values are read and written.
READER_PINNED = {**PINNED, "DateStyle": "ISO, MDY", "IntervalStyle": "postgres",
                 "extra_float_digits": "1"}


def _encoding(value: str) -> str | None:
    """PostgreSQL's name of an encoding, spelt as PostgreSQL accepts it (utf-8, Unicode)."""
    return ENCODINGS.get(re.sub(r"[^a-z0-9]", "", value.lower()))


def _date_order_kept(value: str) -> bool:
    words = set(re.split(r"[\s,]+", value.strip().lower()))
    # German output brings day-first input with it, unless an order is named.
    return not words & _DAY_FIRST and ("german" not in words or bool(words & _MONTH_FIRST))


# Each guarded setting (lower case, as PostgreSQL matches names) and the values allowed.
_ALLOWED: dict[str, Callable[[str], bool]] = {
    "standard_conforming_strings": lambda value: value.strip().lower() in _TRUE,
    "backslash_quote": lambda value: value.strip().lower() == "safe_encoding",
    # SQL_ASCII only at startup: a change after it would renew the relay connection.
    "client_encoding": lambda value: _encoding(value) == "UTF8",
    "datestyle": _date_order_kept,
    "intervalstyle": lambda value: value.strip().lower() != "sql_standard",
}
_WHY = {
    "standard_conforming_strings": ("dpgate reads '…' strings as standard SQL, where \\ "
                                    "is a character", "Write backslash escapes in E'…' "
                                    "strings instead."),
    "backslash_quote": ("dpgate reads \\' only as PostgreSQL's default (safe_encoding) does",
                        "Write a quote in a string as ''."),
    "client_encoding": ("dpgate reads SQL text as UTF-8", "Use client_encoding UTF8 (for "
                        "psql and libpq: PGCLIENTENCODING=UTF8)."),
    "datestyle": ("private statements read dates month first (MDY), as PostgreSQL's "
                  "default does", "Keep the MDY order (e.g. DateStyle = 'ISO, MDY') or "
                  "write dates as YYYY-MM-DD."),
    "intervalstyle": ("private statements read intervals as PostgreSQL's default "
                      "IntervalStyle does", "Use IntervalStyle postgres or iso_8601."),
}


def guarded(name: str) -> bool:
    """Whether dpgate holds this setting to certain values."""
    return name.lower() in _ALLOWED


def check_setting(name: str, value: str | None, route: str,
                  position: int | None = None) -> None:
    """Refuse (0A000) a guarded setting set to a value dpgate does not read as
    PostgreSQL would. None is DEFAULT/RESET: back to the pinned startup value."""
    key = name.lower()
    if value is None or key not in _ALLOWED or _ALLOWED[key](value):
        return
    why, hint = _WHY[key]
    raise Refusal(FEATURE_NOT_SUPPORTED, f"{route} {name} = '{value}' is not supported: {why}",
                  hint=hint, position=position)


def startup_settings(parameters: Mapping[str, str]) -> dict[str, str]:
    """The settings of a client's startup packet dpgate passes to its relay connection
    (guarded ones checked, encodings spelt as PostgreSQL reports them), with the pinned
    ones added. Settings in `options` (-c name=value, --name=value) are checked and not
    passed on, as dpgate passes no other option either.
    """
    for name, value in _options(parameters.get("options", "")):
        check_setting(name, value, "the startup option")
    for name, value in parameters.items():
        if name != "client_encoding" or _encoding(value) is None:
            check_setting(name, value, "the startup parameter")
    passed = {name: parameters[name] for name in ("DateStyle", "TimeZone", "search_path")
              if name in parameters}
    encoding = _encoding(parameters.get("client_encoding", "")) or "UTF8"
    return {**passed, **PINNED, "client_encoding": encoding}


def _options(options: str) -> list[tuple[str, str]]:
    """(name, value) of each -c name=value and --name=value in a startup `options`
    string (backslash escapes a space, as PostgreSQL splits it)."""
    words = [re.sub(r"\\(.)", r"\1", word)
             for word in re.findall(r"(?:\\.|\\$|[^\s\\])+", options, re.DOTALL)]
    settings = []
    for word, after in zip(words, [*words[1:], ""], strict=False):
        if word.startswith("--") and "=" in word:
            setting = word[2:]
        elif word == "-c":
            setting = after
        elif word.startswith("-c"):
            setting = word[2:]
        else:
            continue
        name, _, value = setting.partition("=")
        settings.append((name.replace("-", "_"), value))
    return settings
