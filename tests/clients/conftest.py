"""Fixtures of the client-compatibility tests: an analyst of their own (so that the many
private counts these tests ask do not spend alice's or bob's budget) and the true counts
the noisy answers are checked against."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import pytest

from tests.conftest import RunningProxy

# Tables every client must see when it browses the schema.
DEMO_TABLES = {"customers", "orders", "products", "recommendations"}
REFUSED = "SELECT * FROM orders"
# Default epsilon 0.1 on a count: discrete Laplace of scale 10 plus a shift of at most
# 1.5 scales. Beyond 150 from the truth (probability about 1e-6) the answer is not noise.
NOISE_TOLERANCE = 150


@dataclass(frozen=True)
class Analyst:
    name: str
    password: str
    host: str
    port: int
    database: str

    @property
    def dsn(self) -> str:
        return (f"postgresql://{self.name}:{self.password}@{self.host}:{self.port}/"
                f"{self.database}")

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"


@pytest.fixture(scope="session")
def analyst(proxy: RunningProxy) -> Analyst:
    """An analyst with a budget large enough for every client test."""
    name, password = "client_tests", "client-tests-pw"
    proxy.add_analyst(name, password, 1000)
    return Analyst(name, password, "127.0.0.1", proxy.port, "dpgate_e2e")


@pytest.fixture(scope="session")
def true_count(proxy: RunningProxy):
    """The exact `count(*) FROM orders WHERE product_id = k`, read as the database owner."""
    def count(product_id: int) -> int:
        with psycopg.connect(proxy.database.admin_dsn) as connection:
            return connection.execute("SELECT count(*) FROM orders WHERE product_id = %s",
                                      (product_id,)).fetchone()[0]
    return count


def assert_noisy(answer: object, truth: int) -> None:
    assert isinstance(answer, int) and not isinstance(answer, bool), repr(answer)
    assert abs(answer - truth) <= NOISE_TOLERANCE, (answer, truth)
