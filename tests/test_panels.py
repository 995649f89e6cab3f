"""Judge panels (issue 8): one aggregation rule for every panel-capable type, scripted judges of
known behaviour on the fake server (one model name per behaviour), failing judges, the family warning."""

import json

import pytest
from aiohttp import web
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.scoring.panels import JudgeVerdict, aggregate, model_family, same_family

runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "--no-cache", *map(str, args)])


# ---------------------------------------------------------------- the rule itself


def v(name, score=None, passed=None, error=None):
    return JudgeVerdict(name, score=score, passed=passed, error=error)


def test_mean_majority_unanimous_and_a_tie():
    three = [v("a", 1.0), v("b", 1.0), v("c", 0.0)]
    mean = aggregate(three, 0.5, "mean")
    assert (mean.score, mean.passed, mean.error) == (pytest.approx(2 / 3), True, None)
    assert aggregate(three, 0.7, "mean").passed is False
    assert aggregate(three, 0.5, "majority").passed is True
    assert aggregate(three, 0.5, "majority").rule() == "majority 2-1"
    unanimous = aggregate(three, 0.5, "unanimous")
    assert unanimous.passed is False and unanimous.score == pytest.approx(2 / 3)  # the score stays the mean
    tie = aggregate([v("a", 1.0), v("b", 0.0)], 0.5, "majority")
    assert tie.error == "the judges tie under majority voting (1 pass, 1 fail)"


def test_a_judge_vote_wins_over_its_score_and_a_panel_of_one_is_its_judge():
    # llm-rubric style: a judge may score 0.9 and still vote fail
    votes = [v("a", 0.9, passed=False), v("b", 0.9, passed=False), v("c", 0.1, passed=True)]
    assert aggregate(votes, 0.5, "majority").passed is False
    assert aggregate(votes, 0.5, "mean").passed is True  # mean decides by the scores
    # factuality style: weight 0.3 passes on its own, whatever the threshold
    assert aggregate([v("a", 0.3, passed=True)], 0.5, "mean").passed is True


def test_failed_judges_are_left_out_and_all_failed_is_an_error():
    panel = aggregate([v("a", 1.0), v("b", error="HTTP 500"), v("c", 0.0)], 0.5, "mean")
    assert panel.score == 0.5 and panel.passed is True
    assert [j.judge for j in panel.failed] == ["b"] and panel.metadata()["judgesFailed"] == ["b"]
    assert panel.failed_note() == "1 of 3 judges failed and was left out: b: HTTP 500"
    assert [m.get("error") for m in panel.judges_meta()] == [None, "HTTP 500", None]
    assert "score" not in panel.judges_meta()[1]  # a failed judge is never counted as a verdict
    # with the failed judge out, a 2-1 majority would be a 1-1 tie
    assert aggregate([v("a", 1.0), v("b", error="x"), v("c", 0.0)], 0.5, "majority").error.startswith("the judges tie")
    assert aggregate([v("a", 1.0), v("b", error="x")], 0.5, "unanimous").passed is True
    every = aggregate([v("a", error="HTTP 500"), v("b", error="no JSON")], 0.5, "mean")
    assert every.error == "all 2 judges failed: a: HTTP 500; b: no JSON" and every.score is None
    assert aggregate([v("a", error="HTTP 500")], 0.5).error == "HTTP 500"


def test_model_families():
    assert same_family("openai:gpt-5", "openai:chat:gpt-5-mini") == "openai gpt"
    assert same_family("anthropic:messages:claude-sonnet-4-5", "anthropic:claude-3-5-haiku-20241022")
    assert same_family("bedrock:us.anthropic.claude-3-7-sonnet-20250219-v1:0", "anthropic:messages:claude-opus-4-1")
    assert same_family("openrouter:meta-llama/llama-3.1-70b-instruct", "ollama:chat:llama3.1:8b") == "meta llama"
    assert same_family("openai:gpt-5", "anthropic:messages:claude-sonnet-4-5") is None
    assert model_family("google:gemini-2.5-pro") == "google gemini"
    assert model_family("olmo-2-7b") == "olmo"  # unknown models: their leading word
    assert model_family("echo") is None and model_family("python:provider.py") is None
    assert model_family("file://provider.py") is None and model_family("openai:chat:m") is None


# ---------------------------------------------------------------- scripted judges, end to end

# Per type: the assertion value and the reply of a judge that passes, one that fails, and one
# whose reply cannot be read. g-eval judges answer both of its steps.
def _geval(score):
    def reply(body):
        text = body["messages"][-1]["content"]
        if "Evaluation steps" not in text:
            return '{"steps": ["Check the answer"]}'
        return score if isinstance(score, str) else json.dumps({"score": score, "reason": f"scored {score}"})
    return reply


TYPES = {
    "factuality": ("Paris", '{"category": "C", "reason": "same details"}',
                   '{"category": "D", "reason": "they disagree"}', "no idea"),
    "llm-rubric": ("names the capital", '{"pass": true, "score": 1, "reason": "fine"}',
                   '{"pass": false, "score": 0, "reason": "wrong"}', "no json here"),
    "model-graded-closedqa": ("names Paris", "It names Paris.\nY", "It does not.\nN", "Perhaps."),
    "g-eval": ("correct", _geval(9), _geval(2), _geval("a fine answer")),
}
SCORES = {"factuality": (1.0, 0.0), "llm-rubric": (1.0, 0.0), "model-graded-closedqa": (1.0, 0.0),
          "g-eval": (0.9, 0.2)}


def _down(body):
    raise web.HTTPInternalServerError()


def script(fake_openai, kind):
    _, yes, no, garbage = TYPES[kind]
    fake_openai.add_rule("Q:", "Paris.", model="m")
    for model, reply in (("yes", yes), ("yes2", yes), ("no", no), ("no2", no), ("garbage", garbage),
                         ("down", _down)):
        fake_openai.add_rule(".", reply, model=model)


def judge(model):
    return f'{{id: "openai:chat:{model}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}'


def config(kind, judges, aggregate_mode=None, threshold=0.5, negate=False, provider="openai:chat:m"):
    value = TYPES[kind][0]
    extra = f"\n        config: {{aggregate: {aggregate_mode}}}" if aggregate_mode else ""
    extra += f"\n        threshold: {threshold}" if threshold is not None else ""
    return f"""
prompts: ["Q: capital of France?"]
providers: [{{id: "{provider}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
tests:
  - assert:
      - type: {'not-' if negate else ''}{kind}
        value: "{value}"
        provider: [{', '.join(judge(j) for j in judges)}]{extra}
"""


def graded(tmp_path, text):
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", text), "-o", out)
    assert out.exists(), result.output
    doc = json.loads(out.read_text())
    return result, doc, doc["results"]["results"][0]["gradingResult"]["componentResults"][0]


KINDS = list(TYPES)


@pytest.mark.parametrize("kind", KINDS)
def test_mean_of_three_judges(fake_openai, tmp_path, kind):
    script(fake_openai, kind)
    hi, lo = SCORES[kind]
    _, _, comp = graded(tmp_path, config(kind, ["yes", "yes2", "no"]))
    meta = comp["metadata"]
    assert comp["score"] == pytest.approx((2 * hi + lo) / 3) and comp["pass"] is True
    assert [j["judge"] for j in meta["judges"]] == ["openai:chat:yes", "openai:chat:yes2", "openai:chat:no"]
    assert [j["verdict"] for j in meta["judges"]] == ["PASS", "PASS", "FAIL"]
    assert [j["score"] for j in meta["judges"]] == pytest.approx([hi, hi, lo])
    assert all(j["reason"] and "cost" in j for j in meta["judges"])
    assert meta["aggregate"] == "mean" and meta["judgesFailed"] == []
    assert comp["reason"].startswith("Judge panel PASS (mean of 3 judges;")
    _, _, comp = graded(tmp_path, config(kind, ["yes", "no", "no2"]))
    assert comp["pass"] is False and comp["score"] == pytest.approx((hi + 2 * lo) / 3)


@pytest.mark.parametrize("kind", KINDS)
def test_majority_unanimous_and_a_tie(fake_openai, tmp_path, kind):
    script(fake_openai, kind)
    _, _, comp = graded(tmp_path, config(kind, ["yes", "no", "no2"], "majority", threshold=0.3))
    assert comp["pass"] is False and "majority 1-2" in comp["reason"]  # votes decide, not the mean
    _, _, comp = graded(tmp_path, config(kind, ["yes", "yes2", "no"], "unanimous"))
    assert comp["pass"] is False and "unanimous 2-1" in comp["reason"]
    _, _, comp = graded(tmp_path, config(kind, ["yes", "yes2"], "unanimous"))
    assert comp["pass"] is True
    _, doc, comp = graded(tmp_path, config(kind, ["yes", "no"], "majority"))
    assert comp["pass"] is False and comp["metadata"]["graderError"] is True
    assert comp["reason"] == f"{kind}: the judges tie under majority voting (1 pass, 1 fail)"
    assert doc["factcli"]["columns"][0]["gradingErrors"] == 1


@pytest.mark.parametrize("kind", KINDS)
def test_failing_judges_are_left_out_and_reported(fake_openai, tmp_path, monkeypatch, kind):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    script(fake_openai, kind)
    hi, _ = SCORES[kind]
    result, doc, comp = graded(tmp_path, config(kind, ["yes", "down", "garbage"]))
    assert result.exit_code == 0, result.output
    meta = comp["metadata"]
    assert comp["pass"] is True and comp["score"] == pytest.approx(hi) and not meta.get("graderError")
    assert meta["judgesFailed"] == ["openai:chat:down", "openai:chat:garbage"]
    down, garbage = meta["judges"][1], meta["judges"][2]
    assert "score" not in down and "verdict" not in down and down["error"]
    assert "score" not in garbage and garbage["graderRaw"]  # the unreadable reply is kept
    assert "2 of 3 judges" not in comp["reason"]  # the reason lists them one by one
    assert "- openai:chat:down: failed, left out:" in comp["reason"]
    assert "- openai:chat:garbage: failed, left out:" in comp["reason"]
    assert doc["factcli"]["columns"][0]["gradingErrors"] == 0
    # with the failed judges out, the one that answered decides even a unanimous vote
    _, _, comp = graded(tmp_path, config(kind, ["no", "down"], "unanimous"))
    assert comp["pass"] is False and comp["metadata"]["judgesFailed"] == ["openai:chat:down"]


@pytest.mark.parametrize("kind", KINDS)
def test_all_judges_failing_is_a_grading_error(fake_openai, tmp_path, monkeypatch, kind):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    script(fake_openai, kind)
    result, doc, comp = graded(tmp_path, config(kind, ["down", "garbage"], negate=kind != "factuality"))
    assert result.exit_code == 100
    assert comp["pass"] is False and comp["score"] == 0 and comp["metadata"]["graderError"] is True
    assert comp["reason"].startswith(f"{kind}: all 2 judges failed: openai:chat:down: ")
    assert doc["results"]["results"][0]["failureReason"] == 1  # a failed grading, not a provider ERROR


def test_show_lists_each_judge_and_the_failed_ones(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    script(fake_openai, "factuality")
    graded(tmp_path, config("factuality", ["yes", "no", "down"]))
    shown = runner.invoke(app, ["show", "latest", "0"])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    # judges at a loopback address are local models: their cost is a known $0 (providers/pricing.py)
    assert "judges:" in text and "openai:chat:yes · PASS · 1.000 · $0: same details" in text
    assert "openai:chat:no · FAIL · 0.000 · $0: they disagree" in text
    assert "openai:chat:down · failed, left out:" in text


def test_not_inverts_the_panel_not_each_judge(fake_openai, tmp_path):
    script(fake_openai, "llm-rubric")
    _, _, comp = graded(tmp_path, config("llm-rubric", ["yes", "yes2", "no"], negate=True))
    assert comp["pass"] is False and comp["score"] == pytest.approx(1 / 3)
    assert [j["verdict"] for j in comp["metadata"]["judges"]] == ["PASS", "PASS", "FAIL"]


def test_factuality_panel_category(fake_openai, tmp_path):
    script(fake_openai, "factuality")
    fake_openai.add_rule(".", '{"category": "A", "reason": "a subset"}', model="subset")
    _, doc, comp = graded(tmp_path, config("factuality", ["yes", "no", "no2", "subset"], threshold=None))
    meta = comp["metadata"]
    assert [j["category"] for j in meta["judges"]] == ["C", "D", "D", "A"]
    assert meta["categories"] == {"A": 1, "C": 1, "D": 2} and meta["category"] == "D"
    assert comp["score"] == 0.5 and comp["pass"] is True  # the default panel threshold is 0.5
    assert doc["factcli"]["columns"][0]["categories"] == {"D": 1}  # one per assertion: the panel's
    # a tie between categories goes to the more cautious (lower weight) one
    _, _, comp = graded(tmp_path, config("factuality", ["yes", "no"]))
    assert comp["metadata"]["category"] == "D" and comp["metadata"]["categories"] == {"C": 1, "D": 1}


def test_single_grader_results_are_unchanged(fake_openai, tmp_path):
    """A grader given as one provider (not a list) keeps its type's own rules and metadata."""
    script(fake_openai, "factuality")
    text = config("factuality", ["yes"]).replace(f"provider: [{judge('yes')}]", f"provider: {judge('yes')}")
    _, _, comp = graded(tmp_path, text)
    assert comp["pass"] is True and comp["reason"] == "same details" and "judges" not in comp["metadata"]
    assert comp["metadata"]["category"] == "C"


# ---------------------------------------------------------------- config-time checks


def test_a_judge_of_the_same_family_as_the_model_under_test_is_warned_about(fake_openai, tmp_path):
    fake_openai.add_rule("Q:", "Paris.", model="gpt-5")
    fake_openai.add_rule(".", '{"category": "C", "reason": "same"}', model="gpt-5-mini")
    fake_openai.add_rule(".", '{"category": "C", "reason": "same"}', model="claude-sonnet-4-5")
    cfg = write(tmp_path / "c.yaml", config("factuality", ["gpt-5-mini", "claude-sonnet-4-5"],
                                            provider="openai:chat:gpt-5"))
    result = run("-c", cfg)
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())  # the console wraps long lines
    assert "the grader openai:chat:gpt-5-mini is from the same model family (openai gpt)" in output
    assert "self-preference" in output and "claude-sonnet-4-5 is from" not in output


def test_panels_of_other_types_and_empty_panels_are_config_errors(fake_openai, tmp_path):
    for text, message in [
        (config("factuality", []), "an empty list of judges"),
        (config("factuality", ["yes"]).replace("type: factuality", "type: context-recall"),
         "a judge panel (a list of providers) is not supported for 'context-recall'"),
    ]:
        result = run("-c", write(tmp_path / "c.yaml", text))
        assert result.exit_code == 1 and message in result.output, result.output
    bad = config("llm-rubric", ["yes", "no"], "median")
    script(fake_openai, "llm-rubric")
    out = tmp_path / "r.json"
    run("-c", write(tmp_path / "c.yaml", bad), "-o", out)
    row = json.loads(out.read_text())["results"]["results"][0]
    assert "config.aggregate must be mean, majority or unanimous" in row["error"]


def test_answer_relevance_needs_an_embedding_grader_too(fake_openai, tmp_path):
    text = """
prompts: ["Q: capital of France?"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
  - assert:
      - type: answer-relevance
        provider: {text: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}}
"""
    result = run("-c", write(tmp_path / "c.yaml", text))
    assert result.exit_code == 1
    assert "tests[0].assert[0]: answer-relevance also needs an embedding model: no grader" in result.output
    assert fake_openai.request_count == 0
    both = text.replace('"}}}\n', '"}}, embedding: {id: "openai:embedding:e", config: '
                                   '{apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}}\n')
    assert both != text
    result = run("-c", write(tmp_path / "c.yaml", both))
    assert "needs an embedding model" not in result.output and result.exit_code in (0, 100), result.output
