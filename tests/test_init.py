"""`factcli init [DIR]`: a commented config, a CSV of tests and stand-ins that run offline as written;
the two printed lines switch to a real model and grader; no file is ever overwritten."""

import json

from typer.testing import CliRunner

from factcli.cli import app
from factcli.cli.init_cmd import REAL_GRADER, REAL_MODEL

runner = CliRunner()


def test_init_then_eval_runs_offline(fake_openai, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made = runner.invoke(app, ["init", "my-eval"])
    assert made.exit_code == 0, made.output
    assert made.output.splitlines()[-2:] == [f"  {REAL_MODEL}", f"  {REAL_GRADER}"]
    assert "cd my-eval && factcli eval" in made.output
    config = (tmp_path / "my-eval" / "promptfooconfig.yaml").read_text()
    assert config.startswith("# A factcli eval") and "tests: file://tests.csv" in config
    monkeypatch.chdir(tmp_path / "my-eval")
    result = runner.invoke(app, ["eval", "--no-progress-bar", "-o", "r.json"])
    assert result.exit_code == 100, result.output  # one answer is wrong on purpose
    doc = json.loads((tmp_path / "my-eval" / "r.json").read_text())
    assert doc["results"]["stats"]["successes"] == 2 and doc["results"]["stats"]["failures"] == 1
    spider = [r for r in doc["results"]["results"] if "spider" in r["vars"]["question"]][0]
    assert [c["reason"] for c in spider["gradingResult"]["componentResults"]][1] == "the answer does not say 'eight'"
    assert fake_openai.request_count == 0  # nothing left the machine


def test_the_two_printed_lines_switch_to_a_real_model_and_grader(fake_openai, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner.invoke(app, ["init"])
    path = tmp_path / "promptfooconfig.yaml"
    lines = path.read_text().splitlines()
    model = next(i for i, line in enumerate(lines) if line.startswith("providers:"))
    grader = next(i for i, line in enumerate(lines) if line.strip().startswith("options: {provider: file://"))
    lines[model] = REAL_MODEL
    lines[grader] = "  " + REAL_GRADER
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule(r"agrees with", '{"pass": true, "score": 1, "reason": "fine"}', model="gpt-4o")
    result = runner.invoke(app, ["eval", "--no-progress-bar", "--no-table"])
    assert result.exit_code in (0, 100), result.output
    models = sorted({r["json"]["model"] for r in fake_openai.requests})
    assert models == ["gpt-4o", "gpt-4o-mini"] and fake_openai.request_count == 6


def test_init_never_overwrites(tmp_path):
    (tmp_path / "tests.csv").write_text("mine\n")
    result = runner.invoke(app, ["init", str(tmp_path)])
    assert result.exit_code == 1
    assert f"error: {tmp_path / 'tests.csv'} already exists: factcli init never overwrites a file" in result.output
    assert (tmp_path / "tests.csv").read_text() == "mine\n" and not (tmp_path / "promptfooconfig.yaml").exists()
    file = tmp_path / "a-file"
    file.write_text("x")
    assert runner.invoke(app, ["init", str(file)]).exit_code == 1
