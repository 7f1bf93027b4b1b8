"""The policy as column comments: psql's `\\d+ orders` shows, per column of a private
table, what an analyst can ask of it (issue 13: the policy visible from SQL).

psql, pgAdmin and DBeaver read a column's comment with `col_description(relation,
attnum)`. In a relayed catalog statement each such call becomes

    COALESCE(<the policy's note for that column> || <the owner's comment, if any>,
             col_description(relation, attnum))

where the note is looked up in a VALUES list of the policy's private tables by
`to_regclass` and the column's name, so PostgreSQL itself matches the relation and the
column: nothing is assumed about OIDs. Relations the policy does not name keep their own
comment (a table the policy forgets is private, but dpgate does not know its columns here).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from ..policy.model import Policy
from ..policy.view import column_note

# Aliases no psql or tool query uses, so that the arguments keep their meaning inside.
_TEMPLATE = (
    "COALESCE((SELECT dpgate_n.note || COALESCE(' | ' || "
    "pg_catalog.col_description(__rel, __num), '') FROM (VALUES {rows}) AS "
    "dpgate_n(t, c, note) WHERE pg_catalog.to_regclass(dpgate_n.t) = __rel AND "
    "(dpgate_n.c IS NULL OR dpgate_n.c = (SELECT dpgate_a.attname::text FROM "
    "pg_catalog.pg_attribute AS dpgate_a WHERE dpgate_a.attrelid = __rel AND "
    "dpgate_a.attnum = __num)) ORDER BY dpgate_n.c IS NULL LIMIT 1), "
    "pg_catalog.col_description(__rel, __num))"
)


def annotate_columns(tree: exp.Expression, policy: Policy) -> bool:
    """Rewrite every col_description(rel, num) in `tree` in place; whether any was."""
    calls = [node for node in tree.find_all(exp.Anonymous)
             if str(node.this).lower() == "col_description" and len(node.expressions) == 2]
    if not calls:
        return False
    rows = _note_rows(policy)
    if not rows:
        return False
    template: exp.Expr = sqlglot.parse_one(f"SELECT {_TEMPLATE.format(rows=', '.join(rows))}",
                                           dialect="postgres").expressions[0]
    for call in calls:
        relation, number = call.expressions
        replacement = template.copy()  # parsed once: a catalog query may call it per column
        for placeholder in list(replacement.find_all(exp.Column)):
            if placeholder.name == "__rel":
                placeholder.replace(exp.Paren(this=relation.copy()))
            elif placeholder.name == "__num":
                placeholder.replace(exp.Paren(this=number.copy()))
        # psql qualifies the call (pg_catalog.col_description): replace the Dot around it.
        target = call.parent if isinstance(call.parent, exp.Dot) else call
        target.replace(replacement)
    return True


def _note_rows(policy: Policy) -> list[str]:
    """VALUES rows (table, column or NULL for the table's other columns, note)."""
    rows = []
    for key, table in sorted(policy.tables.items()):
        if not table.private:
            continue
        entries: list[tuple[str | None, str]] = [
            (column, column_note(policy, key, column)) for column in table.columns]
        entries.append((None, column_note(policy, key, None)))
        for column, note in entries:
            rows.append("(" + ", ".join([
                exp.Literal.string(f'"{table.schema}"."{table.name}"').sql(),
                "NULL::text" if column is None else exp.Literal.string(column).sql(),
                exp.Literal.string(note).sql()]) + ")")
    return rows
