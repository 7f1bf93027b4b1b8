"""A bound on the work PostgreSQL does for one private row, whatever the statement.

PostgreSQL evaluates an expression only when a row reaches it, so an expression that is
slow to evaluate turns its own latency into an answer: `CASE WHEN <private condition> THEN
<costly> ELSE true END` takes longer exactly when the condition holds (issue 23: products
of 20,001-digit numbers cost milliseconds per row). The work of an expression grows with
its size and with the size of the values it builds, so both are bounded where they meet a
row (docs/totality.md §3):

- at most MAX_ROW_NODES nodes that read a row, over the whole statement. A subtree that
  reads no row counts once: PostgreSQL folds it when planning, or dpgate computes it
  first (constants.py), so its cost does not depend on the rows. An IN list is one hashed
  look-up;
- text written in the statement at most MAX_TEXT_LITERAL characters long;
- at most MAX_CONCAT_OPERANDS operands in one chain of `||` or concat() (each step copies
  what came before, so the work grows with the square of the chain), and no parameter or
  computed value (of any size) concatenated with or trimmed from a row's value;
- numbers in arithmetic: at most 40 digits (arithmetic.py).

What is left is linear in the size of the row's own values, and small; the latency bench
(bench/timing_oracle.py) measures the strongest construct these bounds accept.
"""

from __future__ import annotations

from sqlglot import exp

from ..errors import PROGRAM_LIMIT_EXCEEDED, Refusal
from ..sql.positions import position_of
from .buckets import DOMAIN_ONLY

MAX_ROW_NODES = 1_000
MAX_TEXT_LITERAL = 200
MAX_CONCAT_OPERANDS = 16
COSTLY_HINT = ("dpgate bounds the work per private row so that its time cannot depend on "
               "which rows reach it; write a shorter expression")
# Parts of a statement that evaluate nothing per row themselves.
_NOT_COUNTED = (exp.Identifier, exp.Star, exp.DataType, exp.Var, exp.Alias, exp.TableAlias,
                exp.Ordered, exp.Order, exp.Group, exp.Where, exp.Having)
_CONCATENATIONS = (exp.DPipe, exp.Concat)
# Text work that grows with every operand (a parameter or computed value can be megabytes).
_TEXT_BUILDERS = (exp.DPipe, exp.Concat, exp.Trim)


def refuse_costly(roots: list[exp.Expression], offset: int) -> None:
    """Raise 54000 when the expressions evaluated on private rows can cost too much."""
    total = 0
    for root in roots:
        count, _ = _count(root, offset)
        total += count
        if total > MAX_ROW_NODES:
            raise Refusal(PROGRAM_LIMIT_EXCEEDED,
                          f"the expressions evaluated on each private row are too large (more"
                          f" than {MAX_ROW_NODES} operations)", COSTLY_HINT,
                          position_of(root, offset))


def _count(node: exp.Expression, offset: int) -> tuple[int, bool]:
    """(operations evaluated per row, whether the node reads a row)."""
    if node.meta.get(DOMAIN_ONLY):
        return 1, False
    if isinstance(node, exp.Literal) and node.is_string and len(node.this) > MAX_TEXT_LITERAL:
        raise Refusal(PROGRAM_LIMIT_EXCEEDED,
                      f"text on private rows is at most {MAX_TEXT_LITERAL} characters long",
                      COSTLY_HINT, position_of(node, offset))
    if isinstance(node, _TEXT_BUILDERS) and node.find(exp.Column) is not None and \
            node.find(exp.Parameter, exp.Placeholder) is not None:
        raise Refusal(PROGRAM_LIMIT_EXCEEDED,
                      "a parameter or computed value has no bounded size: it cannot be "
                      "concatenated with or trimmed from private rows", COSTLY_HINT,
                      position_of(node, offset))
    if isinstance(node, _CONCATENATIONS) and not isinstance(node.parent, _CONCATENATIONS) \
            and _operands(node) > MAX_CONCAT_OPERANDS:
        raise Refusal(PROGRAM_LIMIT_EXCEEDED,
                      f"at most {MAX_CONCAT_OPERANDS} values are concatenated on private "
                      "rows", COSTLY_HINT, position_of(node, offset))
    count, reads = 0, isinstance(node, exp.Column)
    for child in node.iter_expressions():
        if isinstance(node, exp.In) and child is not node.this and child.find(exp.Column) is None:
            continue  # an IN list of values is hashed: one look-up
        child_count, child_reads = _count(child, offset)
        count, reads = count + child_count, reads or child_reads
    if not reads:
        return 1, False
    return count + (0 if isinstance(node, _NOT_COUNTED) else 1), True


def _operands(node: exp.Expression) -> int:
    if isinstance(node, exp.DPipe):
        return sum(_operands(side) for side in (node.this, node.expression))
    if isinstance(node, exp.Concat):
        return sum(_operands(argument) for argument in node.expressions)
    if isinstance(node, exp.Paren):
        return _operands(node.this)
    return 1
