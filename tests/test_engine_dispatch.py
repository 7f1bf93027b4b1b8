"""The engine's dispatcher in-process, without a database: the plans it answers itself
(SET/SHOW dp.*, SHOW dp.budget, empty statements), what it refuses to dispatch, and the
one conversion of errors. The backend pool points nowhere: these never need it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from accounting import Analyst, ScramVerifier, SqliteLedger
from mechanisms.random_source import SecureRandomSource
from proxy.config import Config
from proxy.engine.dispatch import Description, Engine
from proxy.engine.errors import StatementError, client_error
from proxy.engine.knowledge import Knowledge
from proxy.engine.outcome import Answer, Reply
from proxy.engine.plan_cache import PlanCache
from proxy.engine.plan_check import PlanChecker
from proxy.engine.planning import Planner
from proxy.engine.workers import Workers
from proxy.pgwire import wire
from proxy.pgwire.backend import BackendError, BackendPool, Endpoint
from proxy.pgwire.running import Running
from rewriter.errors import Refusal
from rewriter.plan import EmptyStatement, Relay, SetDpSetting, ShowDpSetting
from rewriter.sqlstate import SqlState

pytestmark = pytest.mark.unit


@pytest.fixture
def engine(tmp_path: Path):
    config = Config()
    ledger = SqliteLedger(tmp_path / "ledger.sqlite3")
    analyst = Analyst("ada", ScramVerifier(b"s", b"k", b"k", 4096), 2.0, 1e-6, 1.0)
    ledger.add_analyst(analyst)
    # Port 9 (discard) on a closed host: any use of the backend would fail loudly.
    pool = BackendPool(Endpoint("127.0.0.1", 9, "nobody", None, "none"), size=1)
    workers = Workers()
    planner = Planner(config, Knowledge(ledger), PlanCache(), pool, workers)
    yield Engine(analyst, config, ledger, pool, SecureRandomSource(), planner,
                 PlanChecker(config.policy), workers, Running())
    workers.close()


def run(coroutine):
    return asyncio.run(coroutine)


def test_set_then_show_a_dp_setting(engine: Engine) -> None:
    done = run(engine.execute("SET dp.epsilon = 0.5", SetDpSetting("dp.epsilon", "0.5")))
    assert done == Reply(wire.command_complete("SET"))
    shown = run(engine.execute("SHOW dp.epsilon", ShowDpSetting("dp.epsilon")))
    assert isinstance(shown, Answer) and shown.rows == [["0.5"]] and shown.tag == "SHOW"
    reset = run(engine.execute("RESET dp.epsilon", SetDpSetting("dp.epsilon", None)))
    assert reset == Reply(wire.command_complete("RESET"))
    assert engine.settings.epsilon == Config().privacy.default_epsilon


def test_a_value_outside_the_owners_range_is_refused_with_22023(engine: Engine) -> None:
    with pytest.raises(StatementError) as refused:
        run(engine.execute("SET dp.epsilon = 50", SetDpSetting("dp.epsilon", "50")))
    fields = wire.parse_error_fields(refused.value.to_response()[5:])
    assert fields["C"] == SqlState.INVALID_PARAMETER_VALUE
    assert "between 0.001 and 10" in fields["M"]


def test_show_budget_reads_the_ledger(engine: Engine) -> None:
    shown = run(engine.execute("SHOW dp.budget", ShowDpSetting("dp.budget")))
    assert isinstance(shown, Answer)
    assert [name for name, _ in shown.columns][:3] == ["epsilon_total", "epsilon_spent",
                                                       "epsilon_left"]
    assert shown.rows[0][:3] == ["2.0", "0.0", "2.0"]


def test_an_empty_statement_and_describe_without_running(engine: Engine) -> None:
    assert run(engine.execute("", EmptyStatement())) == Reply(wire.empty_query_response())
    described = run(engine.describe("SHOW dp.delta", ShowDpSetting("dp.delta"), ()))
    assert described == Description(columns=(("dp.delta", wire.TEXT_OID),))


def test_relayed_plans_are_not_the_engines(engine: Engine) -> None:
    with pytest.raises(TypeError):
        run(engine.execute("SELECT 1", Relay("SELECT 1")))


def test_a_refusal_by_name_is_reported_without_asking_postgresql(engine: Engine) -> None:
    refusal = Refusal(SqlState.INSUFFICIENT_PRIVILEGE, "function pg_sleep is refused",
                      position=8)
    error = run(engine.refused("SELECT pg_sleep(1)", refusal))
    fields = wire.parse_error_fields(error.to_response()[5:])
    assert (fields["C"], fields["P"]) == ("42501", "8")


def test_client_error_shifts_or_drops_postgresqls_position() -> None:
    backend = BackendError({"C": "42703", "M": 'column "x" does not exist', "P": "8"})
    in_string = wire.parse_error_fields(client_error(backend, offset=20).to_response()[5:])
    assert in_string["P"] == "28"  # the statement starts at character 21 of the string
    rewritten = wire.parse_error_fields(client_error(backend).to_response()[5:])
    assert "P" not in rewritten  # SQL the client never wrote: no position
    refusal = Refusal(SqlState.SYNTAX_ERROR, "syntax error", "a hint", position=3)
    fields = wire.parse_error_fields(client_error(refusal).to_response()[5:])
    assert (fields["C"], fields["H"], fields["P"]) == ("42601", "a hint", "3")
