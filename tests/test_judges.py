"""Which judges grade an assertion is one rule (scoring/judges.judges_of): the checks before any call
(run/planning/graders.check_graders, whose graders run/planning/preflight checks), the dry run's estimate (run/planning/estimate) and the
scorer's handlers name the same judges, for panels, a method's `config.models`, its own decomposer and
embedder, a test's own `options.provider` (a typed map) and defaultTest's, against the vendor stand-ins."""

import json
import re

import pytest
from conftest import write
from fake_vendors import FakeVendors
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.loader import load_suite
from factcli.run.options import RunOptions
from factcli.run.runner import prepare
from factcli.scoring.grading import GraderSource
from factcli.scoring.judges import JudgeProblem, judges_of
from factcli.types import Assertion

runner = CliRunner()

CONFIG = """
prompts: ["Paris is big."]
providers: [echo]
defaultTest:
  vars: {context: "Paris is big.", query: "Tell me about Paris."}
  options:
    provider: %(default)s
tests:
  - description: its own grader, a typed map (text and embedding)
    options:
      provider: {text: %(test)s, embedding: %(emb_test)s}
    assert:
      - {type: factuality, value: "Paris is big."}
      - {type: answer-relevance, threshold: 0}
  - description: defaultTest's grader, panels, a method's own models
    assert:
      - {type: llm-rubric, value: "is about Paris", provider: [%(a)s, %(b)s]}
      - {type: factual-correctness, value: "Paris is big.", config: {models: [%(c)s, %(d)s]}}
      - {type: factscore, config: {knowledge: "%(kb)s", decomposer: %(dec)s, retriever: dense,
                                   embeddingProvider: %(emb_dense)s}}
      - type: assert-set
        assert:
          - {type: g-eval, value: "is about Paris", threshold: 0}
"""

TEXT = ("default", "test", "a", "b", "c", "d", "dec")
EMBEDDING = ("emb_test", "emb_dense")


@pytest.fixture(scope="module")
def _vendors():
    with FakeVendors() as server:
        yield server


@pytest.fixture
def vendors(_vendors):
    _vendors.requests.clear()
    return _vendors


def _config(tmp_path, vendors_url: str, embeddings_url: str):
    kb = tmp_path / "kb.jsonl"
    kb.write_text(json.dumps({"title": "Paris", "text": "Paris is big."}) + "\n")
    ids = {k: f"{{id: 'openai:chat:judge-{k}', config: {{apiBaseUrl: '{vendors_url}/v1', apiKey: sk-test}}}}"
           for k in TEXT}
    ids.update({k: f"{{id: 'openai:embedding:{k}', config: {{apiBaseUrl: '{embeddings_url}', apiKey: sk-test}}}}"
                for k in EMBEDDING})
    return write(tmp_path / "c.yaml", CONFIG % {**ids, "kb": kb})


EXPECTED = {("text", f"openai:chat:judge-{k}") for k in TEXT} | {("embedding", f"openai:embedding:{k}")
                                                                  for k in EMBEDDING}


def test_the_checks_the_estimate_and_the_scorer_name_the_same_judges(vendors, fake_openai, tmp_path, monkeypatch):
    monkeypatch.delenv("FACTCLI_GRADER", raising=False)
    cfg = _config(tmp_path, vendors.url, fake_openai.url)
    # the checks before any call: every grader the preflight then checks (vendor, credential, server)
    run = prepare(load_suite([cfg]), RunOptions())
    checked = {(kind, spec.id) for spec, kind in run.grader_specs}
    assert checked == EXPECTED
    assert vendors.requests == [] and fake_openai.request_count == 0
    # the dry run's estimate: a line per grader
    dry = runner.invoke(app, ["eval", "-c", str(cfg), "--dry-run", "--no-cache"])
    assert dry.exit_code == 0, dry.output
    estimated = set(re.findall(r"^  grader (\S+):", dry.output, re.M))
    assert estimated == {gid for _, gid in EXPECTED}, dry.output
    # the scorer: the models the handlers called
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-cache", "--no-progress-bar",
                                 "--no-table"])
    assert "Traceback" not in result.output, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    errored = [(c["assertion"]["type"], c["reason"]) for r in rows for c in r["gradingResult"]["componentResults"]
               if (c.get("metadata") or {}).get("graderError")]
    assert errored == [], errored
    called = {("text", f"openai:chat:{b['model']}") for b in vendors.by_path("/chat/completions")}
    called |= {("embedding", f"openai:embedding:{r['json']['model']}") for r in fake_openai.requests
               if r["path"].endswith("/embeddings")}
    assert called == EXPECTED


def _a(**fields) -> Assertion:
    return Assertion(**fields)


def test_the_rule_by_hand():
    source = GraderSource(cli="openai:chat:cli")
    roles = [(j.role, j.kind, j.spec.id) for j in judges_of(_a(type="answer-relevance"), None, source)]
    assert roles == [("judge", "text", "openai:chat:cli"), ("judge", "embedding", "openai:chat:cli")]
    # `config.models` is a panel only for a type that reads it as one
    assert [j.spec.id for j in judges_of(_a(type="factual-correctness", value="x", config={"models": ["m1", "m2"]}),
                                         None, source)] == ["m1", "m2"]
    with pytest.raises(JudgeProblem) as refused:
        judges_of(_a(type="similar", value="x", provider=["m1"]), None, source)
    assert refused.value.key == "provider" and "not supported for 'similar'" in refused.value.detail
    with pytest.raises(JudgeProblem) as empty:
        judges_of(_a(type="llm-rubric", value="x", provider=[]), None, source)
    assert (empty.value.key, empty.value.detail) == ("provider", "an empty list of judges")
    with pytest.raises(JudgeProblem) as unnamed:
        judges_of(_a(type="factscore", config={"models": ["m1", {"embedding": "e"}]}), None, source)
    assert (unnamed.value.key, unnamed.value.detail) == ("config.models[1]", "a judge needs a text model")
    # factscore's own models: the decomposer when set, the embedder only for dense retrieval
    bm25 = judges_of(_a(type="factscore", config={"decomposer": "dec", "embeddingProvider": "emb"}), None, source)
    assert [(j.role, j.spec.id) for j in bm25] == [("judge", "openai:chat:cli"), ("decomposer", "dec")]
    dense = judges_of(_a(type="factscore", config={"retriever": "dense", "embeddingProvider": "emb"}), None, source)
    assert [(j.role, j.kind, j.spec.id) for j in dense] == [("judge", "text", "openai:chat:cli"),
                                                            ("embedder", "embedding", "emb")]
    assert judges_of(_a(type="contains", value="x"), None, source) == []
