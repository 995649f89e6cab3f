"""A row's vars and prompt, step by step (run/planning/row_vars.py): what the model receives, checked in the fake
server's request log, and what assertions see."""

import json

from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
PROVIDER = '{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'


def _eval(tmp_path, config: str, *args):
    cfg = write(tmp_path / "promptfooconfig.yaml", config)
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache", *args])
    assert result.exit_code in (0, 100), result.output
    return json.loads(out.read_text())["results"]["results"]


def _sent(fake_openai) -> list[list[dict]]:
    return [r["json"]["messages"] for r in fake_openai.requests if r["path"].endswith("/chat/completions")]


def test_block_var_reaches_the_model_without_its_trailing_newline(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    _eval(tmp_path, f"""
prompts: ["[{{{{text}}}}]"]
providers: [{PROVIDER}]
tests:
  - vars:
      text: |
        two lines
        of text
      twice: "x\\n\\n"
""")
    assert _sent(fake_openai) == [[{"role": "user", "content": "[two lines\nof text]"}]]


def test_one_newline_only_is_stripped_and_assertions_see_it_stripped(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    rows = _eval(tmp_path, f"""
prompts: ["<{{{{twice}}}}>"]
providers: [{PROVIDER}]
tests:
  - vars: {{twice: "x\\n\\n"}}
    assert:
      - type: javascript
        value: "context.vars.twice === 'x\\\\n'"
""")
    assert _sent(fake_openai)[0][0]["content"] == "<x\n>"
    assert rows[0]["success"], rows[0]


def test_var_that_references_other_vars_is_rendered_once(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # the fake server echoes the prompt: the output holds the rendered message
    rows = _eval(tmp_path, f"""
prompts: ["{{{{message}}}} {{{{shout}}}}"]
providers: [{PROVIDER}]
defaultTest:
  vars: {{favoriteFruit: mango}}
tests:
  - vars:
      message: 'Why do you like {{{{favoriteFruit}}}}?'
      shout: '{{{{ message | upper }}}}!'
    assert:
      - type: contains
        value: "{{{{message}}}}"
      - type: javascript
        value: "context.vars.message === 'Why do you like mango?'"
""")
    assert _sent(fake_openai) == [[{"role": "user", "content": "Why do you like mango? WHY DO YOU LIKE MANGO?!"}]]
    assert rows[0]["success"], rows[0]["gradingResult"]
    # the results keep the vars as written, as promptfoo's do
    assert rows[0]["vars"]["message"] == "Why do you like {{favoriteFruit}}?"


def test_var_naming_something_that_is_not_a_var_stays_literal(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    _eval(tmp_path, f"""
prompts: ["{{{{doc}}}}"]
providers: [{PROVIDER}]
tests:
  - vars: {{doc: 'use {{{{ placeholder }}}} in {{{{lang}}}}', lang: jinja}}
""")
    assert _sent(fake_openai)[0][0]["content"] == "use {{ placeholder }} in {{lang}}"


def test_values_from_csv_and_files_are_never_rendered(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "tests.csv", 'q,x\n"cell {{x}}",X\n')
    write(tmp_path / "doc.txt", "file {{x}}")
    _eval(tmp_path, f"""
prompts: ["{{{{q}}}} | {{{{doc}}}}"]
providers: [{PROVIDER}]
defaultTest:
  vars: {{doc: file://doc.txt}}
tests: file://tests.csv
""")
    assert _sent(fake_openai)[0][0]["content"] == "cell {{x}} | file {{x}}"


def test_chat_template_built_with_a_loop_arrives_as_separate_messages(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "chat.json", """[
  {"role": "system", "content": "You are terse."},
{% for turn in history %}
  {"role": "user", "content": {{ turn.q | dump }}},
  {"role": "assistant", "content": {{ turn.a | dump }}},
{% endfor %}
  {"role": "user", "content": {{ question | dump }}}
]""")
    _eval(tmp_path, f"""
prompts: [file://chat.json]
providers: [{PROVIDER}]
tests:
  - vars:
      question: 'And "now"?'
      history: [{{q: hi, a: hello}}, {{q: x, a: y}}]
""")
    assert _sent(fake_openai) == [[
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "x"}, {"role": "assistant", "content": "y"},
        {"role": "user", "content": 'And "now"?'},
    ]]


def test_steps_run_in_order(tmp_path, fake_openai, monkeypatch):
    """A script var sees the other vars as written (runtime vars in, newline not yet stripped, templates
    unrendered); the prompt function sees the final vars, with the script's output in them."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "seen.py", """
import json
def get_var(var_name, prompt, other_vars):
    return {"output": json.dumps({"name": var_name, "prompt": prompt, "vars": other_vars})}
""")
    write(tmp_path / "prompts.py", """
import json
def build(context):
    return json.dumps(context["vars"], sort_keys=True)
""")
    _eval(tmp_path, f"""
prompts: [file://prompts.py:build, "T {{{{__evalStepId}}}} {{{{__repeatIndex}}}}"]
providers: [{PROVIDER}]
tests:
  - vars:
      a: "A\\n"
      b: "{{{{a}}}}?"
      seen: file://seen.py
""")
    contents = sorted((m[0]["content"] for m in _sent(fake_openai)), key=lambda c: c.startswith("T "))
    function_sees = json.loads(contents[0])
    script_saw = json.loads(function_sees["seen"])
    assert script_saw["name"] == "seen" and "def build" in script_saw["prompt"]
    assert script_saw["vars"]["a"] == "A\n" and script_saw["vars"]["b"] == "{{a}}?"
    assert script_saw["vars"]["seen"].startswith("file://") and script_saw["vars"]["__evalStepId"] == \
        "test-0-prompt-0-repeat-0"
    assert script_saw["vars"]["__evalId"].startswith("eval-")
    assert function_sees["a"] == "A" and function_sees["b"] == "A?"
    assert function_sees["__repeatIndex"] == 0
    assert contents[1] == "T test-0-prompt-1-repeat-0 0"


def test_assertions_do_not_see_runtime_vars(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    rows = _eval(tmp_path, f"""
prompts: ["{{{{q}}}}"]
providers: [{PROVIDER}]
tests:
  - vars: {{q: hi}}
    assert:
      - type: javascript
        value: "Object.keys(context.vars).join(',') === 'q'"
""")
    assert rows[0]["success"], rows[0]["gradingResult"]


def test_failed_render_is_an_error_row_and_sends_nothing(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    rows = _eval(tmp_path, f"""
prompts: ["{{{{ q() }}}}", "fine {{{{q}}}}"]
providers: [{PROVIDER}]
tests:
  - vars: {{q: hi}}
""")
    assert rows[0]["failureReason"] == 2 and "not callable" in rows[0]["error"]
    assert rows[0]["prompt"]["raw"] == "" and rows[1]["success"]
    assert _sent(fake_openai) == [[{"role": "user", "content": "fine hi"}]]


def test_prompt_config_is_a_request_parameter_and_part_of_the_cache_key(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = write(tmp_path / "promptfooconfig.yaml", """
prompts:
  - {raw: "Q {{q}}", label: cool, config: {temperature: 0.1}}
  - {raw: "Q {{q}}", label: warm, config: {temperature: 0.9}}
providers:
  - {id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", temperature: 0.5, max_tokens: 50}}
tests:
  - vars: {q: hi}
""")
    for _ in range(2):  # the second run is answered from the cache: one entry per temperature
        result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-write"])
        assert result.exit_code == 0, result.output
    bodies = [r["json"] for r in fake_openai.requests]
    assert [(b["temperature"], b["max_tokens"]) for b in bodies] == [(0.1, 50), (0.9, 50)]


def test_cache_key_keeps_request_parameters_apart_and_secrets_out():
    from factcli.run.calling.cache import cache_key

    identity = {"id": "openai:chat:m", "config": {"temperature": 0.5, "apiKey": "sk-1"}}
    messages = [{"role": "user", "content": "x"}]
    plain = cache_key(identity, messages, 0)
    assert cache_key(identity, messages, 0, None, {"temperature": 0.1}) != plain
    assert cache_key(identity, messages, 0, None, {"temperature": 0.5}) == plain  # the same request
    assert cache_key(identity, messages, 0, None, {"apiKey": "sk-2"}) == plain  # secrets are not hashed


def test_var_templates_follow_their_dependencies_and_cycles_stay_literal():
    from factcli.run.planning.row_vars import render_var_values

    out = render_var_values({"name": "Ann", "greeting": "Hello {{ name }}", "x": "{{ greeting }}!",
                             "c1": "{{c2}}", "c2": "{{c1}}"}, {"greeting", "x", "c1", "c2"})
    assert out["x"] == "Hello Ann!" and out["greeting"] == "Hello Ann"
    assert (out["c1"], out["c2"]) == ("{{c2}}", "{{c1}}")
    loop = render_var_values({"items": ["a", "b"], "v": "{% for i in items %}{{ i }};{% endfor %}"}, {"v"})
    assert loop["v"] == "a;b;"
