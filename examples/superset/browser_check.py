"""Superset through dpgate in a real browser: headless Chromium driven by Selenium (Debian's
`chromium` and `chromium-driver`), against a running Superset whose admin is admin/admin.
Run it with Superset's own Python (Selenium comes with Superset):

    /path/to/superset-venv/bin/python examples/superset/browser_check.py \\
        http://127.0.0.1:8088 postgresql+psycopg2://alice:alice@127.0.0.1:6432/demo report.json

What the UI's forms post is posted to Superset's REST API, as the browser would (the
connection, datasets, charts); what the analyst reads is read from the page in Chromium:

1. connect: "Test connection", then the database saved;
2. browse typed columns: the dataset public.orders, its columns and types, and Explore
   listing them;
3. SQL Lab: an answer (orders per quantity), its error bars (SHOW dp.last_answers) and
   an error (raw rows, refused);
4. a chart (a table of orders per quantity) drawn in Explore;
5. saving virtual datasets from SQL Lab's SQL: one of rows, one aggregate that SQL Lab
   ran first, one dpgate refuses; then a chart over each of the first and last in
   Explore; and Explore's Samples tab.

It writes one JSON report; tests/test_superset.py checks it and dpgate's ledger.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import requests
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
PER_QUANTITY = "SELECT quantity, count(*) AS orders FROM orders GROUP BY quantity ORDER BY 1"
RAW_ROWS = "SELECT * FROM orders"
ROWS_DATASET = ("SELECT o.order_date, o.quantity, p.category FROM orders o "
                "JOIN products p ON o.product_id = p.product_id")
AGGREGATE_DATASET = ("SELECT p.category, count(*) AS orders FROM orders o "
                     "JOIN products p ON o.product_id = p.product_id GROUP BY p.category")
REFUSED_DATASET = "SELECT customer_id, sum(order_id) AS total FROM orders GROUP BY customer_id"


class Api:
    """Superset's REST API, logged in as admin, with its CSRF token."""

    def __init__(self, base: str):
        self.base = base
        self.session = requests.Session()
        token = self.session.post(f"{base}/api/v1/security/login", json={
            "username": "admin", "password": "admin", "provider": "db"}).json()
        self.session.headers["Authorization"] = f"Bearer {token['access_token']}"
        csrf = self.session.get(f"{base}/api/v1/security/csrf_token/").json()["result"]
        self.session.headers.update({"X-CSRFToken": csrf, "Referer": base})

    def post(self, path: str, body: dict) -> requests.Response:
        return self.session.post(self.base + path, json=body)

    def get(self, path: str) -> dict:
        return self.session.get(self.base + path).json()


class Browser:
    """Headless Chromium logged in to Superset."""

    def __init__(self, base: str):
        self.base = base
        options = Options()
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                         "--window-size=1400,1000"):
            options.add_argument(argument)
        options.binary_location = CHROMIUM
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(120)
        self.open("/login/", lambda text: "Sign in" in text)
        self.driver.find_element(By.ID, "username").send_keys("admin")
        self.driver.find_element(By.ID, "password").send_keys("admin")
        self._button("Sign in").click()
        self.wait(lambda text: "Dashboards" in text)

    def open(self, path: str, ready: Callable[[str], bool], timeout: float = 120) -> str:
        self.driver.get(self.base + path)
        return self.wait(ready, timeout)

    def text(self) -> str:
        return str(self.driver.find_element(By.TAG_NAME, "body").text)

    def wait(self, ready: Callable[[str], bool], timeout: float = 120) -> str:
        """The page's text once `ready` holds for it (the last text after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                text = self.text()
            except Exception:  # the page is being replaced
                text = ""
            if ready(text) or time.monotonic() > deadline:
                return text
            time.sleep(0.5)

    def sql_lab(self, database: int, sql: str, done: Callable[[str], bool]) -> str:
        """Run `sql` in a new SQL Lab tab and return the page's text once `done`."""
        query = urllib.parse.urlencode({"dbid": database, "schema": "public", "sql": sql})
        self.open(f"/sqllab/?{query}", lambda text: "Run" in text and sql in text)
        self._button("Run").click()
        return self.wait(done)

    def click_text(self, text: str) -> None:
        """Click the element whose own text is `text` (a tab)."""
        for _ in range(60):
            found = self.driver.find_elements(By.XPATH, f"//*[text()='{text}']")
            if found:
                found[-1].click()
                return
            time.sleep(0.5)
        raise RuntimeError(f"nothing reads {text!r} on {self.driver.current_url}")

    def screenshot(self, path: str) -> None:
        self.driver.save_screenshot(path)

    def _button(self, label: str):
        for _ in range(60):
            buttons = [b for b in self.driver.find_elements(By.TAG_NAME, "button")
                       if b.text.strip().startswith(label)]
            if buttons:
                return buttons[0]
            time.sleep(0.5)
        raise RuntimeError(f"no button {label!r} on {self.driver.current_url}")

    def quit(self) -> None:
        self.driver.quit()


def _dataset(api: Api, database: int, name: str, sql: str | None = None) -> dict:
    """A dataset saved as the UI saves it (a table, or SQL Lab's "Save dataset")."""
    body: dict = {"database": database, "schema": "public", "table_name": name}
    if sql is not None:
        body["sql"] = sql
    response = api.post("/api/v1/dataset/", body)
    result: dict = {"status": response.status_code, "id": None, "columns": {},
                    "message": None}
    if response.status_code == 201:
        result["id"] = response.json()["id"]
        columns = api.get(f"/api/v1/dataset/{result['id']}")["result"]["columns"]
        result["columns"] = {c["column_name"]: c["type"] for c in columns}
    else:
        result["message"] = response.json().get("message")
    return result


def _chart(api: Api, dataset: int, name: str, groupby: str) -> int:
    params = {"viz_type": "table", "datasource": f"{dataset}__table", "query_mode": "aggregate",
              "groupby": [groupby], "metrics": ["count"], "row_limit": 10,
              "order_desc": True}
    response = api.post("/api/v1/chart/", {
        "slice_name": name, "viz_type": "table", "datasource_id": dataset,
        "datasource_type": "table", "params": json.dumps(params)})
    response.raise_for_status()
    return int(response.json()["id"])


def main(base: str, uri: str, shots: Path) -> dict:
    api = Api(base)
    report: dict = {}
    tested = api.post("/api/v1/database/test_connection/",
                      {"database_name": "dpgate", "sqlalchemy_uri": uri})
    report["test_connection"] = tested.status_code
    created = api.post("/api/v1/database/", {"database_name": "dpgate", "sqlalchemy_uri": uri,
                                             "expose_in_sqllab": True})
    created.raise_for_status()
    database = int(created.json()["id"])
    orders = _dataset(api, database, "orders")
    report["orders"] = orders

    browser = Browser(base)
    try:
        report["databases_page"] = browser.open(
            "/databaseview/list/", lambda text: "dpgate" in text)
        report["explore_orders"] = browser.open(
            f"/explore/?datasource_type=table&datasource_id={orders['id']}",
            lambda text: "order_date" in text and "customer_id" in text)
        # Explore's Samples tab: a count (charged), then raw rows (refused).
        browser.click_text("Samples")
        report["samples"] = browser.wait(lambda text: "only aggregates" in text or
                                         "Fatal error" in text)
        report["sql_lab_answer"] = browser.sql_lab(
            database, PER_QUANTITY, lambda text: "10 rows" in text)
        # The error bars a BI tool never shows as a NOTICE (SHOW dp.last_answers).
        report["sql_lab_last_answers"] = browser.sql_lab(
            database, "SHOW dp.last_answers", lambda text: "rows" in text or "rror" in text)
        report["sql_lab_error"] = browser.sql_lab(
            database, RAW_ROWS, lambda text: "only aggregates" in text)
        browser.screenshot(str(shots / "sql_lab_error.png"))
        chart = _chart(api, orders["id"], "orders per quantity", "quantity")
        report["chart"] = browser.open(
            f"/explore/?slice_id={chart}",
            lambda text: "orders per quantity" in text and "10 rows" in text)
        browser.screenshot(str(shots / "chart.png"))

        # SQL Lab first, as an analyst does before saving a dataset from it.
        report["sql_lab_aggregate"] = browser.sql_lab(
            database, AGGREGATE_DATASET, lambda text: "8 rows" in text)
        report["rows_dataset"] = _dataset(api, database, "order_rows", ROWS_DATASET)
        report["aggregate_dataset"] = _dataset(api, database, "orders_per_category",
                                               AGGREGATE_DATASET)
        report["refused_dataset"] = _dataset(api, database, "totals", REFUSED_DATASET)
        if report["rows_dataset"]["id"] is not None:
            over_rows = _chart(api, report["rows_dataset"]["id"], "orders per category",
                               "category")
            report["chart_over_rows"] = browser.open(
                f"/explore/?slice_id={over_rows}",
                lambda text: "cannot protect" in text or "rows" in text and "Books" in text)
            browser.screenshot(str(shots / "chart_over_rows.png"))
        if report["refused_dataset"]["id"] is not None:
            over_refused = _chart(api, report["refused_dataset"]["id"], "totals",
                                  "customer_id")
            report["chart_over_refused"] = browser.open(
                f"/explore/?slice_id={over_refused}",
                lambda text: "postgresql error" in text or "Fatal error" in text)
            browser.screenshot(str(shots / "chart_over_refused.png"))
    finally:
        browser.quit()
    return report


if __name__ == "__main__":
    output = Path(sys.argv[3])
    output.write_text(json.dumps(main(sys.argv[1], sys.argv[2], output.parent), indent=2) + "\n")
