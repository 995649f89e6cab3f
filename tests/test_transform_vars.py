"""transformVars (promptfoo-features part B §1): once per test, before its var arrays become rows; inline
JavaScript, `file://x.js[:fn]`, `file://x.py[:fn]`; the test's own replaces defaultTest's; a failure
makes that test's rows ERROR rows (promptfoo aborts the whole run)."""

import json
import shutil

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.loader import load_suite
from factcli.errors import ConfigError

runner = CliRunner()
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
PROVIDER = '{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'


def _eval(tmp_path, config: str, *args):
    cfg = write(tmp_path / "promptfooconfig.yaml", config)
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache", *args])
    assert result.exit_code in (0, 100), result.output
    return json.loads(out.read_text())["results"]["results"]


def _contents(fake_openai) -> list[str]:
    return sorted(r["json"]["messages"][-1]["content"] for r in fake_openai.requests)


@needs_node
def test_inline_javascript_default_and_test_level(tmp_path, fake_openai, monkeypatch):
    """tv01/tv02: defaultTest's transform, replaced (not chained) by a test's own; one uuid per test,
    the same in every column; assertions and results see the transformed vars."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    rows = _eval(tmp_path, f"""
prompts: ["P1 q={{{{question}}}} upper={{{{upper}}}} extra={{{{extra}}}} id={{{{id}}}}", "P2 id={{{{id}}}}"]
providers: [{PROVIDER}]
defaultTest:
  vars: {{base: fromDefault}}
  options:
    transformVars: "{{ ...vars, upper: vars.question.toUpperCase(), extra: 'X', keys: Object.keys(vars).join(','), id: context.uuid, prompt: JSON.stringify(context.prompt) }}"
tests:
  - vars: {{question: hello}}
    assert:
      - type: javascript
        value: "context.vars.upper === 'HELLO'"
  - vars: {{question: partial}}
    options:
      transformVars: "({{ extra: 'P', id: 'fixed' }})"
""")
    first = [r for r in rows if r["testIdx"] == 0]
    assert first[0]["vars"]["keys"] == "base,question" and first[0]["vars"]["prompt"] == "{}"
    uuid = first[0]["vars"]["id"]
    assert len(uuid) == 36 and first[1]["vars"]["id"] == uuid
    assert all(r["success"] for r in first)
    second = next(r for r in rows if r["testIdx"] == 1)
    assert second["vars"] == {"base": "fromDefault", "question": "partial", "extra": "P", "id": "fixed"}
    assert _contents(fake_openai) == sorted([f"P1 q=hello upper=HELLO extra=X id={uuid}", f"P2 id={uuid}",
                                             "P1 q=partial upper= extra=P id=fixed", "P2 id=fixed"])


@needs_node
def test_javascript_file_and_arrays_returned_become_rows(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "tv.js", """
module.exports = (vars, context) => ({ topic: [vars.a + '1', vars.a + '2'] });
module.exports.named = async (vars) => ({ a: vars.a + '!' });
""")
    _eval(tmp_path, f"""
prompts: ["{{{{a}}}} {{{{topic}}}}"]
providers: [{PROVIDER}]
tests:
  - vars: {{a: x}}
    options: {{transformVars: file://tv.js}}
  - vars: {{a: y, topic: t}}
    options: {{transformVars: "file://tv.js:named"}}
""")
    assert _contents(fake_openai) == ["x x1", "x x2", "y! t"]


def test_python_file_default_function_and_named(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "tv.py", """
def get_transform(vars, context):
    return {"upper": vars["question"].upper(), "ctx": ",".join(sorted(context))}

async def shout(vars, context):
    return {"question": vars["question"] + "!"}
""")
    _eval(tmp_path, f"""
prompts: ["{{{{question}}}} {{{{upper}}}} {{{{ctx}}}}"]
providers: [{PROVIDER}]
tests:
  - vars: {{question: hi}}
    options: {{transformVars: file://tv.py}}
  - vars: {{question: yo}}
    options: {{transformVars: "file://tv.py:shout"}}
""")
    assert _contents(fake_openai) == ["hi HI prompt,uuid", "yo!  "]


def test_failure_makes_that_tests_rows_errors_and_the_others_run(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "tv.py", """
def get_transform(vars, context):
    raise ValueError("py boom")

def as_string(vars, context):
    return "not an object"
""")
    rows = _eval(tmp_path, f"""
prompts: ["{{{{q}}}}"]
providers: [{PROVIDER}]
tests:
  - vars: {{q: one}}
    options: {{transformVars: file://tv.py}}
  - vars: {{q: two}}
    options: {{transformVars: "file://tv.py:as_string"}}
  - vars: {{q: three}}
""")
    errors = {r["vars"]["q"]: r.get("error") for r in rows}
    assert "Transform failed ([file transform]): tv.py:get_transform: ValueError: py boom" in errors["one"]
    assert "must return an object of vars, got str" in errors["two"]
    assert errors["three"] is None
    assert _contents(fake_openai) == ["three"]


def test_transform_values_are_data_and_never_rendered(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "tv.py", "def get_transform(vars, context):\n    return {'b': '{{a}} from transform'}\n")
    _eval(tmp_path, f"""
prompts: ["{{{{b}}}} / {{{{c}}}}"]
providers: [{PROVIDER}]
tests:
  - vars: {{a: A, b: "{{{{a}}}} as written", c: "{{{{a}}}} kept"}}
    options: {{transformVars: file://tv.py}}
""")
    assert _contents(fake_openai) == ["{{a}} from transform / A kept"]


def test_config_errors(tmp_path):
    for value, message in (("file://nope.py", "transform file not found"), (5, "a transform must be a string")):
        cfg = write(tmp_path / "c.yaml", "prompts: ['{{q}}']\nproviders: [echo]\n"
                                         f"tests: [{{vars: {{q: x}}, options: {{transformVars: {json.dumps(value)}}}}}]\n")
        with pytest.raises(ConfigError) as info:
            load_suite([cfg])
        assert message in str(info.value) and "tests[0].options.transformVars" in str(info.value)


def test_filter_failing_and_retry_errors_match_rows_by_their_transformed_vars(tmp_path, monkeypatch):
    """Stored rows carry the transformed vars: --filter-failing and --retry-errors find them again
    (the transform runs once per test either way)."""
    write(tmp_path / "model.py", "import os\n\ndef call_api(prompt, options, context):\n"
                                 "    if 'TWO' in prompt and os.environ.get('BREAK'):\n"
                                 "        raise RuntimeError('down')\n"
                                 "    return {'output': prompt}\n")
    write(tmp_path / "t.py", "def get_transform(vars, context):\n    return {'big': vars['q'].upper()}\n")
    cfg = write(tmp_path / "promptfooconfig.yaml", """
prompts: ["Q: {{big}}"]
providers: [file://model.py]
defaultTest: {options: {transformVars: file://t.py}}
tests:
  - vars: {q: one}
    assert: [{type: contains, value: ONE}]
  - vars: {q: two}
  - vars: {q: three}
    assert: [{type: contains, value: nope}]
""")
    monkeypatch.setenv("BREAK", "1")
    first = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--no-table"])
    assert first.exit_code == 100 and "Errors: 1" in first.output, first.output
    failing = runner.invoke(app, ["eval", "-c", str(cfg), "--filter-failing", "latest", "--no-progress-bar",
                                  "--no-cache", "--no-table", "--no-write"])
    assert "2 of 3 tests failed or errored there" in " ".join(failing.output.split()), failing.output
    monkeypatch.delenv("BREAK")
    again = runner.invoke(app, ["eval", "--retry-errors", "latest", "--no-progress-bar", "--no-table"])
    assert again.exit_code == 100, again.output  # the error row is now a PASS; test 3 still fails
    assert "Errors: 0" in again.output and "Successes: 2" in again.output, again.output
