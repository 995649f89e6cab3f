"""One row numbering everywhere (issue 52 item 8): a row is named by its test index, from 0, the number
`factcli show RUN N` takes, in view, show, diff, the HTML page and the web view. promptfoo's description of a
CSV row without one (`Row #n`, counted from 1, kept as promptfoo writes it in the results JSON) is not shown
beside it as a second number (`1 | Row #2`): the row's vars are."""

import json

from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()


def _said(result) -> str:
    return " ".join(result.output.split())


def _run(tmp_path):
    write(tmp_path / "t.csv", "q,__expected,__description\none,contains:one,\ntwo,contains:zzz,\n"
                              "three,contains:three,named three\nfour,contains:zzz,\n")
    cfg = write(tmp_path / "c.yaml", 'prompts: ["{{q}}"]\nproviders: [echo]\ntests: file://t.csv\n')
    out = tmp_path / "r.json"
    html = tmp_path / "r.html"
    junit = tmp_path / "r.junit.xml"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "-o", str(out), "-o", str(html),
                                 "-o", str(junit)])
    assert result.exit_code == 100, result.output
    return result, json.loads(out.read_text()), html.read_text() + junit.read_text()


def test_every_screen_numbers_a_row_by_the_test_index_show_takes(tmp_path):
    result, doc, html = _run(tmp_path)
    # the results JSON keeps promptfoo's descriptions as promptfoo writes them
    assert [r["testCase"]["description"] for r in doc["results"]["results"]] == [
        "Row #1", "Row #2", "named three", "Row #4"]
    run_id = doc["evalId"]
    assert f"Open a failed row: factcli show {run_id} 1" in _said(result)  # the first failed row: test 1

    view = runner.invoke(app, ["view", "latest"]).output
    lines = [" ".join(line.split()) for line in view.splitlines()]
    assert "1 | q=two | FAIL 0.00" in lines, view
    assert "2 | named three | PASS 1.00" in lines, view  # a description the user gave is its name
    assert "Row #" not in view
    assert "Tests 0–3 (4 of 4, page 1/1)" in lines, view
    failing = " ".join(runner.invoke(app, ["view", "latest", "--failures"]).output.split())
    assert "Tests 1–3 (2 of 2, page 1/1)" in failing, failing

    shown = runner.invoke(app, ["show", "latest", "1"]).output
    assert shown.splitlines()[0].endswith("· test 1") and "Row #" not in shown, shown
    assert "q: two" in shown
    named = runner.invoke(app, ["show", "latest", "2"]).output
    assert named.splitlines()[0].endswith("· test 2 · named three"), named

    assert "Row #" not in html and ">named three<" in html
    assert 'name="q=two [test 1]"' in html and 'name="named three [test 2]"' in html  # the JUnit file


def test_the_web_view_numbers_rows_as_the_cli_does(tmp_path, isolated_home):
    import warnings

    warnings.filterwarnings("ignore", message=".*httpx.*")
    from starlette.testclient import TestClient

    from factcli.web.app import create_app

    _run(tmp_path)
    run_id = json.loads(runner.invoke(app, ["list", "--json"]).output)[0]["id"]
    client = TestClient(create_app(isolated_home / "factcli.db", token="t"))
    page = client.get(f"/runs/{run_id}").text
    assert '<td class="num">1</td>' in page and "named three" in page
    assert "Row #" not in page
    cell = client.get(f"/runs/{run_id}/cell/1/0/0").text
    assert "Test 1" in cell and "Row #" not in cell
