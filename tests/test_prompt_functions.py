"""Prompt functions (promptfoo-features §2): Python and JavaScript, every return form, their config
reaching the request body, labels and raw, and errors that name the file and the function."""

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
PROVIDER = ('{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", temperature: 0.9, '
            'max_tokens: 100}}')

PROMPTS_PY = '''
def as_string(context):
    v = context["vars"]
    return f"STR {v['topic']} for {context['provider']['id']} {{{{ kept }}}}"

def as_messages(context):
    return [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Tell me about " + context["vars"]["topic"]}]

def as_prompt_and_config(context):
    return {"prompt": "PC " + context["vars"]["topic"], "config": {"temperature": 0.25, "max_tokens": 7}}

def as_object(context):
    return {"hello": context["vars"]["topic"], "n": 1}

def sees_config(context):
    return "CFG " + json.dumps(context["config"], sort_keys=True)

def as_none(context):
    return None

def as_number(context):
    return 42

def raises(context):
    raise RuntimeError("prompt function failed")

class Builder:
    @staticmethod
    def build(context):
        return "METHOD " + context["vars"]["topic"]

import json
'''


def _eval(tmp_path, config: str, *args):
    cfg = write(tmp_path / "promptfooconfig.yaml", config)
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache", *args])
    assert result.exit_code in (0, 100), result.output
    return json.loads(out.read_text())


def _bodies(fake_openai) -> list[dict]:
    return [r["json"] for r in fake_openai.requests if r["path"].endswith("/chat/completions")]


def _by_label(doc) -> dict:
    return {r["prompt"]["label"]: r for r in doc["results"]["results"]}


def test_python_return_forms_reach_the_model(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "prompts.py", PROMPTS_PY)
    doc = _eval(tmp_path, f"""
prompts: [file://prompts.py:as_string, file://prompts.py:as_messages, file://prompts.py:as_prompt_and_config,
          file://prompts.py:as_object, file://prompts.py:Builder.build]
providers: [{PROVIDER}]
tests: [{{vars: {{topic: cats}}}}]
""")
    sent = {json.dumps(b["messages"]): b for b in _bodies(fake_openai)}
    user = lambda text: json.dumps([{"role": "user", "content": text}])
    # a string is sent as it is: `{{ kept }}` is not rendered (contract §3)
    assert user("STR cats for openai:chat:m1 {{ kept }}") in sent
    chat = json.dumps([{"role": "system", "content": "You are terse."},
                       {"role": "user", "content": "Tell me about cats"}])
    assert chat in sent and sent[chat]["temperature"] == 0.9
    pc = sent[user("PC cats")]
    assert (pc["temperature"], pc["max_tokens"]) == (0.25, 7)  # the function's config over the provider's
    assert user(json.dumps({"hello": "cats", "n": 1}, indent=2)) in sent
    assert user("METHOD cats") in sent
    rows = _by_label(doc)
    assert set(rows) == {"prompts.py:as_string", "prompts.py:as_messages", "prompts.py:as_prompt_and_config",
                         "prompts.py:as_object", "prompts.py:Builder.build"}
    assert all(r["success"] for r in rows.values())


def test_prompt_config_then_function_config_then_test_request_params(tmp_path, fake_openai, monkeypatch):
    """§2.6: the prompt entry's config, the function's config over it; the function sees the entry's."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "prompts.py", PROMPTS_PY)
    _eval(tmp_path, f"""
prompts:
  - {{id: file://prompts.py:as_prompt_and_config, label: fn, config: {{temperature: 0.5, seed: 3}}}}
  - {{id: file://prompts.py:sees_config, label: sees, config: {{seed: 4}}}}
providers: [{PROVIDER}]
tests: [{{vars: {{topic: cats}}}}]
""")
    bodies = {b["messages"][-1]["content"]: b for b in _bodies(fake_openai)}
    assert {k: bodies["PC cats"][k] for k in ("temperature", "max_tokens", "seed")} == \
        {"temperature": 0.25, "max_tokens": 7, "seed": 3}
    assert bodies['CFG {"seed": 4}']["seed"] == 4


def test_test_request_params_win_over_the_function_config():
    import asyncio

    from factcli.run.planning.row_vars import build_row
    from factcli.types import EvalStep, Prompt, ProviderSpec, TestCase

    path = ROOT / "examples/prompt-functions/prompts.py"
    prompt = Prompt(raw="", label="fn", function=f"file://{path}:chat", config={"temperature": 0.5, "seed": 1})
    test = TestCase(vars={"question": "Why?", "persona": "a pirate"}, request_params={"seed": 9})
    step = EvalStep(0, 0, 0, test, test.vars, prompt, ProviderSpec(id="echo"))
    row = asyncio.run(build_row(step))
    assert row.prompt.config == {"temperature": 0.2, "seed": 9, "max_tokens": 200}
    assert row.prompt.messages[0]["role"] == "system"


def test_python_errors_are_error_rows_naming_file_and_function(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "prompts.py", PROMPTS_PY)
    doc = _eval(tmp_path, f"""
prompts: [file://prompts.py:as_none, file://prompts.py:as_number, file://prompts.py:raises]
providers: [{PROVIDER}]
tests: [{{vars: {{topic: cats}}}}]
""")
    rows = _by_label(doc)
    assert all(r["failureReason"] == 2 for r in rows.values())
    assert "prompts.py:as_none returned nothing" in rows["prompts.py:as_none"]["error"]
    assert "prompts.py:as_number must return a string or object, got int" in rows["prompts.py:as_number"]["error"]
    error = rows["prompts.py:raises"]["error"]
    assert "prompts.py:raises" in error and "RuntimeError: prompt function failed" in error
    assert _bodies(fake_openai) == []


def test_python_file_without_function_runs_as_a_script(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    source = ('import json, sys\nctx = json.loads(sys.argv[1])\n'
              'print("LEGACY " + ctx["vars"]["topic"] + " " + ctx["provider"]["id"])\nprint("{{ kept }}")\n')
    write(tmp_path / "legacy.py", source)
    doc = _eval(tmp_path, f"""
prompts: [file://legacy.py]
providers: [{PROVIDER}]
tests: [{{vars: {{topic: cats}}}}]
""")
    assert _bodies(fake_openai)[0]["messages"] == [{"role": "user", "content": "LEGACY cats openai:chat:m1\n{{ kept }}"}]
    prompt = doc["results"]["prompts"][0]
    assert prompt["label"] == f"legacy.py: {source}" and prompt["raw"] == source


def test_labels_and_raw(tmp_path):
    write(tmp_path / "prompts.py", PROMPTS_PY)
    write(tmp_path / "sub/more.py", "def f(context):\n    return 'x'\n")
    cfg = write(tmp_path / "c.yaml", """
prompts:
  - file://prompts.py:as_string
  - {id: file://prompts.py:as_messages, label: chat}
  - file://sub/more.py:f
providers: [echo]
""")
    prompts = load_suite([cfg]).prompts
    assert [p.label for p in prompts] == ["prompts.py:as_string", "chat", "sub/more.py:f"]
    assert prompts[0].raw == PROMPTS_PY and prompts[1].raw == PROMPTS_PY
    assert prompts[0].id != prompts[1].id  # one file, two functions, two prompts


@pytest.mark.parametrize("entry, message", [
    ("file://missing.py:f", "prompt function file not found"),
    ("file://prompts.py:as_strin", "prompts.py has no function 'as_strin' (did you mean 'as_string'?)"),
    ("file://broken.py:f", "broken.py does not import: ZeroDivisionError"),
    pytest.param("file://prompts.ts:f", f"prompts.ts {TS_REFUSED}", marks=ts_refused),
])
def test_load_time_errors(tmp_path, entry, message):
    write(tmp_path / "prompts.py", PROMPTS_PY)
    write(tmp_path / "broken.py", "x = 1 / 0\n")
    write(tmp_path / "prompts.ts", "export function f() { return 'x'; }\n")
    cfg = write(tmp_path / "c.yaml", f"prompts: ['{entry}']\nproviders: [echo]\n")
    with pytest.raises(ConfigError) as info:
        load_suite([cfg])
    assert message in str(info.value) and "prompts[0]" in str(info.value)


@pytest.mark.parametrize("file, code, entry, kind", [
    ("prompts.py", 'GREETING = "Hello {{topic}}"\ndef fn(context):\n    return "x"\n', "prompts.py:GREETING", "a str"),
    ("prompts.py", "TOPICS = ['a']\n", "prompts.py:TOPICS", "a list"),
    pytest.param("prompts.js", 'module.exports.GREETING = "Hello {{topic}}";\nmodule.exports.fn = () => "x";\n',
                 "prompts.js:GREETING", "a string", marks=needs_node),
    pytest.param("prompts.mjs", "export const CONFIG = {t: 1};\nexport function fn() { return 'x'; }\n",
                 "prompts.mjs:CONFIG", "an object", marks=needs_node),
])
def test_a_name_that_is_no_function_says_what_it_is_before_any_call(tmp_path, fake_openai, monkeypatch, file, code,
                                                                      entry, kind):
    """It said "has no function 'GREETING'" though the name is there (Python), or failed every row (JS)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    write(tmp_path / file, code)
    cfg = write(tmp_path / "c.yaml", f"prompts: ['file://{entry}']\nproviders: [openai:chat:gpt-4o-mini]\n"
                                     "tests: [{vars: {topic: cats}}]\n")
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--no-write"])
    assert result.exit_code == 1, result.output
    assert (f"prompts[0]: {entry} is {kind}, not a function: a prompt function takes a context ({{vars, provider, "
            "config}) and returns the prompt (a string, chat messages, or {prompt, config})") in " ".join(
                result.output.split())
    assert fake_openai.request_count == 0


@needs_node
def test_a_missing_javascript_export_is_found_when_the_config_loads(tmp_path):
    write(tmp_path / "prompts.js", "module.exports.fn = () => 'x';\n")
    cfg = write(tmp_path / "c.yaml", "prompts: ['file://prompts.js:fnn']\nproviders: [echo]\n")
    with pytest.raises(ConfigError, match='prompts.js does not export a function named "fnn"'):
        load_suite([cfg])


@needs_node
def test_javascript_default_and_named_exports(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "prompt.js", """
module.exports = ({ vars, provider, config }) => `JS ${vars.topic} ${provider.label} ${JSON.stringify(config)}`;
module.exports.chat = ({ vars }) => ({
  prompt: [{ role: 'user', content: 'JS chat ' + vars.topic }],
  config: { temperature: 0.3 },
});
module.exports.nothing = () => undefined;
""")
    write(tmp_path / "esm.mjs", "export function named({ vars }) { return 'ESM ' + vars.topic; }\n")
    doc = _eval(tmp_path, """
prompts:
  - {id: file://prompt.js, config: {seed: 1}}
  - file://prompt.js:chat
  - file://prompt.js:nothing
  - file://esm.mjs:named
providers: [{id: "openai:chat:m1", label: mine, config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests: [{vars: {topic: cats}}]
""")
    bodies = {b["messages"][-1]["content"]: b for b in _bodies(fake_openai)}
    assert set(bodies) == {'JS cats mine {"seed":1}', "JS chat cats", "ESM cats"}
    assert bodies["JS chat cats"]["temperature"] == 0.3 and bodies['JS cats mine {"seed":1}']["seed"] == 1
    rows = _by_label(doc)
    assert set(rows) == {"prompt.js", "prompt.js:chat", "prompt.js:nothing", "esm.mjs:named"}
    assert "prompt.js:nothing returned undefined" in rows["prompt.js:nothing"]["error"]
    # a missing named export: a config error when the config loads (the test below)


def test_prompt_functions_example_runs_offline(tmp_path):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(ROOT / "examples/prompt-functions/promptfooconfig.yaml"),
                                 "-o", str(out), "--no-progress-bar", "--no-cache"])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["results"]["stats"]["successes"] == len(doc["results"]["results"]) > 0


def test_litellm_call_path_lays_request_parameters_over_the_provider_config():
    from factcli.providers.litellm_provider import LiteLLMProvider
    from factcli.types import ProviderSpec

    provider = LiteLLMProvider(ProviderSpec(id="anthropic:messages:claude-x",
                                            config={"temperature": 0.9, "max_tokens": 10}))
    kwargs = provider.call_kwargs(with_secrets=False, request={"temperature": 0.1, "seed": 5, "apiBaseUrl": "x"})
    assert (kwargs["temperature"], kwargs["max_tokens"], kwargs["seed"]) == (0.1, 10, 5)
    assert "api_base" not in kwargs  # request parameters are body parameters, never the endpoint
