"""A resumed run rewrites the -o files it was started with when they are given again (the store's
list of them is not trusted: run/recording/trust.py), and a provider's apiKeyEnvar (a variable's
name, not a secret) survives in the stored config so that the resumed run finds its key again."""

import json

from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
N = 12


def _config() -> str:
    tests = "".join(f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q'}}]\n" for i in range(N))
    return ('prompts: ["Q: <<n>>"]\nproviders: [{id: "openai:chat:gpt-4o-mini", config: {apiBaseUrl: '
            '"{{ env.FAKE_OPENAI_URL }}", max_tokens: 20, apiKeyEnvar: MY_GATEWAY_KEY}}]\n'
            f"tests:\n{tests}")


def test_resume_rewrites_the_original_outputs_and_keeps_the_key_variable_name(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_GATEWAY_KEY", "gw-secret-value-123")
    cfg = write(tmp_path / "c.yaml", _config())
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    first = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "-o", str(csv), "--max-cost", "0.00002",
                                "-j", "2", "--no-progress-bar", "--no-table"])
    assert first.exit_code == 130, first.output
    done = len(json.loads(out.read_text())["results"]["results"])
    assert 0 < done < N

    later = tmp_path / "later"
    later.mkdir()
    monkeypatch.chdir(later)  # the stored paths are absolute: resuming from elsewhere writes the same files
    # the store's -o paths are written when given again (without them, or --trust-stored-config, a resume
    # leaves them alone: tests/test_stored_trust.py)
    resumed = runner.invoke(app, ["eval", "--resume", "latest", "--max-cost", "1", "--no-progress-bar", "--no-table",
                                  "-o", str(out), "-o", str(csv)])
    assert resumed.exit_code == 0, resumed.output
    doc = json.loads(out.read_text())
    assert len(doc["results"]["results"]) == N and doc["factcli"]["status"] == "complete"
    assert len(csv.read_text().strip().splitlines()) == N + 1
    assert f"Wrote {out}" in " ".join(resumed.output.split())
    # every call carried the key read from the named variable; the name is stored, the value never
    assert {r["headers"].get("Authorization") for r in fake_openai.requests} == {"Bearer gw-secret-value-123"}
    assert doc["config"]["providers"][0]["config"]["apiKeyEnvar"] == "MY_GATEWAY_KEY"
    assert "gw-secret-value-123" not in out.read_text()


def test_a_grader_rejecting_its_key_mid_run_keeps_the_finished_rows(fake_openai, tmp_path, monkeypatch):
    """Two rows finish (model call, then grader call each); the third row's grader answers 401: the run
    stops with exit 3, and the two finished rows are in the store and in the -o file; --retry-errors
    (or --resume) later finishes the run without calling the models of the kept rows again."""
    monkeypatch.setenv("MY_GATEWAY_KEY", "gw-key")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-grader")
    tests = "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(4))
    grader = '{id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'
    cfg = write(tmp_path / "c.yaml", _config().split("tests:")[0]
                + f"defaultTest:\n  options: {{provider: {grader}}}\n  assert: [{{type: llm-rubric, value: 'a number'}}]\n"
                + f"tests:\n{tests}")
    verdict = '{"pass": true, "score": 1, "reason": "a number"}'
    fake_openai.enqueue("1", verdict, "2", verdict, "3")
    fake_openai.enqueue_fault(status=401, times=20)
    out = tmp_path / "r.json"
    first = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "-j", "1", "--no-progress-bar", "--no-cache"])
    assert first.exit_code == 3, first.output
    assert "401" in first.output
    doc = json.loads(out.read_text())
    kept = [r for r in doc["results"]["results"] if r["success"]]
    assert len(kept) == 2 and doc["factcli"]["status"] == "aborted"
    fake_openai.reset()
    fake_openai.add_rule("a number", verdict)
    again = runner.invoke(app, ["eval", "--resume", "latest", "--no-progress-bar", "--no-table", "-o", str(out)])
    assert again.exit_code == 0, again.output
    assert len(json.loads(out.read_text())["results"]["results"]) == 4
    models = [r for r in fake_openai.requests if r["json"]["model"] != "judge"]
    assert len(models) == 2  # the kept rows' models were not called again
