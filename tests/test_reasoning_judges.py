"""Judges that reason before they answer (OpenAI's o-series and gpt-5 family, Claude with thinking, Gemini's
thinking models), parameters a server refuses, and schemas in each server's dialect, against the vendor
stand-ins of tests/fake_vendors.py reached by the real clients (factcli's OpenAI path, litellm)."""

import json
import re

import pytest
from conftest import write
from fake_vendors import FakeVendors, rambling
from starlette.testclient import TestClient
from typer.testing import CliRunner

from factcli.cli import app
from factcli.web.app import create_app

runner = CliRunner()
TYPES = ("factuality", "llm-rubric", "model-graded-closedqa", "g-eval", "simpleqa", "factual-correctness",
         "factscore", "facts-grounding")

CONFIG = """
prompts: ["Paris is big."]
providers: [echo]
defaultTest:
  vars: {context: "Paris is big.", query: "Tell me about Paris."}
%(grader)s
tests:
%(tests)s
"""
ROW = """  - vars: {n: %(i)d}
    assert:
      - {type: factuality, value: "Paris is big."}
      - {type: llm-rubric, value: "is about Paris"}
      - {type: model-graded-closedqa, value: "is about Paris"}
      - {type: g-eval, value: "is about Paris", threshold: 0}
      - {type: simpleqa, value: "Paris is big."}
      - {type: factual-correctness, value: "Paris is big."}
      - {type: factscore, config: {knowledge: "%(kb)s"}}
      - {type: facts-grounding}
"""


@pytest.fixture(scope="module")
def _vendors():
    with FakeVendors() as server:
        yield server


@pytest.fixture
def vendors(_vendors):
    _vendors.requests.clear()
    _vendors.refusals.clear()
    _vendors.efforts.clear()
    _vendors.reasoning_models.clear()
    _vendors.judge = FakeVendors().judge
    return _vendors


def config(tmp_path, grader: str = "", rows: int = 3) -> str:
    kb = tmp_path / "kb.jsonl"
    kb.write_text(json.dumps({"title": "Paris", "text": "Paris is big."}) + "\n")
    tests = "".join(ROW % {"i": i, "kb": kb} for i in range(rows))
    return write(tmp_path / "c.yaml", CONFIG % {"grader": grader, "tests": tests})


def run(*args):
    result = runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "--no-cache", *map(str, args)])
    assert "Traceback" not in result.output, result.output
    return result


def components(out):
    doc = json.loads(out.read_text())
    return doc, [c for r in doc["results"]["results"] for c in r["gradingResult"]["componentResults"]]


def errors_of(comps):
    return [(c["assertion"]["type"], c["reason"]) for c in comps if (c.get("metadata") or {}).get("graderError")]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_default_grader_grades_every_type_on_a_reasoning_model(vendors, tmp_path, monkeypatch):
    """The default grader (openai:gpt-5) on a stand-in that reasons 700 hidden tokens at the default effort and
    refuses `low`: every type grades, the refused effort costs one request for the whole run, and the
    reasoning tokens are counted, priced and shown."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", vendors.url + "/v1")
    vendors.efforts["gpt-5"] = ("medium", "high")
    out = tmp_path / "r.json"
    db = tmp_path / "r.db"
    result = run("-c", config(tmp_path), "-o", out, "-j", "4", "--db", db)
    assert "Errors: 0" in result.output, result.output
    doc, comps = components(out)
    assert sorted({c["assertion"]["type"] for c in comps}) == sorted(TYPES) and len(comps) == 3 * len(TYPES)
    assert errors_of(comps) == []  # (the stand-in's first choices are not all passing verdicts)
    sent = vendors.by_path("/chat/completions")
    # one refused request for the endpoint's one refused parameter, however many calls were in flight
    assert vendors.refusals == {("gpt-5", "reasoning_effort"): 1}
    answered = [b for b in sent if b.get("reasoning_effort") == "medium"]
    assert len(answered) == len(sent) - 1
    for body in sent:
        assert "max_tokens" not in body and "temperature" not in body
        step_cap = body["max_completion_tokens"] - 2048  # the reasoning allowance at low effort, on top of the cap
        assert 0 < step_cap <= 2048
    assert flat(result.output).count("refused reasoning_effort") == 1
    # reasoning tokens: 700 a call, in the results, the summary and the cost (priced as output)
    stats = doc["results"]["stats"]["tokenUsage"]["assertions"]
    assert stats["completionDetails"]["reasoning"] == 700 * len(answered)
    assert re.search(r"grading, [\d,]+ reasoning", flat(result.output)), result.output
    row = doc["results"]["results"][0]
    assert row["gradingResult"]["tokensUsed"]["completionDetails"]["reasoning"] >= 700 * len(TYPES)
    cost = row["gradingResult"]["metadata"]["graderCost"]
    assert cost >= row["gradingResult"]["tokensUsed"]["completion"] * 1e-05  # gpt-5's output price, reasoning in
    hidden = row["gradingResult"]["tokensUsed"]["completionDetails"]["reasoning"]
    shown = runner.invoke(app, ["show", "latest", "0", "--db", str(db)])
    assert f"grading ({hidden:,} reasoning)" in flat(shown.output), shown.output
    shown = json.loads(runner.invoke(app, ["show", "latest", "0", "--db", str(db), "--json"]).output)
    assert shown[0]["tokens"]["gradingReasoning"] == hidden
    client = TestClient(create_app(db, token="t"))
    page = client.get(f"/runs/{doc['evalId']}/cell/0/0/0", headers={"Authorization": "Bearer t"})
    assert page.status_code == 200 and f"grading ({hidden:,} reasoning)" in flat(page.text)


def test_a_cut_off_reply_is_asked_again_with_a_doubled_budget_then_is_a_grading_error(vendors, tmp_path,
                                                                                          monkeypatch):
    """High effort reasons 2,800 tokens: a budget of 1,500 is cut off and asked once more with 3,000, which
    answers; a budget of 600 is cut off twice and becomes a grading error naming the key to raise."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", vendors.url + "/v1")
    rows = """  - assert: [{type: factuality, value: "Paris is big."}]\n"""
    body = "prompts: [\"Paris is big.\"]\nproviders: [echo]\ndefaultTest:\n  options:\n    provider: %s\ntests:\n" + rows
    grader = "{id: openai:chat:gpt-5, config: {reasoning_effort: high, reasoningBudget: %d}}"
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "a.yaml", body % (grader % 1500)), "-o", out)
    assert result.exit_code == 0, result.output
    sent = [b["max_completion_tokens"] for b in vendors.by_path("/chat/completions")]
    assert sent == [1500 + 512, 3000 + 512]
    _, comps = components(out)
    assert comps[0]["pass"] and comps[0]["tokensUsed"]["completionDetails"]["reasoning"] == 2012 + 2800

    vendors.requests.clear()
    result = run("-c", write(tmp_path / "b.yaml", body % (grader % 600)), "-o", out)
    assert result.exit_code != 0
    sent = [b["max_completion_tokens"] for b in vendors.by_path("/chat/completions")]
    assert sent == [600 + 512, 1200 + 512]  # once more, then no more
    _, comps = components(out)
    reason = comps[0]["reason"]
    assert comps[0]["metadata"]["graderError"]
    assert "cut off while it reasoned" in reason and "raise reasoningBudget in the grader's config" in reason, reason
    assert "2,824 reasoning tokens spent" in reason and "reasoningBudget: 2400" in reason  # 1,112 + 1,712


@pytest.mark.parametrize("judge", ["openai:chat:house-judge", "litellm:openai/house-judge"])
def test_a_custom_reasoning_endpoint_learns_its_refusals_once_and_takes_a_reasoning_key(vendors, tmp_path, judge):
    """A reasoning model under a name no table knows, through factcli's OpenAI path and through litellm: its
    refusals of max_tokens and temperature are learned once for the run, and its cut-off replies name
    `reasoning: true`, which makes it grade."""
    vendors.reasoning_models.add("house-judge")
    grader = ('  options:\n    provider: {id: %s, config: {apiBaseUrl: "%s/v1", apiKey: sk-test%s}}'
              % (judge, vendors.url, "%s"))
    out = tmp_path / "r.json"
    result = run("-c", config(tmp_path, grader % "", rows=4), "-o", out, "-j", "4")
    assert vendors.refusals == {("house-judge", "max_tokens"): 1, ("house-judge", "temperature"): 1}
    assert flat(result.output).count("refused max_tokens, temperature") == 1, result.output
    _, comps = components(out)
    errors = errors_of(comps)
    assert errors and all("config: {reasoning: true}" in reason for _, reason in errors if "cut off" in reason)

    vendors.requests.clear()
    vendors.refusals.clear()
    result = run("-c", config(tmp_path, grader % ", reasoning: true", rows=2), "-o", out, "-j", "4")
    assert "Errors: 0" in result.output, result.output
    _, comps = components(out)
    assert errors_of(comps) == [] and vendors.refusals == {}


@pytest.mark.parametrize("grader, path, sent", [
    ("{id: anthropic:messages:claude-sonnet-4-5, config: {apiBaseUrl: '%s', apiKey: sk-ant-test, reasoning: true}}",
     "/v1/messages", "thinking"),
    # asked by its effort: the budget that effort gives, sent as thinking (not litellm's own mapping beside it)
    ("{id: anthropic:messages:claude-sonnet-4-5, config: {apiBaseUrl: '%s', apiKey: sk-ant-test, reasoning_effort: "
     "low}}", "/v1/messages", "thinking"),
    # its own thinking budget: kept, with the step's cap on top
    ("{id: anthropic:messages:claude-sonnet-4-5, config: {apiBaseUrl: '%s', apiKey: sk-ant-test, thinking: {type: "
     "enabled, budget_tokens: 1500}}}", "/v1/messages", "own-thinking"),
    ("{id: google:gemini-2.5-flash, config: {apiBaseUrl: '%s', apiKey: gm-test}}", ":generateContent", "gemini"),
    # no thinking; litellm asks for JSON and shows the schema in the prompt
    ("{id: google:gemini-1.5-flash, config: {apiBaseUrl: '%s', apiKey: gm-test}}", ":generateContent", "json"),
])
def test_claude_and_gemini_with_thinking_through_litellm(vendors, tmp_path, grader, path, sent):
    out = tmp_path / "r.json"
    result = run("-c", config(tmp_path, "  options:\n    provider: " + grader % vendors.url, rows=2), "-o", out,
                 "-j", "4")
    assert "Errors: 0" in result.output, result.output
    doc, comps = components(out)
    assert errors_of(comps) == [] and len(comps) == 2 * len(TYPES)
    bodies = vendors.by_path(path)
    assert bodies and vendors.refusals == {}
    for body in bodies:
        if sent in ("thinking", "own-thinking"):  # Anthropic: budget_tokens within max_tokens, no temperature
            budget = 1500 if sent == "own-thinking" else 1024
            assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
            assert body["max_tokens"] > budget and "temperature" not in body
            assert body["output_format"]["type"] == "json_schema"
        elif sent == "json":
            config_ = body["generationConfig"]
            assert "thinkingConfig" not in config_ and config_["response_mime_type"] == "application/json"
            assert config_["max_output_tokens"] <= 2048 and config_["temperature"] == 0
        else:  # Gemini: the thinking budget within maxOutputTokens, the schema as JSON Schema
            config_ = body["generationConfig"]
            assert config_["thinkingConfig"]["thinkingBudget"] == 1024
            assert config_["max_output_tokens"] > 1024 and "response_json_schema" in config_
    stats = doc["results"]["stats"]["tokenUsage"]["assertions"]
    if sent == "json":
        assert "completionDetails" not in stats and "reasoning" not in flat(result.output)
        return
    assert stats["completionDetails"]["reasoning"] >= 700 * len(bodies) * (1 if sent == "gemini" else 0.5)
    assert "reasoning" in flat(result.output)


@pytest.mark.parametrize("judge", ["openai:chat:gemma-3-270m", "litellm:hosted_vllm/gemma-3-270m",
                                   "litellm:openai/gemma-3-270m"])
def test_a_rambling_local_judge_finishes_inside_its_caps(vendors, tmp_path, judge):
    """A small local model writes on inside every string; a grammar-backed server (llama.cpp's, vLLM's) stops
    it at the schema's maxLength, which factcli sizes to fit the step's cap (told apart by `grammar: false`,
    which sends the schema without lengths: every verdict with free text is then cut off)."""
    vendors.judge = rambling
    grader = '  options:\n    provider: {id: %s, config: {apiBaseUrl: "%s/v1", apiKey: none%s}}' % (judge, vendors.url,
                                                                                                  "%s")
    out = tmp_path / "r.json"
    run("-c", config(tmp_path, grader % ", grammar: false", rows=1), "-o", out)
    _, comps = components(out)
    assert sorted(t for t, _ in errors_of(comps)) == sorted(set(TYPES) - {"simpleqa"})  # its letter: no free text

    vendors.requests.clear()
    result = run("-c", config(tmp_path, grader % "", rows=2), "-o", out)
    _, comps = components(out)
    assert errors_of(comps) == [], result.output
    for body in vendors.by_path("/chat/completions"):
        schema = body["response_format"]["json_schema"]["schema"]
        free = re.findall(r'"type": "string"(?:, "maxLength": \d+)?}', json.dumps(schema))
        assert all("maxLength" in f for f in free), schema


def test_ollama_gets_its_format_with_lengths_through_litellm(vendors, tmp_path):
    vendors.judge = rambling
    grader = "  options:\n    provider: {id: ollama:chat:gemma3:270m, config: {apiBaseUrl: '%s'}}" % vendors.url
    out = tmp_path / "r.json"
    result = run("-c", config(tmp_path, grader, rows=1), "-o", out)
    _, comps = components(out)
    assert errors_of(comps) == [], result.output
    bodies = vendors.by_path("/api/chat")
    assert bodies and all(isinstance(b["format"], dict) for b in bodies)
    assert any("maxLength" in json.dumps(b["format"]) for b in bodies)


def test_dry_run_and_max_cost_reserve_the_reasoning_budget(vendors, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", vendors.url + "/v1")
    body = ('prompts: ["Paris is big."]\nproviders: [echo]\ntests:\n'
            '  - assert: [{type: factuality, value: "Paris is big."}, {type: llm-rubric, value: "is about Paris"}]\n')
    path = write(tmp_path / "c.yaml", body)
    result = runner.invoke(app, ["eval", "-c", str(path), "--dry-run"])
    line = next(x for x in result.output.splitlines() if "grader openai:gpt-5" in x)
    assert "2 calls" in line and "replies up to 2,560 tokens each" in line, line  # 512 + 2,048 of reasoning
    assert vendors.requests == []
    # a budget that holds the calls at their reply cap but not with the reasoning budget on top stops the run
    # before the second grader call: 2,560 tokens at gpt-5's $10/M output is $0.0256 a call
    result = run("-c", path, "--max-cost", "0.03", "-j", "1")
    assert "budget" in flat(result.output) and len(vendors.by_path("/chat/completions")) == 1, result.output


@pytest.mark.parametrize("message, param, sent, expected", [
    ("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
     "max_tokens", {"max_tokens": 5, "temperature": 0}, ("max_tokens", "rename", "max_completion_tokens")),
    ("litellm.BadRequestError: OpenAIException - Unsupported value: 'temperature' does not support 0 with this "
     "model. Only the default (1) value is supported.", None, {"max_tokens": 5, "temperature": 0},
     ("temperature", "drop", None)),
    ("Unsupported value: 'reasoning_effort' does not support 'low' with this model. Supported values are: 'high' "
     "and 'medium'.", "reasoning_effort", {"reasoning_effort": "low"}, ("reasoning_effort", "value", "medium")),
    ('AnthropicException - {"type":"error","error":{"type":"invalid_request_error","message":"`temperature` may '
     'only be set to 1 when thinking is enabled."}}', None, {"temperature": 0, "max_tokens": 9},
     ("temperature", "drop", None)),
    ("Unrecognized request argument supplied: seed", None, {"seed": 0, "max_tokens": 9}, ("seed", "drop", None)),
    # not a refused parameter: the prompt, the context window, a parameter that was not sent
    ("Invalid value for 'messages': expected an array", "messages", {"temperature": 0}, None),
    ("This model's maximum context length is 8192 tokens; max_tokens is too large", None, {"max_tokens": 9}, None),
    ("Unsupported parameter: 'top_p'", "top_p", {"temperature": 0}, None),
])
def test_a_400_naming_a_parameter_says_what_to_send_instead(message, param, sent, expected):
    from factcli.providers.base import adapt, refused_parameter

    found = refused_parameter(message, param, sent)
    assert found == expected
    if found:
        name, action, arg = found
        after = adapt(sent, {name: (action, arg)})
        assert name not in after or after[name] == arg
        if action == "rename":
            assert after[arg] == sent[name]


def test_a_local_servers_schema_fits_its_cap():
    from factcli.assertions.graded import FACTUALITY_REPLY
    from factcli.methods.factual_correctness import CLAIMS_REPLY, VERDICTS_REPLY
    from factcli.scoring.replies import CHARS_PER_TOKEN

    reason = FACTUALITY_REPLY.bounded_schema(512)["properties"]["reason"]
    assert reason == {"type": "string", "maxLength": int(512 * CHARS_PER_TOKEN * 0.75)}
    # one verdict per claim: the list's length is known, and its texts share what the cap holds
    cap = VERDICTS_REPLY.cap_for(3)
    verdicts = VERDICTS_REPLY.bounded_schema(cap, 3)["properties"]["verdicts"]
    assert verdicts["maxItems"] == verdicts["minItems"] == 3  # exactly: the reader refuses fewer
    item = verdicts["items"]["properties"]
    assert 3 * (item["claim"]["maxLength"] + item["reason"]["maxLength"]) <= cap * CHARS_PER_TOKEN
    # claims of a 30-word text: at most one a three words
    claims = CLAIMS_REPLY.bounded_schema(CLAIMS_REPLY.cap_for(30), 30)["properties"]["claims"]
    assert claims["maxItems"] == 10 and claims["items"]["maxLength"] >= 16


@pytest.mark.parametrize("jobs", [1, 3])
def test_a_reasoning_model_under_test_learns_its_refusals_and_shows_its_reasoning(vendors, tmp_path, jobs):
    """A model under test, not a grader: o3 given the config a chat model takes (max_tokens, temperature 0).
    One at a time, each refused parameter costs one request for the run; calls in flight together each
    meet it at most once, and every row answers. Its hidden reasoning is in the summary."""
    body = ('prompts: ["Q {{n}}"]\nproviders: [{id: openai:chat:o3, config: {apiBaseUrl: "%s/v1", max_tokens: 2000, '
            'temperature: 0}}]\ntests:\n' % vendors.url + "".join(f"  - vars: {{n: {i}}}\n" for i in range(3)))
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", body), "-o", out, "-j", jobs)
    assert result.exit_code == 0, result.output
    if jobs == 1:
        assert vendors.refusals == {("o3", "max_tokens"): 1, ("o3", "temperature"): 1}
    assert set(vendors.refusals) <= {("o3", "max_tokens"), ("o3", "temperature")}
    assert all(n <= jobs for n in vendors.refusals.values())
    sent = vendors.by_path("/chat/completions")
    answered = [b for b in sent if "max_tokens" not in b and "temperature" not in b]
    assert len(answered) == 3 and all(b["max_completion_tokens"] == 2000 for b in answered)
    rows = json.loads(out.read_text())["results"]["results"]
    assert [r["response"]["tokenUsage"]["completionDetails"]["reasoning"] for r in rows] == [700] * 3
    assert "Tokens " in result.output and "2,100 reasoning" in flat(result.output), result.output


def test_a_judge_that_always_replies_with_junk_is_an_error_not_a_failure(vendors, tmp_path):
    """Every grading a grading error (a reply no step can read): no row was judged, so none failed; the
    summary says so, the pass rate is n/a, and the exit code is contract §2's 4 (judged rows passed, some
    rows could not be judged)."""
    vendors.judge = lambda body, schema: "no idea"  # JSON, but not the object any step asks for
    grader = '  options:\n    provider: {id: openai:chat:junk-judge, config: {apiBaseUrl: "%s/v1"}}' % vendors.url
    body = CONFIG % {"grader": grader, "tests": "".join(
        f'  - vars: {{n: {i}}}\n    assert: [{{type: factuality, value: "Paris is big."}}, '
        f'{{type: llm-rubric, value: "is about Paris"}}]\n' for i in range(3))}
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", body), "-o", out)
    said = flat(result.output)
    assert "Failures: 0" in said and "Errors: 3" in said, result.output
    assert "Pass rate: n/a" in said, result.output
    assert result.exit_code == 4, result.output
    _, comps = components(out)
    assert len(comps) == 6 and all(c["metadata"]["graderError"] for c in comps)
