"""Vars checked before any call: a near miss of a defined var is an error (did-you-mean) before the
fake server sees a request; another unknown name is a warning before the first call and in --dry-run;
an assertion whose value renders empty names the var."""

import json

from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()

CONFIG = """
prompts: ["{prompt}"]
providers: [{{id: "openai:chat:m", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
tests:
  - vars: {{question: capital of France, answer: Paris}}
    assert: [{{type: icontains, value: "{value}"}}]
  - vars: {{question: capital of Japan, answer: Tokyo}}
"""


def _eval(tmp_path, prompt="Q: {{question}}", value="<<answer>>", *extra):
    cfg = write(tmp_path / "c.yaml", CONFIG.format(prompt=prompt, value=value))
    return runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table", *extra])


def test_a_near_miss_in_the_prompt_is_an_error_before_any_call(fake_openai, tmp_path):
    result = _eval(tmp_path, prompt="Q: {{questoin}}")
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "prompts[0] (Q: {{questoin}}) uses the var 'questoin', which no test defines (did you mean " \
           "'question'?) (found before any call; nothing was sent)" in out
    assert fake_openai.request_count == 0
    dry = _eval(tmp_path, "Q: {{questoin}}", "<<answer>>", "--dry-run")
    assert dry.exit_code == 1 and "did you mean 'question'?" in dry.output


def test_a_near_miss_in_an_assertion_value_is_an_error_before_any_call(fake_openai, tmp_path):
    result = _eval(tmp_path, value="<<answr>>")
    assert result.exit_code == 1
    assert "tests[0].assert[0] uses the var '<<answr>>', which no test defines (did you mean '<<answer>>'?)" in \
        " ".join(result.output.split())
    assert fake_openai.request_count == 0


def test_another_unknown_name_warns_before_the_first_call_and_in_the_dry_run(fake_openai, tmp_path):
    dry = _eval(tmp_path, "Q: {{question}} {{style_guide}}", "<<answer>>", "--dry-run")
    assert dry.exit_code == 0
    warning = "warning: prompts[0] (Q: {{question}} {{style_guide}}) uses the var 'style_guide', which no test " \
              "defines: it renders empty"
    assert warning in " ".join(dry.output.split()) and fake_openai.request_count == 0
    result = _eval(tmp_path, "Q: {{question}} {{style_guide}}")
    out = " ".join(result.output.split())
    assert warning in out and out.index(warning) < out.index("Run eval-")
    assert fake_openai.request_count == 2


def test_an_assertion_value_that_renders_empty_names_the_var(fake_openai, tmp_path):
    """tests[1] has no `answer`: the var exists (no near miss), so the run goes on, and the row's error
    says which var rendered empty."""
    cfg = write(tmp_path / "c.yaml", CONFIG.format(prompt="Q: {{question}}", value="<<answer>>").replace(
        "answer: Tokyo}", "}\n    assert: [{type: icontains, value: '<<answer>>'}]"))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "-o", str(out)])
    assert result.exit_code == 100, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    japan = [r for r in rows if r["vars"]["question"] == "capital of Japan"][0]
    assert "icontains: its value '<<answer>>' names 'answer', which this test does not define" in japan["error"]
