"""YAML is read as promptfoo reads it (js-yaml 4, YAML 1.2 core schema): `Yes`/`no`/`on`/`off` stay
strings, `010` is ten, `1:30` is text; one resolver for configs, test files, var files and assertion files."""

import json
import math

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.loader import load_suite
from factcli.errors import ConfigError
from factcli.sources import parse_yaml

# (plain scalar, value js-yaml 4.1 gives) -- each checked against js-yaml 4.1.1 run on Node
SCALARS = [
    ("Yes", "Yes"), ("yes", "yes"), ("No", "No"), ("no", "no"), ("on", "on"), ("Off", "Off"),
    ("y", "y"), ("n", "n"), ("Y", "Y"), ("N", "N"),
    ("true", True), ("True", True), ("TRUE", True), ("false", False), ("False", False), ("FALSE", False),
    ("tRUE", "tRUE"),
    ("~", None), ("null", None), ("Null", None), ("NULL", None), ("nULL", "nULL"),
    ("0", 0), ("-0", 0), ("+12", 12), ("010", 10), ("09", 9), ("0o17", 15), ("0o8", "0o8"), ("0x1F", 31),
    ("-0x1F", -31), ("0b101", 5), ("1_000", 1000), ("0x", "0x"), ("1_", "1_"),
    ("1:30", "1:30"), ("190:20:30", "190:20:30"),
    ("3.5", 3.5), ("1e3", 1000.0), ("1E+3", 1000.0), ("1.", 1.0), (".5", 0.5), ("+.5", "+.5"), ("-.5", "-.5"),
    ("0_1", 1.0),
    ("=", "="),
]


@pytest.mark.parametrize("text,expected", SCALARS, ids=[s for s, _ in SCALARS])
def test_plain_scalars_resolve_as_js_yaml_does(text, expected):
    value = parse_yaml(f"v: {text}\n", "x.yaml")["v"]
    assert value == expected and type(value) is type(expected)


def test_infinities_and_nan():
    doc = parse_yaml("a: .inf\nb: -.Inf\nc: +.INF\nd: .nan\ne: .NaN\nf: -.nan\ng: .Nan\n", "x.yaml")
    assert doc["a"] == math.inf and doc["b"] == -math.inf and doc["c"] == math.inf
    assert math.isnan(doc["d"]) and math.isnan(doc["e"])
    assert doc["f"] == "-.nan" and doc["g"] == ".Nan"  # js-yaml: no sign on .nan, three spellings only


def test_quoted_and_explicitly_tagged_scalars_are_untouched():
    doc = parse_yaml("a: 'Yes'\nb: \"010\"\nc: !!str 12\nd: !!int '7'\ne: !!bool 'true'\n", "x.yaml")
    assert doc == {"a": "Yes", "b": "010", "c": "12", "d": 7, "e": True}


def test_the_fast_reader_and_the_full_loader_agree():
    """Anchors send a document through PyYAML's own loader; the values must not change."""
    body = "a: Yes\nb: 010\nc: 1:30\nd: on\ne: 0o17\nf: 1e3\n"
    fast = parse_yaml(body, "x.yaml")
    slow = parse_yaml("x: &anchor 1\n" + body, "x.yaml")
    assert {k: v for k, v in slow.items() if k != "x"} == fast == {
        "a": "Yes", "b": 10, "c": "1:30", "d": "on", "e": 15, "f": 1000.0}


@pytest.mark.parametrize("prefix", ["", "x: &anchor 1\n"], ids=["fast", "full"])
def test_duplicate_keys_are_still_an_error(prefix):
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        parse_yaml(prefix + "a: 1\na: 2\n", "x.yaml")


def test_merge_keys_still_work():
    doc = parse_yaml("base: &b {x: 1, y: 2}\nchild:\n  <<: *b\n  y: 3\n", "x.yaml")
    assert doc["child"] == {"x": 1, "y": 3}


def test_every_yaml_file_uses_the_same_rules(tmp_path):
    """Config, a tests file, a vars file and an assertion value file."""
    write(tmp_path / "tests.yaml", "- vars: {answer: Yes, code: 010}\n  assert: [{type: equals, value: file://a.yaml}]\n")
    write(tmp_path / "a.yaml", "no\n")
    write(tmp_path / "vars.yaml", "flag: off\n")
    cfg = write(tmp_path / "c.yaml", "prompts: ['{{answer}}']\nproviders: [echo]\n"
                "tests:\n  - file://tests.yaml\n  - vars: file://vars.yaml\n  - vars: {inline: On}\n")
    suite = load_suite([cfg])
    assert suite.tests[0].vars == {"answer": "Yes", "code": 10}
    assert suite.tests[0].assertions[0].value == "no"
    assert suite.tests[1].vars == {"flag": "off"}
    assert suite.tests[2].vars == {"inline": "On"}


def test_yes_reaches_the_model_as_yes(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Reply to: {{ message }} ({{ count }})"]
providers:
  - id: openai:chat:m1
    config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}
tests:
  - vars:
      message: Yes
      count: 010
""")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "--no-progress-bar", "--no-cache", "-c", str(cfg), "-o", str(out)])
    assert result.exit_code == 0, result.output
    [request] = fake_openai.requests
    assert request["json"]["messages"] == [{"role": "user", "content": "Reply to: Yes (10)"}]
    assert json.loads(out.read_text())["results"]["results"][0]["vars"]["message"] == "Yes"


def test_a_repeated_key_next_to_a_merge_is_still_an_error():
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        parse_yaml("base: &b {z: 1}\nchild:\n  <<: *b\n  a: 1\n  a: 2\n", "x.yaml")
