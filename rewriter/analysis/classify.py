"""Split a query string into statements and decide what each one is.

Pure: text and policy in, plans (or refusals) out. Utility statements are recognised by
their leading keywords because sqlglot does not model them faithfully (it reads
`START TRANSACTION` as a column alias); queries are parsed with sqlglot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.tokens import Token, TokenType

from ..aggregate.composite import plan_query
from ..aggregate.released import ONLY_AGGREGATES
from ..errors import SYNTAX_ERROR, Refusal, policy_refusal, unsupported
from ..plan import ColumnProbe, EmptyStatement, Plan, Relay, SetDpSetting, ShowDpSetting
from ..policy.model import Policy
from ..relay.catalog import check_catalog_query, refuse_catalogs_with_private
from ..relay.comments import annotate_columns
from ..sensitivity.metrics import Metrics
from ..sql.functions import changes_state, function_name, is_denied
from ..sql.lexer import as_postgresql_reads, tokenize
from ..sql.lexical import check_setting, guarded
from ..sql.positions import position_of
from ..sql.scopes import real_tables
from .probes import probe_limit

_DIALECT = Postgres()
_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
# Names and type names (CAST(x AS int)) after AS are left as they are.
_NOT_KEYWORDS = frozenset({TokenType.VAR, TokenType.IDENTIFIER}) | Postgres.Parser.TYPE_TOKENS
_AFTER_LABEL = frozenset({TokenType.COMMA, TokenType.FROM, TokenType.R_PAREN})

QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "("})
# Transaction control and session housekeeping: relayed, they touch no rows.
RELAYED_UTILITY = frozenset({
    "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE",
    # Cursors of the relay session: DECLARE is relayed only over catalog or public rows.
    "FETCH", "MOVE", "CLOSE",
    # Drops the session's own listeners (asyncpg's pool reset sends UNLISTEN *).
    "UNLISTEN",
})
_UNCHECKED = "dpgate cannot check the SQL it would run"
# Statements refused whatever they name, and why.
REFUSED_STATEMENTS = {
    "EXPLAIN": "EXPLAIN is refused: its plans and row estimates would reveal private data",
    "COPY": "COPY is refused: it moves raw rows in or out (psql's \\copy sends COPY too)",
    "DO": f"DO is refused: {_UNCHECKED}",
    "CALL": f"CALL is refused: {_UNCHECKED}",
    "PREPARE": "PREPARE is refused: a prepared statement would run without dpgate's checks",
    "EXECUTE": "EXECUTE is refused: a prepared statement would run without dpgate's checks",
}
# Settings that would change who the relay connection acts as.
IDENTITY_SETTINGS = frozenset({"role", "authorization", "session_authorization"})
WRITES = frozenset({
    "INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE", "COPY",
    "GRANT", "REVOKE", "COMMENT", "SECURITY", "REINDEX", "CLUSTER", "VACUUM", "ANALYZE",
    "REFRESH", "IMPORT", "LOCK", "CHECKPOINT", "REASSIGN", "LOAD",
})
WRITE_NODES = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop,
               exp.Alter, exp.TruncateTable, exp.Copy, exp.Command)


@dataclass(frozen=True)
class Statement:
    """One statement of a query string: its text, its offset and what to do with it."""

    text: str
    offset: int
    plan: Plan | Refusal


def classify(sql: str, policy: Policy, metrics: Metrics | None = None) -> list[Statement]:
    """Classify every statement of a simple-query string, in order.

    Raises Refusal (42601) on a syntax error: like PostgreSQL, a syntax error anywhere
    means no statement of the string runs. Other refusals stand in the statement's place.
    Raises MissingMetrics when a join needs a column's maxFreq that nobody measured.
    """
    metrics = metrics or Metrics()
    sql = as_postgresql_reads(sql)  # 1_000, 0x1F, 'a'\n'b' as PostgreSQL 16 reads them
    statements = []
    for tokens in _split(sql):
        start, end = tokens[0].start, tokens[-1].end + 1
        text = sql[start:end]
        try:
            plan: Plan | Refusal = _classify_one(text, tokens, policy, metrics, start)
        except Refusal as refusal:
            if refusal.sqlstate == SYNTAX_ERROR:
                raise
            plan = refusal
        statements.append(Statement(text, start, plan))
    if not statements:
        statements.append(Statement("", 0, EmptyStatement()))
    return statements


def _split(sql: str) -> list[list[Token]]:
    tokens = tokenize(sql)  # refused unless they read the text as PostgreSQL does
    groups: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            groups.append([])
        else:
            groups[-1].append(token)
    return [group for group in groups if group]


def _words(tokens: list[Token]) -> list[str]:
    return [token.text for token in tokens]


def _classify_one(text: str, tokens: list[Token], policy: Policy, metrics: Metrics,
                  offset: int) -> Plan:
    first = tokens[0].text.upper()
    if first in QUERY_STARTS:
        return _classify_query(text, policy, metrics, offset)
    if first == "SET":
        return _classify_set(text, tokens[1:])
    if first == "SHOW":
        name = "".join(_words(tokens[1:])).lower()
        return ShowDpSetting(name) if name.startswith("dp.") else Relay(text)
    if first == "RESET":
        name = "".join(_words(tokens[1:])).lower()
        if name.startswith("dp."):
            return SetDpSetting(name, None)
        return Relay(text, resets_dp=name == "all")
    if first == "DISCARD":
        everything = len(tokens) > 1 and tokens[1].text.upper() == "ALL"
        return Relay(text, resets_dp=everything, deallocates_all=everything)
    if first == "DEALLOCATE":  # DEALLOCATE [PREPARE] name | ALL
        quoted = tokens[-1].token_type == TokenType.IDENTIFIER
        name = tokens[-1].text if quoted else tokens[-1].text.lower()  # PostgreSQL folds
        if len(tokens) > 1 and not quoted and name == "all":
            return Relay(text, deallocates_all=True)
        return Relay(text, deallocates=name if len(tokens) > 1 else None)
    if first in RELAYED_UTILITY:
        return Relay(text)
    if first == "DECLARE":
        return _classify_cursor(text, tokens, policy, offset)
    if first in REFUSED_STATEMENTS:
        raise policy_refusal(REFUSED_STATEMENTS[first],
                             hint="Ask SELECT queries of aggregates, or catalog queries.",
                             position=offset + 1, reason=f"{first}: not served by dpgate")
    if first in WRITES:
        raise policy_refusal(
            f"{first} is refused: dpgate is read-only and {ONLY_AGGREGATES}",
            position=offset + 1, reason=f"{first}: a write (dpgate is read-only)",
        )
    raise policy_refusal(
        f"{first} statements are not allowed through dpgate",
        hint="Ask SELECT queries of aggregates, or catalog queries.",
        position=offset + 1, reason="a statement kind dpgate does not serve",
    )


def _classify_set(text: str, tokens: list[Token]) -> Plan:
    words = _words(tokens)
    if words and words[0].upper() in ("SESSION", "LOCAL"):
        words = words[1:]
    if words and words[0].lower() in IDENTITY_SETTINGS:
        raise policy_refusal(
            f"SET {words[0].upper()} is refused: the proxy's backend identity is fixed"
        )
    if words and words[0].upper() == "NAMES":  # SET NAMES x is SET client_encoding TO x
        words = ["client_encoding", "TO", *words[1:]]
    name_parts: list[str] = []
    while words and words[0] != "=" and words[0].upper() != "TO":
        name_parts.append(words.pop(0))
    name = "".join(name_parts).lower()
    value = " ".join(words[1:])
    value_or_default = None if value.upper() in ("", "DEFAULT") else value
    if not name.startswith("dp."):
        check_setting(name, value_or_default, "SET")
        return Relay(text)
    return SetDpSetting(name, value_or_default)


# The names dpgate writes into the SQL it runs over released values (release.computed's
# ROWS, release.outer's ANSWER, plan.branch_table): it fills them in by their text.
RESERVED = "__dpgate_"


def _classify_query(text: str, policy: Policy, metrics: Metrics, offset: int) -> Plan:
    tree, tables, private = _read_query(text, policy, offset)
    if private:
        if (at := text.lower().find(RESERVED)) >= 0:
            raise unsupported("this statement writes a name dpgate keeps for itself "
                              f"({RESERVED}…)", hint="Rename it.", position=offset + at + 1)
        _refuse_writes_and_side_effects(tree, offset, volatile=metrics.volatile_functions)
        refuse_catalogs_with_private(tables, policy, offset)
        limit = probe_limit(tree)  # before the analysis changes the tree
        try:
            return plan_query(tree, policy, offset, metrics, lambda leaf: _relay_branch(
                leaf, offset))
        except Refusal as refusal:
            if limit is None or refusal.sqlstate == SYNTAX_ERROR:
                raise
            return ColumnProbe(limit, refusal.message)
    return _relay(text, tree, tables, offset, policy)


def _read_query(text: str, policy: Policy, offset: int
                ) -> tuple[exp.Expression, list[exp.Table], bool]:
    """A query's tree and real tables, and whether it reads private ones.

    Identifiers are normalized as PostgreSQL reads them: unquoted ones folded to lower
    case, quoted ones kept, so that `"ORDERS"` and `orders` are different names here too.
    """
    tree = normalize_identifiers(parse_query(text, offset), dialect=_DIALECT)
    tables = real_tables(tree)
    return tree, tables, any(policy.is_private(table.db, table.name) for table in tables)


def _relay(text: str, tree: exp.Expression, tables: list[exp.Table], offset: int,
           policy: Policy | None = None) -> Relay:
    """A catalog or public query, its row counts neutralised; untouched text stays exact.

    Neutralising comes first so that the size functions it replaces are not refused; the
    same functions run as the reader (over private tables) would measure for real.
    """
    changed = check_catalog_query(tree, tables, offset)
    _refuse_writes_and_side_effects(tree, offset, relayed=True)
    if policy is not None:  # after the checks: the notes call no function they refuse
        changed = annotate_columns(tree, policy) or changed
    return Relay(tree.sql(dialect="postgres") if changed else text)


def _relay_branch(leaf: exp.Expression, offset: int) -> None:
    """A set operation's branch over public tables, checked (and its row counts
    neutralised, in place) as the relayed query it would be on its own."""
    check_catalog_query(leaf, real_tables(leaf), offset)
    _refuse_writes_and_side_effects(leaf, offset, relayed=True)


def _classify_cursor(text: str, tokens: list[Token], policy: Policy, offset: int) -> Relay:
    """DECLARE … CURSOR FOR query: relayed when the query would be, refused over private rows.

    A cursor's rows are fetched later, one FETCH at a time, while noise and charges are
    per answer: private aggregates are asked directly instead.
    """
    head = tokens[0].end + 1 - offset
    # sqlglot keeps the words after DECLARE as one string token: read them again.
    words = _split(text[head:])[0] if text[head:].strip() else []
    upper = [word.upper() for word in _words(words)]
    cursor = upper.index("CURSOR") if "CURSOR" in upper else len(upper)
    query_at = upper.index("FOR", cursor) + 1 if "FOR" in upper[cursor:] else len(upper)
    if query_at >= len(words):
        raise policy_refusal("DECLARE is refused unless it reads CURSOR … FOR a query",
                             position=offset + 1)
    start = head + words[query_at].start
    query = text[start:]
    tree, tables, private = _read_query(query, policy, offset + start)
    if private:
        raise policy_refusal(
            "a cursor over private tables is refused: noise and charges are per answer",
            hint="Ask the aggregate directly, without DECLARE (psql: unset FETCH_COUNT).",
            position=offset + 1)
    return Relay(text[:start] + _relay(query, tree, tables, offset + start, policy).text)


def parse_query(text: str, offset: int = 0) -> exp.Expression:
    """sqlglot's tree of one query; a syntax error becomes a 42601 refusal."""
    try:
        return _node(sqlglot.parse_one(text, dialect="postgres"))
    except ParseError as error:
        quoted = _quote_keyword_labels(text)
        qualified = _qualify_array_types(text)
        for retry in dict.fromkeys((quoted, qualified, _qualify_array_types(quoted))):
            if retry == text:
                continue
            try:
                return _node(sqlglot.parse_one(retry, dialect="postgres"))
            except ParseError:
                pass
        detail = error.errors[0] if error.errors else {}
        column = detail.get("col")
        raise Refusal(
            SYNTAX_ERROR,
            f"syntax error: {detail.get('description', str(error))}",
            position=None if column is None else offset + int(column),
        ) from None


def _node(tree: exp.Expr) -> exp.Expression:
    # sqlglot 30 types its results as Expr; every node it builds is also an Expression.
    assert isinstance(tree, exp.Expression)
    return tree


def _quote_keyword_labels(text: str) -> str:
    """`… AS select,` → `… AS "select",`: PostgreSQL takes any keyword as a column label
    after AS (Metabase names columns select, insert…), sqlglot does not. Only a word in a
    label's place (followed by a comma, FROM, a closing parenthesis or the end) is quoted,
    never a type name: the quoted label means the same, so the tree still describes what
    PostgreSQL will run."""
    try:
        tokens = _DIALECT.tokenize(text)
    except TokenError:
        return text
    pieces, last = [], 0
    for before, token, after in zip(tokens[:-1], tokens[1:], [*tokens[2:], None], strict=True):
        if (before.token_type == TokenType.ALIAS
                and token.token_type not in _NOT_KEYWORDS
                and _BARE_WORD.fullmatch(token.text)
                and (after is None or after.token_type in _AFTER_LABEL)):
            pieces += [text[last:token.start], f'"{token.text.lower()}"']
            last = token.end + 1
    return "".join(pieces) + text[last:]


def _relayed_setting(node: exp.Expr, offset: int) -> bool:
    """set_config('jit', 'off', false) in a relayed statement (asyncpg's and SQLAlchemy's
    type introspection) is what `SET jit = off`, which is relayed, does: allowed when the
    setting is named by a literal and is neither dpgate's own nor the backend identity.
    A setting dpgate guards (lexical.py) must be given a value it allows, as a literal."""
    arguments = node.expressions if isinstance(node, exp.Anonymous) else []
    if len(arguments) != 3 or not isinstance(arguments[0], exp.Literal) or \
            not arguments[0].is_string:
        return False
    setting = arguments[0].this.lower()
    if guarded(setting):
        value = arguments[1]
        if not (isinstance(value, exp.Literal) and value.is_string):
            raise unsupported(f"set_config of {setting} is supported only with a constant "
                              "value", position=position_of(node, offset))
        check_setting(setting, value.this, "set_config", position_of(node, offset))
    return not setting.startswith("dp.") and setting not in IDENTITY_SETTINGS


def _qualify_array_types(text: str) -> str:
    """`x::regtype[]` → `x::pg_catalog.regtype[]`: sqlglot reads an array of an object
    identifier type (regtype, oid, regclass…) only when it is schema-qualified, and
    pgcli's completion query casts to regtype[]. These types live in pg_catalog, which
    PostgreSQL searches first, so the qualified name means the same."""
    try:
        tokens = _DIALECT.tokenize(text)
    except TokenError:
        return text
    pieces, last = [], 0
    for before, token, after, closing in zip(tokens, tokens[1:], tokens[2:], tokens[3:],
                                             strict=False):
        if (before.token_type in (TokenType.DCOLON, TokenType.ALIAS)
                and token.token_type == TokenType.OBJECT_IDENTIFIER
                and after.token_type == TokenType.L_BRACKET
                and closing.token_type == TokenType.R_BRACKET):
            pieces += [text[last:token.start], f"pg_catalog.{token.text.lower()}"]
            last = token.end + 1
    return "".join(pieces) + text[last:]


def _refuse_writes_and_side_effects(tree: exp.Expression, offset: int, relayed: bool = False,
                                    volatile: frozenset[str] | None = None) -> None:
    """Refuse writes and denied functions; with `volatile` (a private statement: it runs on
    the reader's and the post-processing pools' connections), also every function that may
    change state, wherever it stands."""
    for node in tree.walk():
        if isinstance(node, WRITE_NODES):
            raise policy_refusal(
                f"{node.key.upper()} is refused: dpgate is read-only",
                position=position_of(node, offset),
            )
        name = function_name(node)
        if name == "set_config" and relayed and _relayed_setting(node, offset):
            continue
        if name and is_denied(name):
            raise policy_refusal(f"function {name} is refused", position=position_of(node, offset))
        if name and volatile is not None and changes_state(name, volatile):
            raise policy_refusal(
                f"function {name} is refused in a query over private tables: it is volatile "
                "and may change the state of the database or of dpgate's connections",
                hint="Ask it without the function, or in a query over public tables only.",
                position=position_of(node, offset))
    into = tree.find(exp.Into)  # also in the first branch of a UNION
    if into:
        raise policy_refusal("SELECT INTO is refused: dpgate is read-only",
                             position=position_of(into, offset))
    if tree.args.get("locks"):
        raise policy_refusal("SELECT … FOR UPDATE/SHARE is refused: dpgate is read-only",
                             position=position_of(tree, offset))
