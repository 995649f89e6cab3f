"""Script-valued vars (promptfoo-features §3): `file://x.py` / `file://x.js` var values called once per
row with promptfoo's arguments; `output` becomes the value, `error` or an exception an ERROR row."""

import json
import shutil

import pytest
from conftest import ROOT, TS_REFUSED, ts_refused, write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.loader import load_suite
from factcli.errors import ConfigError

runner = CliRunner()
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
PROVIDER = '{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'

CONTEXT_PY = '''
import json, os
CALLS = os.path.join(os.path.dirname(__file__), "calls.txt")

def get_var(var_name, prompt, other_vars):
    with open(CALLS, "a") as f:
        f.write(other_vars["__evalStepId"] + "\\n")
    mode = other_vars.get("mode")
    if mode == "error":
        return {"error": "database unreachable"}
    if mode == "raise":
        raise ValueError("boom from python")
    if mode == "plain":
        return "a plain string"
    if mode == "number":
        return {"output": 42}
    return {"output": "  PY:" + other_vars["question"] + " {{ question }}\\n\\n"}

def custom(var_name, prompt, other_vars):
    return {"output": "CUSTOM " + var_name}
'''


def _eval(tmp_path, config: str, *args):
    cfg = write(tmp_path / "promptfooconfig.yaml", config)
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache", *args])
    assert result.exit_code in (0, 100), result.output
    return json.loads(out.read_text())["results"]["results"]


def _contents(fake_openai) -> list[str]:
    return [r["json"]["messages"][-1]["content"] for r in fake_openai.requests]


def test_python_script_var_output_is_trimmed_and_never_rendered(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "load_context.py", CONTEXT_PY)
    rows = _eval(tmp_path, f"""
prompts: ["Q={{{{question}}}} CTX=[{{{{ctx}}}}]"]
providers: [{PROVIDER}]
tests:
  - vars: {{question: q1, ctx: file://load_context.py}}
    assert:
      - type: javascript
        value: "context.vars.ctx.startsWith('PY:q1 ') && context.vars.ctx.includes('question')"
""")
    assert _contents(fake_openai) == ["Q=q1 CTX=[PY:q1 {{ question }}]"]
    assert rows[0]["success"], rows[0]["gradingResult"]  # assertions see the script's output
    assert rows[0]["vars"]["ctx"] == "file://load_context.py"  # the results keep the reference as written


def test_function_suffix_calls_that_function(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "load_context.py", CONTEXT_PY)
    _eval(tmp_path, f"""
prompts: ["{{{{ctx}}}}"]
providers: [{PROVIDER}]
tests: [{{vars: {{ctx: "file://load_context.py:custom"}}}}]
""")
    assert _contents(fake_openai) == ["CUSTOM ctx"]


@pytest.mark.parametrize("mode, message", [
    ("error", "load_context.py:get_var: database unreachable"),
    ("raise", "ValueError: boom from python"),
    ("plain", "did not return any output"),
    ("number", "'output' must be a string, got int"),
])
def test_python_failures_are_error_rows_naming_the_script(tmp_path, fake_openai, monkeypatch, mode, message):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "load_context.py", CONTEXT_PY)
    rows = _eval(tmp_path, f"""
prompts: ["{{{{ctx}}}}"]
providers: [{PROVIDER}]
tests: [{{vars: {{question: q, mode: {mode}, ctx: file://load_context.py}}}}]
""")
    assert rows[0]["failureReason"] == 2 and rows[0]["prompt"]["raw"] == ""
    assert "var 'ctx'" in rows[0]["error"] and "load_context.py" in rows[0]["error"] and message in rows[0]["error"]
    assert fake_openai.request_count == 0


def test_called_once_per_row(tmp_path, fake_openai, monkeypatch):
    """2 prompts x 2 tests x --repeat 2: 8 rows, 8 calls, each with its own __evalStepId (promptfoo s02)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "load_context.py", CONTEXT_PY)
    _eval(tmp_path, f"""
prompts: ["A {{{{ctx}}}}", "B {{{{ctx}}}}"]
providers: [{PROVIDER}]
defaultTest:
  vars: {{ctx: file://load_context.py}}
tests: [{{vars: {{question: one}}}}, {{vars: {{question: two}}}}]
""", "--repeat", "2")
    calls = (tmp_path / "calls.txt").read_text().split()
    assert len(calls) == 8 and len(set(calls)) == 8


@needs_node
def test_javascript_script_gets_four_arguments_and_keys_run_in_order(tmp_path, fake_openai, monkeypatch):
    """The JS default export gets (varName, prompt, otherVars, provider); vars load in key order, so the
    Python script after it sees its output, while it saw the Python var still as a reference."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "load_context.py", '''
def get_var(var_name, prompt, other_vars):
    return {"output": "PY saw js_ctx=" + other_vars["js_ctx"]}
''')
    write(tmp_path / "ctx.js", '''
module.exports = (varName, prompt, otherVars, provider) => ({
  output: `  JS ${varName} ${otherVars.question} py=${otherVars.py_ctx.slice(0, 7)} ${provider.id} ${provider.label} ` +
          `${prompt.slice(0, 2)}\\n`,
});
''')
    write(tmp_path / "bad.js", "module.exports = () => 'plain';\n")
    rows = _eval(tmp_path, """
prompts: ["{{js_ctx}}|{{py_ctx}}"]
providers: [{id: "openai:chat:m1", label: mine, config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
  - vars: {js_ctx: file://ctx.js, py_ctx: file://load_context.py, question: q10}
  - vars: {bad: file://bad.js}
""")
    js = "  JS js_ctx q10 py=file:// openai:chat:m1 mine {{"
    assert _contents(fake_openai) == [f"{js}|PY saw js_ctx={js}"]
    assert "Expected" in rows[1]["error"] and "bad.js" in rows[1]["error"] and "plain string" in rows[1]["error"]


@ts_refused
def test_missing_and_typescript_script_files_are_config_errors(tmp_path):
    write(tmp_path / "ctx.ts", "export default () => ({output: 'x'});\n")
    for value, message in (("file://nope.py", "script var file not found"),
                           ("file://ctx.ts", f"ctx.ts {TS_REFUSED}")):
        cfg = write(tmp_path / "c.yaml", f"prompts: ['{{{{c}}}}']\nproviders: [echo]\ntests: [{{vars: {{c: '{value}'}}}}]\n")
        with pytest.raises(ConfigError) as info:
            load_suite([cfg])
        assert message in str(info.value) and "tests[0].vars.c" in str(info.value)


def test_script_vars_example_runs_offline(tmp_path):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(ROOT / "examples/script-vars/promptfooconfig.yaml"),
                                 "-o", str(out), "--no-progress-bar", "--no-cache"])
    assert result.exit_code == 0, result.output
    stats = json.loads(out.read_text())["results"]["stats"]
    assert (stats["successes"], stats["failures"], stats["errors"]) == (2, 0, 0)
