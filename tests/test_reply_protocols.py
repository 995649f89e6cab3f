"""Each grader step's reading rule (scoring/replies.py, issue 47), through the CLI against the fake server
in its default mode: it takes `response_format` and ignores it, as servers and gateways that drop it do.
A reply is read if it fits the step's schema, else if it is unambiguous in the text form the step's prompt
asks for (read as promptfoo or the reference reads it), else it is a grading error: promptfoo's parity
cases agree row for row (context-relevance's prose apart, which stays an error), and every protocol form
is read as promptfoo reads it."""

import json
from pathlib import Path

import pytest
from conftest import write
from parity_compare import differences
from test_facts_grounding import FOUR_TESTS, _three_judges, component, config, rows_of, scripted_judge
from typer.testing import CliRunner

from factcli.cli import app
from factcli.scoring import replies

PARITY = Path(__file__).parent / "parity"
runner = CliRunner()


def run(*args):
    result = runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "--no-cache", *map(str, args)])
    assert "Traceback" not in result.output, result.output
    return result


def every_judge_request_asked_for_its_schema(fake, judges=("judge",)) -> int:
    """The schema went out with every judge request and was ignored (the server answered each): the
    reply was read by the step's text form, not because the request asked for none."""
    sent = [g for g in fake.generations if g["model"] in judges]
    assert sent and all((g["response_format"] or {}).get("type") == "json_schema" for g in sent)
    assert fake.format_refusals == 0
    return len(sent)


# ---------------------------------------------------------------- promptfoo's parity cases


@pytest.mark.parametrize("case, rows", [("graders", 19), ("compare", 9)])
def test_parity_cases_agree_row_for_row_with_a_server_that_ignores_response_format(fake_openai, tmp_path,
                                                                                   monkeypatch, case, rows):
    """Before issue 47, 9 of graders' 19 rows and 6 of compare's 9 were equal against this server (closedqa's
    final Y, factuality's (B), llm-rubric's string score, select-best's number were grading errors)."""
    for pattern, reply, model in json.loads((PARITY / case / "rules.json").read_text()):
        fake_openai.add_rule(pattern, reply, model=model)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    out = tmp_path / "ours.json"
    result = run("-c", PARITY / case / "promptfooconfig.yaml", "-o", out)
    assert result.exit_code == 100, result.output
    ours = json.loads(out.read_text())
    assert len(ours["results"]["results"]) == rows
    assert differences(ours, json.loads((PARITY / case / "golden.json").read_text())) == []
    every_judge_request_asked_for_its_schema(fake_openai)


def test_rag_parity_case_agrees_but_prose_to_context_relevance_stays_a_grading_error(fake_openai, tmp_path,
                                                                                     monkeypatch):
    """answer-relevance's question, context-recall's [Attributed] tags and conversation-relevance's JSON
    verdict are read as promptfoo reads them (1 of 26 rows was equal before issue 47); the sentences
    context-relevance copies out and the statements context-faithfulness asks for cannot be told from
    prose: those rows are grading errors (context-relevance's exact `Insufficient Information` and a blank
    reply apart, which read as promptfoo reads them)."""
    for pattern, reply, model in json.loads((PARITY / "rag" / "rules.json").read_text()):
        fake_openai.add_rule(pattern, reply, model=model)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    out = tmp_path / "ours.json"
    result = run("-c", PARITY / "rag" / "promptfooconfig.yaml", "-o", out)
    assert result.exit_code == 100, result.output
    ours = json.loads(out.read_text())
    golden = json.loads((PARITY / "rag" / "golden.json").read_text())
    diffs = differences(ours, golden)
    rows = {r["testIdx"]: r for r in ours["results"]["results"]}
    relevance = {i for i, r in rows.items()
                 if any(c["assertion"]["type"] == "context-relevance" for c in r["gradingResult"]["componentResults"])}
    faithfulness = {i for i, r in rows.items() if any(c["assertion"]["type"] == "context-faithfulness"
                                                      for c in r["gradingResult"]["componentResults"])}
    prose = {i for i in relevance | faithfulness if any(
        "cannot be told from prose" in c["reason"] for c in rows[i]["gradingResult"]["componentResults"])}
    assert len(rows) == 26 and len(relevance) == 6 and len(faithfulness) == 6
    assert len(prose) == 4  # context-relevance's blank reply and its sentinel are read
    # 22 of 26 rows equal; these four promptfoo scored from the judge's words, factcli refuses them
    assert {d.split(":")[0] for d in diffs if d.startswith("row")} == {f"row ({i}, 0)" for i in prose}
    for i in prose:
        comps = [c for c in rows[i]["gradingResult"]["componentResults"]
                 if c["assertion"]["type"] == "context-relevance"]
        assert comps and all(c["metadata"]["graderError"] is True and c["score"] == 0 for c in comps)
    every_judge_request_asked_for_its_schema(fake_openai)


# ---------------------------------------------------------------- one test per promptfoo step

ONE = """
prompts: ["Question: {{q}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: {q: "What is 2+2?"}
    assert: [%s]
"""


def grade_one(fake, tmp_path, assertion: str, *judge):
    """One assertion, the judge's replies scripted as (pattern, reply): its component result."""
    fake.add_rule("2\\+2", "4", model="m")
    for pattern, reply in judge:
        fake.add_rule(pattern, reply, model="judge")
    out = tmp_path / "r.json"
    run("-c", write(tmp_path / "c.yaml", ONE % assertion), "-o", out)
    every_judge_request_asked_for_its_schema(fake)
    return json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]


@pytest.mark.parametrize("reply, passed, error", [
    ("The reply is a number.\nY\n", True, None),
    ("The reply uses a digit, not words.\nN", False, None),
    ("Y, it gives a number.", None, "Model grader produced a malformed response:\nY, it gives a number."),
])
def test_closedqa_reads_the_final_letter(fake_openai, tmp_path, reply, passed, error):
    comp = grade_one(fake_openai, tmp_path, '{type: model-graded-closedqa, value: "gives a number"}', (".", reply))
    if error:
        assert comp["metadata"]["graderError"] and comp["reason"] == error
    else:
        assert (comp["pass"], comp["score"]) == (passed, 1.0 if passed else 0.0)
        assert comp["reason"].endswith(f"the criterion:\n{reply}") and not comp["metadata"].get("graderError")


@pytest.mark.parametrize("reply, category, score", [
    ("(A) The submitted answer is a subset of the expert answer.", "A", 1.0),
    ("Comparing both: (d) they disagree on the number.", "D", 0.0),
    ('{"category": "c"}', "C", 1.0),  # promptfoo: trimmed and upper-cased; no reason, the category's text
    ("I cannot decide.", None, None),
])
def test_factuality_reads_the_category_letter(fake_openai, tmp_path, reply, category, score):
    comp = grade_one(fake_openai, tmp_path, '{type: factuality, value: "4"}', (".", reply))
    if category is None:
        assert comp["metadata"]["graderError"]
        assert comp["reason"] == f"Factuality checker output did not match expected format: {reply}"
    else:
        assert comp["metadata"]["category"] == category and comp["score"] == score
        assert comp["pass"] is (score > 0) and not comp["metadata"].get("graderError")


@pytest.mark.parametrize("reply, threshold, passed, score", [
    ('{"reason": "a number", "pass": "true", "score": 1}', None, True, 1.0),
    ('{"reason": "a number", "pass": "Yes"}', None, True, 1.0),  # no score: Number(pass)
    ('{"reason": "no", "pass": "false"}', None, False, 0.0),
    ('{"reason": "a number", "pass": "true "}', None, False, 0.0),  # /^(true|yes|pass|y)$/i: no trimming
    ('{"reason": "good enough", "score": 0.8}', None, True, 0.8),  # no pass: true
    ('{"reason": "good enough", "score": "0.8"}', 0.9, False, 0.8),  # Number("0.8"), below the threshold
    ('{"reason": "fine", "pass": true, "score": null}', None, True, 0.0),  # Number(null) is 0
    ('Verdict: {"reason": "fine", "pass": "y", "score": 0.9}', 0.5, True, 0.9),
])
def test_llm_rubric_reads_promptfoos_json_with_its_coercions(fake_openai, tmp_path, reply, threshold, passed, score):
    extra = "" if threshold is None else f", threshold: {threshold}"
    comp = grade_one(fake_openai, tmp_path, '{type: llm-rubric, value: "gives a number"%s}' % extra, (".", reply))
    assert not comp["metadata"].get("graderError"), comp["reason"]
    assert (comp["pass"], comp["score"]) == (passed, score)


@pytest.mark.parametrize("reply, reason", [
    ("It gives a number, so it passes.", "Could not extract JSON from llm-rubric response"),
    ('{"reason": "It gives a number."}', 'llm-rubric: the judge\'s JSON has neither pass nor score: '
                                         '{"reason": "It gives a number."}'),
])
def test_llm_rubric_refuses_what_is_no_verdict(fake_openai, tmp_path, reply, reason):
    comp = grade_one(fake_openai, tmp_path, '{type: llm-rubric, value: "gives a number"}', (".", reply))
    assert comp["metadata"]["graderError"] and comp["reason"] == reason


def test_g_eval_reads_promptfoos_json_with_other_keys(fake_openai, tmp_path):
    comp = grade_one(fake_openai, tmp_path, '{type: g-eval, value: "gives a number", threshold: 0.5}',
                     ("Check the number", '{"score": "8", "reason": "A number.", "confidence": 1}'),
                     ("criteria", 'Steps: {"steps": ["Check the number"], "note": "short"}'))
    assert not comp["metadata"].get("graderError"), comp["reason"]
    assert (comp["pass"], comp["score"], comp["reason"]) == (True, 0.8, "A number.")


# ---------------------------------------------------------------- SimpleQA's bare letter

SIMPLEQA = """
prompts: ["<<answer>>"]
providers: [echo]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - {vars: {question: "Capital of France?", answer: "Paris."}, assert: [{type: simpleqa, value: Paris}]}
  - {vars: {question: "Capital of France?", answer: "Lyon."}, assert: [{type: simpleqa, value: Paris}]}
  - {vars: {question: "Capital of France?", answer: "Marseille."}, assert: [{type: simpleqa, value: Paris}]}
  - {vars: {question: "Capital of France?", answer: "I do not know."}, assert: [{type: simpleqa, value: Paris}]}
  - {vars: {question: "Capital of France?", answer: "Nice."}, assert: [{type: simpleqa, value: Paris}]}
  - {vars: {question: "Capital of France?", answer: "Toulouse."}, assert: [{type: simpleqa, value: Paris}]}
"""


def test_simpleqa_reads_the_bare_letter(fake_openai, tmp_path):
    """The five forms the prompt's letter takes, each as the grader answered (they were 5/5 grading errors
    against this server before issue 47); prose and two letters stay grading errors."""
    for pattern, reply in [("Answer to grade: Paris", "A"), ("Answer to grade: Lyon", " B. "),
                           ("Answer to grade: Marseille", "INCORRECT"), ("Answer to grade: I do not", "C\n"),
                           ("Answer to grade: Nice", "The answer is wrong."), ("Answer to grade: Toulouse", "A or B")]:
        fake_openai.add_rule(pattern, reply, model="judge")
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", SIMPLEQA), "-o", out)
    assert result.exit_code == 100, result.output
    comps = [r["gradingResult"]["componentResults"][0] for r in
             sorted(json.loads(out.read_text())["results"]["results"], key=lambda r: r["testIdx"])]
    assert [c["metadata"].get("grade") for c in comps] == ["CORRECT", "INCORRECT", "INCORRECT", "NOT_ATTEMPTED",
                                                           None, None]
    assert [bool(c["metadata"].get("graderError")) for c in comps] == [False] * 4 + [True] * 2
    assert comps[4]["reason"] == "simpleqa: the grader's reply is not a grade (A, B or C, or JSON with a 'grade')"
    every_judge_request_asked_for_its_schema(fake_openai)


# ---------------------------------------------------------------- FACTS Grounding's JSON lines


def test_facts_grounding_judge_panel_in_json_lines_reproduces_the_hand_computed_scores(fake_openai, tmp_path):
    """tests/test_facts_grounding.py's three judges (two with the json template's JSON lines, `"excerpt":
    null` included, one with implicit_span_level's sentence lines; eligibility as reasoning and a ```json
    verdict), every request sent its schema and answered in words: every judge read (before issue 47, every
    judge failed), the same figures by hand: row scores 1, 1/3, 0 (ineligible), 1/3."""
    _three_judges(fake_openai)
    cfg = write(tmp_path / "c.yaml", config(FOUR_TESTS, assert_config="{templates: {'openai:chat:judge-c': "
                                                                      "implicit_span_level}}"))
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out).exit_code == 100
    _, rows = rows_of(out)
    metas = [component(r)["metadata"] for r in rows]
    assert not any(m.get("graderError") for m in metas), [component(r)["reason"] for r in rows]
    assert [[j["score"] for j in m["judges"]] for m in metas] == [[1, 1, 1], [0, 1, 0], [0, 0, 0], [1, 0, 0]]
    assert [m["score"] for m in metas] == pytest.approx([1, 1 / 3, 0, 1 / 3])
    assert [m["eligible"] for m in metas] == [True, True, False, True]
    no_excerpt = [c for c in metas[1]["claims"] if c["judge"] == "openai:chat:judge-a"][1]
    assert no_excerpt["verdict"] == "UNSUPPORTED" and no_excerpt["evidence"] is None
    assert every_judge_request_asked_for_its_schema(fake_openai, ("judge-a", "judge-b", "judge-c")) == 4 * 3 * 2


@pytest.mark.parametrize("template", ["implicit_span_level", "span_level", "response_level"])
def test_facts_grounding_other_templates_read_their_final_answer(fake_openai, tmp_path, template):
    fake_openai.add_rule(".", "Alpha is red. Have a nice day!", model="m")
    fake_openai.add_rule(".", scripted_judge({"Alpha": ("No Issues", ["supported", "unsupported"])}), model="judge-a")
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=("judge-a",),
                                            assert_config=f"{{template: {template}}}"))
    out = tmp_path / "r.json"
    run("-c", cfg, "-o", out)
    comp = component(rows_of(out)[1][0])
    assert not comp["metadata"].get("graderError"), comp["reason"]
    assert comp["metadata"]["judges"][0]["accurate"] is False and comp["score"] == 0.0
    every_judge_request_asked_for_its_schema(fake_openai, ("judge-a",))


def test_facts_grounding_reference_profile_reads_baseline_eligibility_without_reasoning_and_json_lines(
        fake_openai, tmp_path):
    """The paper's protocol: a baseline answer (free text: its whole reply), eligibility as the bare
    ```json verdict with no reasoning, then the judge's template (json for GPT, implicit_span_level for
    Claude)."""
    judges = ("gpt-judge", "claude-judge")
    fake_openai.add_rule("^Request: ", "Alpha is red. Beta is blue.", model="m")
    for j in judges:
        fake_openai.add_rule("^Request: ", f"Baseline answer of {j}.", model=j)
        fake_openai.add_rule("Instruction-following check", '{"Instruction Following": "No Issues"}', model=j)
        fake_openai.add_rule(".", scripted_judge({"Alpha": ("No Issues", ["supported", "no_rad"])}), model=j)
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=judges,
                                            assert_config="{profile: reference}"))
    out = tmp_path / "r.json"
    run("-c", cfg, "-o", out)
    comp = component(rows_of(out)[1][0])
    assert not comp["metadata"].get("graderError"), comp["reason"]
    meta = comp["metadata"]
    assert meta["profile"] == "reference" and comp["score"] == 1.0
    assert [(j["template"], j["eligibility"]) for j in meta["judges"]] == [
        ("json", "No Issues"), ("implicit_span_level", "No Issues")]
    assert every_judge_request_asked_for_its_schema(fake_openai, judges) == 2 * 3


# ---------------------------------------------------------------- the rule itself


def test_the_steps_with_a_text_form():
    """docs/judges.md lists these; every other step (claims and facts of the claim-level methods) has
    none, so prose there is a grading error."""
    from factcli.scoring.registry import TYPES, lookup

    for name in TYPES:
        lookup(name)
    with_form = sorted(name for name, r in replies.REPLIES.items() if r.protocol is not None)
    assert with_form == sorted([
        "factuality", "llm_rubric", "closedqa", "geval_steps", "geval_score", "select_best", "simpleqa_grade",
        "answer_relevance_question", "faithfulness_statements", "faithfulness_verdicts", "context_recall",
        "context_relevance", "conversation_relevance", "conversation_relevance_reason", "baseline_response",
        "eligibility", "grounding_labels", "grounding_sentences", "grounding_span", "grounding_response"])
    with pytest.raises(replies.ReplyError, match="no text form"):
        replies.REPLIES["claims"].read_protocol("Paris is big.")


def test_through_litellm_a_route_that_ignores_the_schema_is_read_too(fake_openai, tmp_path):
    """A litellm route whose server drops `response_format`: the schema is sent, the judge answers in
    promptfoo's form, and the reply is read as promptfoo reads it."""
    fake_openai.add_rule("2\\+2", "4", model="m")
    fake_openai.add_rule(".", "The submission adds a detail.\n(B)", model="judge3")
    judge = '{id: "litellm:openai/judge3", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", apiKey: sk-test}}'
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", ONE % ('{type: factuality, value: "4", provider: %s}' % judge)),
                 "-o", out)
    assert result.exit_code == 0, result.output
    comp = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]
    assert comp["metadata"]["category"] == "B" and comp["pass"] and comp["score"] == 1.0
    every_judge_request_asked_for_its_schema(fake_openai, ("judge3",))
