"""Bad input from Python raises FactcliError with the message the CLI prints, in check(), evaluate()
and the pytest helpers; evaluate(text) parses YAML exactly as a config file; warnings point at the
caller's own line."""

import json
import warnings

import pytest
from conftest import write
from typer.testing import CliRunner

import factcli
from factcli.cli import app
from factcli.testing import assert_factual, assert_passes

JUDGE = {"id": "openai:chat:judge", "config": {"apiBaseUrl": "{{ env.FAKE_OPENAI_URL }}"}}


def test_check_without_the_prompt_a_grader_needs_is_a_factcli_error(fake_openai):
    with pytest.raises(factcli.FactcliError) as info:
        factcli.check("Paris", [{"type": "factuality", "value": "Paris"}], grader=JUDGE)
    assert str(info.value) == ("check(): factuality assertion type must have a prompt (the question the output "
                               "answers): check(output, assertions, prompt='...')")
    with pytest.raises(factcli.FactcliError, match="model-graded-closedqa assertion type must have a prompt"):
        factcli.check("Paris", {"type": "model-graded-closedqa", "value": "names a city"}, grader=JUDGE)
    with pytest.raises(factcli.FactcliError, match="must have a prompt"):
        assert_factual("Paris", "Paris is the capital of France", method="factuality", grader=JUDGE)
    assert fake_openai.request_count == 0


def test_bad_assertions_from_python_are_factcli_errors_with_the_clis_message(fake_openai, tmp_path):
    cli = CliRunner().invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", """
prompts: ["x"]
providers: [echo]
tests: [{assert: [{type: containz, value: x}]}]
"""))])
    assert cli.exit_code == 1
    with pytest.raises(factcli.FactcliError) as info:
        assert_passes("x", {"type": "containz", "value": "x"})
    assert "unknown assertion type 'containz' (did you mean 'contains'?)" in str(info.value)
    assert "unknown assertion type 'containz' (did you mean 'contains'?)" in cli.output
    with pytest.raises(factcli.FactcliError, match='check\\(\\): "starts-with" assertion type must have a string value'):
        factcli.check("x", {"type": "starts-with", "value": 3})


YAML = """prompts: ["Q: {{question}}"]
providers: [echo]
tests:
  - vars: {question: What is the capital of France?}
    assert: [{type: contains, value: "France?"}]
"""


def test_evaluate_text_parses_yaml_exactly_as_a_file(tmp_path):
    from_text = factcli.evaluate(YAML, store=False).to_promptfoo()["results"]["results"]
    from_file = factcli.evaluate(str(write(tmp_path / "c.yaml", YAML)), store=False).to_promptfoo()["results"]["results"]
    assert [r["vars"] for r in from_text] == [r["vars"] for r in from_file] == \
        [{"question": "What is the capital of France?"}]
    assert from_text[0]["success"] is True
    with pytest.raises(factcli.ConfigError, match=r"<config>: invalid YAML: line 2"):
        factcli.evaluate("prompts: [x\nproviders: [echo]\n", store=False)


def test_a_warning_points_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        factcli.evaluate(YAML.replace("Q: {{question}}", "Q: {{question}} {{tone}}"), store=False); line = _line()  # noqa: E702
    mine = [w for w in caught if "tone" in str(w.message)]
    assert len(mine) == 1, [str(w.message) for w in caught]
    assert mine[0].filename == __file__ and mine[0].lineno == line
    assert json.dumps(str(mine[0].message)).count("tone") == 2


def _line() -> int:
    import inspect

    return inspect.currentframe().f_back.f_lineno
