"""Config loading: promptfoo keys, file references, defaultTest merging, and one-line errors."""

import json

import pytest
from conftest import without_excerpt, write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.loader import load_suite
from factcli.config.plan import expand
from factcli.errors import ConfigError

runner = CliRunner()

BASE = "prompts: ['Q: {{q}}']\nproviders: [echo]\n"


@pytest.mark.parametrize("body, expected", [
    (BASE + "tests:\n  - assert:\n      - type: contians\n        value: x\n",
     "c.yaml: tests[0].assert[0].type: unknown assertion type 'contians' (did you mean 'contains'?)"),
    (BASE + "tests:\n  - vars: {q: 1}\n    asert: []\n",
     "c.yaml: tests[0].asert: unknown key 'asert' (did you mean 'assert'?)"),
    (BASE + "test: []\n", "c.yaml: test: unknown key 'test' (did you mean 'tests'?)"),
    (BASE + "redteam: {}\n", "c.yaml: redteam: 'redteam' is not supported by factcli"),
    (BASE + "tests:\n  - assert:\n      - type: assert-set\n        assert:\n          - type: assert-set\n"
     "            assert: [{type: contains, value: x}]\n",
     "c.yaml: tests[0].assert[0].assert[0].type: assert-set cannot be nested"),
    (BASE + "tests:\n  - assert: [{type: contains, value: x, weight: heavy}]\n",
     "c.yaml: tests[0].assert[0].weight: expected a number, got 'heavy'"),
    (BASE + "tests:\n  - assert: [{type: contains}]\n", "c.yaml: tests[0].assert[0].value: 'contains' needs a 'value'"),
    (BASE + "tests:\n  - assert: [{type: guardrails}]\n", "c.yaml: tests[0].assert[0].type: assertion type 'guardrails' is not supported"),
    (BASE + "tests: file://missing.csv\n", "c.yaml: tests: file not found:"),
    (BASE + "tests:\n  - assert: [{type: equals, value: 'file://gone.yaml'}]\n",
     "c.yaml: tests[0].assert[0].value: file not found:"),
    ("prompts: ['{{ q ']\nproviders: [echo]\n", "c.yaml: prompts[0]: template syntax error"),
    ("prompts: []\nproviders: [echo]\n", "c.yaml: prompts: no prompts found: list at least one"),
    ("prompts: [x]\n", "c.yaml: providers: no providers"),
    ("prompts: [x]\nproviders: ['python:nope.py']\n", "c.yaml: providers[0]: python provider file not found"),
    (BASE + "assertionTemplates: false\n", "c.yaml: assertionTemplates: expected a mapping of name -> assertion"),
    (BASE + "metadata: 5\n", "c.yaml: metadata: expected a mapping"),
    (BASE + "assertionTemplates: {hi: {type: '0'}}\ntests:\n  - assert: [{$ref: '#/assertionTemplates/hi'}]\n",
     "c.yaml: tests[0].assert[0].type: unknown assertion type '0' (with its $ref, assertionTemplates.hi)"),
    (BASE + "tests:\n  - assert: [{$ref: '#/assertionTemplates/hi'}]\n",
     "c.yaml: tests[0].assert[0].$ref: unknown assertion template 'hi' in assertionTemplates (it names none)"),
    ("prompts: [x]\nproviders: [{id: echo, label: [null]}]\n",
     "c.yaml: providers[0].label: expected a label (a string), got list"),
    ("prompts: [{raw: x, label: {a: 1}}]\nproviders: [echo]\n", "c.yaml: prompts[0].label: expected a label (a string), got dict"),
    ("prompts: [x\nproviders: [echo]\n", "c.yaml: invalid YAML: line"),
    ("prompts: [x]\nprompts: [y]\nproviders: [echo]\n", "c.yaml: invalid YAML: line 2, column 1: duplicate key 'prompts'"),
    ("- just\n- a list\n", "c.yaml: the config must be a mapping"),
    (BASE + "tests:\n  - assert: [{type: contains, value: x, transform: 'file://t.rb'}]\n",
     "c.yaml: tests[0].assert[0].transform: a transform file must be .py or .js"),
    (BASE + "defaultTest: {options: {provder: x}}\n", "c.yaml: defaultTest.options.provder: unknown key 'provder' (did you mean 'provider'?)"),
    (BASE + "evaluateOptions: {maxConcurency: 3}\n", "c.yaml: evaluateOptions.maxConcurency: unknown key 'maxConcurency' (did you mean 'maxConcurrency'?)"),
])
def test_config_errors_are_one_line_exit_1(tmp_path, monkeypatch, body, expected):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "c.yaml", body)
    result = runner.invoke(app, ["eval", "-c", "c.yaml", "--no-progress-bar"])
    assert result.exit_code == 1, result.output
    lines = without_excerpt([ln for ln in result.output.splitlines() if ln.strip()])
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: " + expected), lines[0]
    assert "Traceback" not in result.output


def test_csv_row_error_names_file_row_and_column(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "t.csv", "q,__expected,__config:__expected:threshold\nhi,contains:h,lots\n")
    write(tmp_path / "c.yaml", BASE + "tests: file://t.csv\n")
    result = runner.invoke(app, ["eval", "-c", "c.yaml"])
    assert result.exit_code == 1
    assert result.output.strip() == ("error: t.csv: row 1, column __config:__expected:threshold: "
                                     "invalid numeric value 'lots' for threshold")


def test_missing_config_and_default_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["eval"])
    assert result.exit_code == 1 and "no config" in result.output
    write(tmp_path / "promptfooconfig.yaml", BASE + "tests: [{vars: {q: a}}]\n")
    assert runner.invoke(app, ["eval", "--no-table"]).exit_code == 0


def test_default_test_merging(tmp_path):
    cfg = write(tmp_path / "c.yaml", BASE + """
defaultTest:
  vars: {q: default, lang: en}
  threshold: 0.5
  options: {provider: openai:gpt-5, factuality: {subset: 0.5}}
  metadata: {team: a}
  assert: [{type: contains, value: Q}]
tests:
  - vars: {q: mine}
    options: {factuality: {agree: 0.9}}
    metadata: {owner: b}
    assert: [{type: icontains, value: mine}]
  - threshold: 0
    options: {disableDefaultAsserts: true}
""")
    suite = load_suite([cfg])
    t0, t1 = suite.tests
    assert t0.vars == {"q": "mine", "lang": "en"}
    assert [a.type for a in t0.assertions] == ["contains", "icontains"]
    assert t0.options["provider"] == "openai:gpt-5"
    assert t0.options["factuality"] == {"agree": 0.9}  # shallow: the test's map replaces the default's
    assert t0.metadata == {"team": "a", "owner": "b"}
    assert t0.threshold == 0.5
    assert t1.assertions == [] and t1.threshold == 0


def test_files_globs_and_var_files(tmp_path):
    write(tmp_path / "prompts/a.txt", "First {{q}}\n---\nSecond {{q}}\n")
    write(tmp_path / "prompts/b.txt", "Third {{q}}")
    write(tmp_path / "data/context.txt", "some context")
    write(tmp_path / "data/obj.yaml", "a: 1\nb: [x, y]\n")
    write(tmp_path / "tests/t1.yaml", "- vars: {q: one, ctx: file://../data/context.txt, obj: file://../data/obj.yaml}\n")
    write(tmp_path / "tests/t2.jsonl", json.dumps({"vars": {"q": "two"}}) + "\n")
    write(tmp_path / "tests/t3.csv", "q,__expected,__description\nthree,contains:three,third one\n")
    cfg = write(tmp_path / "c.yaml", "prompts: ['file://prompts/*.txt']\nproviders: [echo]\n"
                "tests: ['file://tests/t1.yaml', 'file://tests/t2.jsonl', 'file://tests/t3.csv']\n")
    suite = load_suite([cfg])
    assert [p.raw for p in suite.prompts] == ["First {{q}}", "Second {{q}}", "Third {{q}}"]
    assert suite.prompts[0].label == "prompts/a.txt: First {{q}}"
    assert [t.vars["q"] for t in suite.tests] == ["one", "two", "three"]
    assert suite.tests[0].vars["ctx"] == "some context"
    assert suite.tests[0].vars["obj"] == {"a": 1, "b": ["x", "y"]}  # parsed (promptfoo: compact JSON text)
    assert suite.tests[2].description == "third one"
    assert suite.tests[2].assertions[0].type == "contains"


def test_env_expansion_and_env_block(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_BASE", "http://127.0.0.1:9/v1")
    cfg = write(tmp_path / "c.yaml", """
env: {FROM_CONFIG: yes-please}
prompts: ["hi {{ env.FROM_CONFIG }}"]
providers:
  - id: openai:chat:x
    config: {apiBaseUrl: "${MY_BASE}", other: "{{ env.MY_BASE }}", unset: "${NOT_SET_ANYWHERE}"}
""")
    suite = load_suite([cfg])
    assert suite.providers[0].config == {"apiBaseUrl": "http://127.0.0.1:9/v1", "other": "http://127.0.0.1:9/v1",
                                         "unset": "${NOT_SET_ANYWHERE}"}
    # the raw config keeps references, for storing without secrets
    assert suite.raw["providers"][0]["config"]["apiBaseUrl"] == "${MY_BASE}"


def test_factuality_guide_configs_load(tmp_path):
    """The configs of the promptfoo factuality guide load as written (scoring factuality is issue 4)."""
    cfg = write(tmp_path / "c.yaml", """
providers:
  - openai:gpt-5-mini
  - openai:gpt-5
  - anthropic:claude-sonnet-4-5-20250929
  - google:gemini-2.0-flash
prompts:
  - |
    Question: What is the capital of {{location}}?
    Please answer accurately.
tests:
  - vars:
      location: California
    assert:
      - type: contains
        value: Sacramento
""")
    suite = load_suite([cfg])
    from factcli.providers.litellm_provider import to_litellm_model

    assert [to_litellm_model(p.id) for p in suite.providers] == [
        "openai/gpt-5-mini", "openai/gpt-5", "anthropic/claude-sonnet-4-5-20250929", "gemini/gemini-2.0-flash"]


def test_expansion_order_and_provider_prompt_filter(tmp_path):
    cfg = write(tmp_path / "c.yaml", """
prompts:
  - {raw: "A {{x}}", label: alpha}
  - {raw: "B {{x}}", label: beta}
providers:
  - echo
  - {id: echo, label: only-beta, prompts: [beta]}
tests:
  - vars: {x: [one, two], y: [[1, 2]]}
  - vars: {x: three}
""")
    suite = load_suite([cfg])
    cols, steps = expand(suite, repeat=2)
    assert [(c.provider.display, c.prompt.label) for c in cols] == [("echo", "alpha"), ("echo", "beta"),
                                                                    ("only-beta", "beta")]
    # testIdx: per test, per repeat, per var combination; columns provider-major
    assert [(s.test_idx, s.prompt_idx, s.vars["x"]) for s in steps[:6]] == [
        (0, 0, "one"), (0, 1, "one"), (0, 2, "one"), (1, 0, "two"), (1, 1, "two"), (1, 2, "two")]
    assert [s.test_idx for s in steps].count(5) == 3 and max(s.test_idx for s in steps) == 5
    assert steps[0].vars["y"] == [[1, 2]]  # arrays of non-strings are not expanded


def test_a_var_an_assertion_takes_as_a_list_is_never_expanded(tmp_path):
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q {{x}}"]
providers: [echo]
tests:
  - vars: {x: [one, two], docs: [p1, p2, p3], context: [c1, c2]}
    assert: [{type: citations, config: {passages: docs}}]
  - vars: {x: one, docs: [p1, p2]}
    assert: [{type: assert-set, assert: [{type: not-citations, config: {passages: docs}}]}]
  - vars: {x: one, context: [c1, c2]}
    assert: [{type: factscore}]
  - vars: {x: one, ctx: [c1, c2]}
    assert: [{type: facts-grounding, config: {contextVar: ctx}}]
""")
    suite = load_suite([cfg])
    _, steps = expand(suite)
    # test 0: x and context expand (2 × 2 rows), docs is citations' list; tests 1-3: one row each
    assert len(steps) == 4 + 1 + 1 + 1
    assert all(s.vars["docs"] == ["p1", "p2", "p3"] for s in steps[:4])
    assert sorted((s.vars["x"], s.vars["context"]) for s in steps[:4]) == [
        ("one", "c1"), ("one", "c2"), ("two", "c1"), ("two", "c2")]
    assert steps[4].vars["docs"] == ["p1", "p2"] and steps[5].vars["context"] == ["c1", "c2"]
    assert steps[6].vars["ctx"] == ["c1", "c2"]
    from factcli.config.plan import expansion_warning

    # said once for the whole suite, naming the first test and var, and the vars of the others
    assert expansion_warning(suite.tests) == str(tmp_path / "c.yaml") + (
        ": tests[0]: its list vars `x` (2), `context` (2) make 4 rows by var expansion (promptfoo's rule); "
        "set options.disableVarExpansion: true to keep a list one value (docs/rag.md)")


def test_list_var_expansion_is_said_once_before_any_call(tmp_path, fake_openai):
    from factcli.run.runner import RunOptions, prepare

    fake_openai.clear_rules()
    fake_openai.add_rule(".", "ok", model="m")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Say {{word}} in {{lang}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
  - vars: {word: hello, lang: [French, German]}
  - vars: {word: [bye, thanks], lang: Dutch}
  - vars: {word: yes, lang: Dutch}
""")
    run = prepare(load_suite([cfg]), RunOptions())
    said = [w.replace(str(tmp_path) + "/", "") for w in run.warnings if "var expansion" in w]
    assert said == ["c.yaml: tests[0]: its `lang` var is a list of 2, which var expansion makes 2 rows, one item "
                    "each; so do 1 more test(s) (vars `word`) (promptfoo's rule); set options.disableVarExpansion: "
                    "true to keep a list one value"]
    assert fake_openai.request_count == 0  # said before any call
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table", "--no-cache"])
    assert " ".join(result.output.split()).count("which var expansion makes 2 rows") == 1, result.output
    assert fake_openai.request_count == 5


def test_assertion_templates_ref(tmp_path):
    cfg = write(tmp_path / "c.yaml", BASE + """
assertionTemplates:
  hasQ: {type: contains, value: Q, metric: m}
tests:
  - assert: [{$ref: "#/assertionTemplates/hasQ", weight: 2}]
  - assert: [{$ref: "#/assertionTemplates/nope"}]
""")
    with pytest.raises(ConfigError, match=r"tests\[1\].assert\[0\].\$ref: unknown assertion template 'nope'"):
        load_suite([cfg])
    empty = write(tmp_path / "e.yaml", BASE + """
assertionTemplates:
  bare: {metric: m}
tests:
  - assert: [{$ref: "#/assertionTemplates/bare"}]
""")
    with pytest.raises(ConfigError, match=r"tests\[0\].assert\[0\].type: an assertion needs a 'type' "
                       r"\(with its \$ref, assertionTemplates.bare\)"):
        load_suite([empty])


def test_multiple_config_files_merge(tmp_path):
    a = write(tmp_path / "a.yaml", "prompts: [one]\nproviders: [echo]\ntests: [{vars: {v: 1}}]\n")
    b = write(tmp_path / "sub/b.yaml", "prompts: [file://p.txt]\ntests: [{vars: {v: 2}}]\n")
    write(tmp_path / "sub/p.txt", "two")
    suite = load_suite([a, b])
    assert [p.raw for p in suite.prompts] == ["one", "two"]
    assert len(suite.tests) == 2
