"""A RAG team's release gate (issue 44): the assertions that take a context read the retrieved passages
from the provider's response (facts-grounding as the RAG types), a judge that ignores the schema is a
grading error (context-relevance's prose), each statement keeps its verdict, reason and passage, a
list-valued context var is warned about, traces score as tests, and the budget sees every price."""

import json
import shutil

import pytest
from conftest import ROOT, write
from test_facts_grounding import scripted_judge
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
JUDGE = '{id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'
PASSAGES = ["Alpha is red.", "Beta is blue.", "Delta is yellow."]
RAG_APP = f'''
def call_api(prompt, options, context):
    return {{"output": "Alpha is red. Beta is blue.", "metadata": {{"contexts": {PASSAGES!r}}}}}
'''
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")


def _eval(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "--no-cache", *map(str, args)])


def _said(result) -> str:
    return " ".join(result.output.split())


@pytest.mark.parametrize("transform", [pytest.param("context.metadata.contexts", marks=needs_node),
                                       "file://transforms.py:passages"])
def test_facts_grounding_reads_the_passages_from_the_providers_metadata(fake_openai, tmp_path, transform):
    write(tmp_path / "app.py", RAG_APP)
    write(tmp_path / "transforms.py", "def passages(output, context):\n    return context['metadata']['contexts']\n")
    # the scripted judge answers in FACTS' own words: from a server that takes no schema, so they are read
    fake_openai.refuse_response_format("json_schema", "json_object")
    fake_openai.add_rule(".", scripted_judge({"Alpha": ("No Issues", ["supported", "supported"])}), model="judge")
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Request: which colours?"]
providers: [file://app.py]
tests:
  - assert:
      - {{type: facts-grounding, provider: {JUDGE}, contextTransform: "{transform}"}}
""")
    out = tmp_path / "r.json"
    result = _eval("-c", cfg, "-o", out)
    assert result.exit_code == 0, result.output
    sent = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests
            if r["json"]["model"] == "judge" and "<response>" in r["json"]["messages"][-1]["content"]]
    assert sent and all("Alpha is red.\n\nBeta is blue.\n\nDelta is yellow." in s for s in sent)
    row = json.loads(out.read_text())["results"]["results"][0]
    assert row["response"]["metadata"]["contexts"] == PASSAGES
    assert row["gradingResult"]["componentResults"][0]["score"] == 1


@pytest.mark.parametrize("kind, prompt", [("facts-grounding", "Request: which colours?"),
                                          ("factscore", "Alan Turing was an English mathematician.")])
def test_a_context_transform_that_fails_names_the_assertion(fake_openai, tmp_path, kind, prompt):
    write(tmp_path / "t.py", "def passages(output, context):\n    return context['metadata']['contexts']\n")
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["{prompt}"]
providers: [echo]
tests:
  - assert: [{{type: {kind}, provider: {JUDGE}, contextTransform: "file://t.py:passages"}}]
""")
    result = _eval("-c", cfg)
    assert result.exit_code == 100, result.output  # echo has no metadata: an ERROR row, named
    assert f"{kind}: its contextTransform failed" in _said(runner.invoke(app, ["show", "latest", "0"]))
    assert not fake_openai.requests  # before any grader call


def test_factual_correctness_takes_its_reference_from_a_context_transform(fake_openai, tmp_path):
    from test_factual_correctness import REFERENCE, scripted_judge as fc_judge

    write(tmp_path / "app.py", f'''
def call_api(prompt, options, context):
    return {{"output": "The capital of France is Paris. The Eiffel Tower was completed in 1889.",
             "metadata": {{"contexts": {[REFERENCE]!r}}}}}
''')
    write(tmp_path / "t.py", "def passages(output, context):\n    return context['metadata']['contexts']\n")
    fake_openai.add_rule(".", fc_judge, model="judge")
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Tell me about Paris."]
providers: [file://app.py]
tests:
  - assert: [{{type: factual-correctness, provider: {JUDGE}, contextTransform: "file://t.py:passages"}}]
""")
    out = tmp_path / "r.json"
    assert _eval("-c", cfg, "-o", out).exit_code == 0
    assert json.loads(out.read_text())["results"]["results"][0]["score"] == 1


RELEVANCE = f"""
prompts: ["Ask: {{{{query}}}}"]
providers: [echo]
defaultTest: {{options: {{provider: {JUDGE}}}}}
tests:
  - vars: {{query: "Where is Paris?", context: "Paris is in France. Bananas are yellow."}}
    assert: [{{type: context-relevance, threshold: 0.5}}]
"""


def test_a_prose_reply_to_context_relevance_is_a_grading_error_not_a_score(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    fake_openai.add_rule(".", "Sure, here is my analysis of the context.\nIt looks relevant to me.", model="judge")
    out = tmp_path / "r.json"
    result = _eval("-c", write(tmp_path / "c.yaml", RELEVANCE), "-o", out)
    assert result.exit_code == 4, result.output
    comp = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]
    assert comp["metadata"]["graderError"] is True and comp["score"] == 0
    assert "does not fit the context_relevance step's JSON schema" in comp["reason"]
    assert comp["metadata"]["graderRaw"].startswith("Sure, here is my analysis")
    assert "extractedSentences" not in comp["metadata"]
    fake_openai.clear_rules()
    fake_openai.add_rule(".", '{"sentences": ["Paris is in France."]}', model="judge")
    assert _eval("-c", write(tmp_path / "c.yaml", RELEVANCE)).exit_code == 0  # the schema's reply: a score


def test_each_statement_keeps_its_verdict_reason_and_passage(fake_openai, tmp_path):
    def judge(body):
        text = body["messages"][-1]["content"]
        if "<statements>" in text:
            return json.dumps({"verdicts": [{"reason": "Passage 2 says Beta is blue.", "verdict": "Yes"},
                                            {"reason": "No passage mentions Gamma.", "verdict": "No"}]})
        if "<question>" in text:
            return json.dumps({"statements": ["Beta is blue.", "Gamma is green."]})
        return json.dumps({"sentences": [{"sentence": "Alpha is red.", "reason": "The first passage.",
                                          "attributed": True}]})

    fake_openai.add_rule(".", judge, model="judge")
    # the echo provider answers the statements the judge lists (issue 52: statements must be the answer's)
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Beta is blue. Gamma is green. Q: {{{{query}}}}"]
providers: [echo]
defaultTest: {{options: {{provider: {JUDGE}, disableVarExpansion: true}}}}
tests:
  - vars: {{query: "Which colours?", context: {json.dumps(PASSAGES)}}}
    assert: [{{type: context-faithfulness}}, {{type: context-recall, value: "Alpha is red."}}]
""")
    out = tmp_path / "r.json"
    result = _eval("-c", cfg, "-o", out)
    assert result.exit_code == 0, result.output
    faith, recall = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"]
    assert faith["score"] == 0.5
    assert faith["metadata"]["claims"] == [
        {"text": "Beta is blue.", "verdict": "Yes", "supported": True, "reason": "Passage 2 says Beta is blue.",
         "evidence": "Beta is blue.", "evidenceId": "passage 2"},
        {"text": "Gamma is green.", "verdict": "No", "supported": False, "reason": "No passage mentions Gamma.",
         "evidence": None, "evidenceId": None}]
    assert recall["metadata"]["claims"][0]["evidenceId"] == "passage 1"
    shown = _said(runner.invoke(app, ["show", "latest", "0"]))
    assert "[Yes] Beta is blue. reason: Passage 2 says Beta is blue. evidence (passage 2): Beta is blue." in shown
    assert "[No] Gamma is green. reason: No passage mentions Gamma." in shown
    html = tmp_path / "r.html"
    runner.invoke(app, ["export", "latest", "-o", str(html)])
    page = html.read_text()
    assert "No passage mentions Gamma." in page and "evidence (passage 2)" in page
    from starlette.testclient import TestClient

    from factcli.store.database import Store, default_target
    from factcli.web.app import create_app

    with Store.open(default_target()) as store:
        run_id = store.resolve("latest")["id"]
    cell = TestClient(create_app(default_target())).get(f"/runs/{run_id}/cell/0/0").text  # the web cell page
    assert "No passage mentions Gamma." in cell and "evidence (passage 2)" in cell


def test_a_list_valued_context_var_that_expands_is_warned_about(tmp_path):
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Q: {{{{query}}}}"]
providers: [echo]
tests:
  - vars: {{query: "Which colours?", context: {json.dumps(PASSAGES)}}}
""")
    result = _eval("-c", cfg)
    said = _said(result)
    assert "its `context` var is a list of 3, which var expansion makes 3 rows" in said
    assert "disableVarExpansion" in said and "3/3 rows" in said


def test_traces_score_as_tests_labelled_as_their_system(fake_openai, tmp_path):
    """Production traces (input, output, passages) from JSONL, without code: providerOutput and the
    context var; the provider is not called, and the column is named after the traces' system."""
    write(tmp_path / "traces.jsonl", "\n".join(json.dumps(t) for t in [
        {"vars": {"query": "Which colours?", "context": PASSAGES}, "providerOutput": "Alpha is red."},
        {"vars": {"query": "Which colours?", "context": PASSAGES}, "providerOutput": "Gamma is green."},
    ]) + "\n")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["{{query}}"]
providers: [{id: echo, label: support-bot-2025-06}]
defaultTest:
  options: {disableVarExpansion: true}
  assert: [{type: contains-any, value: ["Alpha", "Beta", "Delta"]}]
tests: file://traces.jsonl
""")
    out = tmp_path / "r.json"
    result = _eval("-c", cfg, "-o", out)
    assert result.exit_code == 100, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    assert [r["response"]["output"] for r in rows] == ["Alpha is red.", "Gamma is green."]
    assert [r["success"] for r in rows] == [True, False] and rows[0]["provider"]["label"] == "support-bot-2025-06"


def test_the_budget_knows_the_graders_and_the_embedders_prices(fake_openai, tmp_path, monkeypatch):
    """Grader prices set in its config and an embedding model's price from litellm's table count under
    --max-cost as under --dry-run (issue 44: "no price is known for openai:chat:judge")."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    fake_openai.add_rule(".", '{"reason": "fine", "pass": true, "score": 1}', model="judge")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q: {{q}}"]
providers: [echo]
defaultTest:
  options:
    provider:
      text: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", inputCost: 0.000001, outputCost: 0.000002}}
      embedding: {id: "openai:embedding:text-embedding-3-small", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: {q: one}
    assert: [{type: llm-rubric, value: polite}]
""")
    result = _eval("-c", cfg, "--max-cost", "1")
    assert result.exit_code == 0, result.output
    assert "no price is known" not in result.output and "is not a parameter" not in result.output
    cfg.write_text(cfg.read_text().replace("type: llm-rubric, value: polite", "type: answer-relevance"))
    dry = _said(_eval("-c", cfg, "--max-cost", "1", "--dry-run"))
    assert "grader openai:embedding:text-embedding-3-small: 4 embeddings; ~256 tokens" in dry, dry
    assert "grader openai:chat:judge: 3 calls" in dry


def test_the_rag_example_runs_offline_and_its_gates_judge_it(tmp_path):
    out = tmp_path / "r.json"
    result = _eval("-c", ROOT / "examples/rag/promptfooconfig.yaml", "-o", out)
    assert result.exit_code == 100, result.output  # `embellishing` fails its faithfulness gate
    gates = {(g["column"], g["metric"]): g["passed"] for g in json.loads(out.read_text())["factcli"]["gates"]}
    assert gates == {("[grounded]", "faithfulness"): True, ("[grounded]", "recall"): True,
                     ("[grounded]", "pass-rate"): True, ("[embellishing]", "faithfulness"): False,
                     ("[embellishing]", "recall"): True, ("[embellishing]", "pass-rate"): False}
    rows = json.loads(out.read_text())["results"]["results"]
    assert all(r["response"]["metadata"]["contexts"] for r in rows)
    # a row's assertions run side by side but are added in the config's order: its reason (the last
    # failure) and its named scores' order are the same on every run, whichever judge answered first
    failed = [r["gradingResult"] for r in rows if not r["success"]]
    assert failed and all(list(g["namedScores"]) == ["faithfulness", "recall", "grounding"] for g in failed)
    assert all(g["reason"].startswith("FACTS grounding") for g in failed)


def test_model_outputs_take_a_traces_vars_and_its_system(fake_openai, tmp_path):
    """`--model-outputs traces.jsonl`: each trace's output with its vars (the question, the passages as
    one `context` value), the column named after the traces' system."""
    fake_openai.add_rule("<statements>", json.dumps({"verdicts": [{"reason": "passage 1", "verdict": "Yes"}]}),
                         model="judge")
    fake_openai.add_rule("<question>", json.dumps({"statements": ["Alpha is red."]}), model="judge")
    traces = write(tmp_path / "traces.jsonl", "\n".join(json.dumps(
        {"output": "Alpha is red.", "vars": {"query": "Which colour is Alpha?", "context": PASSAGES},
         "system": "support-bot-2025-06"}) for _ in range(2)) + "\n")
    judge = f'{{id: "openai:chat:judge", config: {{apiBaseUrl: "{fake_openai.url}"}}}}'
    asserts = write(tmp_path / "asserts.yaml", f"[{{type: context-faithfulness, provider: {judge}}}]\n")
    out = tmp_path / "r.json"
    result = _eval("--assertions", asserts, "--model-outputs", traces, "-o", out)
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    assert len(rows) == 2 and all(r["vars"]["context"] == PASSAGES for r in rows)
    assert {r["provider"]["label"] for r in rows} == {"support-bot-2025-06"}
    bad = write(tmp_path / "bad.jsonl", '{"output": "x", "vars": ["q"]}\n')
    refused = _eval("--assertions", asserts, "--model-outputs", bad)
    assert refused.exit_code == 1 and "[0].vars: vars must be a mapping" in _said(refused), refused.output


TURING_PASSAGES = ["Alan Turing was an English mathematician and computer scientist.",
                   "Turing was born on 23 June 1912 in Maida Vale, London.",
                   "Bananas are a yellow fruit."]
TURING_APP = f'''
def call_api(prompt, options, context):
    return {{"output": "Alan Turing was an English mathematician. He was born in 1912 in London.",
             "metadata": {{"contexts": {TURING_PASSAGES!r}}}}}
'''


@pytest.mark.parametrize("transform", [pytest.param("context.metadata.contexts", marks=needs_node),
                                       "file://transforms.py:passages"])
def test_factscore_checks_the_facts_against_the_providers_passages(fake_openai, tmp_path, transform):
    from test_factscore import _block, _passages, script_judge

    write(tmp_path / "app.py", TURING_APP)
    write(tmp_path / "transforms.py", "def passages(output, context):\n    return context['metadata']['contexts']\n")
    # a configured knowledge source that the transform replaces: none of its text may reach the judge
    write(tmp_path / "kb" / "Alan Turing.txt", "KNOWLEDGE SOURCE: Alan Turing was an English mathematician, "
                                               "born on 23 June 1912 in London.")
    script_judge(fake_openai)
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Who was Alan Turing?"]
providers: [file://app.py]
tests:
  - assert:
      - type: factscore
        provider: {JUDGE}
        contextTransform: "{transform}"
        config: {{knowledge: kb, k: 1, batch: false, gamma: 0}}
""")
    out = tmp_path / "r.json"
    result = _eval("-c", cfg, "-o", out)
    assert result.exit_code == 0, result.output
    shown = [_passages(_block(r["json"]["messages"][-1]["content"], "passages")) for r in fake_openai.requests
             if r["json"]["model"] == "judge" and "<passages>" in r["json"]["messages"][-1]["content"]]
    assert len(shown) == 4  # one verification call a fact, each with its top k=1 of the provider's passages
    assert all(len(p) == 1 for p in shown)
    texts = {p[0][2] for p in shown}
    assert texts == set(TURING_PASSAGES[:2])  # the banana passage ranks below for every fact
    assert not any("KNOWLEDGE SOURCE" in json.dumps(r["json"]) for r in fake_openai.requests)
    comp = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]
    assert comp["metadata"]["knowledge"] == "contextTransform" and comp["score"] == 1
    assert {f["evidence"] for f in comp["metadata"]["facts"]} == set(TURING_PASSAGES[:2])


def test_factscore_shows_all_the_providers_passages_when_there_are_fewer_than_k(fake_openai, tmp_path):
    from test_factscore import _block, _passages, script_judge

    write(tmp_path / "app.py", TURING_APP)
    write(tmp_path / "t.py", "def passages(output, context):\n    return context['metadata']['contexts'][:2]\n")
    script_judge(fake_openai)
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Who was Alan Turing?"]
providers: [file://app.py]
tests:
  - assert: [{{type: factscore, provider: {JUDGE}, contextTransform: "file://t.py:passages", config: {{gamma: 0}}}}]
""")
    assert _eval("-c", cfg).exit_code == 0
    shown = [_passages(_block(r["json"]["messages"][-1]["content"], "passages")) for r in fake_openai.requests
             if r["json"]["model"] == "judge" and "<passages>" in r["json"]["messages"][-1]["content"]]
    assert len(shown) == 1  # one batch of four facts, k=5 > 2 passages: both shown, each whole
    assert [(title, text) for _, title, text in shown[0]] == [("passage 1", TURING_PASSAGES[0]),
                                                             ("passage 2", TURING_PASSAGES[1])]


def test_a_factscore_context_transform_that_returns_no_texts_is_an_error_row(fake_openai, tmp_path):
    write(tmp_path / "app.py", TURING_APP)
    write(tmp_path / "t.py", "def passages(output, context):\n    return {'not': 'a list'}\n")
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Who was Alan Turing?"]
providers: [file://app.py]
tests:
  - assert: [{{type: factscore, provider: {JUDGE}, contextTransform: "file://t.py:passages"}}]
""")
    assert _eval("-c", cfg).exit_code == 100
    shown = _said(runner.invoke(app, ["show", "latest", "0"]))
    # the one rule every context-taking type follows (registry.transformed_passages), in its words
    assert "factscore: its contextTransform must return a text or a list of texts (the passages), got dict" in shown
    assert not fake_openai.requests  # refused before any grader call


@pytest.mark.parametrize("kind", ["facts-grounding", "factual-correctness", "citations"])
def test_every_context_taking_type_refuses_a_transform_that_returns_no_texts_alike(fake_openai, tmp_path, kind):
    write(tmp_path / "app.py", RAG_APP)
    write(tmp_path / "t.py", "def passages(output, context):\n    return {'not': 'a list'}\n")
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Request: which colours?"]
providers: [file://app.py]
tests:
  - assert: [{{type: {kind}, value: "Alpha is red.", provider: {JUDGE}, contextTransform: "file://t.py:passages"}}]
""")
    assert _eval("-c", cfg).exit_code == 100
    shown = _said(runner.invoke(app, ["show", "latest", "0"]))
    assert f"{kind}: its contextTransform must return a text or a list of texts (the passages), got dict" in shown
    assert not fake_openai.requests


