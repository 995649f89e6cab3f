"""Grader requests carry their step's JSON schema and reply cap; a server that refuses the schema is
asked in a simpler form, once per endpoint; a call that timed out is retried once. Against the fake
OpenAI-compatible server, which records each request's `response_format` and `max_tokens`."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.scoring import replies

runner = CliRunner()
SENTENCE = "Paris is big."
URL = '{apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}'


def run(*args):
    result = runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "--no-cache", *map(str, args)])
    assert "Traceback" not in result.output, result.output
    return result


def instance(schema: dict):
    """The simplest value a schema allows, every string the model's own sentence (so facts-grounding finds
    its labelled sentences in the response), every choice the first, every list one item long."""
    if "anyOf" in schema:
        return instance(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema["type"]
    if kind == "string":
        return SENTENCE
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "array":
        return [instance(schema["items"])] * max(1, schema.get("minItems", 0))
    return {k: instance(v) for k, v in schema["properties"].items()}


def schema_judge(body: dict) -> str:
    """A judge that obeys the request's schema, as a grammar-constrained server does."""
    rf = body.get("response_format")
    assert rf and rf["type"] == "json_schema", rf
    return json.dumps(instance(rf["json_schema"]["schema"]))


EVERY_TYPE = """
prompts: ["Tell me about {{topic}}."]
providers: [{id: "openai:chat:m", config: %(url)s}, {id: "openai:chat:m2", config: %(url)s}]
defaultTest:
  vars: {topic: Paris, query: "Tell me about Paris.", context: "Paris is big."}
  options:
    provider:
      text: {id: "openai:chat:judge", config: %(judge)s}
      embedding: {id: "openai:embedding:emb", config: %(url)s}
tests:
  - assert:
      - {type: factuality, value: "Paris is big."}
      - {type: llm-rubric, value: "is about Paris"}
      - {type: model-graded-closedqa, value: "is about Paris"}
      - {type: g-eval, value: "is about Paris", threshold: 0}
      - {type: answer-relevance}
      - {type: answer-relevance, config: {noncommittal: true}}
      - {type: context-precision, value: "Paris is big."}
      - {type: noise-sensitivity, value: "Paris is big."}
      - {type: context-faithfulness}
      - {type: context-recall, value: "Paris is big."}
      - {type: context-relevance}
      - {type: conversation-relevance}
      - {type: factual-correctness, value: "Paris is big."}
      - {type: factscore, config: {knowledge: "%(kb)s"}}
      - {type: facts-grounding}
      - {type: facts-grounding, config: {template: implicit_span_level}}
      - {type: facts-grounding, config: {template: span_level}}
      - {type: facts-grounding, config: {template: response_level}}
      - {type: simpleqa, value: "Paris is big."}
      - {type: select-best, value: "the most accurate"}
      - {type: safe, config: {K: 1, search: {provider: knowledge, knowledge: "%(kb)s"}}}
      - {type: safe, config: {K: 1, claims: verifiable, search: {provider: knowledge, knowledge: "%(kb)s"}}}
      - {type: safe, config: {K: 1, profile: reference, search: {provider: knowledge, knowledge: "%(kb)s"}}}
      - {type: safe, config: {K: 1, profile: reference, claims: verifiable,
                              search: {provider: knowledge, knowledge: "%(kb)s"}}}
      - {type: citations, transform: "output + ' [1]'", config: {passages: ["Paris is big."]}}
"""


def every_type_config(tmp_path, judge_config: str = "") -> str:
    kb = tmp_path / "kb.jsonl"
    kb.write_text(json.dumps({"title": "Paris", "text": SENTENCE}) + "\n")
    judge = '{apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"%s}' % judge_config
    return write(tmp_path / "c.yaml", EVERY_TYPE % {"url": URL, "judge": judge, "kb": kb})


def unbounded(schema):
    """A schema without the lengths a grammar-backed server is sent."""
    if isinstance(schema, dict):
        out = {k: unbounded(v) for k, v in schema.items() if k not in ("maxLength", "maxItems")}
        if "maxItems" in schema and schema.get("minItems") == schema["maxItems"]:
            del out["minItems"]  # a verdict per claim, exactly: not in the step's own schema
        return out
    if isinstance(schema, list):
        return [unbounded(v) for v in schema]
    return schema


def text_lengths(schema, times: int = 1) -> list:
    """The maxLength of every free-text string of a schema (None where it has none), lists counted
    by their maxItems (once when unbounded: each entry may take the whole share)."""
    if "anyOf" in schema:
        return text_lengths(schema["anyOf"][0], times)
    if schema.get("type") == "string" and "enum" not in schema:
        return [schema.get("maxLength")] * times
    if schema.get("type") == "array":
        return text_lengths(schema["items"], times * schema.get("maxItems", 1))
    if schema.get("type") == "object":
        return [n for v in schema["properties"].values() for n in text_lengths(v, times)]
    return []


def graded_components(out):
    doc = json.loads(out.read_text())
    comps = [c for r in doc["results"]["results"] for c in r["gradingResult"]["componentResults"]]
    return doc, comps


def test_every_grader_request_carries_its_steps_schema_and_cap(fake_openai, tmp_path):
    fake_openai.add_rule(".", SENTENCE, model="m")
    fake_openai.add_rule(".", SENTENCE, model="m2")
    fake_openai.add_rule(".", schema_judge, model="judge")
    out = tmp_path / "r.json"
    result = run("-c", every_type_config(tmp_path), "-o", out)
    doc, comps = graded_components(out)
    assert len(comps) == 2 * 25
    errors = [(c["assertion"]["type"], c["reason"]) for c in comps if (c.get("metadata") or {}).get("graderError")]
    assert errors == [], result.output
    judge = [g for g in fake_openai.generations if g["model"] == "judge"]
    names = {g["response_format"]["json_schema"]["name"] for g in judge}
    # every step of every model-graded type was asked (conversation-relevance's summary only runs after
    # an irrelevant window, facts-grounding's baseline only when configured)
    assert names == set(replies.REPLIES) - {"conversation_relevance_reason", "baseline_response"}
    for g in judge:
        rf = g["response_format"]
        assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
        reply = replies.REPLIES[rf["json_schema"]["name"]]
        # a server on this machine is taken for a grammar-backed one (llama.cpp, vLLM, Ollama): its free-text
        # fields carry a maxLength that fits the cap, and nothing else differs from the step's schema
        sent = rf["json_schema"]["schema"]
        assert unbounded(sent) == reply.json_schema()
        lengths = text_lengths(sent)
        assert all(n is not None for n in lengths), sent
        assert sum(lengths) <= max(g["max_tokens"] * replies.CHARS_PER_TOKEN, len(lengths) * replies.MIN_CHARS)
        assert g["max_tokens"] <= reply.cap <= 2048
        if not reply.per_item:
            assert g["max_tokens"] == reply.cap
    caps = {g["response_format"]["json_schema"]["name"]: g["max_tokens"] for g in judge}
    assert caps["factuality"] == caps["llm_rubric"] == 512
    # caps that follow the input: "Paris is big." is 3 words (64 + 3 × 3), its one claim one verdict (32 + 96)
    assert caps["claims"] == caps["facts"] == 73 and caps["claim_verdicts"] == caps["fact_verdicts"] == 128
    # the models under test are asked as their config says: no schema, no cap
    assert all(g["response_format"] is None and g["max_tokens"] is None
               for g in fake_openai.generations if g["model"] in ("m", "m2"))


def test_a_graders_own_max_tokens_wins(fake_openai, tmp_path):
    fake_openai.add_rule(".", SENTENCE, model="m")
    fake_openai.add_rule(".", SENTENCE, model="m2")
    fake_openai.add_rule(".", schema_judge, model="judge")
    out = tmp_path / "r.json"
    run("-c", every_type_config(tmp_path, ", max_tokens: 3000"), "-o", out)
    _, comps = graded_components(out)
    assert not [c for c in comps if (c.get("metadata") or {}).get("graderError")]
    judge = [g for g in fake_openai.generations if g["model"] == "judge"]
    assert judge and all(g["max_tokens"] == 3000 and g["response_format"]["type"] == "json_schema" for g in judge)


# ---------------------------------------------------------------- a server without structured output

THREE = """
prompts: ["Q: {{question}}"]
providers: [{id: "openai:chat:m", config: %(url)s}]
tests:
%(tests)s
"""
TEST = """  - vars: {question: "q%(i)d"}
    assert:
      - {type: factuality, value: "Paris is big.", provider: {id: "openai:chat:%(judge)s", config: %(url)s}}
      - {type: llm-rubric, value: "is about Paris", provider: {id: "openai:chat:%(judge)s", config: %(url)s}}
      - {type: factual-correctness, value: "Paris is big.", provider: {id: "openai:chat:%(judge)s", config: %(url)s}}
"""


def text_judge(body: dict) -> str:
    """A judge without a grammar: it answers what the step's prompt asks for."""
    system = json.dumps(body["messages"])
    if "Choose exactly one category" in system:
        return '{"category": "A", "reason": "same"}'
    if "Break the text into atomic claims" in system:
        return '{"claims": ["Paris is big."]}'
    if "For each numbered claim" in system:
        return '{"verdicts": [{"claim": "Paris is big.", "verdict": "SUPPORTED", "reason": "stated"}]}'
    return '{"reason": "fine", "pass": true, "score": 1}'


@pytest.mark.parametrize("refused, form, per_endpoint", [
    (("json_schema",), {"type": "json_object"}, 1),
    (("json_schema", "json_object"), None, 2),
])
def test_a_server_refusing_the_schema_still_grades_every_row(fake_openai, tmp_path, monkeypatch, refused, form,
                                                             per_endpoint):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")  # a 400 is never retried anyway: the fallback is not a retry
    fake_openai.refuse_response_format(*refused)
    fake_openai.add_rule(".", SENTENCE, model="m")
    for judge in ("judge", "judge2"):
        fake_openai.add_rule(".", text_judge, model=judge)
    tests = "".join(TEST % {"i": i, "judge": "judge" if i % 2 else "judge2", "url": URL} for i in range(10))
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", THREE % {"url": URL, "tests": tests}), "-o", out, "-j", "8")
    assert result.exit_code == 0, result.output
    doc, comps = graded_components(out)
    assert len(comps) == 30 and all(c["pass"] for c in comps)
    # one refused request per endpoint and form refused, however many calls were in flight
    assert fake_openai.format_refusals == 2 * per_endpoint
    assert " ".join(result.output.split()).count("refused the reply's JSON schema") == 2  # one warning per endpoint
    for judge in ("judge", "judge2"):
        sent = [g["response_format"] for g in fake_openai.generations if g["model"] == judge]
        assert [rf["type"] for rf in sent[:per_endpoint]] == list(refused)
        assert all(rf == form for rf in sent[per_endpoint:])
        assert len(sent) == per_endpoint + 5 * 6  # 5 rows: factuality, llm-rubric, 2 decompositions, 2 verifications


# ---------------------------------------------------------------- timeouts

TIMEOUT_CONFIG = """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m", config: %(url)s}]
tests:
  - vars: {n: one}
""" % {"url": URL}


def test_a_timed_out_generation_is_retried_once(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_TIMEOUT_MS", "300")
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "4")
    fake_openai.enqueue_hang(seconds=3, times=5)
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", TIMEOUT_CONFIG), "-o", out)
    assert result.exit_code == 100
    row = json.loads(out.read_text())["results"]["results"][0]
    assert fake_openai.request_count == 2  # the first try and one retry, not 1 + 4
    assert row["factcli"]["retries"] == 1
    assert row["error"].startswith("timed out after 0.3 s twice (a timed-out call is retried once); raise the limit "
                                   "with evaluateOptions.timeoutMs in the config or FACTCLI_TIMEOUT_MS")


def test_a_timeout_then_an_answer_succeeds_and_5xx_keep_their_retries(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_TIMEOUT_MS", "300")
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "4")
    monkeypatch.setenv("FACTCLI_BACKOFF_MS", "1")
    fake_openai.enqueue_fault(500, times=3)
    fake_openai.enqueue_hang(seconds=3)
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", TIMEOUT_CONFIG), "-o", out)
    assert result.exit_code == 0, result.output
    row = json.loads(out.read_text())["results"]["results"][0]
    assert row["success"] and row["factcli"]["retries"] == 4 and fake_openai.request_count == 5


# ---------------------------------------------------------------- what a dry run reserves


def test_dry_run_reserves_each_steps_cap(fake_openai, tmp_path):
    tests = "".join(TEST % {"i": i, "judge": "judge", "url": URL} for i in range(2))
    result = runner.invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", THREE % {"url": URL, "tests": tests})),
                                 "--dry-run"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "grader openai:chat:judge" in x)
    assert "4 calls" in line and "replies up to 512 tokens each" in line, line
    assert fake_openai.request_count == 0


def test_through_litellm_too_a_refused_schema_falls_back_once(fake_openai, tmp_path):
    fake_openai.refuse_response_format("json_schema")
    fake_openai.add_rule(".", SENTENCE, model="m")
    fake_openai.add_rule(".", text_judge, model="judge3")
    judge = '{id: "litellm:openai/judge3", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", apiKey: sk-test}}'
    tests = "".join(f'  - vars: {{question: "q{i}"}}\n    assert: [{{type: factuality, value: "Paris is big.", '
                    f'provider: {judge}}}]\n' for i in range(4))
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", THREE % {"url": URL, "tests": tests}), "-o", out, "-j", "4")
    assert result.exit_code == 0, result.output
    _, comps = graded_components(out)
    assert len(comps) == 4 and all(c["pass"] for c in comps)
    sent = [g for g in fake_openai.generations if g["model"] == "judge3"]
    assert fake_openai.format_refusals == 1 and len(sent) == 5
    assert sent[0]["response_format"]["type"] == "json_schema" and sent[0]["max_tokens"] == 512
    assert all(g["response_format"] == {"type": "json_object"} for g in sent[1:])
