"""JavaScript providers (`file://x.js[:Name]`) beyond what promptfoo's goldens show
(tests/test_promptfoo_configs.py): limits, timeouts, a worker stuck in a loop, and the errors before
any call, each one line that says what to do."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.providers.registry import provider_class

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="JavaScript runs in factcli's Node worker")
runner = CliRunner()

# in flight now and the most seen, kept in the module: one instance serves every row
COUNTING = """
let inFlight = 0;
let most = 0;
module.exports = class {
  id() { return 'counting'; }
  async callApi(prompt) {
    inFlight += 1;
    most = Math.max(most, inFlight);
    await new Promise((resolve) => setTimeout(resolve, 150));
    inFlight -= 1;
    return { output: String(most) };
  }
};
"""


def _run(tmp_path: Path, config: str, *args: str):
    cfg = write(tmp_path / "promptfooconfig.yaml", config)
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-write", *args])
    rows = json.loads(out.read_text())["results"]["results"] if out.exists() else []
    return result, rows


TESTS = "tests:\n" + "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(8))


def test_calls_run_side_by_side_up_to_the_limits(tmp_path):
    write(tmp_path / "counting.js", COUNTING)
    result, rows = _run(tmp_path, "prompts: ['{{n}}']\nproviders: [file://counting.js]\n" + TESTS, "-j", "4")
    assert result.exit_code == 0, result.output
    assert max(int(r["response"]["output"]) for r in rows) == 4  # -j 4: four callApi awaiting at once


def test_the_providers_max_concurrency_caps_its_calls(tmp_path):
    write(tmp_path / "counting.js", COUNTING)
    config = "prompts: ['{{n}}']\nproviders: [{id: file://counting.js, config: {maxConcurrency: 2}}]\n" + TESTS
    result, rows = _run(tmp_path, config, "-j", "8")
    assert result.exit_code == 0, result.output
    assert max(int(r["response"]["output"]) for r in rows) == 2


def test_a_call_that_outlives_the_timeout_is_an_error_row(tmp_path):
    write(tmp_path / "slow.js", "module.exports = class { async callApi(p) {\n"
                                "  if (p === 'slow') await new Promise((r) => setTimeout(r, 5000));\n"
                                "  return { output: 'done ' + p }; } };\n")
    config = ("prompts: ['{{n}}']\nproviders: [file://slow.js]\nevaluateOptions: {timeoutMs: 300}\n"
              "tests: [{vars: {n: slow}}, {vars: {n: fast}}]\n")
    result, rows = _run(tmp_path, config)
    assert result.exit_code == 100, result.output
    slow, fast = rows
    # the words every provider's timeout gets (run/calling/caller.py), retried once
    assert slow["failureReason"] == 2 and slow["error"].startswith("timed out after 0.3 s twice")
    assert fast["response"]["output"] == "done fast"


def test_a_provider_stuck_in_a_loop_is_stopped_and_the_worker_serves_the_next_rows(tmp_path, monkeypatch):
    from factcli.scripting import node

    monkeypatch.setattr(node.get_worker(), "ping_timeout", 0.3)  # (2 s by default)
    write(tmp_path / "loop.js", "module.exports = class { async callApi(p) {\n"
                                "  if (p === 'loop') { for (;;) {} }\n  return { output: 'ok ' + p }; } };\n")
    # the worker answers no ping while the loop runs: it is stopped before the call ends, and the retry and
    # the next row get a new worker
    config = ("prompts: ['{{n}}']\nproviders: [file://loop.js]\nevaluateOptions: {timeoutMs: 800}\n"
              "tests: [{vars: {n: loop}}, {vars: {n: after}}]\n")
    result, rows = _run(tmp_path, config, "-j", "1")
    assert result.exit_code == 100, result.output
    stuck, after = rows
    assert stuck["failureReason"] == 2 and stuck["error"].startswith("timed out after 0.8 s twice")
    assert after["success"] and after["response"]["output"] == "ok after", after["error"]


@pytest.mark.parametrize("files, provider, expected", [
    ({}, "file://missing.js", "providers[0]: JavaScript provider file not found:"),
    ({"bad.js": "module.exports = class { callApi( { }"}, "file://bad.js",
     "providers[0] file://bad.js: bad.js does not load: SyntaxError:"),
    ({"nocall.js": "module.exports = class { id() { return 'x'; } };"}, "file://nocall.js",
     "nocall.js: the provider class has no callApi(prompt, context, options) method"),
    ({"named.mjs": "export class A { async callApi() { return {output: 'a'}; } }"}, "file://named.mjs:B",
     'named.mjs:B: "B" is not exported as a provider class or function (found nothing)'),
    ({"ctor.js": "module.exports = class { constructor() { throw new Error('no key'); } };"}, "file://ctor.js",
     "ctor.js does not load: Error: no key"),
    ({}, "file://provider.rb", "a provider from a file is Python (file://provider.py[:fn]), JavaScript or TypeScript"),
])
def test_a_provider_that_cannot_run_is_one_line_before_any_call(tmp_path, files, provider, expected):
    for name, text in files.items():
        write(tmp_path / name, text)
    result, rows = _run(tmp_path, f"prompts: [hi]\nproviders: ['{provider}']\n")
    assert result.exit_code == 1, result.output
    assert expected in " ".join(result.output.split())
    assert rows == []


def test_its_config_is_its_own(tmp_path):
    """`model:` once read as a misspelt `models` ("did you mean 'models'?"): a JavaScript provider's config
    keys all reach it, none is checked as a request parameter."""
    write(tmp_path / "p.js", "module.exports = class { constructor(o) { this.c = o.config; }\n"
                             "  async callApi() { return { output: `${this.c.model} ${this.c.temprature}` }; } };\n")
    result, rows = _run(tmp_path, "prompts: [hi]\nproviders: [{id: file://p.js, config: {model: m1, temprature: 2}}]\n")
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    assert rows[0]["response"]["output"] == "m1 2"


def test_script_providers_are_marked_as_user_code():
    """What --trust-stored-config lists: code a stored run would run again."""
    for pid in ("file://p.js", "file://p.mjs:Name", "file://p.ts", "file://p.py", "python:p.py", "exec: ./run"):
        assert provider_class(pid).user_code is True, pid
    for pid in ("echo", "openai:gpt-4o-mini"):
        assert provider_class(pid).user_code is False, pid


def test_a_stored_config_lists_its_javascript_providers_and_derived_metrics_as_code():
    """What a resumed run rebuilt from the store would run (config/stored_trust.py, --trust-stored-config)."""
    from factcli.config.stored_trust import what_it_would_do

    config = {"providers": ["file://p.mjs:Classifier", {"id": "file://agent.ts", "label": "a"}],
              "derivedMetrics": [{"name": "acc", "value": "return namedScores.c / namedScores.__count"},
                                 {"name": "plain", "value": "c / __count"}]}
    assert what_it_would_do(config) == [
        "runs code: providers[0]: provider file://p.mjs:Classifier",
        "runs code: providers[1].id: provider file://agent.ts",
        "runs code: derivedMetrics[0].value: inline javascript derived metric: "
        "return namedScores.c / namedScores.__count"]


def test_every_javascript_and_typescript_suffix_names_a_javascript_provider():
    """One list of suffixes (factcli.sources), .tsx with the TypeScript ones."""
    from factcli.providers.script import JavaScriptProvider
    from factcli.sources import JS_SUFFIXES, TS_SUFFIXES

    for suffix in JS_SUFFIXES + TS_SUFFIXES:
        assert provider_class(f"file://p{suffix}") is JavaScriptProvider, suffix
        assert provider_class(f"file://p{suffix}:Name") is JavaScriptProvider, suffix
