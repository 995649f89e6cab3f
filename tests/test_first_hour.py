"""Issue 40, through the CLI against the fake server: `<<name>>` only where a var is meant, every
problem of a config named at once, provider model types and factscore topics checked, all before
any call (the server's request count proves it), and `promptId` in the results JSON rows."""

import hashlib
import json
import shutil

import pytest
from conftest import ROOT, write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()


def _model(model: str = "m", kind: str = "chat") -> str:
    return f'{{id: "openai:{kind}:{model}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}'


def _eval(tmp_path, text: str, *args: str, name: str = "c.yaml"):
    cfg = write(tmp_path / name, text)
    return runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--no-table", *args])


@pytest.fixture
def server(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return fake_openai


def _sent(server) -> list[str]:
    return [m["content"] for r in server.requests if r["json"] for m in r["json"].get("messages", [])]


# ---------------------------------------------------------------- item 2: <<name>>


def test_an_undefined_angle_name_is_sent_as_written_with_one_warning(server, tmp_path):
    """promptfoo sends `a<<y>>b` unchanged; so does factcli when no test has `y` (one warning, before
    the call); with `y` a var, `<<y>>` is that var (contract §3), and `\\<<y>>` writes it literally."""
    result = _eval(tmp_path, f"prompts: ['what is a<<y>>b? {{{{q}}}}']\nproviders: [{_model()}]\n"
                             "tests:\n  - vars: {q: one}\n  - vars: {q: two}\n")
    assert result.exit_code == 0, result.output
    assert _sent(server) == ["what is a<<y>>b? one", "what is a<<y>>b? two"] or \
        sorted(_sent(server)) == ["what is a<<y>>b? one", "what is a<<y>>b? two"]
    text = " ".join(result.output.split())
    assert text.count("uses the var '<<y>>', which no test defines: it stays as written") == 1
    assert "rendered empty" not in text

    server.reset()
    result = _eval(tmp_path, f"prompts: ['a<<y>>b \\<<y>> {{{{y}}}}']\nproviders: [{_model()}]\n"
                             "tests:\n  - vars: {y: 4}\n")
    assert result.exit_code == 0, result.output
    assert _sent(server) == ["a4b <<y>> 4"]
    assert "<<y>>" not in " ".join(result.output.split())  # no warning: y is a var


# ---------------------------------------------------------------- items 4 and 5: every problem at once


MANY = """
prompts:
  - "Q: {{{{questoin}}}}"
  - file://missing_prompt.txt
providers:
  - {model}
  - opnai:gpt-4o-mini
tests:
  - vars: {{question: capital of France, answer: Paris}}
    assert:
      - type: contians
        value: Paris
      - type: factualty
        value: <<answr>>
  - file://missing_tests.csv
"""


def test_every_problem_of_a_config_is_named_at_once_before_any_call(server, tmp_path):
    result = _eval(tmp_path, MANY.format(model=_model()))
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "7 problems found before any call (nothing was sent):" in text
    for needle in ("prompts[1]: file not found: ", "missing_prompt.txt", "tests[1]: file not found: ", "missing_tests.csv",
                   "tests[0].assert[0].type: unknown assertion type 'contians' (did you mean 'contains'?)",
                   "tests[0].assert[1].type: unknown assertion type 'factualty' (did you mean 'factuality'?)",
                   "uses the var 'questoin', which no test defines (did you mean 'question'?)",
                   "tests[0].assert[1] uses the var '<<answr>>', which no test defines (did you mean '<<answer>>'?)",
                   "unknown provider 'opnai' in 'opnai:gpt-4o-mini' (did you mean openai:gpt-4o-mini?)"):
        assert needle in text, needle
    assert server.request_count == 0
    # the same in a dry run, and with one problem left it is one line, as every error is
    assert _eval(tmp_path, MANY.format(model=_model()), "--dry-run").exit_code == 1
    one = _eval(tmp_path, f"prompts: ['Q: {{{{q}}}}']\nproviders: [{_model()}]\n"
                          "tests:\n  - vars: {q: a}\n    assert: [{type: contians, value: a}]\n")
    assert one.exit_code == 1 and "problems found" not in one.output
    assert "unknown assertion type 'contians' (did you mean 'contains'?)" in " ".join(one.output.split())
    assert server.request_count == 0


def test_an_unknown_openai_model_type_is_a_warning_with_a_did_you_mean_before_any_call(server, tmp_path):
    """promptfoo 0.121.20: `Unknown OpenAI model type: chatt. Treating it as a chat model.`"""
    config = f"prompts: ['Q: {{{{q}}}}']\nproviders: [{_model('gpt-4o-mini', 'chatt')}]\ntests:\n  - vars: {{q: a}}\n"
    dry = _eval(tmp_path, config, "--dry-run")
    assert dry.exit_code == 0 and server.request_count == 0
    warning = ("providers[0] openai:chatt:gpt-4o-mini: unknown OpenAI model type 'chatt' (did you mean "
               "openai:chat:gpt-4o-mini?); it would be sent as the model 'chatt:gpt-4o-mini'")
    assert warning in " ".join(dry.output.split())
    # --strict refuses no warning of this kind: it is a model id, not a key; the run goes on as promptfoo's
    ran = _eval(tmp_path, config)
    assert ran.exit_code == 0 and warning in " ".join(ran.output.split())
    assert [r["json"]["model"] for r in server.requests] == ["chatt:gpt-4o-mini"]
    # the kinds factcli knows, a fine-tune id and other vendors' model names with colons pass quietly
    from factcli.providers.litellm_provider import kind_problem

    for pid in ("openai:chat:gpt-4o-mini", "openai:responses:gpt-5", "openai:gpt-4o-mini",
                "openai:ft:gpt-4o-mini:org:custom:id", "ollama:llama3:8b", "ollama:chat:llama3:8b",
                "openai:embedding:text-embedding-3-small", "bedrock:anthropic.claude-3-haiku-v1:0"):
        assert kind_problem(pid) is None, pid
    assert "did you mean anthropic:messages:claude-sonnet-4-5?" in kind_problem("anthropic:mesages:claude-sonnet-4-5")
    assert "did you mean ollama:chat:llama3?" in kind_problem("ollama:chta:llama3")


# ---------------------------------------------------------------- item 6: factscore topics


def test_a_factscore_topic_is_checked_before_any_call_with_a_did_you_mean(server, tmp_path):
    shutil.copytree(ROOT / "examples" / "factscore" / "knowledge", tmp_path / "knowledge")
    config = f"""
prompts: ["Tell me a bio of <<topic>>."]
providers: [{_model()}]
defaultTest:
  options: {{provider: {_model('judge')}}}
  assert:
    - type: factscore
      config: {{knowledge: knowledge}}
tests:
  - vars: {{topic: Marie Curie}}
  - vars: {{topic: Alan Turring}}
  - vars: {{topic: Ada Lovelce}}
"""
    result = _eval(tmp_path, config)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "2 problems found before any call" in text
    assert "tests[1]: factscore: topic 'Alan Turring' is not a document title in the knowledge source" in text
    assert "(did you mean 'Alan Turing'?)" in text and "(did you mean 'Ada Lovelace'?)" in text
    assert server.request_count == 0


# ---------------------------------------------------------------- item 7: promptId


def test_results_json_rows_carry_promptid_as_promptfoo_writes_it(tmp_path):
    out = tmp_path / "r.json"
    result = _eval(tmp_path, "prompts: ['Answer briefly: {{question}}', {raw: 'Q: {{question}}', label: short}]\n"
                             "providers: [echo]\ntests:\n  - vars: {question: why}\n", "-o", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())["results"]
    assert len(doc["results"]) == 2
    for row in doc["results"]:
        assert row["promptId"] == doc["prompts"][row["promptIdx"]]["id"]
    ids = {row["promptIdx"]: row["promptId"] for row in doc["results"]}
    assert ids[1] == hashlib.sha256(b"Q: {{question}}").hexdigest()
    # promptfoo 0.121.20's own row for the same prompt text (tests/parity/golden.json)
    golden = json.loads((ROOT / "tests" / "parity" / "golden.json").read_text())["results"]["results"]
    theirs = next(r for r in golden if r["prompt"]["label"] == "Answer briefly: {{question}}")
    assert ids[0] == theirs["promptId"]
    exported = tmp_path / "e.json"
    assert runner.invoke(app, ["export", "latest", "-o", str(exported)]).exit_code == 0
    assert [r["promptId"] for r in json.loads(exported.read_text())["results"]["results"]] == \
        [r["promptId"] for r in doc["results"]]


# ---------------------------------------------------------------- items 9 and 10: money and the cosmetic ones


def test_money_keeps_its_precision():
    from factcli.report.figures import fmt_cost, money

    assert [money(x) for x in (0, 0.000074, 0.0012, 0.12345, 12.345, 1234.5)] == \
        ["$0", "$0.000074", "$0.0012", "$0.1235", "$12.35", "$1,234.50"]
    assert fmt_cost(0.000074, 1) == "≥$0.000074 (1 row n/a)" and fmt_cost(None) == "n/a"


def test_retry_errors_with_nothing_to_run_says_so_and_no_warning_for_nothing(server, tmp_path):
    config = (f"prompts: ['Q: {{{{q}}}}']\nproviders: [{_model()}]\n"
              f"defaultTest: {{options: {{provider: {_model()}}}}}\n"
              "tests:\n  - vars: {q: a}\n    assert: [{type: llm-rubric, value: fine}]\n")
    server.add_rule(r"fine", '{"reason": "ok", "pass": true, "score": 1}')
    first = _eval(tmp_path, config)
    assert first.exit_code == 0, first.output
    assert "self-preference bias" in first.output  # the grader is the model under test: said when it grades
    before = server.request_count
    retry = runner.invoke(app, ["eval", "--retry-errors", "latest", "--no-progress-bar"])
    assert retry.exit_code == 1
    assert "has no ERROR rows: nothing to retry" in retry.output and "self-preference" not in retry.output
    resume = runner.invoke(app, ["eval", "--resume", "latest", "--no-progress-bar"])
    assert resume.exit_code == 1 and "nothing to resume" in resume.output
    assert server.request_count == before


def test_show_renders_assertion_values_and_labels_claims_as_explain_does(tmp_path):
    config = ("prompts: ['{{q}}']\nproviders: [echo]\n"
              "tests:\n  - vars: {q: hello, answer: hello}\n    assert: [{type: equals, value: '{{answer}}'}]\n")
    assert _eval(tmp_path, config).exit_code == 0
    shown = runner.invoke(app, ["show", "latest", "0"], env={"COLUMNS": "200"}).output
    assert "value: hello\n" in shown and "(value written as {{answer}})" in shown
    html = tmp_path / "r.html"
    assert runner.invoke(app, ["export", "latest", "-o", str(html)]).exit_code == 0
    assert "<pre>hello</pre><div class=\"dim\">written as <code>{{answer}}</code></div>" in html.read_text()
    import factcli

    run = factcli.evaluate(str(ROOT / "examples/factual-correctness/promptfooconfig.yaml"))
    wrong = next(r for r in run.rows if r.step.provider.display == "wrong-year")
    from factcli.run.check import explain

    assert "(from the response, checked against the reference)" in explain(wrong.grading)
    cfg = ROOT / "examples/factual-correctness/promptfooconfig.yaml"
    assert runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table"]).exit_code == 100
    shown = runner.invoke(app, ["show", "latest", "0"], env={"COLUMNS": "200"}).output
    assert "from the response, checked against the reference" in shown and "evidence: reference" not in shown
    # the example's metrics mean something: precision is 0.5 for the wrong year, 1 for the right answer
    assert "Metrics: f1=0.500, precision=0.500" in shown and "Metrics: f1=1.000, precision=1.000" in shown


def test_every_test_whose_files_are_missing_is_named(server, tmp_path):
    """A test that cannot be read (a var file that is not there) is a problem of its own; the other
    tests, and the rest of the config, are still checked."""
    config = (f"prompts: ['Q: {{{{q}}}} {{{{doc}}}}']\nproviders: [{_model()}]\ntests:\n"
              "  - vars: {q: a, doc: file://missing_a.txt}\n  - vars: {q: b, doc: file://missing_b.txt}\n"
              "  - vars: {q: c, doc: here}\n    assert: [{type: equalz, value: c}]\n")
    result = _eval(tmp_path, config)
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "3 problems found before any call" in text
    assert "tests[0].vars.doc: file not found:" in text and "tests[1].vars.doc: file not found:" in text
    assert "tests[2].assert[0].type: unknown assertion type 'equalz' (did you mean 'equals'?)" in text
    assert server.request_count == 0
