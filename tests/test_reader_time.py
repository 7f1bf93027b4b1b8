"""Each analyst's account of reader-seconds (proxy/engine/reader_time.py), on a clock the
test moves: spent by the time a private query holds its reader, refilled at the rate set,
never above the burst."""

from __future__ import annotations

import pytest

from proxy.config import BackendSettings
from proxy.engine.reader_time import ReaderTime, reader_time

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_overdrawn_account_waits_until_it_refills_to_zero() -> None:
    clock = Clock()
    account = ReaderTime(per_minute=30, burst=120, clock=clock)  # 0.5 s per second
    assert account.wait("eve") == 0
    account.spend("eve", 60)  # 60 of the 120 left: still runs
    assert account.wait("eve") == 0
    account.spend("eve", 90)  # -30: 60 s at 0.5 reader-seconds a second
    assert account.wait("eve") == pytest.approx(60)
    assert account.wait("bob") == 0  # each analyst's own
    clock.now += 59
    assert account.wait("eve") == pytest.approx(1)
    clock.now += 1
    assert account.wait("eve") == 0


def test_the_time_of_a_block_is_spent_and_the_burst_caps_the_refill() -> None:
    clock = Clock()
    account = ReaderTime(per_minute=60, burst=10, clock=clock)
    with account.held("eve"):
        clock.now += 25  # a query held its reader 25 s
    assert account.wait("eve") == pytest.approx(15)
    clock.now += 3600  # an hour idle refills to the burst only
    account.spend("eve", 11)
    assert account.wait("eve") == pytest.approx(1)


def test_a_failing_block_is_spent_too_and_full_accounts_are_forgotten() -> None:
    clock = Clock()
    account = ReaderTime(per_minute=60, burst=10, clock=clock)
    with pytest.raises(TimeoutError), account.held("eve"):
        clock.now += 12
        raise TimeoutError  # a statement that timed out held its reader all the same
    assert account.wait("eve") == pytest.approx(2)
    clock.now += 12
    assert account.wait("eve") == 0
    assert not account._accounts  # back to full: no entry kept per analyst


def test_zero_is_no_limit_and_the_default_burst_is_the_share_run_to_the_timeout() -> None:
    account = ReaderTime(per_minute=0, burst=0)
    account.spend("eve", 1e9)
    assert account.wait("eve") == 0
    settings = reader_time(BackendSettings(private_statement_timeout=60,
                                           private_statements_per_analyst=2))
    assert settings.burst == 120 and settings.rate == pytest.approx(0.5)
