"""A fresh private answer costs one round trip to PostgreSQL once its statement's shape was
checked (issue 27): the private query itself, with literals (lifted out as parameters)
or with the client's parameters, in text or in binary results. Its plan check, its shape
and its binary encoding cost none of their own; an error before the charge stays free
(tests/test_private_bind.py, tests/test_plan_check.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from proxy.engine.literals import LiftedStatement
from proxy.engine.outcome import Answer
from proxy.pgwire.backend import BackendConnection, Parameters
from tests.test_private_connections import Setup, setup  # noqa: F401

pytestmark = pytest.mark.end_to_end

INT4 = 23
COUNT = "SELECT count(*) FROM orders WHERE product_id = {} AND quantity >= {}"
BOUND = "SELECT count(*) FROM orders WHERE product_id = $1 AND quantity >= $2"


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """The first message of every batch any backend connection sends and waits on."""
    sent: list[bytes] = []
    until_ready = BackendConnection._until_ready

    async def counted(self: BackendConnection, keep=None):  # type: ignore[no-untyped-def]
        sent.append(b"".join(self._outgoing)[:80])
        return await until_ready(self, keep)
    monkeypatch.setattr(BackendConnection, "_until_ready", counted)
    yield sent


def test_fresh_answers_cost_one_round_trip_each(setup: Setup,  # noqa: F811
                                                round_trips: list[bytes]) -> None:
    trips: dict[str, list[int]] = {"literals": [], "text": [], "binary": []}

    async def scenario() -> None:
        engine = setup.engine("rtt")
        for number in range(1, 5):
            round_trips.clear()
            (statement,) = await engine.plan(COUNT.format(number, 2))
            assert isinstance(statement, LiftedStatement)
            answer = await engine.answer(statement)
            assert isinstance(answer, Answer)
            trips["literals"].append(len(round_trips))
        (statement,) = await engine.statements(BOUND)
        await engine.describe(BOUND, statement.plan, (INT4, INT4))
        for number in range(1, 5):
            for formats in ((0,), (1,)):
                round_trips.clear()
                values = (str(number).encode(), str(formats[0] + 4).encode())  # not asked above
                answer = await engine.execute(BOUND, statement.plan,
                                              Parameters((INT4, INT4), (0, 0), values))
                assert isinstance(answer, Answer)
                rows = await engine.encode(answer, formats)
                assert len(rows) == 1
                trips["binary" if formats[0] else "text"].append(len(round_trips))
    setup.run(scenario())
    # The first of each is the statement's first: PostgreSQL parses and plans it then.
    assert trips["literals"][0] > 1 and trips["text"][0] > 1
    assert {name: counts[1:] for name, counts in trips.items()} == {
        name: [1] * (len(counts) - 1) for name, counts in trips.items()}
    assert [c.outcome for c in setup.ledger.charges("rtt")] == ["answered"] * 12
