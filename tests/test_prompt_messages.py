"""Prompts written as `{messages: [{role, content}], label?, config?}` (promptfoo's chat-messages-format):
inline, text-file and prompt-function contents reaching the model as chat messages, label and raw, and
the one-line config errors."""

import json
import shutil

import pytest
from conftest import TS_REFUSED, ts_refused, write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.loader import load_suite
from factcli.errors import ConfigError

runner = CliRunner()
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
PROVIDER = '{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", max_tokens: 100}}'


def _run(tmp_path, config: str) -> dict:
    cfg = write(tmp_path / "promptfooconfig.yaml", config)
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    assert result.exit_code in (0, 100), result.output
    return json.loads(out.read_text())


def _sent(fake_openai) -> list[list[dict]]:
    return [r["json"]["messages"] for r in fake_openai.requests if r["path"].endswith("/chat/completions")]


def test_inline_and_text_file_contents(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "system.j2", "You know {{ domain }}.\n")
    write(tmp_path / "user.md", "# Q\n\nExplain **{{ topic }}**.\n")
    write(tmp_path / "assistant.json", '{"topic": "{{ topic }}"}\n')
    _run(tmp_path, f"""
prompts:
  - label: chat
    messages:
      - role: system
        content: file://system.j2
      - {{role: user, content: file://user.md}}
      - {{role: assistant, content: file://assistant.json}}
      - {{role: user, content: 'And {{{{ topic | upper }}}}?', name: ann}}
providers: [{PROVIDER}]
tests: [{{vars: {{domain: ML, topic: nets}}}}]
""")
    assert _sent(fake_openai) == [[
        {"role": "system", "content": "You know ML."},
        {"role": "user", "content": "# Q\n\nExplain **nets**."},
        {"role": "assistant", "content": '{"topic": "nets"}'},  # a .json file's text is the template
        {"role": "user", "content": "And NETS?", "name": "ann"},  # other keys of a message are kept
    ]]


def test_python_function_content_and_config(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "prompts.py", '''
def example(context):
    return f"Example of {context['vars']['topic']} for {context['provider']['id']} {{{{ kept }}}}"

def with_config(context):
    return {"prompt": "CFG " + json.dumps(context["config"]), "config": {"max_tokens": 7}}

import json
''')
    _run(tmp_path, f"""
prompts:
  - config: {{temperature: 0.5}}
    messages:
      - {{role: user, content: 'Show {{{{ topic }}}}'}}
      - {{role: assistant, content: 'file://prompts.py:example'}}
      - {{role: user, content: 'file://prompts.py:with_config'}}
providers: [{PROVIDER}]
tests: [{{vars: {{topic: cats}}}}]
""")
    body = next(r["json"] for r in fake_openai.requests if r["path"].endswith("/chat/completions"))
    assert body["messages"] == [
        {"role": "user", "content": "Show cats"},
        {"role": "assistant", "content": "Example of cats for openai:chat:m1 {{ kept }}"},  # never rendered
        {"role": "user", "content": 'CFG {"temperature": 0.5}'},
    ]
    assert body["temperature"] == 0.5 and body["max_tokens"] == 7


@needs_node
def test_javascript_function_content(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "prompt.js", "module.exports = async ({ vars }) => `JS ${vars.topic}`;\n"
                                  "module.exports.named = ({ vars }) => 'named ' + vars.topic;\n")
    _run(tmp_path, f"""
prompts:
  - messages:
      - {{role: system, content: file://prompt.js}}
      - {{role: user, content: 'file://prompt.js:named'}}
providers: [{PROVIDER}]
tests: [{{vars: {{topic: cats}}}}, {{vars: {{topic: dogs}}}}]
""")
    assert sorted(_sent(fake_openai), key=str) == [
        [{"role": "system", "content": "JS cats"}, {"role": "user", "content": "named cats"}],
        [{"role": "system", "content": "JS dogs"}, {"role": "user", "content": "named dogs"}],
    ]


def test_function_failure_is_an_error_row(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "prompts.py", "def boom(context):\n    raise RuntimeError('no luck')\n")
    doc = _run(tmp_path, f"""
prompts: [{{messages: [{{role: user, content: 'file://prompts.py:boom'}}]}}]
providers: [{PROVIDER}]
tests: [{{vars: {{topic: cats}}}}]
""")
    row = doc["results"]["results"][0]
    assert row["failureReason"] == 2 and "boom" in row["error"] and "no luck" in row["error"]
    assert _sent(fake_openai) == []


def test_label_raw_and_id(tmp_path):
    write(tmp_path / "user.txt", "Hi {{ name }}\n")
    write(tmp_path / "prompts.py", "def f(context):\n    return 'x'\n")
    cfg = write(tmp_path / "c.yaml", """
prompts:
  - label: mine
    messages: [{role: user, content: file://user.txt}]
  - messages: [{role: system, content: 'Be brief.'}, {role: user, content: 'file://prompts.py:f'}]
providers: [echo]
""")
    first, second = load_suite([cfg]).prompts
    assert first.label == "mine"
    assert first.raw == '[{"role": "user", "content": "file://user.txt"}]'  # the messages as written
    assert first.messages == [{"role": "user", "content": "Hi {{ name }}"}]
    assert second.label == second.raw == ('[{"role": "system", "content": "Be brief."}, '
                                          '{"role": "user", "content": "file://prompts.py:f"}]')
    assert second.message_functions == {1: f"file://{(tmp_path / 'prompts.py').resolve()}:f"}
    write(tmp_path / "user.txt", "Hello {{ name }}\n")  # the file's text is part of the prompt's id
    assert load_suite([cfg]).prompts[0].id != first.id


def test_echo_shows_the_rendered_messages(tmp_path):
    write(tmp_path / "user.md", "Explain {{ topic }}.")
    doc = _run(tmp_path, """
prompts:
  - {label: chat, messages: [{role: system, content: Be brief.}, {role: user, content: file://user.md}]}
providers: [echo]
tests: [{vars: {topic: nets}}]
""")
    output = doc["results"]["results"][0]["response"]["output"]
    assert json.loads(output) == [{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "Explain nets."}]


@pytest.mark.parametrize("messages, message, where", [
    ("[{role: usr, content: hi}]", "unknown role 'usr' (did you mean 'user'?)", "prompts[0].messages[0].role"),
    ("[{content: hi}]", "a message needs a 'role'", "prompts[0].messages[0]"),
    ("[{role: user}]", "a message needs a 'content'", "prompts[0].messages[0]"),
    ("[{role: user, content: hi}, {role: user, content: 3}]", "content must be text or a file:// reference, got int",
     "prompts[0].messages[1].content"),
    ("[{role: user, content: [a]}]", "got list", "prompts[0].messages[0].content"),
    ("[hello]", "expected a message {role, content}, got str", "prompts[0].messages[0]"),
    ("[]", "expected a non-empty list", "prompts[0].messages"),
    ("[{role: user, content: 'file://missing.txt'}]", "file not found", "prompts[0].messages[0].content"),
    ("[{role: user, content: 'file://missing.py:f'}]", "prompt function file not found",
     "prompts[0].messages[0].content"),
    pytest.param("[{role: user, content: 'file://p.ts'}]", f"p.ts {TS_REFUSED}", "prompts[0].messages[0].content",
                 marks=ts_refused),
    ("[{role: user, content: 'file://prompts.py:g'}]", "prompts.py has no function 'g'",
     "prompts[0].messages[0].content"),
    ("[{role: user, content: 'file://*.txt'}]", "not a glob", "prompts[0].messages[0].content"),
    ("[{role: user, content: 'Hi {{ name'}]", "", "prompts[0].messages[0].content"),
])
def test_config_errors_name_the_message(tmp_path, messages, message, where):
    write(tmp_path / "p.ts", "export default () => 'x';\n")
    write(tmp_path / "prompts.py", "def f(context):\n    return 'x'\n")
    cfg = write(tmp_path / "c.yaml", f"prompts:\n  - messages: {messages}\nproviders: [echo]\n")
    with pytest.raises(ConfigError) as info:
        load_suite([cfg])
    text = str(info.value)
    assert message in text and where in text and "\n" not in text.strip(), text


def test_messages_with_raw_is_an_error(tmp_path):
    cfg = write(tmp_path / "c.yaml", "prompts:\n  - {raw: hi, messages: [{role: user, content: hi}]}\n"
                                     "providers: [echo]\n")
    with pytest.raises(ConfigError, match="either 'messages' or 'raw'"):
        load_suite([cfg])


def test_cli_reports_a_bad_message_in_one_line(tmp_path):
    cfg = write(tmp_path / "c.yaml", "prompts:\n  - messages: [{role: boss, content: hi}]\nproviders: [echo]\n")
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-write"])
    assert result.exit_code == 1
    assert "prompts[0].messages[0].role" in result.output and "Traceback" not in result.output
