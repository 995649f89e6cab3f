"""Providers routed through litellm reach the fake server over real HTTP, with our retries and
error classification (litellm itself is called with num_retries=0)."""

import json
import subprocess
import sys

from typer.testing import CliRunner

from conftest import write
from factcli.cli import app

CONFIG = """
prompts: ["Capital of {{country}}?"]
providers:
  - id: litellm:openai/m
    label: via-litellm
    config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", apiKey: sk-litellm-test, temperature: 0}
tests:
  - vars: {country: France}
    assert: [{type: icontains, value: paris}]
  - vars: {country: Peru}
    assert: [{type: icontains, value: lima}]
"""


def run(tmp_path, *extra):
    cfg = write(tmp_path / "c.yaml", CONFIG)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache",
                                      *extra])
    doc = json.loads(out.read_text()) if out.exists() else None
    return result, doc


def test_litellm_provider_calls_the_server_and_records_usage(tmp_path, fake_openai):
    fake_openai.add_rule("France", "Paris.")
    fake_openai.add_rule("Peru", "Lima.")
    result, doc = run(tmp_path)
    assert result.exit_code == 0, result.output
    rows = doc["results"]["results"]
    assert [r["response"]["output"] for r in rows] == ["Paris.", "Lima."]
    assert all(r["response"]["tokenUsage"]["total"] > 0 for r in rows)
    sent = [r["json"] for r in fake_openai.requests]
    assert {b["model"] for b in sent} == {"m"} and all(b["temperature"] == 0 for b in sent)
    assert all(r["headers"].get("Authorization") == "Bearer sk-litellm-test" for r in fake_openai.requests)


def test_litellm_transient_errors_are_retried_by_factcli(tmp_path, fake_openai):
    fake_openai.add_rule("France", "Paris.")
    fake_openai.add_rule("Peru", "Lima.")
    fake_openai.enqueue_fault(status=429, retry_after="0")
    fake_openai.enqueue_fault(status=503)
    result, doc = run(tmp_path, "-j", "1")
    assert result.exit_code == 0, result.output
    assert sum(r["factcli"]["retries"] for r in doc["results"]["results"]) == 2
    assert len(fake_openai.requests) == 4  # litellm added no retries of its own


def test_litellm_auth_failure_stops_the_run(tmp_path, fake_openai):
    fake_openai.enqueue_fault(status=401)
    result, _ = run(tmp_path, "-j", "1")
    assert result.exit_code == 3, result.output
    assert len(fake_openai.requests) == 1


def test_help_and_echo_runs_do_not_import_litellm(tmp_path):
    cfg = write(tmp_path / "c.yaml", "prompts: ['hi {{x}}']\nproviders: [echo]\ntests: [{vars: {x: 1}}]\n")
    code = ("import sys\nfrom factcli.cli import main\nsys.argv = ['factcli', 'eval', '-c', sys.argv[1], "
            "'--no-progress-bar', '--no-write']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LITELLM' if 'litellm' in sys.modules else 'NO-LITELLM')")
    proc = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip().endswith("NO-LITELLM"), proc.stdout + proc.stderr
