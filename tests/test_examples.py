"""Every example in examples/ loads, and those that need a model run against the fake server."""

import json

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.loader import load_suite

EXAMPLES = sorted((ROOT / "examples").glob("*/promptfooconfig.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_loads(path):
    suite = load_suite([path])
    assert suite.prompts and suite.providers and suite.tests


def test_openai_example_runs_against_an_openai_compatible_server(fake_openai, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    fake_openai.add_rule("California", "Sacramento.")
    fake_openai.add_rule("New York", "Albany.")
    fake_openai.add_rule("Australia", "Sydney is the capital.")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(ROOT / "examples/openai/promptfooconfig.yaml"),
                                      "-o", str(out), "--no-progress-bar"])
    assert result.exit_code == 100, result.output
    doc = json.loads(out.read_text())
    assert [p["metrics"]["testPassCount"] for p in doc["results"]["prompts"]] == [2, 2]
    assert {r["json"]["model"] for r in fake_openai.requests} == {"gpt-5-mini", "gpt-5"}
    assert fake_openai.requests[0]["json"].get("max_completion_tokens") == 200


def test_ollama_example_runs_against_a_local_server(fake_openai, monkeypatch, tmp_path):
    """The vLLM column speaks OpenAI's protocol; point both at the fake server."""
    import yaml

    data = yaml.safe_load((ROOT / "examples/ollama/promptfooconfig.yaml").read_text())
    data["providers"] = [p for p in data["providers"] if not p["id"].startswith("ollama:")]
    data["providers"][0]["config"]["apiBaseUrl"] = fake_openai.url
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    fake_openai.add_rule("California", "It is Sacramento.")
    fake_openai.add_rule("Canada", "Toronto.")
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar"])
    assert result.exit_code == 100
    assert "[PASS]" in result.output and "[FAIL]" in result.output


def test_factual_correctness_example_reproduces_the_seed_offline():
    import factcli

    run = factcli.evaluate(str(ROOT / "examples/factual-correctness/promptfooconfig.yaml"))
    rows = {r.step.provider.display: r for r in run.rows}
    f1_bad, precision_bad = rows["wrong-year"].grading.component_results
    assert (f1_bad.score, f1_bad.passed) == (0.5, False)
    assert f1_bad.metadata["judges"][0]["precision"] == 0.5 and f1_bad.metadata["judges"][0]["recall"] == 0.5
    assert precision_bad.score == 0.5
    assert rows["right"].grading.component_results[0].score == 1.0 and rows["right"].success
