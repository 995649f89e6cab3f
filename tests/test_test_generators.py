"""Test generators (promptfoo-features §4): `tests: file://gen.py[:fn]`, `file://gen.js[:fn]` and
`{path, config}`, run once while the config loads, before any model call; what they return is checked
like any test list, and every failure is one line naming the generator."""

import ast
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
PROVIDER = '{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'

GEN_PY = '''
import os

def generate_tests(config=None):
    return [{"vars": {"topic": "default-fn"}, "assert": [{"type": "contains", "value": "{{ topic }}"}]}]

def simple():
    return [{"description": "py simple 1", "vars": {"topic": "py-a"}}, {"vars": {"topic": "py-b"}}]

def with_config(config):
    return [{"description": f"lang {lang}", "vars": {"topic": lang}} for lang in config["languages"]]

def echo_config(config=None):
    return [{"vars": {"topic": "none" if config is None else repr(config)}}]

async def later():
    return [{"vars": {"topic": "async"}}]

def boom():
    raise ValueError("generator exploded")

def needs_config(config):
    return []

def returns_dict():
    return {"vars": {"topic": "x"}}

def returns_none():
    pass

def bad_assertion():
    return [{"vars": {"topic": "fine"}}, {"assert": [{"type": "contians", "value": "x"}]}]

def bad_item():
    return [{"vars": {"topic": "fine"}}, 42]

def file_refs():
    return ["file://more_tests.yaml", {"vars": {"topic": "after"}}]

def not_a_path():
    return ["not a test"]

def counted():
    with open(os.path.join(os.path.dirname(__file__), "calls.txt"), "a") as f:
        f.write("x\\n")
    return [{"vars": {"topic": "counted"}}]

def templates():
    return [{"vars": {"topic": "{{ other }}", "other": "OTHER"}}]
'''

GEN_JS = '''
module.exports = (config) => [{ description: 'js default', vars: { topic: 'js-' + JSON.stringify(config === undefined ? 'undefined' : config) } }];
module.exports.named = (config) => [{ vars: { topic: 'named-' + (config ? config.suffix : 'none') } }];
module.exports.throws = () => { throw new TypeError('js generator failed'); };
'''


def _load(tmp_path, tests: str, files: dict | None = None):
    write(tmp_path / "gen.py", GEN_PY)
    write(tmp_path / "gen.js", GEN_JS)
    for name, text in (files or {}).items():
        write(tmp_path / name, text)
    cfg = write(tmp_path / "c.yaml", f"prompts: ['T={{{{ topic }}}}']\nproviders: [echo]\ntests:{tests}\n")
    return load_suite([cfg])


def _error(tmp_path, tests: str, files: dict | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, tests, files)
    message = str(info.value)
    assert "\n" not in message
    return message


def _topics(suite) -> list:
    return [t.vars.get("topic") for t in suite.tests]


def test_python_forms_are_spliced_in_at_their_place(tmp_path):
    suite = _load(tmp_path, """
  - file://gen.py
  - file://gen.py:simple
  - path: file://gen.py:with_config
    config: {languages: [German, Italian]}
  - vars: {topic: inline}
""")
    assert _topics(suite) == ["default-fn", "py-a", "py-b", "German", "Italian", "inline"]
    assert [t.description for t in suite.tests] == [None, "py simple 1", None, "lang German", "lang Italian", None]
    assert suite.tests[0].assertions[0].type == "contains"  # generated tests are parsed like any other


def test_a_single_generator_string_and_a_bare_path(tmp_path):
    assert _topics(_load(tmp_path, " file://gen.py:simple")) == ["py-a", "py-b"]
    assert _topics(_load(tmp_path, "\n  - gen.py:simple")) == ["py-a", "py-b"]


def test_python_arguments_without_and_with_config(tmp_path):
    suite = _load(tmp_path, """
  - file://gen.py:echo_config
  - {path: file://gen.py:echo_config, config: {k: 1}}
  - file://gen.py:later
""")
    assert _topics(suite) == ["none", "{'k': 1}", "async"]


def test_file_values_in_config_are_loaded_before_the_call(tmp_path):
    suite = _load(tmp_path, """
  - path: file://gen.py:echo_config
    config: {rows: file://rows.csv, one: file://one.csv, opts: file://opts.json, y: file://o.yaml, t: file://t.txt}
""", {"rows.csv": "lang,text\nGerman,Hello\nItalian,Ciao\n", "one.csv": "word\nx\ny\n",
      "opts.json": '{"max": 1}', "o.yaml": "a: Yes\n", "t.txt": "text\n"})
    config = ast.literal_eval(suite.tests[0].vars["topic"])  # the repr the generator returned
    assert config == {"rows": [{"lang": "German", "text": "Hello"}, {"lang": "Italian", "text": "Ciao"}],
                      "one": ["x", "y"], "opts": {"max": 1}, "y": {"a": "Yes"}, "t": "text\n"}


@needs_node
def test_javascript_forms(tmp_path):
    suite = _load(tmp_path, """
  - file://gen.js
  - file://gen.js:named
  - {path: file://gen.js:named, config: {suffix: cfg}}
  - file://arr.js
  - file://one.mjs
  - file://esm.mjs:generate
""", {"arr.js": "module.exports = [{vars: {topic: 'array'}}];",
      "one.mjs": "export default {vars: {topic: 'one object'}};",
      "esm.mjs": "export function generate() { return [{vars: {topic: 'esm'}}]; }"})
    assert _topics(suite) == ['js-"undefined"', "named-none", "named-cfg", "array", "one object", "esm"]


@needs_node
def test_javascript_errors(tmp_path):
    files = {"esm.mjs": "export function generate() { return []; }"}
    assert "tests[0]: test generator gen.js:throws failed: TypeError: js generator failed" in \
        _error(tmp_path, "\n  - file://gen.js:throws", files)
    assert "esm.mjs failed: Error: it has no default export; name the function to call, as file://esm.mjs:<function>" \
        in _error(tmp_path, "\n  - file://esm.mjs", files)


@ts_refused
def test_typescript_without_a_way_to_run_says_both_ways(tmp_path):
    message = _error(tmp_path, "\n  - file://gen.ts", {"gen.ts": "export default [];"})
    assert f"gen.ts {TS_REFUSED}" in message and "(npm install typescript)" in message


@pytest.mark.parametrize("tests, expected", [
    ("file://gen.py:boom",
     "c.yaml: tests[0]: test generator gen.py:boom raised ValueError: generator exploded (gen.py line 20)"),
    ("file://gen.py:nope", "c.yaml: tests[0]: gen.py has no function 'nope'"),
    ("file://gen.py:needs_config",
     ("needs_config() missing 1 required positional argument: 'config' (it is called with no arguments: "
      "give the parameter a default, or use {path, config})")),
    ("file://gen.py:returns_dict",
     "tests[0]: test generator gen.py:returns_dict must return a list of test cases, got an object"),
    ("file://gen.py:returns_none", "must return a list of test cases, got nothing"),
    ("file://gen.py:bad_assertion",
     ("c.yaml: tests[0]: gen.py:bad_assertion[1].assert[0].type: unknown assertion type 'contians' "
      "(did you mean 'contains'?)")),
    ("file://gen.py:bad_item", "c.yaml: tests[0]: gen.py:bad_item[1]: expected a test mapping, got int 42"),
    ("file://gen.py:not_a_path",
     "tests[0]: gen.py:not_a_path[0]: expected a test mapping or a file:// reference, got 'not a test'"),
    ("file://missing.py", "c.yaml: tests[0]: test generator file not found:"),
    ("{path: file://gen.py:simple, confg: {}}", "tests[0].confg: unknown key 'confg' (did you mean 'config'?)"),
    ("{path: file://tests.yaml}", "tests[0].path: expected a test generator, e.g. file://tests.py:generate"),
])
def test_errors_are_one_line_naming_the_generator(tmp_path, tests, expected):
    assert expected in _error(tmp_path, "\n  - " + tests)


def test_a_module_that_does_not_import(tmp_path):
    message = _error(tmp_path, "\n  - file://broken.py:gen", {"broken.py": "def gen(:\n"})
    assert message.startswith(f"{tmp_path / 'c.yaml'}: tests[0]: importing broken.py failed: SyntaxError")
    assert "(broken.py line 1)" in message


def test_returned_strings_are_test_files(tmp_path):
    suite = _load(tmp_path, "\n  - file://gen.py:file_refs", {"more_tests.yaml": "- vars: {topic: from-file}\n"})
    assert _topics(suite) == ["from-file", "after"]


def test_called_once_even_with_several_config_files(tmp_path):
    write(tmp_path / "gen.py", GEN_PY)
    first = write(tmp_path / "a.yaml", "prompts: ['T={{ topic }}']\nproviders: [echo]\ntests: [file://gen.py:counted]\n")
    second = write(tmp_path / "b.yaml", "tests: [{vars: {topic: b}}]\n")
    suite = load_suite([first, second])
    assert _topics(suite) == ["counted", "b"]
    assert (tmp_path / "calls.txt").read_text() == "x\n"


def test_generated_tests_reach_the_model_and_their_values_are_not_rendered(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "gen.py", GEN_PY)
    cfg = write(tmp_path / "c.yaml", f"prompts: ['T={{{{ topic }}}}']\nproviders: [{PROVIDER}]\n"
                "tests:\n  - file://gen.py:simple\n  - file://gen.py:templates\n")
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert [r["json"]["messages"][-1]["content"] for r in fake_openai.requests] == \
        ["T=py-a", "T=py-b", "T={{ other }}"]  # a generated value is data: never rendered
    rows = json.loads(out.read_text())["results"]["results"]
    assert [r["testCase"].get("description") for r in rows] == ["py simple 1", None, None]


def test_a_failing_generator_stops_before_any_model_call(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "gen.py", GEN_PY)
    cfg = write(tmp_path / "c.yaml", f"prompts: ['T={{{{ topic }}}}']\nproviders: [{PROVIDER}]\n"
                "tests:\n  - vars: {topic: first}\n  - file://gen.py:boom\n")
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache"])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    expected = f"error: {cfg}: tests[1]: test generator gen.py:boom raised ValueError: generator exploded"
    assert lines == [expected + " (gen.py line 20)"]
    assert fake_openai.requests == []


def test_the_example_runs_offline(tmp_path):
    from conftest import ROOT

    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(ROOT / "examples/test-generators/promptfooconfig.yaml"),
                                 "-o", str(out), "--no-progress-bar"])
    assert result.exit_code == 100, result.output  # the stand-in model gets Turkey wrong, by design
    rows = json.loads(out.read_text())["results"]["results"]
    assert [(r["vars"]["country"], r["success"]) for r in rows] == [
        ("Australia", True), ("Canada", True), ("Turkey", False), ("Nigeria", True), ("Morocco", True),
        ("France", True)]
