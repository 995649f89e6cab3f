"""Preflight: every mistake that can be found without spending money is found before the first call,
all of them at once, with exit 1 and nothing sent to the server; and `--dry-run`'s estimate."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.report.figures import money

runner = CliRunner()


def _provider(model: str, extra: str = "") -> str:
    return f'{{id: "openai:chat:{model}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"{extra}}}}}'


def _config(providers: str, asserts: str = "[{type: contains, value: a}]", extra: str = "") -> str:
    return (f'prompts: ["Q: <<n>>"]\nproviders: [{providers}]\n{extra}'
            f"tests:\n  - description: first\n    vars: {{n: '1'}}\n    assert: {asserts}\n"
            f"  - description: second\n    vars: {{n: '2'}}\n    assert: {asserts}\n")


def _eval(tmp_path, text: str, *args: str):
    cfg = write(tmp_path / "c.yaml", text)
    return runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", *args])


@pytest.fixture
def server(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return fake_openai


def _refused(result, server, *needles: str) -> None:
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "found before any call" in text and "nothing was sent" in text
    for needle in needles:
        assert needle in text, text
    assert server.request_count == 0


def test_a_provider_id_typo_is_caught_with_a_suggestion(server, tmp_path):
    result = _eval(tmp_path, _config('"opnai:gpt-5-mini"'))
    _refused(result, server, "c.yaml: providers[0] opnai:gpt-5-mini: unknown provider 'opnai'",
             "did you mean openai:gpt-5-mini?")


def test_a_missing_key_names_the_provider_and_the_variable(server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = _eval(tmp_path, _config('"openai:gpt-4o-mini", "anthropic:messages:claude-3-5-haiku-20241022"'))
    _refused(result, server, "providers[0] openai:gpt-4o-mini: no API key: set OPENAI_API_KEY",
             "providers[1] anthropic:messages:claude-3-5-haiku-20241022: no API key: set ANTHROPIC_API_KEY")


def test_an_api_key_envar_that_is_not_set_is_named(server, tmp_path, monkeypatch):
    monkeypatch.delenv("MY_GATEWAY_KEY", raising=False)
    result = _eval(tmp_path, _config(_provider("gpt-4o-mini", ", apiKeyEnvar: MY_GATEWAY_KEY")))
    _refused(result, server, "apiKeyEnvar names MY_GATEWAY_KEY, which is not set")


def test_a_graders_missing_key_is_caught_before_the_models_are_called(server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    text = _config(_provider("gpt-4o-mini"), "[{type: llm-rubric, value: is right}]",
                   extra="defaultTest: {options: {provider: openai:gpt-4o}}\n")
    result = _eval(tmp_path, text)
    _refused(result, server, "grader openai:gpt-4o: no API key: set OPENAI_API_KEY")


def test_bad_outputs_are_all_named(server, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    (tmp_path / "blocker").write_text("a file, not a folder")
    # a folder that does not exist yet is made (tests/test_user_configs.py); one under a file cannot be
    # (/proc, /sys and the rest: tests/test_output_path.py)
    result = _eval(tmp_path, _config(_provider("gpt-4o-mini")), "-o", str(tmp_path / "blocker" / "sub" / "r.json"),
                   "-o", str(tmp_path / "r.docx"), "-o", str(locked / "r.json"))
    locked.chmod(0o700)
    needles = [f"{tmp_path / 'blocker'} is a file, not a folder", "r.docx: unknown format"]
    import os

    if os.geteuid() != 0:  # root writes anywhere
        needles.append(f"-o {locked / 'r.json'}: cannot create {locked / 'r.json'}: Permission denied")
    _refused(result, server, "problems found", *needles)


def test_a_missing_knowledge_source_is_caught(server, tmp_path, monkeypatch):
    monkeypatch.delenv("FACTSCORE_KNOWLEDGE", raising=False)
    text = _config(_provider("gpt-4o-mini"), '[{type: factscore, config: {knowledge: "${FACTSCORE_KNOWLEDGE}"}}]',
                   extra=f"defaultTest: {{options: {{provider: {_provider('gpt-4o-mini')}}}}}\n")
    _refused(_eval(tmp_path, text), server, "FACTSCORE_KNOWLEDGE, which is not set")
    text = text.replace("${FACTSCORE_KNOWLEDGE}", str(tmp_path / "no-such-wiki.jsonl"))
    _refused(_eval(tmp_path, text), server, "factscore:", "no-such-wiki.jsonl")


def test_an_llm_rubric_without_a_rubric_is_caught(server, tmp_path):
    grader = f"defaultTest: {{options: {{provider: {_provider('judge')}}}}}\n"
    text = _config(_provider("gpt-4o-mini"), "[{type: llm-rubric}]", extra=grader)
    _refused(_eval(tmp_path, text), server,
             "c.yaml: tests[0] and 1 more: llm-rubric has no value: the grader would score against an empty rubric")
    # a rubricPrompt that needs no rubric (it reads the test's vars) is fine
    server.add_rule(".*", '{"pass": true, "score": 1, "reason": "ok"}')
    prompt = 'rubricPrompt: "Is {{output}} the number {{n}}? Reply as JSON."'
    text = _config(_provider("gpt-4o-mini"), "[{type: llm-rubric}]",
                   extra=f"defaultTest: {{options: {{provider: {_provider('judge')}, {prompt}}}}}\n")
    result = _eval(tmp_path, text)
    assert result.exit_code == 0, result.output


def test_a_python_provider_that_does_not_import_is_caught(server, tmp_path):
    write(tmp_path / "broken.py", "import no_such_module_here\n\ndef call_api(prompt, options, context):\n    return {}\n")
    write(tmp_path / "nofunc.py", "x = 1\n")
    result = _eval(tmp_path, _config('"file://broken.py", "file://nofunc.py"'))
    _refused(result, server, "broken.py does not import: ModuleNotFoundError", "nofunc.py has no function 'call_api'")


def test_a_filter_that_matches_nothing_is_an_error(server, tmp_path):
    result = _eval(tmp_path, _config(_provider("gpt-4o-mini")), "--filter-pattern", "^third")
    _refused(result, server, "--filter-pattern ^third: no test is left to run (of 2)")


def test_a_local_server_needs_no_key(server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    server.add_rule(".*", "a")
    result = _eval(tmp_path, _config(_provider("my-local-model")))
    assert result.exit_code == 0, result.output
    assert server.request_count == 2


def test_dry_run_estimates_without_calling(server, tmp_path):
    """gpt-4o-mini at $0.15/M in, $0.60/M out; "Q: 1" is 4 o200k tokens, +3 for the message, +3 for
    the reply's primer: 10 input tokens a call; replies capped at max_tokens 100."""
    text = _config(_provider("gpt-4o-mini", ", max_tokens: 100"), "[{type: llm-rubric, value: is right}]",
                   extra=f"defaultTest: {{options: {{provider: {_provider('gpt-4o-mini', ', max_tokens: 50')}}}}}\n")
    result = _eval(tmp_path, text, "--dry-run")
    assert result.exit_code == 0, result.output
    assert server.request_count == 0
    out = " ".join(result.output.split())
    low, high = 2 * 10 * 0.15e-6, 2 * (10 * 0.15e-6 + 100 * 0.60e-6)
    assert (f"model openai:chat:gpt-4o-mini: 2 calls; 20 input tokens, replies up to 100 tokens each; "
            f"cost {money(low)} – {money(high)}") in out
    # the grader: 2 calls, a 600-token rubric; up to the model's 100-token reply more in, 50 out
    g_low, g_high = 2 * 600 * 0.15e-6, 2 * (700 * 0.15e-6 + 50 * 0.60e-6)
    assert (f"grader openai:chat:gpt-4o-mini: 2 calls; ~1,200 rubric tokens, replies up to 50 tokens each; "
            f"cost {money(g_low)} – {money(g_high)}") in out
    assert f"Estimated cost: {money(low + g_low)} – {money(high + g_high)}" in out
    assert money(low) == "$0.0000030"  # two significant digits, never $0.0000
    assert json.loads(runner.invoke(app, ["list", "--json"]).output) == []  # nothing stored


def test_dry_run_counts_what_the_cache_holds(server, tmp_path):
    server.add_rule(".*", "a")
    cfg_path = write(tmp_path / "c.yaml", _config(_provider("gpt-4o-mini")))
    assert runner.invoke(app, ["eval", "-c", str(cfg_path), "--no-progress-bar"]).exit_code == 0
    result = runner.invoke(app, ["eval", "-c", str(cfg_path), "--no-progress-bar", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "2 calls, 2 already cached; 0 input tokens" in " ".join(result.output.split())


def test_near_misses_of_special_csv_columns_and_provider_parameters_are_errors(server, tmp_path):
    write(tmp_path / "t.csv", "n,__expect\n1,Q\n")
    cfg = write(tmp_path / "c.yaml", f'prompts: ["Q: <<n>>"]\nproviders: [{_provider("gpt-4o-mini")}]\n'
                                     "tests: file://t.csv\n")
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar"])
    assert result.exit_code == 1 and 'column "__expect" is not a special column; did you mean "__expected"?' in \
        " ".join(result.output.split())
    result = _eval(tmp_path, _config(_provider("gpt-4o-mini", ", temprature: 0.2")))
    assert result.exit_code == 1
    assert "providers[0].config.temprature: unknown parameter 'temprature'; did you mean 'temperature'?" in \
        " ".join(result.output.split())
    result = _eval(tmp_path, _config(_provider("gpt-4o-mini", ", my_gateway_flag: 1")))  # passes through
    assert result.exit_code in (0, 100), result.output
    assert server.request_count == 2


def test_a_python_provider_returning_a_bare_value_is_an_error_row(server, tmp_path):
    write(tmp_path / "p.py", "def call_api(prompt, options, context):\n    return 'just text'\n")
    cfg = write(tmp_path / "c.yaml", _config('"file://p.py"'))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar"])
    assert result.exit_code == 100, result.output
    errors = {r["error"] for r in json.loads(out.read_text())["results"]["results"]}
    assert len(errors) == 1 and "call_api must return a dict such as {\"output\": ...}" in errors.pop()
