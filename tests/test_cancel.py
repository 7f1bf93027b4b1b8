"""CancelRequest reaches the backend query a session is running, in both protocols."""

from __future__ import annotations

import threading

import psycopg
import pytest
from psycopg import errors

from tests.conftest import RunningProxy

pytestmark = pytest.mark.end_to_end

LONG = "SELECT count(*) FROM generate_series(1, 2000000000)"


def cancel_soon(connection: psycopg.Connection) -> threading.Timer:
    timer = threading.Timer(0.5, connection.cancel)
    timer.start()
    return timer


@pytest.mark.parametrize("parameters", [None, (1,)], ids=["simple", "extended"])
def test_cancel_stops_a_running_query_and_the_session_goes_on(proxy: RunningProxy,
                                                              parameters):
    query = LONG if parameters is None else LONG + " WHERE %s = 1"
    with psycopg.connect(proxy.dsn("alice"), autocommit=True) as connection:
        timer = cancel_soon(connection)
        with pytest.raises(errors.QueryCanceled):
            connection.execute(query, parameters)
        timer.join()
        assert connection.execute("SELECT 1").fetchone() == (1,)
