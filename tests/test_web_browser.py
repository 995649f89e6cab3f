"""The web view in a real browser: headless Chromium driven by Selenium (Debian's `chromium` and
`chromium-driver`; .ci/run installs them) against the real server (uvicorn in a thread on a free
port) over a store built by a real eval. It opens the run page, filters failures, opens a cell,
rates it, and reads the rating back from SQLite."""

import shutil
import sqlite3
import threading
import time

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="needs Debian's chromium and chromium-driver "
                                       "(apt-get install chromium chromium-driver; .ci/run installs them)")

CONFIG = """
description: browser test
prompts: ["Say {{word}}"]
providers: [echo]
tests:
  - description: passes
    vars: {word: hello}
    assert: [{type: contains, value: hello}]
  - description: fails
    vars: {word: "bye <b>bold</b>"}
    assert: [{type: contains, value: hello}]
"""


@pytest.fixture
def served(tmp_path):
    """(base URL, db path, run id): the real server over a store with one run, stopped afterwards."""
    import uvicorn

    from factcli.store.database import Store
    from factcli.web.app import create_app
    from factcli.web.server import free_port

    db = tmp_path / "b.db"
    result = CliRunner().invoke(app, ["eval", "--no-progress-bar", "--no-table", "-c",
                                      str(write(tmp_path / "c.yaml", CONFIG)), "--db", str(db)])
    assert result.exit_code == 100, result.output
    with Store.open(db) as store:
        run_id = store.resolve(None)["id"]
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(db), host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(100):
        if server.started:
            break
        time.sleep(0.05)
    assert server.started, "the server did not start"
    yield f"http://127.0.0.1:{port}", db, run_id
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,800"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def test_filter_open_a_cell_and_rate_it(served, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    base, db, run_id = served
    wait = WebDriverWait(browser, 15)
    browser.get(f"{base}/runs/{run_id}")
    assert run_id in browser.find_element(By.TAG_NAME, "h1").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr[id^=test-]")) == 2
    # the output's markup is text on the page, not an element
    assert not browser.find_elements(By.CSS_SELECTOR, "table.matrix b")
    browser.find_element(By.ID, "f-failures").click()  # applies at once (web.js); Apply does it without JS
    wait.until(ec.url_contains("failures=1"))
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[id^=test-]")
    assert [r.get_attribute("id") for r in rows] == ["test-1"]
    rows[0].find_element(By.CSS_SELECTOR, "td.cell a.open").click()
    wait.until(ec.presence_of_element_located((By.ID, "rate-form")))
    assert "/cell/1/0/0" in browser.current_url
    assert "bye <b>bold</b>" in browser.find_element(By.ID, "output").text
    browser.find_element(By.ID, "rate-comment").send_keys("not a greeting")
    browser.find_element(By.ID, "rate-rater").send_keys("tester")
    browser.find_element(By.ID, "rate-fail").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#ratings li.rating")))
    item = browser.find_element(By.CSS_SELECTOR, "#ratings li.rating")
    assert "fail" in item.text and "tester" in item.text and "not a greeting" in item.text
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT run_id, test_idx, prompt_idx, repeat_idx, assertion_idx, passed, comment, rater, "
                            "retracted_at FROM ratings").fetchall()
    assert rows == [(run_id, 1, 0, 0, None, 0, "not a greeting", "tester", None)]
    # the run page marks the rated row
    browser.get(f"{base}/runs/{run_id}")
    assert browser.find_element(By.CSS_SELECTOR, "#test-1 .rated").text == "rated fail"
