"""`factcli view --web` (factcli/web/): every page and filter with Starlette's TestClient against
stores built by real evals (echo and script providers, the fake OpenAI server as judge), the
escaping of hostile outputs, 404s without tracebacks, the token on POSTs, the live status document
of a run in progress, Compare, a 100,000-row run's first page, and the CLI's options."""

import os
import re
import socket
import warnings

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.store.database import Store

warnings.filterwarnings("ignore", message=".*httpx.*")  # Starlette's TestClient would rather have httpx2
from starlette.testclient import TestClient

from factcli.web.app import create_app

runner = CliRunner()
TOKEN = "test-token-123"

PROVIDER = """
def call_api(prompt, options, context):
    if "boom" in prompt:
        raise RuntimeError("provider blew up on boom")
    return {"output": prompt.upper()}
"""

CONFIG = """
description: web view test
prompts: ["{{text}}"]
providers: [echo, "file://prov.py"]
tests:
  - description: greets
    vars: {text: hello world}
    assert: [{type: contains, value: hello, metric: greeting}]
  - description: hostile output
    vars: {text: "<script>alert(1)</script><img src=x onerror=alert(2)>"}
    assert: [{type: contains, value: zzz, metric: greeting}]
  - description: boom
    vars: {text: boom}
    assert: [{type: python, value: "True"}]
"""

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


def eval_into(db, tmp_path, config=CONFIG, name="c.yaml"):
    write(tmp_path / "prov.py", PROVIDER)
    result = cli("eval", "--no-progress-bar", "--no-table", "-c", write(tmp_path / name, config), "--db", db)
    assert result.exit_code in (0, 100), result.output
    with Store.open(db) as store:
        return store.resolve(None)["id"]


@pytest.fixture
def stored(tmp_path):
    """(client, db, run id) over a run of 3 tests x 2 columns: PASS/FAIL, FAIL/FAIL, PASS/ERROR."""
    db = tmp_path / "web.db"
    run_id = eval_into(db, tmp_path)
    return TestClient(create_app(db, token=TOKEN)), db, run_id


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text


# ---------------------------------------------------------------- pages


def test_runs_page_lists_runs_with_rate_interval_and_compare_picks(stored):
    client, _, run_id = stored
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    assert run_id in html and "web view test" in html
    assert "33.3%" in html  # 2 of 6 rows passed
    assert "[9.7, 70.0]" in html  # its 95% Wilson interval
    assert f'name="run" value="{run_id}"' in html and 'action="/compare"' in html
    assert f'<meta name="factcli-token" content="{TOKEN}">' in html


def test_run_page_matrix_summaries_and_filters(stored):
    client, _, run_id = stored
    html = client.get(f"/runs/{run_id}").text
    assert "Run " + run_id in html and "Rows <b>6</b>/6" in html
    assert html.count('class="tag">PASS') == 2 and html.count('class="tag">FAIL') == 3
    assert html.count('class="tag">ERROR') == 1
    assert "[echo]" in html and "[file://prov.py]" in html
    assert "66.7%" in html and "[20.8, 93.9]" in html  # echo column: 2/3 with its Wilson interval
    assert '<p class="legend" id="small-sample">Small sample (3 rows a column): wide intervals' in html
    assert "greeting" in html  # the named metric, with its filter link
    assert "HELLO WORLD" in html and "provider blew up on boom" in html
    assert f"/runs/{run_id}/cell/1/0/0" in html  # every cell opens its page
    latest = client.get("/runs/latest").text
    assert run_id in latest

    def tests_shown(query: str) -> list[str]:
        page = client.get(f"/runs/{run_id}?{query}")
        assert page.status_code == 200, page.text
        return re.findall(r'<tr id="test-(\d+)">', page.text)

    assert tests_shown("") == ["0", "1", "2"]
    assert tests_shown("failures=1") == ["0", "1"]  # test 0 fails in the script's column
    assert tests_shown("errors=1") == ["2"]
    assert tests_shown("q=hostile") == ["1"]
    assert tests_shown("q=blew+up") == ["2"]
    assert tests_shown("failures=1&column=0") == ["1"]
    assert tests_shown("metric=greeting&column=0") == ["1"]  # lost points on the metric
    assert tests_shown("metric=greeting") == ["0", "1"]
    assert tests_shown("q=nothing-like-this") == []
    assert tests_shown("limit=1&page=2") == ["1"]
    only_echo = client.get(f"/runs/{run_id}?column=0").text
    assert "[file://prov.py]</span><br>" not in only_echo.split('id="results"')[1].split("</form>")[1]
    paged = client.get(f"/runs/{run_id}?limit=1").text
    assert "page 1 of 3" in paged and 'id="next-page"' in paged


def test_cell_page_shows_the_whole_row(stored):
    client, _, run_id = stored
    page = client.get(f"/runs/{run_id}/cell/1/1")  # repeat 0 by default
    assert page.status_code == 200
    html = page.text
    assert "Test 1" in html and "hostile output" in html and "[file://prov.py]" in html
    assert "Expected output to contain &#34;zzz&#34;" in html or "Expected output to contain &quot;zzz&quot;" in html
    assert "<code>contains</code>" in html and "weight 1" in html and "metric greeting" in html
    assert "latency" in html and "tokens" in html
    # failures in test, column, repeat order: (0,1) FAIL, (1,0) FAIL, (1,1) FAIL, (2,1) ERROR
    assert f'href="/runs/{run_id}/cell/1/0/0" id="prev-failure"' in html
    assert f'href="/runs/{run_id}/cell/2/1/0" id="next-failure"' in html
    first = client.get(f"/runs/{run_id}/cell/0/1/0").text
    assert "no earlier failure" in first and "HELLO WORLD" in first
    error = client.get(f"/runs/{run_id}/cell/2/1/0").text
    assert "provider blew up on boom" in error and "no later failure" in error
    for field in ('id="rate-form"', 'id="rate-pass"', 'id="rate-fail"', 'id="rate-comment"', 'id="rate-rater"',
                  'id="ratings"', f'name="token" value="{TOKEN}"', f'name="next" value="/runs/{run_id}/cell/1/1/0"'):
        assert field in html, field


def test_hostile_outputs_render_as_text(stored):
    client, _, run_id = stored
    for url in (f"/runs/{run_id}", f"/runs/{run_id}/cell/1/0/0", f"/runs/{run_id}?q=script", "/"):
        html = client.get(url).text
        assert "<script>alert" not in html and "<img" not in html.lower() and "<SCRIPT>" not in html, url
        assert not re.search(r"<[^>]*onerror=", html, re.IGNORECASE), url  # only ever as text, never an attribute
    cell = client.get(f"/runs/{run_id}/cell/1/0/0").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in cell
    # the only <script> of any page is the package's own file
    assert re.findall(r"<script[^>]*>", cell) == ['<script src="/static/web.js">']
    # a run id is escaped too, and a hostile search term is echoed back as text
    html = client.get(f"/runs/{run_id}?q=%22%3E%3Cscript%3Ex%3C/script%3E").text
    assert '"><script>x' not in html and "&#34;&gt;&lt;script&gt;x" in html


def test_unknown_runs_rows_and_bad_requests_get_plain_pages(stored):
    client, _, run_id = stored
    for url, code, words in ((f"/runs/nope-{run_id}", 404, "no run"), (f"/runs/{run_id}/cell/99/0", 404, "no row"),
                             (f"/runs/{run_id}/cell/0/7/0", 404, "no row"), (f"/runs/{run_id}?page=x", 400, "whole number"),
                             (f"/runs/{run_id}?page=9", 404, "past the end"), (f"/runs/{run_id}?column=5", 404, "no column"),
                             ("/no/such/page", 404, "Not found"), (f"/runs/nope-{run_id}/disagreements", 404, "no run")):
        page = client.get(url)
        assert page.status_code == code, (url, page.text[:300])
        assert words in page.text, url
        _no_traceback(page.text)
    missing = client.get("/api/runs/nope/status")
    assert missing.status_code == 404 and "no run" in missing.json()["error"]


def test_a_broken_page_is_a_plain_500(stored, monkeypatch):
    from factcli.web import queries

    client, _, run_id = stored
    monkeypatch.setattr(queries, "matrix", lambda *a, **k: 1 / 0)
    client = TestClient(client.app, raise_server_exceptions=False)
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 500 and "Server error" in page.text
    _no_traceback(page.text)
    assert "ZeroDivisionError" not in page.text


# ---------------------------------------------------------------- ratings in the pages


JUDGED = """
description: judged
prompts: ["Q: {{q}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest: {options: {provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}}}
tests:
  - vars: {q: one}
    assert: [{type: llm-rubric, value: is polite}]
  - vars: {q: two}
    assert: [{type: llm-rubric, value: is polite}]
"""


def test_rating_from_the_cell_page_shows_everywhere_and_needs_the_token(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule("Q:", "an answer", model="m")
    fake_openai.add_rule(".", '{"pass": true, "score": 1, "reason": "polite enough"}', model="judge")
    db = tmp_path / "judged.db"
    run_id = eval_into(db, tmp_path, JUDGED)
    client = TestClient(create_app(db, token=TOKEN))
    cell = f"/runs/{run_id}/cell/1/0/0"
    assert "No ratings yet" in client.get(cell).text
    assert "judge-agreement" not in client.get(f"/runs/{run_id}").text
    form = {"test_idx": "1", "prompt_idx": "0", "repeat_idx": "0", "verdict": "fail", "comment": "rude <b>really</b>",
            "rater": "ann", "next": cell}
    refused = client.post(f"/api/runs/{run_id}/ratings", data={**form, "token": "wrong"}, follow_redirects=False)
    assert refused.status_code == 403
    with Store.open(db) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0] == 0
    done = client.post(f"/api/runs/{run_id}/ratings", data={**form, "token": TOKEN}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == cell
    html = client.get(cell).text
    items = re.findall(r'<li class="rating[^"]*">(.*?)</li>', html, re.DOTALL)
    assert len(items) == 1 and "fail" in items[0] and "ann" in items[0] and 'class="retract"' in items[0]
    assert "rude &lt;b&gt;really&lt;/b&gt;" in items[0]
    run_page = client.get(f"/runs/{run_id}").text
    assert "rated fail" in run_page  # the matrix marks the rated row
    assert "the judge agrees with raters on <b>0 of 1</b>" in run_page
    assert f'href="/runs/{run_id}/disagreements"' in run_page
    disagreements = client.get(f"/runs/{run_id}/disagreements").text
    assert f"/runs/{run_id}/cell/1/0/0" in disagreements and "ann" in disagreements
    rating_id = re.search(r'action="/api/ratings/(\d+)/retract"', html).group(1)
    back = client.post(f"/api/ratings/{rating_id}/retract", data={"token": TOKEN, "next": cell}, follow_redirects=False)
    assert back.status_code == 303
    html = client.get(cell).text
    assert "retracted" in html and 'class="retract"' not in html
    assert "judge-agreement" not in client.get(f"/runs/{run_id}").text  # no rating in force


# ---------------------------------------------------------------- live updates


def test_a_run_in_progress_polls_its_status(stored):
    client, db, run_id = stored
    with Store.open(db) as store:  # as a run still writing: started, by this live process
        store.update_run(run_id, {"status": "started", "finished_at": None, "pid": os.getpid(),
                                  "host": socket.gethostname()})
        store.conn.execute("DELETE FROM results WHERE run_id = ? AND test_idx = 2", (run_id,))
        store.commit()
    html = client.get(f"/runs/{run_id}").text
    assert f'data-live="/api/runs/{run_id}/status"' in html and 'data-rows="4"' in html
    assert "updating as rows finish" in html
    status = client.get(f"/api/runs/{run_id}/status").json()
    assert status["status"] == "running" and status["rows"] == 4 and status["failures"] == 3
    eval_into(db, db.parent, CONFIG, "again.yaml")  # another run does not change this one's count
    assert client.get(f"/api/runs/{run_id}/status").json()["rows"] == 4
    with Store.open(db) as store:
        store.update_run(run_id, {"status": "complete", "finished_at": "2099-01-01T00:00:00.000+00:00"})
    assert client.get(f"/api/runs/{run_id}/status").json()["status"] == "complete"
    assert "data-live" not in client.get(f"/runs/{run_id}").text


# ---------------------------------------------------------------- compare


def test_compare_two_runs(stored, tmp_path):
    client, db, run_a = stored
    run_b = eval_into(db, tmp_path, CONFIG.replace("value: zzz", "value: script"), "b.yaml")
    picked = client.get("/compare", params=[("run", run_a), ("run", run_b)], follow_redirects=False)
    assert picked.status_code == 303 and picked.headers["location"] == f"/compare?a={run_a}&b={run_b}"
    html = client.get(picked.headers["location"]).text
    assert "<b>1</b> row flipped" in html and "1 fix<" in html  # test 1's echo column now passes
    assert "pass rate" in html and "+33.3 pts" in html
    assert "hostile output" in html and "<script>alert" not in html
    assert client.get("/compare").status_code == 200  # the picker alone
    assert client.get("/compare", params=[("run", run_a)]).status_code == 200
    assert client.get(f"/compare?a={run_a}&b=nope").status_code == 404


# ---------------------------------------------------------------- 100,000 rows


def test_first_screen_of_a_100k_row_run(tmp_path):
    """Correctness only; how fast lives in benchmarks/web.py."""
    from test_view import make_big_run

    db = tmp_path / "big.db"
    run_id = make_big_run(db, tests=25_000, columns=4)
    client = TestClient(create_app(db, token=TOKEN))
    html = client.get(f"/runs/{run_id}").text
    assert "Rows <b>100000</b>/100000" in html and "25000 tests" in html and "page 1 of 500" in html
    assert re.findall(r'<tr id="test-(\d+)">', html)[:2] == ["0", "1"]
    # the rows' ids, not any "test-50" in the page: the store's temp path is shown, and pytest numbers
    # its temp folders (pytest-502/test_first_screen_… held "test-50" on a machine that had run 502)
    assert re.findall(r'<tr id="test-(\d+)">', html)[-1] == "49"
    failures = client.get(f"/runs/{run_id}?failures=1&page=200").text
    assert "12500 matching tests" in failures and "test-19900" in failures
    assert "test number 24999" in client.get(f"/runs/{run_id}?q=question+24999").text
    cell = client.get(f"/runs/{run_id}/cell/24998/3/0").text
    assert f'href="/runs/{run_id}/cell/24998/2/0" id="prev-failure"' in cell and "no later failure" in cell


# ---------------------------------------------------------------- the command


def test_view_web_options(stored, monkeypatch, tmp_path):
    from factcli.web import server

    _, db, run_id = stored
    calls = []
    monkeypatch.setattr(server, "serve", lambda db_path, **kw: calls.append((db_path, kw)))
    free = server.free_port()
    result = cli("view", run_id, "--web", "--no-open", "--port", free, "--failures", "--db", db)
    assert result.exit_code == 0, result.output
    path, kw = calls[-1]
    assert path == db and kw["host"] == "127.0.0.1" and kw["port"] == free and kw["open_browser"] is False
    assert kw["path"] == f"/runs/{run_id}?failures=1"
    n = len(calls)
    result = cli("view", "--web", "--host", "0.0.0.0", "--db", db)  # the network without a token: refused
    assert result.exit_code == 1 and "--token" in result.output and len(calls) == n, result.output
    result = cli("view", "--web", "--host", "0.0.0.0", "--token", "short", "--db", db)
    assert result.exit_code == 1 and "too short" in result.output and len(calls) == n
    monkeypatch.setenv("FACTCLI_WEB_TOKEN", "t" * 20)
    result = cli("view", "--web", "--host", "0.0.0.0", "--db", db)
    assert result.exit_code == 0 and "anyone who can reach this machine" in result.output
    assert calls[-1][1]["open_browser"] is True and calls[-1][1]["host"] == "0.0.0.0"
    assert calls[-1][1]["token"] == "t" * 20
    result = cli("view", "--token", "x" * 20, "--db", db)
    assert result.exit_code == 1 and "go with --web" in result.output
    for args, words in ((["--web", "--json"], "do not go together"), (["--port", "9"], "go with --web"),
                        (["--web", "nope"], "no run 'nope'")):
        result = cli("view", *args, "--db", db)
        assert result.exit_code == 1 and words in result.output, result.output
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("view", "--web", "--port", port, "--db", db)
        assert result.exit_code == 1 and "in use" in result.output
        monkeypatch.setattr(server, "DEFAULT_PORT", port)
        chosen, note = server.pick_port("127.0.0.1", None)
        assert chosen != port and "in use" in note
    assert server.exposed_warning("127.0.0.1") is None and server.url_of("0.0.0.0", 80, "/x") == "http://127.0.0.1:80/x"
