"""factual-correctness reproduces the seed's worked example with a scripted judge over real HTTP."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.methods.factual_correctness import f_beta

REFERENCE = "Paris is the capital of France. The Eiffel Tower was completed in 1889."
BAD = "Paris is the capital of France. The Eiffel Tower was built in 1500."
GOOD = "The capital of France is Paris. The Eiffel Tower was completed in 1889."

CLAIMS = {
    REFERENCE: ["Paris is the capital of France", "The Eiffel Tower was completed in 1889"],
    BAD: ["Paris is the capital of France", "The Eiffel Tower was built in 1500"],
    GOOD: ["The capital of France is Paris", "The Eiffel Tower was completed in 1889"],
}


def scripted_judge(body):
    """Decomposes by lookup and checks each claim against the premise it is given."""
    text = body["messages"][-1]["content"]
    if text.startswith("<text>"):
        source = text.split("<text>\n", 1)[1].rsplit("\n</text>", 1)[0]
        return json.dumps({"claims": CLAIMS.get(source, [])})
    premise = text.split("<premise>\n", 1)[1].split("\n</premise>", 1)[0]
    claims_block = text.split("<claims>\n", 1)[1].rsplit("\n</claims>", 1)[0]
    claims = [line.split(". ", 1)[1] for line in claims_block.splitlines()]
    verdicts = []
    for c in claims:
        if "Paris" in c:
            verdict = "SUPPORTED" if "Paris" in premise else "NEUTRAL"
        else:
            year = "1889" if "1889" in c else "1500"
            verdict = "SUPPORTED" if year in premise else "CONTRADICTED"
        verdicts.append({"claim": c, "verdict": verdict, "reason": "scripted"})
    return json.dumps({"verdicts": verdicts})


CONFIG = """
prompts: ["Tell me about Paris ({{which}})."]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: {which: bad}
    assert: [{type: factual-correctness, value: "%(ref)s", metric: fc%(extra)s}]
  - vars: {which: good}
    assert: [{type: factual-correctness, value: "%(ref)s", metric: fc%(extra)s}]
"""


def run_config(tmp_path, fake_openai, extra=""):
    fake_openai.add_rule(r"\(bad\)", BAD, model="m")
    fake_openai.add_rule(r"\(good\)", GOOD, model="m")
    fake_openai.add_rule(".", scripted_judge, model="judge")
    cfg = write(tmp_path / "c.yaml", CONFIG % {"ref": REFERENCE, "extra": extra})
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    rows = sorted(json.loads(out.read_text())["results"]["results"], key=lambda r: r["testIdx"])
    return result, [r["gradingResult"]["componentResults"][0] for r in rows]


def test_seed_example_reproduces(tmp_path, fake_openai):
    result, (bad, good) = run_config(tmp_path, fake_openai)
    assert result.exit_code == 0, result.output  # 0.50 meets the default threshold of 0.5
    judge = bad["metadata"]["judges"][0]
    assert (judge["precision"], judge["recall"], bad["score"]) == (0.5, 0.5, 0.5)
    assert good["score"] == 1.0 and good["pass"] is True
    assert bad["reason"].startswith("Factual correctness 0.50 ≥ 0.5 (precision 0.50; recall 0.50; F1 0.50")
    claims = {(c["side"], c["text"]): c["verdict"] for c in bad["metadata"]["claims"]}
    assert claims[("response", "The Eiffel Tower was built in 1500")] == "CONTRADICTED"
    assert claims[("reference", "The Eiffel Tower was completed in 1889")] == "CONTRADICTED"
    # four calls per row: two decompositions and two verifications, each claim list in one call
    judge_calls = [r for r in fake_openai.requests if r["json"]["model"] == "judge"]
    assert len(judge_calls) == 8


@pytest.mark.parametrize("mode, expected", [("precision", 0.5), ("recall", 0.5)])
def test_modes(tmp_path, fake_openai, mode, expected):
    _, (bad, good) = run_config(tmp_path, fake_openai, f", config: {{mode: {mode}}}")
    assert bad["score"] == expected and good["score"] == 1.0
    calls = [r for r in fake_openai.requests if r["json"]["model"] == "judge"]
    assert len(calls) == 4  # one side only: one decomposition and one verification per row


def test_judge_panel_scores_each_and_averages(tmp_path, fake_openai):
    fake_openai.add_rule(".", scripted_judge, model="judge2")
    _, (bad, good) = run_config(
        tmp_path, fake_openai,
        ', provider: [{id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}, '
        '{id: "openai:chat:judge2", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]')
    assert [j["judge"] for j in bad["metadata"]["judges"]] == ["openai:chat:judge", "openai:chat:judge2"]
    assert [j["score"] for j in bad["metadata"]["judges"]] == [0.5, 0.5] and bad["score"] == 0.5


def test_a_failing_judge_is_left_out_and_reported(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    fake_openai.add_rule(".", scripted_judge, model="judge2")
    fake_openai.add_rule(".", "I cannot help with that.", model="judge3")
    judges = ", ".join(f'{{id: "openai:chat:{j}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}'
                       for j in ("judge", "judge2", "judge3"))
    _, (bad, good) = run_config(tmp_path, fake_openai, f", provider: [{judges}], config: {{aggregate: unanimous}}")
    for row, score in ((bad, 0.5), (good, 1.0)):
        meta = row["metadata"]
        assert not meta.get("graderError") and row["score"] == score
        assert meta["judgesFailed"] == ["openai:chat:judge3"]
        failed = meta["judges"][2]
        assert "score" not in failed and "has no JSON object" in failed["error"]
        assert "1 of 3 judges failed and was left out: openai:chat:judge3:" in row["reason"]
        assert "unanimous 2-0" in row["reason"]
    assert bad["pass"] is True and good["pass"] is True


def test_every_judge_failing_is_a_grading_error(tmp_path, fake_openai):
    fake_openai.add_rule(".", "no json", model="judge2")
    _, (bad, _good) = run_config(
        tmp_path, fake_openai,
        ', provider: [{id: "openai:chat:judge2", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}, '
        '{id: "openai:chat:judge2", label: j2b, config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]')
    assert bad["metadata"]["graderError"] is True
    assert bad["reason"].startswith("factual-correctness: all 2 judges failed: openai:chat:judge2: ")
    assert bad["metadata"]["judgesFailed"] == ["openai:chat:judge2", "j2b"]


@pytest.mark.parametrize("reply, message", [
    ('{"claims": "not a list"}', "claims.claims must be a list"),  # outside the step's schema
    ("no json at all", "has no JSON object"),
])
def test_bad_decomposition_is_a_grading_error(tmp_path, fake_openai, reply, message):
    fake_openai.add_rule(".", reply, model="judge")
    _, (bad, _good) = run_config(tmp_path, fake_openai)
    assert bad["pass"] is False and bad["metadata"]["graderError"] is True
    assert message in bad["reason"]


def test_mismatched_verdicts_are_a_grading_error(tmp_path, fake_openai):
    def short_judge(body):
        text = body["messages"][-1]["content"]
        if text.startswith("<text>"):
            source = text.split("<text>\n", 1)[1].rsplit("\n</text>", 1)[0]
            return json.dumps({"claims": CLAIMS[source]})  # claims of the text (issue 52: not "a", "b")
        first = text.split("<claims>\n1. ", 1)[1].split("\n", 1)[0]
        return json.dumps({"verdicts": [{"claim": first, "verdict": "SUPPORTED", "reason": ""}]})

    fake_openai.add_rule(".", short_judge, model="judge")
    _, (bad, _good) = run_config(tmp_path, fake_openai)
    assert bad["metadata"]["graderError"] and "1 verdicts for 2 items" in bad["reason"]
    assert "graderRaw" in bad["metadata"]


def test_zero_claims_is_reported_not_scored(tmp_path, fake_openai):
    def empty_judge(body):
        text = body["messages"][-1]["content"]
        if text.startswith("<text>") and "1889" in text:
            return json.dumps({"claims": ["The Eiffel Tower was completed in 1889"]})
        if text.startswith("<text>"):
            return json.dumps({"claims": []})
        # the verdict echoes the claim it was sent (issue 52: an echo of "x" is a grading error now)
        return json.dumps({"verdicts": [{"claim": "The Eiffel Tower was completed in 1889", "verdict": "NEUTRAL",
                                         "reason": ""}]})

    fake_openai.add_rule(".", empty_judge, model="judge")
    result, (bad, _good) = run_config(tmp_path, fake_openai)
    assert bad["pass"] is False and bad["metadata"]["undefined"] is True
    assert "the response has no claims, so precision is undefined" in bad["reason"]
    # the column's line gives both figures: an abstaining system does not look better than it is
    line = " ".join(result.output.split())
    assert "counting the 1 undefined as 0" in line, line


def test_the_column_line_counts_undefined_rows_as_0_beside_the_mean_of_the_rest():
    from factcli.methods.factual_correctness import factual_correctness_summary, format_factual_correctness

    rows = [{"score": 1.0, "judges": [{"precision": 1.0, "recall": 1.0}]}] * 3 + [{"score": 0.0, "undefined": True}]
    line = format_factual_correctness(factual_correctness_summary(rows))
    assert line.startswith("factual-correctness F 1.000 on the 3 rows with claims, 0.750 counting the 1 undefined as 0")


def test_f_beta():
    assert f_beta(0.5, 0.5, 1) == 0.5
    assert f_beta(0, 0, 1) == 0
    assert f_beta(1.0, 0.5, 2) == pytest.approx(5 * 0.5 / (4 + 0.5))


def test_not_factual_correctness_inverts_a_score_but_never_an_undefined_one(tmp_path, fake_openai):
    _, (bad, good) = run_config(tmp_path, fake_openai)
    cfg = (tmp_path / "c.yaml").read_text().replace("type: factual-correctness", "type: not-factual-correctness").replace(
        "metric: fc", "threshold: 0.8, metric: fc")
    (tmp_path / "c.yaml").write_text(cfg)
    out = tmp_path / "r2.json"
    CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "-o", str(out), "--no-progress-bar", "--no-cache"])
    rows = sorted(json.loads(out.read_text())["results"]["results"], key=lambda r: r["testIdx"])
    nbad, ngood = [r["gradingResult"]["componentResults"][0] for r in rows]
    assert (nbad["pass"], nbad["score"]) == (True, 0.5) and (ngood["pass"], ngood["score"]) == (False, 0.0)


# ---------------------------------------------------------------- profile: reference (RAGAS)

EINSTEIN_REF = "Einstein was born in Ulm, Germany, in 1879. He won the Nobel Prize in 1921."
EINSTEIN = "Einstein was born in Ulm. He was born in Germany. He was born in 1879."
EINSTEIN_CLAIMS = {
    EINSTEIN_REF: ["Einstein was born in Ulm, Germany, in 1879", "Einstein won the Nobel Prize in 1921"],
    EINSTEIN: ["Einstein was born in Ulm", "Einstein was born in Germany", "Einstein was born in 1879"],
}


def ragas_judge(body):
    """3 response claims, all supported by the reference; 2 reference claims, 1 supported by the response."""
    text = body["messages"][-1]["content"]
    if text.startswith("<text>"):
        source = text.split("<text>\n", 1)[1].rsplit("\n</text>", 1)[0]
        return json.dumps({"claims": EINSTEIN_CLAIMS.get(source, [])})
    claims_block = text.split("<claims>\n", 1)[1].rsplit("\n</claims>", 1)[0]
    claims = [line.split(". ", 1)[1] for line in claims_block.splitlines()]
    return json.dumps({"verdicts": [{"claim": c, "verdict": "NEUTRAL" if "Nobel" in c else "SUPPORTED",
                                     "reason": "scripted"} for c in claims]})


def run_einstein(tmp_path, fake_openai, config: str):
    fake_openai.clear_rules()
    fake_openai.add_rule(".", EINSTEIN, model="m")
    fake_openai.add_rule(".", ragas_judge, model="judge")
    cfg = write(tmp_path / "e.yaml", f"""
prompts: ["Where was Einstein born?"]
providers: [{{id: "openai:chat:m", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
defaultTest:
  options:
    provider: {{id: "openai:chat:judge", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}
tests:
  - assert: [{{type: factual-correctness, value: "{EINSTEIN_REF}", config: {config}}}]
""")
    out = tmp_path / "e.json"
    CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    row = json.loads(out.read_text())["results"]["results"][0]
    return row["gradingResult"]["componentResults"][0] if row["gradingResult"]["componentResults"] else row


def test_the_ragas_example_in_both_profiles(tmp_path, fake_openai):
    # RAGAS: TP = 3 supported response claims, FP = 0, FN = 1 unsupported reference claim:
    # precision 3/3, recall 3/(3+1) = 0.75, F1 = 2·1·0.75/1.75 = 0.857
    c = run_einstein(tmp_path, fake_openai, "{profile: reference}")
    judge = c["metadata"]["judges"][0]
    assert (judge["tp"], judge["fp"], judge["fn"]) == (3, 0, 1)
    assert (judge["precision"], judge["recall"]) == (1.0, 0.75)
    assert round(c["score"], 3) == 0.857 and c["metadata"]["profile"] == "reference"
    # RAGAS's default levels, low atomicity and low coverage, are in the decomposition prompt
    decompositions = [r["json"]["messages"][0]["content"] for r in fake_openai.requests
                      if r["json"]["model"] == "judge" and r["json"]["messages"][-1]["content"].startswith("<text>")]
    assert decompositions and all("Atomicity is low" in t and "Coverage is low" in t for t in decompositions)
    assert (c["metadata"]["atomicity"], c["metadata"]["coverage"]) == ("low", "low")
    # factcli's default: recall = supported reference claims / reference claims = 1/2: F1 = 2·1·0.5/1.5 = 0.667
    c = run_einstein(tmp_path, fake_openai, "{}")
    judge = c["metadata"]["judges"][0]
    assert (judge["precision"], judge["recall"]) == (1.0, 0.5) and round(c["score"], 3) == 0.667
    assert "atomicity" not in c["metadata"]


def test_atomicity_and_coverage_choose_the_examples(tmp_path, fake_openai):
    run_einstein(tmp_path, fake_openai, "{atomicity: high, coverage: high}")
    system = next(r["json"]["messages"][0]["content"] for r in fake_openai.requests
                  if r["json"]["messages"][-1]["content"].startswith("<text>"))
    assert "Atomicity is high" in system and "Rosalind Franklin was an amateur mountaineer." in system
    c = run_einstein(tmp_path, fake_openai, "{atomicity: medium}")
    assert "config.atomicity must be low or high" in json.dumps(c)


def test_verification_is_batched_ten_claims_a_call(tmp_path, fake_openai, monkeypatch):
    many = [f"Einstein born {i}" for i in range(23)]  # claims of the answer (issue 52: not "Claim number i")

    def judge(body):
        text = body["messages"][-1]["content"]
        if text.startswith("<text>"):
            return json.dumps({"claims": many})
        claims = [line.split(". ", 1)[1] for line in
                  text.split("<claims>\n", 1)[1].rsplit("\n</claims>", 1)[0].splitlines()]
        return json.dumps({"verdicts": [{"claim": c, "verdict": "SUPPORTED", "reason": ""} for c in claims]})

    import test_factual_correctness as me

    monkeypatch.setattr(me, "ragas_judge", judge)
    c = run_einstein(tmp_path, fake_openai, "{mode: precision}")
    assert c["score"] == 1.0 and len(c["metadata"]["claims"]) == 23
    sizes = sorted(r["json"]["messages"][-1]["content"].count("Einstein born") for r in fake_openai.requests
                   if r["json"]["model"] == "judge" and "<claims>" in r["json"]["messages"][-1]["content"])
    assert sizes == [3, 10, 10]


def test_a_reference_without_claims_gives_ragas_recall_1(tmp_path, fake_openai, monkeypatch):
    """RAGAS: FN counts the reference's claims the response does not support, so a reference that
    decomposes into no claims leaves FN = 0 and recall = TP/(TP + 0) = 1 once a response claim is
    supported (F1 1.0 with precision 1); the default profile calls that recall undefined."""
    import test_factual_correctness as me

    monkeypatch.setitem(me.EINSTEIN_CLAIMS, EINSTEIN_REF, [])
    for mode, score in (("recall", 1.0), ("f1", 1.0)):
        c = run_einstein(tmp_path, fake_openai, "{profile: reference, mode: %s}" % mode)
        judge = c["metadata"]["judges"][0]
        assert (judge["tp"], judge["fp"], judge["fn"]) == (3, 0, 0) and judge["recall"] == 1.0
        assert c["score"] == score and not c["metadata"].get("undefined")
    c = run_einstein(tmp_path, fake_openai, "{mode: recall}")
    assert c["pass"] is False and "the reference has no claims, so recall is undefined" in c["reason"]
