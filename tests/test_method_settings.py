"""The claim-level methods' one settings reader (methods/settings.py): camelCase is the documented
spelling; an older one (snake_case, `concurrency`) is read the same and named once, before any call,
with its documented spelling; a wrong value is one error naming the key; an unknown key is a warning,
or an error with "did you mean" when it is a near miss."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.scoring.registry import AssertionError_, lookup

METHODS = ("factual-correctness", "factscore", "facts-grounding", "simpleqa", "safe", "citations")

# (method, older spelling, a value) -> the documented key it is read as, with the value as the method uses it
OLDER = {
    ("factscore", "passage_words", 50): ("passageWords", 50),
    ("factscore", "batch_size", 0): ("batchSize", 0),
    ("factscore", "abstain_phrases", "Sorry"): ("abstainPhrases", ["Sorry"]),
    ("factscore", "on_abstain", "Pass"): ("onAbstain", "pass"),
    ("factscore", "skip_preambles", False): ("skipPreambles", False),
    ("factscore", "concurrency", 2): ("maxConcurrency", 2),
    ("facts-grounding", "check_sentences", False): ("checkSentences", False),
    ("facts-grounding", "min_coverage", 0.3): ("minCoverage", 0.3),
    ("facts-grounding", "max_concurrency", 3): ("maxConcurrency", 3),
    ("facts-grounding", "concurrency", 3): ("maxConcurrency", 3),
    ("facts-grounding", "context_var", "doc"): ("contextVar", "doc"),
    ("facts-grounding", "request_var", "question"): ("requestVar", "question"),
    ("safe", "concurrency", 4): ("maxConcurrency", 4),
    ("citations", "concurrency", 1): ("maxConcurrency", 1),
}


def settings_of(method):
    return lookup(method).settings


def test_every_method_declares_its_settings_and_every_older_spelling_is_tested():
    renames = {(m, old) for m in METHODS for old in settings_of(m).renames}
    assert renames == {(m, old) for m, old, _ in OLDER}


@pytest.mark.parametrize("method, old, value", list(OLDER))
def test_an_older_spelling_is_read_as_the_documented_key(method, old, value):
    new, used = OLDER[method, old, value]
    s = settings_of(method)
    assert s.read({old: value}) == {new: used} == s.read({new: value})
    assert s.renamed({old: value}) == [(old, new)] and s.renamed({new: value}) == []
    assert s.read({old: value, new: None}) == {new: used}  # a null documented key counts as not given


def test_the_documented_spelling_wins_over_the_older_one():
    assert settings_of("factscore").read({"passage_words": 50, "passageWords": 80}) == {"passageWords": 80}


@pytest.mark.parametrize("method, cfg, message", [
    ("factscore", {"passage_words": 0}, "factscore: config.passage_words must be a whole number ≥ 1, got 0"),
    ("factscore", {"maxConcurrency": "8"}, "factscore: config.maxConcurrency must be a whole number ≥ 1, got '8'"),
    ("factscore", {"batch": "yes"}, "factscore: config.batch must be true or false, got 'yes'"),
    ("factscore", {"gamma": -1}, "factscore: config.gamma must be a number ≥ 0 (0 turns the penalty off), got -1"),
    ("factscore", {"abstainPhrases": [1]}, "factscore: config.abstainPhrases must be a list of strings, got [1]"),
    ("factscore", {"retriever": "tfidf"}, "factscore: config.retriever must be one of bm25, dense, got 'tfidf'"),
    ("facts-grounding", {"min_coverage": 1.5},
     "facts-grounding: config.min_coverage must be a number in [0, 1], got 1.5"),
    ("facts-grounding", {"checkSentences": "false"},
     "facts-grounding: config.checkSentences must be true or false, got 'false'"),
    ("factual-correctness", {"beta": 0}, "factual-correctness: config.beta must be a positive number, got 0"),
    ("safe", {"claims": "some"}, "safe: config.claims must be all (SAFE) or verifiable (VeriScore), got 'some'"),
    ("simpleqa", {"profile": "papers"}, "simpleqa: config.profile must be default or reference, got 'papers'"),
    ("citations", {"concurrency": True}, "citations: config.concurrency must be a whole number ≥ 1, got True"),
])
def test_a_wrong_value_is_one_error_naming_the_key(method, cfg, message):
    with pytest.raises(AssertionError_) as caught:
        settings_of(method).read(cfg)
    assert str(caught.value) == message


def test_unknown_keys_and_shared_keys():
    s = settings_of("factscore")
    assert s.unknown({"models": [], "calibration": {}, "aggregate": "mean", "decompositionPrompt": "x",
                      "passage_words": 3, "profile": "reference", "colour": 1}) == ["colour"]
    assert settings_of("citations").unknown({"profile": "reference"}) == ["profile"]  # citations has one profile


# ---------------------------------------------------------------- through the CLI

P1, P2 = "Alpha is red.", "Beta is blue."
CONFIG = """
prompts: ["Colours? {{n}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  vars: {docs: %(docs)s}
  options:
    disableVarExpansion: true
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: {n: 1}
    assert: [{type: citations, config: {passages: docs, %(cfg)s}}]
  - vars: {n: 2}
    assert: [{type: citations, config: {passages: docs, %(cfg)s}}]
"""


def run(tmp_path, fake_openai, cfg, *args):
    fake_openai.add_rule(".", "Alpha is red [1]. Beta is blue [2].", model="m")
    fake_openai.add_rule(".", json.dumps({"entailed": True, "reason": "said"}), model="judge")
    config = write(tmp_path / "c.yaml", CONFIG % {"docs": json.dumps([P1, P2]), "cfg": cfg})
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(config), "-o", str(out), "--no-progress-bar",
                                      "--no-cache", *args])
    rows = json.loads(out.read_text())["results"]["results"] if out.exists() else None
    return result, rows


def test_an_older_spelling_warns_once_and_still_works(tmp_path, fake_openai):
    result, rows = run(tmp_path, fake_openai, "concurrency: 1")
    assert result.exit_code == 0, result.output
    warning = "citations config.concurrency is written config.maxConcurrency now (the old spelling still works)"
    assert result.output.count(warning) == 1  # two tests, one warning
    assert result.output.index(warning) < result.output.index("Colours?")  # before the table of results
    assert [r["success"] for r in rows] == [True, True]
    # the same through --strict, which refuses unknown keys: an older spelling is not one
    result, rows = run(tmp_path, fake_openai, "concurrency: 1", "--strict")
    assert result.exit_code == 0, result.output


def test_a_wrong_value_is_one_error_per_row_before_the_judge(tmp_path, fake_openai):
    result, rows = run(tmp_path, fake_openai, "maxConcurrency: many")
    for row in rows:
        assert row["error"] == "citations: config.maxConcurrency must be a whole number ≥ 1, got 'many'"
    assert not [r for r in fake_openai.requests if r["json"]["model"] == "judge"]


def test_a_near_miss_is_an_error_and_another_key_a_warning(tmp_path, fake_openai):
    result, _ = run(tmp_path, fake_openai, "maxConcurency: 2")
    assert result.exit_code == 1 and fake_openai.requests == []
    assert "config.maxConcurency: unknown key 'maxConcurency' (did you mean 'maxConcurrency'?)" in result.output
    result, rows = run(tmp_path, fake_openai, "colour: red")
    assert result.exit_code == 0 and "tests[0].assert[0].config.colour (and 1 more like it): unknown key " \
                                     "'colour' (ignored)" in result.output
    assert [r["success"] for r in rows] == [True, True]
