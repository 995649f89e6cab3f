"""Bugs are bugs (issue 51 item 5): a factcli bug inside a row stops that row with the exception's
type named and a pointer to --debug, counted apart from provider errors; --debug prints the
traceback. An error the user's own code raises stays the row it always was."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.scoring.registry import lookup

runner = CliRunner()

CONFIG = """
prompts: ["Q: {{q}}"]
providers: [echo]
tests:
  - vars: {q: one}
    assert: [{type: contains, value: one}]
  - vars: {q: two}
    assert: [{type: python, value: "{}['missing']"}]
  - vars: {q: three}
    assert: [{type: equals, value: "Q: three"}]
"""


@pytest.fixture
def buggy_contains(monkeypatch):
    """`contains` with a bug in its handler: a KeyError no input explains."""
    kind = lookup("contains")

    def handler(ctx):
        return {}["claims"]

    monkeypatch.setattr(kind, "handler", handler)
    monkeypatch.setattr(kind, "check", None)  # (the scorer's fast path would not call the handler)
    monkeypatch.delenv("FACTCLI_DEBUG", raising=False)
    return kind


def _rows(out):
    return {r["testIdx"]: r for r in json.loads(out.read_text())["results"]["results"]}


def test_a_bug_in_an_assertion_names_its_type_and_is_counted_apart(tmp_path, buggy_contains):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", CONFIG)), "-o", str(out),
                                 "--no-progress-bar", "--no-table"])
    assert result.exit_code == 100, result.output
    rows = _rows(out)
    bug = rows[0]["error"]
    assert bug.startswith("factcli bug: KeyError: 'claims' in the assertions (this row stopped; run again with "
                          "factcli --debug"), bug
    assert rows[0]["failureReason"] == 2  # an ERROR row
    user = rows[1]["error"]  # the user's own python assertion raising KeyError: a FAIL row as before, not a bug
    assert "KeyError" in user and "factcli bug" not in user and rows[1]["failureReason"] == 1, user
    assert rows[2]["success"] is True
    said = " ".join(result.output.split())
    assert "Failures: 1 Errors: 1 (1 factcli bug)" in said, said
    assert "Traceback" not in result.output


def test_debug_prints_the_bugs_traceback(tmp_path, buggy_contains, monkeypatch):
    monkeypatch.setenv("FACTCLI_DEBUG", "0")  # (restored after the test: --debug sets it for the process)
    result = runner.invoke(app, ["--debug", "eval", "-c", str(write(tmp_path / "c.yaml", CONFIG)),
                                 "--no-progress-bar", "--no-table"])
    assert result.exit_code == 100, result.output
    text = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "factcli bug in the assertions of test 0, column 0:" in text
    assert "Traceback (most recent call last):" in text and 'return {}["claims"]' in text, text
    assert "KeyError: 'claims'" in text
