"""`dpgate policy init` and `dpgate policy check` on a clinic schema of their own: the
draft says what the catalog proves, and every policy mistake a data owner made in issue 26
stops `serve` with the setting's name and a fix, before an analyst could meet it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.config import load_policy_file
from rewriter.policy.model import ColumnDomain, RangeDomain, ValuesDomain
from tests.clinic import Clinic, clinic_server
from tests.conftest import add_analyst, dpgate_cli, free_port, start_proxy, wait_for_port

pytestmark = pytest.mark.end_to_end

CLINIC_POLICY = """
privacy_unit = { table = "patients", column = "patient_id" }
max_contributions = 5

[tables.doctors]
private = false

[tables.patients]
private = true

[tables.patients.columns.birth_year]
domain = { range = [1900, 2025] }
bounds = [1930, 2020]

[tables.patients.columns.sex]
domain = ["female", "male", "other"]

[tables.visits]
private = true
unit = "patient_id"

[tables.visits.columns.kind]
domain = ["checkup", "emergency", "follow-up"]

[tables.visits.columns.visit_date]
domain = { range = [2024-01-01, 2024-12-31] }

[tables.visits.columns.cost]
bounds = [0, 400]

[tables.prescriptions]
private = true
unit = "visit_id -> visits.visit_id -> visits.patient_id"
"""


@pytest.fixture(scope="module")
def clinic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clinic]:
    yield from clinic_server(tmp_path_factory.mktemp("clinic-pg"))


def write_config(directory: Path, clinic: Clinic, policy: str) -> Path:
    (directory / "policy.toml").write_text(policy)
    config = directory / "dpgate.toml"
    config.write_text(f"""
[server]
listen_port = {free_port()}
[backend]
dsn = "{clinic.reader_dsn}"
relay_dsn = "{clinic.relay_dsn}"
[ledger]
path = "ledger.sqlite3"
[policy]
file = "policy.toml"
""")
    return config


def test_init_reads_only_the_catalog_and_drafts_what_it_proves(clinic: Clinic, tmp_path):
    # A role that may read no table at all: if init selected a row, it would fail.
    clinic.execute("DROP ROLE IF EXISTS catalog_only; "
                   "CREATE ROLE catalog_only LOGIN PASSWORD 'catalog-pw'")
    with psycopg.connect(clinic.dsn("catalog_only", "catalog-pw")) as connection:
        assert connection.execute(
            "SELECT bool_or(has_table_privilege(c.oid, 'SELECT')) FROM pg_class c "
            "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'"
        ).fetchone() == (False,)
    out = tmp_path / "policy.toml"
    result = dpgate_cli("policy", "init", "--dsn", clinic.dsn("catalog_only", "catalog-pw"),
                        "--public", "doctors", "--output", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    policy = load_policy_file(out)
    assert policy.unit is not None and policy.unit.label == "public.patients.patient_id"
    assert str(policy.unit_path("public.visits")) == "patient_id"
    assert str(policy.unit_path("public.prescriptions")) == \
        "visit_id -> visits.visit_id -> visits.patient_id"
    assert not policy.is_private("public", "doctors")
    assert all(policy.is_private("public", t) for t in ("patients", "visits", "prescriptions"))
    visits = policy.tables["public.visits"].columns
    assert visits["kind"].domain == ValuesDomain(("checkup", "emergency", "follow-up"))
    assert visits["doctor_id"].domain == ColumnDomain("public.doctors", "doctor_id")
    patients = policy.tables["public.patients"].columns
    assert patients["insured"].domain == ValuesDomain((True, False))
    assert patients["birth_year"].domain == RangeDomain(1900, 2025)
    assert patients["birth_year"].bounds == (1900.0, 2025.0)
    assert patients["sex"].domain == ValuesDomain(("female", "male", "other"))  # an enum
    prescriptions = policy.tables["public.prescriptions"].columns
    assert prescriptions["days"].bounds == (1.0, 90.0)
    # What only the owner can decide is marked, not guessed.
    assert "# TODO bounds = [lo, hi]" in text.split("[tables.visits.columns.cost]")[1]
    assert "visit_date" not in visits and "cost" not in visits
    assert "# TODO tau" in text and "--public" in text


def test_init_names_a_public_table_that_does_not_exist(clinic: Clinic):
    result = dpgate_cli("policy", "init", "--dsn", clinic.owner_dsn, "--public", "doctor")
    assert result.returncode == 1
    assert "--public names table(s) not in schema public: doctor" in result.stderr


def test_the_drafted_policy_passes_the_check(clinic: Clinic, tmp_path):
    drafted = dpgate_cli("policy", "init", "--dsn", clinic.owner_dsn, "--public", "doctors")
    assert drafted.returncode == 0, drafted.stderr
    config = write_config(tmp_path, clinic, drafted.stdout)
    result = dpgate_cli("policy", "check", "--config", str(config))
    assert (result.returncode, result.stdout.strip()) == (0, "policy check passed"), \
        result.stderr


# Each mistake: (what in CLINIC_POLICY, replaced by, the setting named, PostgreSQL's words).
MISTAKES = {
    "unknown table": ("[tables.doctors]", "[tables.labs]\nprivate = true\n[tables.doctors]",
                      "[tables.labs]", "no table public.labs in database clinic"),
    "unknown column": ("[tables.visits.columns.cost]", "[tables.visits.columns.costs]",
                       "[tables.visits.columns.costs]", "public.visits has no column costs"),
    "integer range on a date": ("range = [2024-01-01, 2024-12-31]", "range = [1, 366]",
                                "[tables.visits.columns.visit_date] domain",
                                "operator does not exist: date = integer"),
    "numbers for a text column": ('["checkup", "emergency", "follow-up"]', "[1, 2, 3]",
                                  "[tables.visits.columns.kind] domain",
                                  "operator does not exist: text = integer"),
    "bounds on a date": ("domain = { range = [2024-01-01, 2024-12-31] }",
                         "bounds = [0, 366]", "[tables.visits.columns.visit_date] bounds",
                         "cannot cast type date to numeric"),
    "a unit path's column misspelt": ("visits.visit_id -> visits.patient_id",
                                      "visits.visit_id -> visits.patientid",
                                      "[tables.prescriptions] unit",
                                      "column t1.patientid does not exist"),
    "a unit path of another type": ('unit = "patient_id"', 'unit = "kind"',
                                    "[tables.visits] unit",
                                    "operator does not exist: text = integer"),
    "an unknown unit table": ('table = "patients"', 'table = "patient"', "privacy_unit",
                              "no table public.patient"),
    "a label the enum lacks": ('"female", "male"', '"female", "males"',
                               "[tables.patients.columns.sex] domain",
                               'invalid input value for enum sex: "males"'),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_policy_mistake_is_named_with_its_setting_and_serve_refuses(
        clinic: Clinic, tmp_path, mistake):
    old, new, setting, words = MISTAKES[mistake]
    assert old in CLINIC_POLICY
    config = write_config(tmp_path, clinic, CLINIC_POLICY.replace(old, new, 1))
    result = dpgate_cli("policy", "check", "--config", str(config))
    assert result.returncode == 1
    line = next(line for line in result.stderr.splitlines() if setting in line)
    assert line.startswith("dpgate: policy error: ") and words in line, result.stderr
    assert "  fix: " in result.stderr


def test_the_base_policy_passes_and_serve_refuses_a_failing_one(clinic: Clinic, tmp_path):
    good = write_config(tmp_path, clinic, CLINIC_POLICY)
    result = dpgate_cli("policy", "check", "--config", str(good))
    assert result.returncode == 0, result.stderr
    # What bounds cost is said before an analyst finds out (tau 5 x 2020 / epsilon 0.09: a
    # lone SUM gives a tenth of its epsilon to its count of values, privacy.sum_count_share).
    assert ("dpgate: policy note: [tables.patients.columns.birth_year] bounds: "
            "sum(birth_year) gets noise of scale 112,222 at epsilon 0.1 (bounds [1930, 2020])"
            ) in result.stderr
    bad = write_config(tmp_path, clinic, CLINIC_POLICY.replace("[tables.visits.columns.cost]",
                                                               "[tables.visits.columns.costs]"))
    served = subprocess.run([sys.executable, "-m", "proxy", "serve", "--config", str(bad)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert served.returncode == 1 and "listening" not in served.stdout
    assert "[tables.visits.columns.costs]" in served.stderr
    assert "dpgate: not serving: fix the policy" in served.stderr


def test_grants_the_policy_needs_are_checked(clinic: Clinic, tmp_path):
    config = write_config(tmp_path, clinic, CLINIC_POLICY)
    # A private table the policy forgot and the grants missed ("permission denied for
    # table labs" in issue 26), and a private table the relay role may read.
    clinic.execute("CREATE TABLE labs (lab_id integer PRIMARY KEY, patient_id integer); "
                   "GRANT SELECT ON patients TO dpgate_relay")
    try:
        result = dpgate_cli("policy", "check", "--config", str(config))
    finally:
        clinic.execute("DROP TABLE labs; REVOKE SELECT ON patients FROM dpgate_relay")
    assert result.returncode == 1
    assert ("dpgate: policy error: [tables.labs]: the reader role dpgate_reader cannot "
            "SELECT public.labs") in result.stderr
    assert "GRANT SELECT ON public.labs TO dpgate_reader" in result.stderr
    assert ("dpgate: policy error: [tables.patients]: the relay role dpgate_relay can "
            "SELECT private table public.patients") in result.stderr
    assert "dpgate: policy warning: [tables.labs] unit" in result.stderr


def test_string_bounds_are_refused_with_the_setting(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('[tables.patients]\nprivate = true\n[tables.patients.columns.birth_year]\n'
                    'bounds = ["1930-01-01", "2020-12-31"]\n')
    with pytest.raises(ValueError, match=r"patients\.birth_year: bounds must be two numbers"):
        load_policy_file(path)


# Issue 26: an enum column could not have a domain (PostgreSQL has no operator enum = text).
ENUM_QUERIES = [
    "SELECT sex, count(*) FROM patients GROUP BY sex ORDER BY sex",
    "SELECT sex, count(*) FROM patients WHERE sex = 'male' GROUP BY sex",
    "SELECT sex, count(*) FROM patients WHERE sex <> 'other' AND birth_year < 1950 "
    "GROUP BY sex ORDER BY sex DESC",
    "SELECT p.sex, v.kind, count(*) FROM visits v JOIN patients p USING (patient_id) "
    "GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT CASE WHEN sex = 'female' THEN 'f' ELSE 'm/o' END AS s, count(*) FROM patients "
    "GROUP BY 1 ORDER BY 1",
    "SELECT level, count(*) FROM triage GROUP BY level ORDER BY level",
    "SELECT level, count(*) FROM triage WHERE level > 'urgent' GROUP BY 1 ORDER BY 1 DESC",
]


TRIAGE = """
[tables.triage]
private = true
unit = "visit_id -> visits.visit_id -> visits.patient_id"

[tables.triage.columns.level]
domain = ["urgent", "routine", "low"]
"""


def test_an_enum_domain_answers_as_postgresql_does(clinic: Clinic, tmp_path):
    # An enum whose order is not its labels' (urgent < routine < low).
    clinic.execute("CREATE TYPE level AS ENUM ('urgent', 'routine', 'low'); "
                   "CREATE TABLE triage (visit_id integer, level level); "
                   "INSERT INTO triage SELECT i, (ARRAY['urgent', 'routine', 'low'])"
                   "[1 + i % 3]::level FROM generate_series(1, 300) AS i; "
                   "GRANT SELECT ON triage TO dpgate_reader; "
                   "GRANT REFERENCES ON triage TO dpgate_relay")
    try:
        _enum_answers(clinic, tmp_path)
    finally:
        clinic.execute("DROP TABLE triage; DROP TYPE level")


def _enum_answers(clinic: Clinic, tmp_path: Path) -> None:
    config = write_config(tmp_path, clinic, CLINIC_POLICY + TRIAGE)
    # Zero noise, row-level: the answers are PostgreSQL's own (the oracle).
    config.write_text(config.read_text() + "row_level = true\n[privacy]\n"
                      "default_epsilon = 1e12\nmax_epsilon = 1e12\nshift_interval = [0.0, 0.0]\n")
    add_analyst(config, "eve", "eve-pw", 1e18)
    process = start_proxy(config)
    try:
        wait_for_port(int(re.search(r"listen_port = (\d+)", config.read_text())[1]), process)
        port = re.search(r"listen_port = (\d+)", config.read_text())[1]
        with psycopg.connect(f"postgresql://eve:eve-pw@127.0.0.1:{port}/clinic",
                             autocommit=True) as proxied, \
                psycopg.connect(clinic.owner_dsn, autocommit=True) as direct:
            for query in ENUM_QUERIES:
                answered, expected = proxied.execute(query), direct.execute(query)
                assert answered.fetchall() == expected.fetchall(), query
                # The key comes back as the enum, in the enum's order (not the labels').
                assert [c.type_code for c in answered.description] == \
                    [c.type_code for c in expected.description], query
    finally:
        process.terminate()
        process.wait(timeout=30)
