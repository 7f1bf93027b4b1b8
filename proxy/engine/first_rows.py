"""The same question with a smaller LIMIT: the first rows of an answer already released,
returned free (post-processing).

Superset saves an aggregate virtual dataset by running its SQL with LIMIT 1, after SQL
Lab ran it with LIMIT 1001: a new text, so without this a second charge. The rows of a
released answer to `Q LIMIT m` are the released rows of Q filtered, ordered and cut after
the noise (release.py, or PostgreSQL over the released values); those of `Q LIMIT k`, k ≤ m
(or any k when it held fewer than m rows: all there are), are their first k, as that
same release gives them. Returning them reads nothing of the
data, so nothing is charged. The question is compared by the ledger's fingerprint of its
normalized text without the LIMIT, with the same ε, δ, mechanism, bounds and values.

The proxy remembers, per analyst, which stored answer (its ledger fingerprint) answered a
question with which LIMIT; the rows come from the ledger, so an answer the ledger forgot
(`dpgate ledger forget-answers`, `user rotate-shift`) is not reused. The memory is this
proxy's: behind a load balancer each proxy knows its own answers, and a restart forgets
them (the smaller LIMIT is then charged as a question of its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .shapes import Remembered

# The outermost LIMIT ends the normalized text sqlglot writes (rewriter/aggregate/record.py's
# fingerprint), before the notes dpgate appends: a LIMIT inside a subquery is followed
# by its closing parenthesis, and an OFFSET by its own number.
_TOP_LIMIT = re.compile(r"(?s)(?P<question>.*) LIMIT (?P<limit>\d+)(?P<notes>(?: /\*[^*]*\*/)*)")


def split_limit(fingerprint_text: str) -> tuple[str, int] | None:
    """The question without its outermost constant LIMIT, and that LIMIT; None when it has
    none (or an OFFSET, or a parameter as its LIMIT)."""
    found = _TOP_LIMIT.fullmatch(fingerprint_text)
    if found is None:
        return None
    return found["question"] + found["notes"], int(found["limit"])


@dataclass(frozen=True)
class Released:
    """A stored answer to a question with a LIMIT: the LIMIT, the ledger's fingerprint
    of the answer, and whether it held fewer rows than the LIMIT (then all there are)."""

    limit: int
    fingerprint: str
    complete: bool


class FirstRows:
    """Stored answers with a LIMIT, by analyst and question (the event loop's only)."""

    def __init__(self) -> None:
        self._answers: Remembered[tuple[str, str], Released] = Remembered()

    def remember(self, analyst: str, question: str, limit: int, fingerprint: str,
                 rows: int, fresh: bool) -> None:
        """A stored answer to the question with this LIMIT. A repeated one (`fresh`
        False) does not take the place of another already remembered, which may have the
        larger LIMIT."""
        if fresh or self._answers.get((analyst, question)) is None:
            self._answers.put((analyst, question),
                              Released(limit, fingerprint, rows < limit))

    def first(self, analyst: str, question: str, limit: int) -> Released | None:
        """An earlier answer to the question whose first `limit` rows answer it now."""
        earlier = self._answers.get((analyst, question))
        if earlier is None or limit > earlier.limit and not earlier.complete:
            return None  # it holds fewer rows than asked, and more may exist
        return earlier
