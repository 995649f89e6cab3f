"""RAGAS's metrics teams look for (issue 52), through the CLI against a scripted judge over real HTTP, each
figure worked by hand from RAGAS's definitions (explodinggradients/ragas, src/ragas/metrics/):
rank-aware context precision, answer relevance's noncommittal flag, noise sensitivity; and the
per-passage verdicts in show, the web cell page and the HTML report."""

import json
import math
import re

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.assertions.rag_metrics import average_precision, noise_sensitivity
from factcli.cli import app

runner = CliRunner()
JUDGE = '{id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'
EMBEDDER = '{id: "openai:embedding:emb", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'


def _between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def _eval(tmp_path, config: str, *args):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", config)), "-o", str(out),
                                 "--no-progress-bar", "--no-cache", "--no-table", *map(str, args)])
    data = json.loads(out.read_text()) if out.exists() else None
    return result, data


def _components(data):
    return [r["gradingResult"]["componentResults"] for r in data["results"]["results"]]


def _judged(fake):
    return [r["json"] for r in fake.requests if (r["json"] or {}).get("model") == "judge"]


# ---------------------------------------------------------------- context-precision

PASSAGES = ["Paris is the capital of France.", "Lyon is known for its food.",
            "France's capital has been Paris since 987.", "The Loire is France's longest river."]
USEFUL = {PASSAGES[0], PASSAGES[2]}


def precision_judge(body):
    """Useful exactly for the passages that name the capital; the reason says which passage it read."""
    text = body["messages"][-1]["content"]
    passage = _between(text, "passage")
    useful = passage in USEFUL
    return json.dumps({"reason": f"{'names' if useful else 'does not name'} the capital: {passage[:12]}",
                       "verdict": int(useful)})


PRECISION = """
prompts: ["Answer: {{query}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest: {options: {provider: %s}}
tests:
  - vars: {query: What is the capital of France?, context: %s}
    assert: [{type: context-precision, value: "Paris is the capital of France.", metric: precision}]
  - vars: {query: What is the capital of France?, context: %s}
    assert: [{type: context-precision, value: "Paris is the capital of France.", metric: precision}]
"""


def test_context_precision_by_hand_is_rank_aware(tmp_path, fake_openai):
    fake_openai.add_rule(".", "Paris.", model="m")
    fake_openai.add_rule(".", precision_judge, model="judge")
    reordered = [PASSAGES[1], PASSAGES[0], PASSAGES[3], PASSAGES[2]]
    result, data = _eval(tmp_path, PRECISION % (JUDGE, json.dumps(PASSAGES), json.dumps(reordered)))
    assert result.exit_code == 0, result.output
    first, second = (c[0] for c in _components(data))  # one row per test: the list var is one value
    # RAGAS: Σ_k precision@k × v_k / (Σ v_k + 1e-10).
    # Ranked v = [1, 0, 1, 0]: precision@1 = 1/1, @3 = 2/3 -> (1 + 2/3) / 2 = 5/6 = 0.8333
    assert first["score"] == pytest.approx((1 + 2 / 3) / 2) == pytest.approx(0.833333, abs=1e-6)
    # the same passages ranked v = [0, 1, 0, 1]: precision@2 = 1/2, @4 = 2/4 -> (1/2 + 1/2) / 2 = 0.5
    assert second["score"] == pytest.approx(0.5)
    meta = first["metadata"]
    assert [(r["passage"], r["relevant"]) for r in meta["passageVerdicts"]] == [(1, True), (2, False), (3, True),
                                                                               (4, False)]
    assert meta["passageVerdicts"][1]["reason"] == "does not name the capital: Lyon is know"
    assert [r["precisionAtK"] for r in meta["passageVerdicts"]] == pytest.approx([1, 1 / 2, 2 / 3, 2 / 4])
    assert first["reason"] == "Context precision 0.83 is >= 0 (2 of 4 passages useful; ranks: 1, 3)"
    # one call per passage, each asked about the reference answer (RAGAS's ContextPrecision "with reference")
    judged = _judged(fake_openai)
    assert len(judged) == 8
    assert all(_between(b["messages"][-1]["content"], "answer") == "Paris is the capital of France." for b in judged)
    assert all(b["response_format"]["json_schema"]["name"] == "context_precision_verdict" for b in judged)
    # the metric over both rows: promptfoo's namedScores sum 5/6 + 1/2 = 4/3 over a count of 2, a mean of 2/3
    metrics = data["results"]["prompts"][0]["metrics"]
    assert metrics["namedScores"]["precision"] / metrics["namedScoresCount"]["precision"] == pytest.approx(2 / 3)


def test_average_precision_matches_ragas_edges():
    assert average_precision([0, 0, 0]) == 0  # no useful passage: 0, not NaN (RAGAS's 1e-10)
    assert average_precision([1]) == pytest.approx(1.0)
    assert average_precision([0, 0, 1]) == pytest.approx(1 / 3)


def test_context_precision_without_a_reference_judges_against_the_output(tmp_path, fake_openai):
    """RAGAS's ContextUtilization: no value, the answer is the output."""
    fake_openai.add_rule(".", "The capital is Paris.", model="m")
    fake_openai.add_rule(".", precision_judge, model="judge")
    cfg = PRECISION.replace(', value: "Paris is the capital of France."', "").split("  - vars", 2)
    result, data = _eval(tmp_path, (cfg[0] + "  - vars" + cfg[1]) % (JUDGE, json.dumps(PASSAGES)))
    assert result.exit_code == 0, result.output
    comp = _components(data)[0][0]
    assert comp["metadata"]["answerFrom"] == "output" and comp["score"] == pytest.approx(5 / 6)
    assert {_between(b["messages"][-1]["content"], "answer") for b in _judged(fake_openai)} == {"The capital is Paris."}


@pytest.mark.parametrize("reply, detail", [
    ('{"reason": "maybe", "verdict": 2}', "passage 1: verdict must be 0 or 1, got 2"),
    ("It is useful, I think.", "does not fit the context_precision_verdict step's JSON schema"),
])
def test_context_precision_unreadable_verdicts_are_grading_errors(tmp_path, fake_openai, reply, detail):
    fake_openai.add_rule(".", "Paris.", model="m")
    fake_openai.add_rule(".", reply, model="judge")
    cfg = PRECISION.split("  - vars")
    result, data = _eval(tmp_path, (cfg[0] + "  - vars" + cfg[1]) % (JUDGE, json.dumps(PASSAGES[:1])))
    comp = _components(data)[0][0]
    assert comp["metadata"]["graderError"] and comp["pass"] is False and detail in comp["reason"]
    assert comp["metadata"]["graderRaw"] == reply  # what the judge sent, kept to read
    assert result.exit_code == 4, result.output  # not judged, never a 0 that a threshold of 0 passes


# ---------------------------------------------------------------- answer-relevance's noncommittal flag

QUERY = "How many vacation days do I get?"
QUESTIONS = ["How many vacation days do I get?", "How many days of leave are there?", "Is vacation paid?"]
# query (1, 0, …); the three questions at cosines 1, 0.6 and 0.8 from it
VECTORS = {QUESTIONS[0]: [1, 0], QUESTIONS[1]: [0.6, 0.8], QUESTIONS[2]: [0.8, 0.6]}


def _pad(v):
    return [float(x) for x in v] + [0.0] * 6


RELEVANCE = """
prompts: ["{{query}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {text: %s, embedding: %s}
tests:
  - vars: {query: "%s"}
    assert: [{type: answer-relevance%s}]
"""


def _relevance(tmp_path, fake, flags, config=", config: {noncommittal: true}"):
    calls = iter(range(3))

    def judge(body):
        i = next(calls)
        return json.dumps({"question": QUESTIONS[i], "noncommittal": flags[i]})

    fake.clear_rules()
    fake.add_rule(".", "It depends on many things.", model="m")
    fake.add_rule(".", judge, model="judge")
    for text, vec in VECTORS.items():
        fake.add_rule(f"^{re.escape(text)}$", _pad(vec))
    return _eval(tmp_path, RELEVANCE % (JUDGE, EMBEDDER, QUERY, config))


def test_answer_relevance_noncommittal_by_hand(tmp_path, fake_openai):
    # RAGAS's ResponseRelevancy: mean cosine × int(not all noncommittal). Cosines 1, 0.6, 0.8 -> mean 0.8
    _, data = _relevance(tmp_path, fake_openai, [0, 1, 0])
    comp = _components(data)[0][0]
    assert comp["score"] == pytest.approx((1 + 0.6 + 0.8) / 3) == pytest.approx(0.8)
    assert comp["metadata"]["noncommittal"] is False  # one committal question keeps the mean (np.all)
    assert [q["noncommittal"] for q in comp["metadata"]["generatedQuestions"]] == [0, 1, 0]
    # every generation flags it noncommittal: 0.8 × 0 = 0, and the reason says why
    _, data = _relevance(tmp_path, fake_openai, [1, 1, 1])
    comp = _components(data)[0][0]
    assert comp["score"] == 0 and comp["metadata"]["averageSimilarity"] == pytest.approx(0.8)
    assert comp["reason"] == ("Relevance 0.00 is greater than threshold 0 (the answer is noncommittal: RAGAS "
                              "scores it 0)")
    asked = _judged(fake_openai)[-1]
    assert asked["response_format"]["json_schema"]["name"] == "answer_relevance_noncommittal"


def test_answer_relevance_without_the_option_is_promptfoos(tmp_path, fake_openai):
    """No option: promptfoo's prompt and reading, the flag never asked; a noncommittal answer keeps its mean."""
    fake_openai.clear_rules()
    calls = iter(range(3))
    fake_openai.add_rule(".", "It depends on many things.", model="m")
    fake_openai.add_rule(".", lambda body: json.dumps({"question": QUESTIONS[next(calls)]}), model="judge")
    for text, vec in VECTORS.items():
        fake_openai.add_rule(f"^{re.escape(text)}$", _pad(vec))
    _, data = _eval(tmp_path, RELEVANCE % (JUDGE, EMBEDDER, QUERY, ""))
    comp = _components(data)[0][0]
    assert comp["score"] == pytest.approx(0.8) and "noncommittal" not in comp["metadata"]
    assert all(b["response_format"]["json_schema"]["name"] == "answer_relevance_question"
               for b in _judged(fake_openai))


def test_a_noncommittal_flag_outside_0_1_is_a_grading_error(tmp_path, fake_openai):
    _, data = _relevance(tmp_path, fake_openai, [0, 7, 0])
    comp = _components(data)[0][0]
    assert comp["metadata"]["graderError"] and "noncommittal must be 0 or 1, got 7" in comp["reason"]


def test_a_noncommittal_option_that_is_not_a_boolean_is_refused_before_any_call(tmp_path, fake_openai):
    result, _ = _relevance(tmp_path, fake_openai, [0, 0, 0], config=', config: {noncommittal: "yes"}')
    assert result.exit_code == 1 and "config.noncommittal must be true or false, got 'yes'" in result.output
    assert fake_openai.request_count == 0


# ---------------------------------------------------------------- noise-sensitivity: RAGAS's own example

LIC_Q = "What is the Life Insurance Corporation of India (LIC) known for?"
LIC_REFERENCE = ("The Life Insurance Corporation of India (LIC) is the largest insurance company in India, established "
                 "in 1956 through the nationalization of the insurance industry. It is known for managing a large "
                 "portfolio of investments.")
LIC_ANSWER = ("The Life Insurance Corporation of India (LIC) is the largest insurance company in India, known for its "
              "vast portfolio of investments. LIC contributes to the financial stability of the country.")
LIC_PASSAGES = [
    "The Life Insurance Corporation of India (LIC) was established in 1956 following the nationalization of the "
    "insurance industry in India.",
    "LIC is the largest insurance company in India, with a vast network of policyholders and huge investments.",
    "As the largest institutional investor in India, LIC manages substantial funds, contributing to the financial "
    "stability of the country.",
    "The Indian economy is one of the fastest-growing major economies in the world, thanks to sectors like finance, "
    "technology, manufacturing etc."]
G1, G2, G3 = ("LIC is the largest insurance company in India.", "LIC was established in 1956 through nationalization.",
              "LIC manages a large portfolio of investments.")
A1, A2, A3 = ("LIC is the largest insurance company in India.", "LIC is known for its vast portfolio of investments.",
              "LIC contributes to the financial stability of the country.")
A4 = "The Indian economy is one of the fastest-growing in the world."
# what each text (a passage, or the reference) supports: the judge's NLI verdicts, scripted
SUPPORTS = {LIC_PASSAGES[0]: {G2}, LIC_PASSAGES[1]: {G1, G3, A1, A2}, LIC_PASSAGES[2]: {G3, A2, A3},
            LIC_PASSAGES[3]: {A4}, LIC_REFERENCE: {A1, A2}}


def noise_judge(body):
    text = body["messages"][-1]["content"]
    if "<statements>" in text:
        context = _between(text, "context")
        listed = re.findall(r"^\d+\. (.*)$", _between(text, "statements"), re.M)
        return json.dumps({"statements": [
            {"statement": s, "reason": f"{'in' if s in SUPPORTS[context] else 'not in'} the text",
             "verdict": int(s in SUPPORTS[context])} for s in listed]})
    answer = _between(text, "answer")
    if answer == LIC_REFERENCE:
        return json.dumps({"statements": [G1, G2, G3]})
    return json.dumps({"statements": [A1, A2, A3] + ([A4] if "economy" in answer else [])})


NOISE = """
prompts: ["{{query}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest: {options: {provider: %s}}
tests:
  - vars: {query: %s, context: %s}
    assert:
      - {type: noise-sensitivity, value: %s, metric: noise}
      - {type: noise-sensitivity, value: %s, config: {mode: irrelevant}}
"""


def _noise(tmp_path, fake, answer):
    fake.clear_rules()
    fake.add_rule(".", answer, model="m")
    fake.add_rule(".", noise_judge, model="judge")
    return _eval(tmp_path, NOISE % (JUDGE, json.dumps(LIC_Q), json.dumps(LIC_PASSAGES), json.dumps(LIC_REFERENCE),
                                    json.dumps(LIC_REFERENCE)))


def test_noise_sensitivity_by_hand_on_ragas_own_example(tmp_path, fake_openai):
    """RAGAS's docs example (docs/concepts/metrics/available_metrics/noise_sensitivity.md): 0.333 relevant,
    0.0 irrelevant. By hand, from _compute_score:
    - passages relevant when they support a reference statement: 1 (G2), 2 (G1, G3), 3 (G3): relevant; 4: not;
    - answer statements incorrect when the reference does not support them: A3 only (A1, A2 are in it);
    - relevant: A3 is supported by passage 3, a relevant one -> 1 of 3 statements = 1/3;
    - irrelevant: A3 rests on a relevant passage, so it is not counted -> 0 of 3 = 0."""
    result, data = _noise(tmp_path, fake_openai, LIC_ANSWER)
    assert result.exit_code == 0, result.output
    relevant, irrelevant = _components(data)[0]
    assert relevant["metadata"]["noiseSensitivity"] == pytest.approx(1 / 3)
    assert relevant["score"] == pytest.approx(2 / 3)  # 1 − noise sensitivity: higher is better
    assert irrelevant["metadata"]["noiseSensitivity"] == 0 and irrelevant["score"] == 1
    assert relevant["reason"] == ("Noise sensitivity (relevant) 0.33: 1 of 3 answer statements incorrect and from a "
                                  "relevant passage; score 0.67 (1 − noise sensitivity) is >= 0")
    meta = relevant["metadata"]
    assert [(r["passage"], r["relevant"]) for r in meta["passageVerdicts"]] == [(1, True), (2, True), (3, True),
                                                                               (4, False)]
    assert meta["passageVerdicts"][1]["reason"] == ("supports reference statement(s) 1, 3 (1: in the text; "
                                                    "3: in the text)")
    assert meta["passageVerdicts"][3]["reason"] == "supports no statement of the reference"
    assert [(c["text"], c["supported"], c["evidenceId"]) for c in meta["claims"]] == [
        (A1, True, "passage 2"), (A2, True, "passage 2"), (A3, False, "passage 3")]
    # 2 statement calls + 2 per passage + the answer against the reference, for each assertion
    assert len(_judged(fake_openai)) == 2 * (2 + 2 * 4 + 1)


def test_noise_sensitivity_irrelevant_mode_by_hand(tmp_path, fake_openai):
    """The answer adds A4, which only the irrelevant passage 4 supports and the reference does not:
    relevant: A3 (from passage 3) of 4 statements = 1/4; irrelevant: A4 of 4 = 1/4."""
    result, data = _noise(tmp_path, fake_openai, LIC_ANSWER + " The Indian economy is one of the fastest-growing.")
    relevant, irrelevant = _components(data)[0]
    assert relevant["metadata"]["noiseSensitivity"] == pytest.approx(1 / 4)
    assert irrelevant["metadata"]["noiseSensitivity"] == pytest.approx(1 / 4)
    assert irrelevant["metadata"]["claims"][3]["verdict"] == "incorrect, from an irrelevant passage"


def test_the_formula_against_ragas_numpy_reading():
    # rows: passages; columns: statements (RAGAS's matrices transposed)
    ref = [[0, 1, 0], [1, 0, 1], [0, 0, 1], [0, 0, 0]]
    ans = [[0, 0, 0], [1, 1, 0], [0, 1, 1], [0, 0, 0]]
    assert noise_sensitivity(ref, ans, [1, 1, 0]) == pytest.approx(1 / 3)
    assert noise_sensitivity(ref, ans, [1, 1, 0], "irrelevant") == 0
    assert noise_sensitivity(ref, ans, [1, 1, 1]) == 0
    assert math.isclose(noise_sensitivity([[0, 0]], [[1, 1]], [0, 0], "irrelevant"), 1.0)


def test_noise_sensitivity_with_a_verdict_missing_is_a_grading_error(tmp_path, fake_openai):
    fake_openai.add_rule(".", LIC_ANSWER, model="m")
    fake_openai.add_rule("<statements>", json.dumps({"statements": [{"statement": G1, "reason": "x", "verdict": 1}]}),
                         model="judge")
    fake_openai.add_rule(".", noise_judge, model="judge")
    _, data = _eval(tmp_path, NOISE % (JUDGE, json.dumps(LIC_Q), json.dumps(LIC_PASSAGES), json.dumps(LIC_REFERENCE),
                                       json.dumps(LIC_REFERENCE)))
    comp = _components(data)[0][0]
    assert comp["metadata"]["graderError"] and "1 verdicts for 3 statements" in comp["reason"]


def test_a_bad_mode_is_refused_before_any_call(tmp_path, fake_openai):
    cfg = NOISE.replace("mode: irrelevant", "mode: irrelevent")
    result, _ = _eval(tmp_path, cfg % (JUDGE, json.dumps(LIC_Q), json.dumps(LIC_PASSAGES), json.dumps(LIC_REFERENCE),
                                       json.dumps(LIC_REFERENCE)))
    assert result.exit_code == 1 and "config.mode must be relevant or irrelevant" in result.output
    assert fake_openai.request_count == 0


# ---------------------------------------------------------------- the verdicts, passage by passage, on screen


def test_show_the_web_cell_page_and_the_html_report_list_each_passages_verdict(tmp_path, fake_openai):
    import warnings

    warnings.filterwarnings("ignore", message=".*httpx.*")
    from starlette.testclient import TestClient

    from factcli.store.database import Store
    from factcli.web.app import create_app

    fake_openai.add_rule(".", "Paris.", model="m")
    fake_openai.add_rule(".", precision_judge, model="judge")
    db = tmp_path / "c.db"
    cfg = PRECISION.split("  - vars")
    result, _ = _eval(tmp_path, (cfg[0] + "  - vars" + cfg[1]) % (JUDGE, json.dumps(PASSAGES)), "--db", db,
                      "-o", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    text = runner.invoke(app, ["show", "latest", "0", "--db", str(db)]).output
    assert "passages:" in text
    assert f"1. [relevant] {PASSAGES[0]}" in text and f"2. [not relevant] {PASSAGES[1]}" in text
    assert "reason: does not name the capital: Lyon is know" in text
    with Store.open(db) as store:
        run_id = store.resolve(None)["id"]
    page = TestClient(create_app(db, token="t")).get(f"/runs/{run_id}/cell/0/0/0").text
    for html in (page, (tmp_path / "r.html").read_text()):
        assert "4 passages (2 relevant)" in html
        assert f'<span class="bad">[not relevant]</span> {PASSAGES[1]}' in html
        assert "does not name the capital: Lyon is know" in html


# ---------------------------------------------------------------- CI: retry its own run by the evalId (docs/rag.md)


def test_ci_retries_its_own_run_by_the_evalid_of_its_output_file(tmp_path, fake_openai, monkeypatch):
    """docs/rag.md's CI job: exit 4 when the judge failed some rows, then `--retry-errors <evalId of the -o
    file>` (not `latest`, which another job's run may be by then) judges them and writes the file again."""
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    fake_openai.add_rule(".", "Paris.", model="m")
    cfg = PRECISION.split("  - vars")
    config = write(tmp_path / "c.yaml", (cfg[0] + "  - vars" + cfg[1]) % (JUDGE, json.dumps(PASSAGES)))
    fake_openai.enqueue("Paris.")  # the model's answer, then the judge is down for the first passage
    fake_openai.enqueue_fault(500)
    fake_openai.add_rule(".", precision_judge, model="judge")
    out = tmp_path / "candidate.json"
    first = runner.invoke(app, ["eval", "-c", str(config), "-o", str(out), "--no-progress-bar", "--no-table"])
    assert first.exit_code == 4, first.output
    run = json.loads(out.read_text())["evalId"]
    # another job's run lands in the shared store meanwhile: `latest` is no longer this job's
    runner.invoke(app, ["eval", "-c", str(config), "--no-progress-bar", "--no-table"])
    second = runner.invoke(app, ["eval", "--retry-errors", run, "-o", str(out), "--no-progress-bar", "--no-table"])
    assert second.exit_code == 0, second.output
    doc = json.loads(out.read_text())
    assert doc["evalId"] == run
    assert _components(doc)[0][0]["score"] == pytest.approx(5 / 6)
