"""Model-graded assertions: parity with promptfoo, grader resolution, and every kind of bad reply."""

import json
from pathlib import Path

import pytest
from conftest import write
from parity_compare import differences
from typer.testing import CliRunner

from factcli.cli import app

PARITY = Path(__file__).parent / "parity" / "graders"
runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", *map(str, args)])


def test_graders_parity_with_promptfoo(fake_openai, tmp_path, monkeypatch):
    for pattern, reply, model in json.loads((PARITY / "rules.json").read_text()):
        fake_openai.add_rule(pattern, reply, model=model)
    # the judge answered promptfoo in words; a server that takes no response_format is one factcli's
    # graders read in words too, as promptfoo does (with a schema sent, words are a grading error)
    fake_openai.refuse_response_format("json_schema", "json_object")
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    out = tmp_path / "ours.json"
    result = run("-c", PARITY / "promptfooconfig.yaml", "-o", out)
    assert result.exit_code == 100, result.output
    ours = json.loads(out.read_text())
    assert differences(ours, json.loads((PARITY / "golden.json").read_text())) == []
    rows = {r["testIdx"]: r for r in ours["results"]["results"]}
    comp = rows[0]["gradingResult"]["componentResults"][0]["metadata"]
    assert comp["category"] == "A" and "graderRaw" in comp
    # unreadable replies are failures marked as grading errors, with the raw reply kept
    bad = rows[5]["gradingResult"]["componentResults"][0]["metadata"]
    assert bad["graderError"] is True and bad["graderRaw"] == "I cannot decide."
    assert ours["factcli"]["columns"][0]["categories"] == {"A": 2, "B": 1, "C": 1, "D": 1, "E": 1}
    assert ours["factcli"]["columns"][0]["gradingErrors"] == 4  # ref-05, ref-06, rubric-04, crit-03
    # graders are asked for temperature 0 and a fixed seed
    judge = [r["json"] for r in fake_openai.requests if r["json"].get("model") == "judge"]
    assert judge and all(b["temperature"] == 0 and b["seed"] == 0 for b in judge)


FACT = """
prompts: ["Q: {{question}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
  - vars: {question: "capital of France?"}
    assert: [{type: factuality, value: "Paris", provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}}]
"""


@pytest.mark.parametrize("reply, passed, score, grading_error", [
    ('{"category": "b", "reason": "more"}', True, 1.0, False),
    ("```json\n{category: 'C', reason: 'same'}\n```", True, 1.0, False),  # lenient JSON
    ("(D) they disagree", False, 0.0, False),
    ('{"reason": "no category"} but (A) anyway', True, 1.0, False),  # legacy fallback
    ("garbage without a letter", False, 0.0, True),
    ("", False, 0.0, True),
    ('{"category": "Z"}', False, 0.0, True),
])
def test_factuality_replies(fake_openai, tmp_path, reply, passed, score, grading_error):
    """promptfoo's reader of a reply in words: a server that takes no response_format (with the schema
    sent, a reply outside it is a grading error: tests/test_judge_trouble.py)."""
    fake_openai.refuse_response_format("json_schema", "json_object")
    fake_openai.add_rule("capital", "Paris.", model="m")
    fake_openai.add_rule(".", reply, model="judge")
    out = tmp_path / "r.json"
    run("-c", write(tmp_path / "c.yaml", FACT), "-o", out, "--no-cache")
    comp = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]
    assert (comp["pass"], comp["score"]) == (passed, score)
    assert bool((comp.get("metadata") or {}).get("graderError")) is grading_error


def test_grader_http_error_and_truncation_are_grading_errors(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    fake_openai.add_rule("capital", "Paris.", model="m")
    cfg = write(tmp_path / "c.yaml", FACT)
    out = tmp_path / "r.json"
    fake_openai.add_rule(".", {"content": '{"category": "A"', "finish_reason": "length"}, model="judge")
    run("-c", cfg, "-o", out, "--no-cache")
    comp = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]
    assert comp["pass"] is False and comp["metadata"]["graderError"] and "finish_reason=length" in comp["reason"]
    fake_openai.clear_rules()
    fake_openai.add_rule("capital", "Paris.", model="m")
    fake_openai.enqueue("Paris.")  # the provider call, then the grader call fails
    fake_openai.enqueue_fault(status=500)
    run("-c", cfg, "-o", out, "--no-cache")
    row = json.loads(out.read_text())["results"]["results"][0]
    comp = row["gradingResult"]["componentResults"][0]
    assert comp["pass"] is False and comp["metadata"]["graderError"]
    assert row["failureReason"] == 1  # a grading error fails the row; it is not a provider ERROR


def test_not_llm_rubric_never_inverts_a_grading_error(fake_openai, tmp_path):
    fake_openai.add_rule("Q:", "hi", model="m")
    fake_openai.add_rule(".", "no json here", model="judge")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q: x"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest: {options: {provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}}}
tests: [{assert: [{type: not-llm-rubric, value: rude}]}]
""")
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out).exit_code == 4  # not judged
    comp = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]
    assert comp["pass"] is False and comp["metadata"]["graderError"]


def test_no_grader_is_a_config_error_before_any_call(fake_openai, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "c.yaml", """
prompts: ["Q: x"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests: [{assert: [{type: contains, value: x}, {type: factuality, value: y}]}]
""")
    result = run("-c", "c.yaml")
    assert result.exit_code == 1
    assert result.output.startswith("error: c.yaml: tests[0].assert[1]: no grader for a model-graded assertion")
    assert fake_openai.request_count == 0


def test_grader_resolution_order(monkeypatch):
    from factcli.scoring.grading import GraderSource

    src = GraderSource(cli="cli-grader", default_test="default-grader")
    assert src.resolve("assert-grader", "test-grader").id == "assert-grader"
    assert src.resolve(None, "test-grader").id == "test-grader"
    # a test provider inherited from defaultTest ranks below --grader
    assert src.resolve(None, "default-grader", test_provider_is_default=True).id == "cli-grader"
    assert GraderSource(default_test="default-grader").resolve(None, None).id == "default-grader"
    monkeypatch.setenv("FACTCLI_GRADER", "env-grader")
    assert GraderSource().resolve(None, None).id == "env-grader"
    monkeypatch.delenv("FACTCLI_GRADER")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert GraderSource().resolve(None, None).id == "openai:gpt-5"
    assert GraderSource().resolve(None, {"text": "t", "embedding": "e"}, "embedding").id == "e"


def test_grader_flag_and_self_preference_warning(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule("expert_answer", '{"category": "C", "reason": "same"}')
    fake_openai.add_rule("Q:", "Paris", model="m")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q: capital of France?"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests: [{assert: [{type: factuality, value: Paris}]}]
""")
    result = run("-c", cfg, "--grader", "openai:chat:m")
    assert "self-preference" in result.output
    assert "Grader: openai:chat:m" in result.output


COMPARE = Path(__file__).parent / "parity" / "compare"


def test_compare_assertions_parity_with_promptfoo(fake_openai, tmp_path, monkeypatch):
    for pattern, reply, model in json.loads((COMPARE / "rules.json").read_text()):
        fake_openai.add_rule(pattern, reply, model=model)
    fake_openai.refuse_response_format("json_schema", "json_object")  # words, as promptfoo's judge answered
    out = tmp_path / "ours.json"
    result = run("-c", COMPARE / "promptfooconfig.yaml", "-o", out)
    assert result.exit_code == 100, result.output
    assert differences(json.loads(out.read_text()), json.loads((COMPARE / "golden.json").read_text())) == []


def test_select_best_compares_columns_in_order(fake_openai, tmp_path):
    """The judge sees the outputs in column order and its verdict marks exactly one winner."""
    fake_openai.add_rule("Tell a joke", "A short joke.", model="model-a")
    fake_openai.add_rule("Tell a joke", "A very funny joke about cats.", model="model-b")
    fake_openai.add_rule("Tell a joke", "No.", model="model-c")

    def judge(body):
        text = body["messages"][-1]["content"]
        order = [text.index(s) for s in ("A short joke.", "A very funny joke", "No.")]
        assert order == sorted(order)
        return '{"index": 1}'

    fake_openai.add_rule("funniest", judge, model="judge")
    cfg = write(tmp_path / "c.yaml", (COMPARE / "promptfooconfig.yaml").read_text().split("tests:")[0] + """
tests:
  - vars: {question: "Tell a joke"}
    assert:
      - {type: select-best, value: funniest}
      - {type: icontains, value: joke}
""")
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out).exit_code == 100
    doc = json.loads(out.read_text())
    rows = sorted(doc["results"]["results"], key=lambda r: r["promptIdx"])
    assert [r["success"] for r in rows] == [False, True, False]
    assert rows[0]["error"] == "Output not selected: funniest"
    assert rows[2]["gradingResult"]["reason"] == "Output not selected: funniest"
    assert [p["metrics"]["testPassCount"] for p in doc["results"]["prompts"]] == [0, 1, 0]
    assert [p["metrics"]["score"] for p in doc["results"]["prompts"]] == [0, 1, 0]


REASON_ORDER = """
prompts: ["Say {{n}}"]
providers: [echo]
tests:
  - description: two rubrics around a contains
    vars: {n: "one"}
    assert:
      - {type: llm-rubric, value: "first", metric: first, provider: {id: "openai:chat:judge", config: {apiBaseUrl: "%(x)s"}}}
      - {type: contains, value: "zzz", metric: middle}
      - {type: llm-rubric, value: "last", metric: last, provider: {id: "openai:chat:judge", config: {apiBaseUrl: "%(y)s"}}}
  - description: a rubric before a contains
    vars: {n: "two"}
    assert:
      - {type: llm-rubric, value: "first", provider: {id: "openai:chat:judge", config: {apiBaseUrl: "%(x)s"}}}
      - {type: contains, value: "zzz"}
  - description: a contains before a rubric
    vars: {n: "three"}
    assert:
      - {type: contains, value: "zzz"}
      - {type: llm-rubric, value: "last", provider: {id: "openai:chat:judge", config: {apiBaseUrl: "%(x)s"}}}
"""


@pytest.mark.parametrize("slow", ["x", "y"])
def test_a_rows_reason_is_the_last_failure_in_the_configs_order_whichever_grader_answers_last(tmp_path, monkeypatch,
                                                                                                slow):
    """Graders on two servers, one answering 300 ms later than the other, then the other way round: the
    row's reason is its last failing assertion in the config's order, its components and named scores
    come in that order, however long each took (promptfoo 0.121.20 keeps the last failure to finish:
    with the slow grader first, its reason; see promptfoo-departures.md)."""
    from fake_openai import FakeOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI() as x, FakeOpenAI() as y:
        for server, name in ((x, "x"), (y, "y")):
            server.add_rule(".", json.dumps({"pass": False, "score": 0, "reason": f"judge {name} says no"}))
            server.latency = 0.3 if name == slow else 0.0
        cfg = write(tmp_path / "c.yaml", REASON_ORDER % {"x": x.url, "y": y.url})
        out = tmp_path / "r.json"
        result = run("-c", cfg, "-o", out, "--no-cache", "-j", "4")
    assert result.exit_code == 100, result.output
    rows = {r["testCase"]["description"]: r["gradingResult"] for r in json.loads(out.read_text())["results"]["results"]}
    around = rows["two rubrics around a contains"]
    assert around["reason"] == "judge y says no"
    assert [c["reason"] for c in around["componentResults"]] == [
        "judge x says no", 'Expected output to contain "zzz"', "judge y says no"]
    assert list(around["namedScores"]) == ["first", "middle", "last"]
    assert rows["a rubric before a contains"]["reason"] == 'Expected output to contain "zzz"'
    assert rows["a contains before a rubric"]["reason"] == "judge x says no"
