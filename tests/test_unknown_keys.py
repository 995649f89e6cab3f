"""Unknown keys (contract §4): a near miss of a known key is an error with "did you mean"; any other
unknown key is one warning naming the file and the key path, printed before any call, and the run
goes on; `--strict` refuses them with nothing sent. Test options that are not test options are
request parameters (promptfoo-features B §5.2)."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.loader import load_suite

runner = CliRunner()

PROVIDER = 'id: "openai:chat:m1"\n    config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}'


@pytest.fixture
def server(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return fake_openai


def _config(*, top: str = "", provider: str = "", default: str = "", test: str = "",
            assertion: str = "") -> str:
    """One test, one OpenAI-compatible provider; each argument adds YAML lines at that level."""
    text = 'prompts: ["Q: {{n}}"]\nproviders:\n  - ' + PROVIDER + "\n"
    text += "".join(f"    {line}\n" for line in provider.splitlines())
    text += top
    if default:
        text += "defaultTest:\n" + "".join(f"  {line}\n" for line in default.splitlines())
    text += "tests:\n  - vars: {n: '1'}\n" + "".join(f"    {line}\n" for line in test.splitlines())
    text += "    assert:\n      - type: contains\n        value: Q\n"
    text += "".join(f"        {line}\n" for line in assertion.splitlines())
    return text


def _eval(tmp_path, text: str, *args: str, name: str = "c.yaml"):
    cfg = write(tmp_path / name, text)
    return runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--no-table", *args])


def _warnings(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("warning:")]


# ---------------------------------------------------------------- each level: a warning, the run goes on

@pytest.mark.parametrize("parts, line", [
    ({"top": "outputs: [{type: json}]\n"}, "c.yaml: outputs: unknown key 'outputs' (ignored)"),
    ({"top": "topLevelBogus: 1\n"}, "c.yaml: topLevelBogus: unknown key 'topLevelBogus' (ignored)"),
    ({"default": "bogusDefaultTestKey: 1"},
     "c.yaml: defaultTest.bogusDefaultTestKey: unknown key 'bogusDefaultTestKey' (ignored)"),
    ({"test": "unknownTestKey: 1"}, "c.yaml: tests[0].unknownTestKey: unknown key 'unknownTestKey' (ignored)"),
    ({"assertion": "bogusAssertKey: 1"},
     "c.yaml: tests[0].assert[0].bogusAssertKey: unknown key 'bogusAssertKey' (ignored)"),
    ({"provider": "bogusProviderKey: 1"},
     "c.yaml: providers[0].bogusProviderKey: unknown key 'bogusProviderKey' (ignored)"),
    ({"top": "evaluateOptions: {bogusEvalOption: 1}\n"},
     "c.yaml: evaluateOptions.bogusEvalOption: unknown key 'bogusEvalOption' (ignored)"),
    ({"default": "options: {includeMetrics: true}"},
     "c.yaml: defaultTest.options.includeMetrics: 'includeMetrics' is neither a test option nor a request "
     "parameter (ignored)"),
    ({"test": "options: {bogusOption: 1}"},
     "c.yaml: tests[0].options.bogusOption: 'bogusOption' is neither a test option nor a request parameter "
     "(ignored)"),
    ({"test": "options: {apiBaseUrl: 'http://127.0.0.1:9/v1'}"},
     "c.yaml: tests[0].options.apiBaseUrl: 'apiBaseUrl' is a provider setting, not a request parameter: set it "
     "in the provider's config (ignored here)"),
    ({"top": "scenarios: [{config: [{vars: {n: '2'}}], tests: [{vars: {}}], bogusScenarioKey: 1}]\n"},
     "c.yaml: scenarios[0].bogusScenarioKey: unknown key 'bogusScenarioKey' (ignored)"),
])
def test_an_unknown_key_is_one_warning_and_the_run_goes_on(server, tmp_path, parts, line):
    result = _eval(tmp_path, _config(**parts))
    assert result.exit_code == 0, result.output
    assert _warnings(result.output) == [f"warning: {tmp_path / line}"], result.output
    assert result.output.splitlines()[0].startswith("warning:")  # before the run prints anything
    assert server.request_count >= 1


def test_a_provider_config_key_the_model_does_not_send_is_a_warning_naming_the_provider(server, tmp_path):
    text = _config().replace('{apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}',
                             '{apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", bogusConfigKey: 1, temperature: 0.5}')
    result = _eval(tmp_path, text)
    assert result.exit_code == 0, result.output
    assert _warnings(result.output) == [f"warning: {tmp_path / 'c.yaml'}: providers[0].config.bogusConfigKey: "
                                        "'bogusConfigKey' is not a parameter of openai:chat:m1 (ignored)"]
    body = server.requests[-1]["json"]
    assert body["temperature"] == 0.5 and "bogusConfigKey" not in body


def test_a_script_providers_config_goes_to_the_script_unwarned(tmp_path):
    write(tmp_path / "p.py", "def call_api(prompt, options, context):\n"
                             "    return {'output': str(options['config']['anything'])}\n")
    text = ('prompts: ["x"]\nproviders:\n  - id: file://p.py\n    config: {anything: 7}\n'
            "tests:\n  - assert: [{type: equals, value: '7'}]\n")
    result = _eval(tmp_path, text)
    assert result.exit_code == 0, result.output
    assert _warnings(result.output) == []


def test_the_same_key_in_many_tests_is_one_line(server, tmp_path):
    tests = "".join(f"  - vars: {{n: '{i}'}}\n    stray: {i}\n" for i in range(5))
    text = f'prompts: ["Q: {{{{n}}}}"]\nproviders:\n  - {PROVIDER}\ntests:\n{tests}'
    result = _eval(tmp_path, text)
    assert result.exit_code == 0, result.output
    assert _warnings(result.output) == [f"warning: {tmp_path / 'c.yaml'}: tests[0].stray (and 4 more like it): "
                                        "unknown key 'stray' (ignored)"]


def test_warnings_print_with_dry_run_and_before_the_preflight(server, tmp_path, monkeypatch):
    text = _config(top="outputs: [{type: json}]\n")
    result = _eval(tmp_path, text, "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"warning: {tmp_path / 'c.yaml'}: outputs: unknown key 'outputs' (ignored)"
    assert "Dry run" in result.output and server.request_count == 0
    # a preflight problem (no API key) still comes after the warning
    monkeypatch.delenv("OPENAI_API_KEY")
    result = _eval(tmp_path, text.replace(PROVIDER, 'id: "openai:chat:m1"'))
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("warning:") and "outputs" in lines[0]
    assert lines[1].startswith("error:") and "no API key" in lines[1]
    assert server.request_count == 0


def test_the_run_keeps_the_warnings_and_prints_each_once(server, tmp_path):
    out = tmp_path / "r.html"
    result = _eval(tmp_path, _config(top="outputs: [{type: json}]\n"), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert len(_warnings(result.output)) == 1, result.output  # not again when the run starts
    assert "outputs: unknown key &#x27;outputs&#x27; (ignored)" in out.read_text()  # the report shows it


def test_several_files_name_their_own_file(server, tmp_path):
    write(tmp_path / "b.yaml", "tests:\n  - vars: {n: '2'}\n    strayInB: 1\n")
    a = write(tmp_path / "a.yaml", f'prompts: ["Q: {{{{n}}}}"]\nproviders:\n  - {PROVIDER}\nstrayInA: 1\n')
    result = runner.invoke(app, ["eval", "-c", str(a), "-c", str(tmp_path / "b.yaml"), "--no-progress-bar",
                                 "--no-table"])
    assert result.exit_code == 0, result.output
    assert _warnings(result.output) == [
        f"warning: {a}: strayInA: unknown key 'strayInA' (ignored)",
        f"warning: {tmp_path / 'b.yaml'}: tests[0].strayInB: unknown key 'strayInB' (ignored)"]


# ---------------------------------------------------------------- --strict

def test_strict_refuses_every_unknown_key_and_sends_nothing(server, tmp_path):
    text = _config(top="outputs: [{type: json}]\n", default="options: {includeMetrics: true}",
                   assertion="bogusAssertKey: 1")
    result = _eval(tmp_path, text, "--strict")
    assert result.exit_code == 1, result.output
    f = tmp_path / "c.yaml"
    assert result.output.splitlines() == [
        "error: 3 unknown or ignored keys (--strict; nothing was sent):",
        f"  - {f}: outputs: unknown key 'outputs'",
        f"  - {f}: defaultTest.options.includeMetrics: 'includeMetrics' is neither a test option nor a request "
        "parameter",
        f"  - {f}: tests[0].assert[0].bogusAssertKey: unknown key 'bogusAssertKey'",
    ]
    assert server.request_count == 0


def test_strict_with_one_key_is_one_line_and_a_clean_config_runs(server, tmp_path):
    result = _eval(tmp_path, _config(top="outputs: [{type: json}]\n"), "--strict")
    assert result.exit_code == 1
    assert result.output.strip() == (f"error: {tmp_path / 'c.yaml'}: outputs: unknown key 'outputs' "
                                     "(--strict; nothing was sent)")
    assert server.request_count == 0
    result = _eval(tmp_path, _config(), "--strict")
    assert result.exit_code == 0, result.output
    assert server.request_count == 1


# ---------------------------------------------------------------- near misses are errors

@pytest.mark.parametrize("parts, path, suggestion", [
    ({"top": "promts: [x]\n"}, "promts", "prompts"),
    ({"top": "defaultTests: {}\n"}, "defaultTests", "defaultTest"),
    ({"default": "asert: []"}, "defaultTest.asert", "assert"),
    ({"default": "options: {providers: openai:gpt-5}"}, "defaultTest.options.providers", "provider"),
    ({"test": "threshhold: 0.5"}, "tests[0].threshhold", "threshold"),
    ({"test": "Vars: {}"}, "tests[0].Vars", "vars"),
    ({"assertion": "metirc: m"}, "tests[0].assert[0].metirc", "metric"),
    ({"provider": "lable: x"}, "providers[0].lable", "label"),
    ({"top": "evaluateOptions: {maxConcurency: 2}\n"}, "evaluateOptions.maxConcurency", "maxConcurrency"),
    ({"test": "options: {temprature: 0}"}, "tests[0].options.temprature", "temperature"),
    ({"test": "options: {max_token: 5}"}, "tests[0].options.max_token", "max_tokens"),
    ({"test": "options: {maxTokens: 5}"}, "tests[0].options.maxTokens", "max_tokens"),
    ({"test": "options: {prefx: a}"}, "tests[0].options.prefx", "prefix"),
    ({"test": "options: {apiBaseURL: x}"}, "tests[0].options.apiBaseURL", "apiBaseUrl"),
])
def test_a_near_miss_is_an_error_with_did_you_mean(server, tmp_path, parts, path, suggestion):
    result = _eval(tmp_path, _config(**parts))
    assert result.exit_code == 1, result.output
    assert result.output.strip().startswith(f"error: {tmp_path / 'c.yaml'}: {path}: unknown key"), result.output
    assert f"(did you mean '{suggestion}'?)" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert server.request_count == 0


def test_a_provider_config_near_miss_is_an_error(server, tmp_path):
    text = _config().replace('"{{ env.FAKE_OPENAI_URL }}"}', '"{{ env.FAKE_OPENAI_URL }}", apiBaseURL: x}')
    result = _eval(tmp_path, text)
    assert result.exit_code == 1
    assert "providers[0].config.apiBaseURL: unknown parameter 'apiBaseURL'; did you mean 'apiBaseUrl'?" in result.output
    assert server.request_count == 0


@pytest.mark.parametrize("parts, path", [
    ({"test": "provider: echo"}, "tests[0].provider"),
    ({"test": "prompts: [x]"}, "tests[0].prompts"),
    ({"test": "options: {repeat: 2}"}, "tests[0].options.repeat"),
    ({"top": "evaluateOptions: {filterRange: '0:1'}\n"}, "evaluateOptions.filterRange"),
    ({"top": "redteam: {}\n"}, "redteam"),
    ({"provider": "inputs: {}"}, "providers[0].inputs"),
])
def test_promptfoo_keys_factcli_does_not_run_are_errors(server, tmp_path, parts, path):
    result = _eval(tmp_path, _config(**parts))
    assert result.exit_code == 1, result.output
    assert f"{path}: '{path.split('.')[-1]}' is not supported by factcli" in result.output
    assert server.request_count == 0


# ---------------------------------------------------------------- request parameters from test options

def test_options_that_are_not_test_options_are_request_parameters(tmp_path):
    cfg = write(tmp_path / "c.yaml", _config(
        default="options: {max_tokens: 11, temperature: 0.1, includeMetrics: true, prefix: 'P '}",
        test="options: {temperature: 0.33, seed: 42, response_format: {type: json_object}}"))
    suite = load_suite([cfg])
    (test,) = suite.tests
    assert test.request_params == {"max_tokens": 11, "temperature": 0.33, "seed": 42,
                                   "response_format": {"type": "json_object"}}
    assert test.options["prefix"] == "P "  # a test option, not a parameter
    assert suite.unknown_keys == [f"{cfg}: defaultTest.options.includeMetrics: 'includeMetrics' is neither a test "
                                  "option nor a request parameter (ignored)"]


def test_request_parameters_reach_the_request_over_the_provider_config(server, tmp_path):
    text = _config(default="options: {max_tokens: 11, includeMetrics: true}",
                   test="options: {temperature: 0.33, seed: 42}")
    text = text.replace('"{{ env.FAKE_OPENAI_URL }}"}', '"{{ env.FAKE_OPENAI_URL }}", temperature: 0.9}')
    text += "  - vars: {n: '2'}\n"  # a second test: the provider's own temperature, defaultTest's max_tokens
    result = _eval(tmp_path, text)
    assert result.exit_code == 0, result.output
    bodies = sorted((r["json"] for r in server.requests), key=lambda b: json.dumps(b["messages"]))
    assert [(b["temperature"], b.get("seed"), b["max_tokens"]) for b in bodies] == [(0.33, 42, 11), (0.9, None, 11)]
    assert all("includeMetrics" not in b for b in bodies)
