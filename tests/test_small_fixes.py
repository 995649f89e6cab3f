"""The small ones: a weight-0 assertion's own verdict, a pasteable next-page hint, a misspelled model
warned of with a did-you-mean, a YAML syntax error with its lines, the self-preference warning once
per run, and factual-correctness's per-column line."""

import json
import shlex
import warnings

from conftest import ROOT, write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()


def cli(*args, **kw):
    return runner.invoke(app, [*map(str, args)], **kw)


WEIGHT_ZERO = """
prompts: ["{{q}}"]
providers: [echo]
tests:
  - vars: {q: hello}
    assert:
      - {type: contains, value: hello}
      - {type: contains, value: zzz, weight: 0}
"""


def test_a_weight_zero_assertion_that_failed_shows_fail_and_why_it_does_not_count(tmp_path):
    warnings.filterwarnings("ignore", message=".*httpx.*")
    from starlette.testclient import TestClient

    from factcli.settings import home
    from factcli.web.app import create_app

    assert cli("eval", "-c", write(tmp_path / "c.yaml", WEIGHT_ZERO), "--no-progress-bar").exit_code == 0
    shown = cli("show", "latest", "0").output
    lines = [line.strip() for line in shown.splitlines()]
    assert "PASS contains 1.000 value: hello" in lines
    assert "FAIL contains 0.000 (weight 0: does not affect the test) value: zzz" in lines
    run_id = json.loads(cli("list", "--json").output)[0]["id"]
    html = TestClient(create_app(home() / "factcli.db", token="t")).get(f"/runs/{run_id}/cell/0/0/0").text
    assert '<span class="bad">FAIL</span> <code>contains</code> <span class="dim">score 0.000 · weight 0: does not ' \
           'affect the test' in html


def test_the_next_page_hint_can_be_pasted(tmp_path):
    tests = "".join(f"  - vars: {{q: 'row {i}'}}\n    assert: [{{type: contains, value: zzz}}]\n" for i in range(3))
    cli("eval", "-c", write(tmp_path / "c.yaml", f"prompts: ['{{{{q}}}}']\nproviders: [echo]\ntests:\n{tests}"),
        "--no-progress-bar")
    out = cli("view", "--failures", "--filter", "row ", "--limit", "1", env={"COLUMNS": "300"}).output
    hint = next(line for line in out.splitlines() if line.startswith("Next page:"))
    args = shlex.split(hint.removeprefix("Next page: "))
    assert args[:2] == ["factcli", "view"] and "…" not in hint
    second = cli(*args[1:], env={"COLUMNS": "300"})
    assert second.exit_code == 0 and "row 1" in second.output and "row 0" not in second.output


def test_a_misspelled_model_is_a_warning_with_did_you_mean_in_the_dry_run_and_the_run(fake_openai, remote_prices,
                                                                                        tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["{{q}}"]
providers: [{id: "openai:gpt-4o-mni", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests: [{vars: {q: hi}}]
""")
    warning = "warning: providers[0] openai:gpt-4o-mni: litellm's model list has no 'gpt-4o-mni' (did you mean " \
              "'gpt-4o-mini'?)"
    dry = cli("eval", "-c", cfg, "--dry-run")
    assert dry.exit_code == 0 and warning in " ".join(dry.output.split()) and fake_openai.request_count == 0
    run = cli("eval", "-c", cfg, "--no-progress-bar")
    assert run.exit_code == 0 and warning in " ".join(run.output.split()) and fake_openai.request_count == 1


def test_a_yaml_syntax_error_shows_the_lines_it_points_at(tmp_path):
    cfg = write(tmp_path / "c.yaml", "prompts: ['{{q}}']\nproviders: [echo]\ntests:\n  - vars: {q: [1, 2}\n")
    result = cli("eval", "-c", cfg)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == f"error: {cfg}: invalid YAML: line 4, column 20: did not find expected ',' or ']'"
    assert lines[1:] == ["    2 | providers: [echo]", "    3 | tests:", "  > 4 |   - vars: {q: [1, 2}",
                         "      |                    ^"]


def test_the_self_preference_warning_once_per_run(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule("Rubric", '{"pass": true, "score": 1, "reason": "ok"}')
    url = '{apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}'
    tests = "".join(f"  - vars: {{q: 'q{i}'}}\n    assert: [{{type: llm-rubric, value: fine}}, "
                    f"{{type: llm-rubric, value: good}}]\n" for i in range(3))
    cfg = write(tmp_path / "c.yaml", f"prompts: ['{{{{q}}}}']\nproviders: [{{id: 'openai:chat:gpt-4o-mini', config: "
                                     f"{url}}}]\ndefaultTest: {{options: {{provider: {{id: 'openai:chat:gpt-4o', "
                                     f"config: {url}}}}}}}\ntests:\n{tests}")
    result = cli("eval", "-c", cfg, "--no-progress-bar")
    assert result.exit_code == 0, result.output
    assert " ".join(result.output.split()).count("self-preference bias") == 1
    assert "self-preference" not in cli("view").output


def test_factual_correctness_prints_its_per_column_line(tmp_path):
    out = cli("eval", "-c", ROOT / "examples" / "factual-correctness" / "promptfooconfig.yaml", "--no-progress-bar",
              "--no-table", env={"COLUMNS": "200"}).output
    lines = [line for line in out.splitlines() if "factual-correctness F" in line]
    assert len(lines) == 2, out
    assert lines[0].endswith("factual-correctness F 0.500 (precision 0.500, recall 0.500; N=2)")
    assert lines[1].endswith("factual-correctness F 1.000 (precision 1.000, recall 1.000; N=2)")
    assert "factual-correctness F" in cli("view", env={"COLUMNS": "200"}).output
