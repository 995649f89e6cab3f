"""facts-grounding: the FACTS Grounding protocol with scripted judges on the fake OpenAI server.

Hand-computed figures (three judges, four rows) are in test_three_judges_reproduce_hand_computed_scores.
"""

import json
import math
import re
import time

import pytest
from typer.testing import CliRunner

from conftest import ROOT, write
from factcli.methods.facts_grounding import facts_interval, facts_summary, format_facts_summary
from factcli.methods.facts_parsing import (parse_eligibility, parse_implicit_span_level, parse_json_labels,
                                          parse_span_level, read_final_answer, split_sentences)
from factcli.methods.claims import JudgeError
from factcli.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _judges_answer_in_words(fake_openai):
    """The scripted judges here answer in the method's own words (a letter, FACTS' labels), as its
    reference prompts ask: a server that takes no response_format, whose words are read. Sent the
    step's schema, a reply in words is a grading error (tests/test_judge_trouble.py)."""
    fake_openai.refuse_response_format("json_schema", "json_object")


def _answered(server) -> list:
    """The requests the server answered: not those it refused for their response_format."""
    return [r for r in server.requests if "response_format" not in (r["json"] or {})]
DOC = "Alpha is red. Beta is blue. Delta is yellow."


def run(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "--no-cache", *map(str, args)])


def _last_user(body: dict) -> str:
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return users[-1] if users else body["messages"][-1]["content"]


def _tag(text: str, name: str) -> str:
    m = re.search(rf"<{name}>\n(.*?)\n</{name}>", text, re.S)
    return m.group(1) if m else ""


def scripted_judge(script: dict):
    """A judge that replies from a script: key (a text found in the response) -> (eligibility
    verdict, one label per sentence: supported / unsupported / contradictory / no_rad). It answers
    in the format of whichever default prompt it is sent."""

    def reply(body: dict) -> str:
        user = _last_user(body)
        step = user.splitlines()[0]
        data = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")  # span_level: two messages
        response = _tag(data, "test_response") or _tag(data, "response")
        verdict, labels = next(v for k, v in script.items() if k in response)
        sentences = split_sentences(response)
        assert len(sentences) == len(labels), (response, labels)
        ok = [label in ("supported", "no_rad") for label in labels]
        if step.startswith("Instruction-following check"):
            return f'Analysis: the request asks for colours.\n```json\n{{"Instruction Following": "{verdict}"}}\n```'
        if step.startswith("Grounding check: label every sentence"):
            return "\n".join(json.dumps({"sentence": s, "label": label, "rationale": f"{label} by the script",
                                         "excerpt": s if label in ("supported", "contradictory") else None})
                             for s, label in zip(sentences, labels))
        if step.startswith("Grounding check: sentences and final answer"):
            lines = []
            for i, (s, good) in enumerate(zip(sentences, ok), 1):
                lines += [f"Sentence {i}: {s}", f"Sentence {i} label: {'Accurate' if good else 'Inaccurate'}"]
            return "\n".join(lines + [f"Final Answer: {'Accurate' if all(ok) else 'Inaccurate'}"])
        if step.startswith("Grounding check: span"):
            i = sentences.index(_tag(user, "span"))
            return f"Evidence: {sentences[i]}\nReasoning: scripted.\nFinal Answer: {'Accurate' if ok[i] else 'Inaccurate'}"
        if step.startswith("Grounding check: whole response"):
            return f"Let me check each part.\nFinal Answer: {'Accurate' if all(ok) else 'Inaccurate'}"
        raise AssertionError(f"unexpected step {step!r}")

    return reply


def config(tests: str, judges=("judge-a", "judge-b", "judge-c"), assert_config: str = "{}", extra: str = "") -> str:
    panel = ", ".join(f'{{id: "openai:chat:{j}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}'
                      for j in judges)
    return f"""
prompts: ["Request: {{{{request}}}}"]
providers: [{{id: "openai:chat:m", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
defaultTest:
  vars: {{context: "{DOC}"}}
  assert:
    - type: facts-grounding
      provider: [{panel}]
      config: {assert_config}
{extra}
tests:
{tests}
"""


def rows_of(out):
    doc = json.loads(out.read_text())
    return doc, sorted(doc["results"]["results"], key=lambda r: r["testIdx"])


def component(row):
    return row["gradingResult"]["componentResults"][0]


# ---------------------------------------------------------------- the three-judge run, by hand

RESPONSES = {
    "r1": "Alpha is red. Beta is blue.",
    "r2": "Alpha is red. Gamma is green.",
    "r3": "Colours exist.",
    "r4": "Alpha is red. Beta is green. Thanks!",
}
# (eligibility, sentence labels) per judge and row
SCRIPTS = {
    "judge-a": {"Alpha is red. Beta is blue.": ("No Issues", ["supported", "supported"]),
                "Gamma": ("No Issues", ["supported", "unsupported"]),
                "Colours": ("Major Issue(s)", ["no_rad"]),
                "Thanks": ("Major Issue(s)", ["supported", "supported", "no_rad"])},
    "judge-b": {"Alpha is red. Beta is blue.": ("No Issues", ["supported", "supported"]),
                "Gamma": ("Minor Issue(s)", ["supported", "supported"]),
                "Colours": ("Major Issue(s)", ["no_rad"]),
                "Thanks": ("Major Issue(s)", ["supported", "contradictory", "no_rad"])},
    "judge-c": {"Alpha is red. Beta is blue.": ("Minor Issue(s)", ["supported", "supported"]),
                "Gamma": ("No Issues", ["supported", "unsupported"]),
                "Colours": ("Major Issue(s)", ["no_rad"]),
                "Thanks": ("Minor Issue(s)", ["supported", "unsupported", "no_rad"])},
}
FOUR_TESTS = "\n".join(f'  - vars: {{request: "Which colours? ({k})"}}' for k in RESPONSES)


def _three_judges(fake_openai):
    for key, text in RESPONSES.items():
        fake_openai.add_rule(rf"\({key}\)", text, model="m")
    for judge, script in SCRIPTS.items():
        fake_openai.add_rule(".", scripted_judge(script), model=judge)


def test_three_judges_reproduce_hand_computed_scores(fake_openai, tmp_path):
    """By hand (judge-c uses implicit_span_level, a and b the json template):

    row  eligibility a/b/c      grounded a/b/c   eligible  score_j     row score  unadjusted
    r1   No/No/Minor            1/1/1            yes       1, 1, 1     1          1
    r2   No/Minor/No            0/1/0            yes       0, 1, 0     1/3        1/3
    r3   Major/Major/Major      1/1/1            NO        0, 0, 0     0          1
    r4   Major/Major/Minor      1/0/0            yes       1, 0, 0     1/3        1/3

    per judge: a = 2/4 = 0.5, b = 2/4 = 0.5, c = 1/4 = 0.25; p = mean = 0.41667 = (0.5+0.5+0.25)/3;
    95% interval = 1.96·sqrt(p(1-p)/4) = 0.48315; unadjusted p = 2.6667/4 = 0.66667;
    pass (threshold 0.5): r1 only.
    """
    _three_judges(fake_openai)
    cfg = write(tmp_path / "c.yaml", config(FOUR_TESTS, assert_config="{templates: {'openai:chat:judge-c': implicit_span_level}}"))
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out)
    assert result.exit_code == 100, result.output
    doc, rows = rows_of(out)
    metas = [component(r)["metadata"] for r in rows]
    assert not any(m.get("graderError") for m in metas), [component(r)["reason"] for r in rows]
    assert [m["eligible"] for m in metas] == [True, True, False, True]
    assert [[j["eligibility"] for j in m["judges"]] for m in metas] == [
        ["No Issues", "No Issues", "Minor Issue(s)"], ["No Issues", "Minor Issue(s)", "No Issues"],
        ["Major Issue(s)"] * 3, ["Major Issue(s)", "Major Issue(s)", "Minor Issue(s)"]]
    assert [[j["score"] for j in m["judges"]] for m in metas] == [[1, 1, 1], [0, 1, 0], [0, 0, 0], [1, 0, 0]]
    assert [m["score"] for m in metas] == pytest.approx([1, 1 / 3, 0, 1 / 3])
    assert [m["unadjustedScore"] for m in metas] == pytest.approx([1, 1 / 3, 1, 1 / 3])
    assert [r["success"] for r in rows] == [True, False, False, False]
    assert [component(r)["score"] for r in rows] == pytest.approx([1, 1 / 3, 0, 1 / 3])
    assert "ineligible" in component(rows[2])["reason"]
    assert [j["template"] for j in metas[0]["judges"]] == ["json", "json", "implicit_span_level"]
    assert [j["verdict"] for j in metas[3]["judges"]] == ["ACCURATE", "INACCURATE", "INACCURATE"]

    # sentence-level evidence: text, verdict, reason, evidence span
    claims = [c for c in metas[1]["claims"] if c["judge"] == "openai:chat:judge-a"]
    assert [(c["text"], c["verdict"], c["grounded"]) for c in claims] == [
        ("Alpha is red.", "SUPPORTED", True), ("Gamma is green.", "UNSUPPORTED", False)]
    assert claims[0]["evidence"] == "Alpha is red." and claims[0]["evidenceFound"] is True
    assert claims[0]["reason"] == "supported by the script" and claims[1]["evidence"] is None
    c_claims = [c for c in metas[3]["claims"] if c["judge"] == "openai:chat:judge-c"]
    assert [c["verdict"] for c in c_claims] == ["ACCURATE", "INACCURATE", "ACCURATE"]

    summary = facts_summary(doc["results"]["results"])
    assert summary["n"] == 4 and summary["ineligible"] == 1 and summary["gradingErrors"] == 0
    assert summary["accuracy"] == pytest.approx(5 / 12)
    assert summary["ci95"] == pytest.approx(1.96 * math.sqrt(5 / 12 * 7 / 12 / 4)) == pytest.approx(0.48315, abs=1e-5)
    assert summary["unadjusted"] == pytest.approx(8 / 12)
    judges = summary["judges"]
    assert {k: v["accuracy"] for k, v in judges.items()} == {
        "openai:chat:judge-a": 0.5, "openai:chat:judge-b": 0.5, "openai:chat:judge-c": 0.25}
    assert judges["openai:chat:judge-c"]["ci95"] == pytest.approx(1.96 * math.sqrt(0.25 * 0.75 / 4))
    assert judges["openai:chat:judge-a"]["majorIssues"] == 2 and judges["openai:chat:judge-c"]["majorIssues"] == 1
    assert format_facts_summary(summary).startswith("FACTS 41.7% ±48.3 (N=4; ineligible 1;")

    # the eligibility prompt sees the request and the response, not the document (paper Table 4)
    bodies = [r["json"] for r in _answered(fake_openai) if r["json"]["model"].startswith("judge")]
    assert len(bodies) == 4 * 3 * 2
    elig = [b for b in bodies if _last_user(b).startswith("Instruction-following check")]
    assert len(elig) == 12 and not any("Delta is yellow" in _last_user(b) for b in elig)
    # text steps too are schema-constrained (this server refused the schema: their words are read)
    asked = [r["json"] for r in fake_openai.requests if "response_format" in r["json"]]
    assert asked and all(b["response_format"]["type"] in ("json_schema", "json_object") for b in asked)
    assert all(b["temperature"] == 0 for b in bodies)


def test_summary_reproduces_table_5_intervals():
    """FACTS Grounding, Table 5: 91.4% on N = 860 is ±1.9, and the other cells likewise
    (the Average column uses N = 1719, both splits)."""
    rows = [{"method": "facts-grounding", "score": 1.0 if i < 786 else 0.0, "eligible": True,
             "judges": [{"judge": "gemini", "score": 1.0 if i < 786 else 0.0, "accurate": i < 786,
                         "eligibility": "No Issues"}]} for i in range(860)]
    s = facts_summary(rows)
    assert s["n"] == 860 and round(100 * s["accuracy"], 1) == 91.4 and round(100 * s["ci95"], 1) == 1.9
    assert round(100 * s["judges"]["gemini"]["ci95"], 1) == 1.9
    for p, n, half in [(0.914, 860, 1.9), (0.820, 860, 2.6), (0.849, 860, 2.4), (0.502, 860, 3.3),
                       (0.907, 859, 1.9), (0.807, 859, 2.6), (0.713, 859, 3.0), (0.858, 1719, 1.7),
                       (0.621, 1719, 2.3), (0.798, 1719, 1.9), (0.836, 1719, 1.8)]:
        assert round(100 * facts_interval(p, n), 1) == half, (p, n)
    assert math.isnan(facts_interval(0.5, 0)) and facts_summary([])["accuracy"] is None


def test_summary_counts_grading_errors_apart_and_reads_every_row_shape():
    from factcli.types import GradingResult

    good = {"method": "facts-grounding", "score": 2 / 3, "unadjustedScore": 2 / 3, "eligible": True, "judges": []}
    bad = {"method": "facts-grounding", "graderError": True}
    json_row = {"gradingResult": {"componentResults": [{"metadata": good}, {"metadata": {"other": 1}}]}}
    graded = GradingResult(True, 1.0, component_results=[GradingResult(True, 1.0, metadata=dict(good, score=1.0))])
    s = facts_summary([json_row, graded, {"metadata": bad}, {"gradingResult": None}])
    assert s["n"] == 2 and s["gradingErrors"] == 1 and s["accuracy"] == pytest.approx(5 / 6)


# ---------------------------------------------------------------- each template, end to end

@pytest.mark.parametrize("template, labels, accurate, calls", [
    ("json", ["supported", "no_rad"], True, 1),
    ("json", ["supported", "contradictory"], False, 1),
    ("implicit_span_level", ["supported", "no_rad"], True, 1),
    ("implicit_span_level", ["unsupported", "no_rad"], False, 1),
    ("span_level", ["supported", "no_rad"], True, 2),
    ("span_level", ["supported", "unsupported"], False, 2),
    ("response_level", ["supported", "no_rad"], True, 1),
    ("response_level", ["unsupported", "no_rad"], False, 1),
])
def test_each_template(fake_openai, tmp_path, template, labels, accurate, calls):
    fake_openai.add_rule(".", "Alpha is red. Have a nice day!", model="m")
    fake_openai.add_rule(".", scripted_judge({"Alpha": ("No Issues", labels)}), model="judge-a")
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=("judge-a",),
                                            assert_config=f"{{template: {template}}}"))
    out = tmp_path / "r.json"
    run("-c", cfg, "-o", out)
    _, rows = rows_of(out)
    comp = component(rows[0])
    meta = comp["metadata"]
    assert not meta.get("graderError"), comp["reason"]
    assert meta["judges"][0]["accurate"] is accurate and comp["pass"] is accurate
    assert comp["score"] == (1.0 if accurate else 0.0)
    grounding = [r for r in _answered(fake_openai) if r["json"]["model"] == "judge-a"
                 and _last_user(r["json"]).startswith("Grounding check")]
    assert len(grounding) == calls
    if template == "span_level":
        assert [c["text"] for c in meta["claims"]] == ["Alpha is red.", "Have a nice day!"]
        assert "span 2 of 2" in _last_user(grounding[-1]["json"]) or "span 2 of 2" in _last_user(grounding[0]["json"])
        assert meta["claims"][0]["evidence"] == "Alpha is red."
    elif template != "response_level":
        assert len(meta["claims"]) == 2


def test_parsers_follow_the_methods_doc():
    # json: the fenced block, split at "}\n", newlines in an object read as spaces, \' unescaped
    reply = ("Here you go:\n```json\n{\"sentence\": \"A b.\", \"label\": \"supported\",\n \"rationale\": \"it\\'s there\","
             " \"excerpt\": \"A b c.\"}\n{\"sentence\": \"Hi!\", \"label\": \"no rad\", \"rationale\": \"greeting\","
             " \"excerpt\": null}\n```\ntrailing words")
    claims = parse_json_labels(reply)
    assert [(c["text"], c["verdict"], c["reason"], c["evidence"]) for c in claims] == [
        ("A b.", "SUPPORTED", "it's there", "A b c."), ("Hi!", "NO_RAD", "greeting", None)]
    assert [c["verdict"] for c in parse_json_labels('[{"sentence": "A.", "label": "Contradictory"}]')] == ["CONTRADICTORY"]
    two_on_a_line = '{"sentence": "A.", "label": "supported"} {"sentence": "B.", "label": "unsupported"}'
    assert [c["verdict"] for c in parse_json_labels(two_on_a_line)] == ["SUPPORTED", "UNSUPPORTED"]
    array_in_prose = 'Output:\n[{"sentence": "A.", "label": "supported"},\n{"sentence": "B.", "label": "no_rad"}]\nDone.'
    assert [c["verdict"] for c in parse_json_labels(array_in_prose)] == ["SUPPORTED", "NO_RAD"]
    # implicit span level: the text after the last "Final Answer:", "inaccurate"/"false" first
    assert read_final_answer("Final Answer: Accurate", "s") is True
    assert read_final_answer("**Final Answer:** Inaccurate", "s") is False
    assert read_final_answer("Final Answer: Accurate\nNo false claims.", "s") is False
    assert read_final_answer("Final Answer: maybe\nFinal Answer: True", "s") is True
    assert read_final_answer("Step by step...\nThe response is inaccurate.", "s") is False
    ok, sentences = parse_implicit_span_level(
        "Sentence 1: A.\nSentence 1 evidence: A b.\nSentence 1 label: Accurate\n**Sentence 2:** B.\n"
        "Sentence 2 label: Inaccurate\nFinal Answer: Inaccurate")
    assert ok is False and [(s["text"], s["verdict"], s["evidence"]) for s in sentences] == [
        ("A.", "ACCURATE", "A b."), ("B.", "INACCURATE", None)]
    assert parse_span_level("Evidence: none\nReasoning: not there.\nFinal Answer: Inaccurate", "s") == (
        False, "not there.", None)
    # eligibility: the ```json block, newlines read as spaces
    assert parse_eligibility('Analysis\n```json\n{\n  "Instruction Following": "Major Issue(s)"\n}\n```') == "Major Issue(s)"
    assert parse_eligibility('Analysis... {"Instruction Following": "minor issues"}') == "Minor Issue(s)"


@pytest.mark.parametrize("fn, reply, message", [
    (parse_json_labels, "The response looks fine to me.", "no JSON object"),
    (parse_json_labels, '{"sentence": "A.", "label": "partially supported"}', "label"),
    (parse_json_labels, '{"sentence": "A.", "label": "supported"}\n{"sentence": "B.", "label": "supp', "not valid JSON"),
    (parse_json_labels, '{"label": "supported"}', "no sentence"),
    (lambda t: parse_implicit_span_level(t), "Sentence 1: A.\nSentence 1 label: Accurate", "Final Answer"),
    (lambda t: parse_implicit_span_level(t), "Sentence 1: A.\nSentence 1 label: Inaccurate\nFinal Answer: Accurate",
     "contradicts"),
    (lambda t: parse_implicit_span_level(t), "Sentence 1: A.\nSentence 1 label: Accurate\nSentence 3: C.\n"
                                             "Sentence 3 label: Accurate\nFinal Answer: Accurate", "numbered"),
    (lambda t: parse_implicit_span_level(t), "Sentence 1: A.\nSentence 1 label: Accurate/Inaccurate\n"
                                             "Final Answer: Inaccurate", "label"),
    (lambda t: parse_implicit_span_level(t), "Sentence 1: A.\nFinal Answer: Accurate", "label"),
    (lambda t: read_final_answer(t, "s"), "I cannot tell from the evidence.", "Final Answer"),
    (lambda t: read_final_answer(t, "s"), "Final Answer: unclear", "neither"),
    (parse_eligibility, "Analysis: fine.", "no {"),
    (parse_eligibility, '```json\n{"Instruction Following": "Some Issues"}\n```', "unknown verdict"),
    (parse_eligibility, '```json\n{"Instruction Following": "No Issues"}\n```\n```json\n'
                        '{"Instruction Following": "Major Issue(s)"}\n```', "conflicting"),
])
def test_malformed_replies_raise(fn, reply, message):
    with pytest.raises(JudgeError, match=re.escape(message)):
        fn(reply)


@pytest.mark.parametrize("template, reply, message", [
    ("json", "Everything is grounded.", "no JSON object"),
    ("json", '{"sentence": "Alpha is red.", "label": "maybe"}\n{"sentence": "Beta is blue.", "label": "supported"}',
     "label"),
    # the judge labels the prompt's few-shot example instead of the response
    ("json", '{"sentence": "The museum opens at 9 a.m.", "label": "supported", "excerpt": "x"}\n'
             '{"sentence": "Enjoy your visit!", "label": "no_rad"}', "is not from the response"),
    # one sentence of a long response: coverage below config.minCoverage
    ("json", '{"sentence": "Alpha is red.", "label": "supported"}', "cover"),
    ("implicit_span_level", "Sentence 1: Alpha is red.\nSentence 1 label: Accurate\nSentence 2: Beta is blue.\n"
                            "Sentence 2 label: Inaccurate\nFinal Answer: Accurate", "contradicts"),
    ("response_level", "Hard to say.", "Final Answer"),
])
def test_mismatched_replies_are_grading_errors(fake_openai, tmp_path, template, reply, message):
    fake_openai.add_rule(".", "Alpha is red. Beta is blue. Delta is yellow and both other colours are also "
                              "mentioned in the document.", model="m")
    fake_openai.add_rule("Instruction-following", 'Analysis\n```json\n{"Instruction Following": "No Issues"}\n```',
                         model="judge-a")
    fake_openai.add_rule("Grounding check", reply, model="judge-a")
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=("judge-a",),
                                            assert_config=f"{{template: {template}}}"))
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out).exit_code == 4  # not judged
    doc, rows = rows_of(out)
    comp = component(rows[0])
    assert comp["pass"] is False and comp["score"] == 0
    assert comp["metadata"]["graderError"] is True and comp["metadata"]["graderRaw"] == reply
    assert message in comp["reason"]
    assert rows[0]["failureReason"] == 1
    assert doc["factcli"]["columns"][0]["gradingErrors"] == 1
    assert facts_summary(rows)["gradingErrors"] == 1 and facts_summary(rows)["n"] == 0


def test_an_unreadable_eligibility_reply_is_a_grading_error_not_eligible(fake_openai, tmp_path):
    fake_openai.add_rule(".", "Alpha is red.", model="m")
    fake_openai.add_rule("Instruction-following", "Looks fine to me.", model="judge-a")
    fake_openai.add_rule("Grounding check", '{"sentence": "Alpha is red.", "label": "supported"}', model="judge-a")
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=("judge-a",)))
    out = tmp_path / "r.json"
    run("-c", cfg, "-o", out)
    comp = component(rows_of(out)[1][0])
    assert comp["metadata"]["graderError"] and "eligibility" in comp["reason"]
    assert comp["metadata"]["graderRaw"] == "Looks fine to me."


def test_a_failing_judge_is_left_out_and_reported(fake_openai, tmp_path, monkeypatch):
    """Issue 8: a judge that errors is left out of the row's aggregate and reported, never counted
    as a verdict; the column summary shows the rows scored without it."""
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    _three_judges(fake_openai)
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Which colours? (r1)"}',
                                            extra="evaluateOptions: {maxConcurrency: 1}"))
    fake_openai.enqueue(RESPONSES["r1"])  # the provider call; then one judge call gets HTTP 500
    fake_openai.enqueue_fault(status=500)
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out).exit_code == 0  # the two judges that answered find r1 accurate
    doc, rows = rows_of(out)
    comp = component(rows[0])
    meta = comp["metadata"]
    assert comp["pass"] is True and not meta.get("graderError")
    failed = [j for j in meta["judges"] if "error" in j]
    assert len(failed) == 1 and "score" not in failed[0]
    assert meta["judgesFailed"] == [failed[0]["judge"]]
    assert meta["score"] == 1.0 and comp["score"] == 1.0  # the mean of the two that answered
    assert f"1 of 3 judges failed and was left out: {failed[0]['judge']}" in comp["reason"]
    summary = facts_summary(doc["results"]["results"])
    assert summary["n"] == 1 and summary["rowsWithFailedJudges"] == 1
    assert summary["judges"][failed[0]["judge"]]["failed"] == 1
    assert summary["judges"][failed[0]["judge"]]["accuracy"] is None
    assert "a judge failed and was left out in 1 row(s)" in format_facts_summary(summary)
    assert doc["factcli"]["columns"][0]["gradingErrors"] == 0


def test_a_garbled_judge_reply_is_left_out_and_changes_the_majority(fake_openai, tmp_path):
    fake_openai.add_rule(r"\(r2\)", RESPONSES["r2"], model="m")
    for judge in ("judge-a", "judge-b"):
        fake_openai.add_rule(".", scripted_judge(SCRIPTS[judge]), model=judge)
    fake_openai.add_rule(".", "I would rather not say.", model="judge-c")
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Which colours? (r2)"}',
                                            assert_config="{aggregate: majority}"))
    out = tmp_path / "r.json"
    run("-c", cfg, "-o", out)
    comp = component(rows_of(out)[1][0])
    # judge-a: inaccurate, judge-b: accurate, judge-c unreadable: one vote each way is a tie
    assert comp["metadata"]["graderError"] is True and "tie" in comp["reason"]
    assert comp["metadata"]["judgesFailed"] == ["openai:chat:judge-c"]


def test_all_judges_failing_is_a_grading_error(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    _three_judges(fake_openai)
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Which colours? (r1)"}',
                                            extra="evaluateOptions: {maxConcurrency: 1}"))
    fake_openai.enqueue(RESPONSES["r1"])
    for _ in range(6):  # eligibility and grounding of each judge
        fake_openai.enqueue_fault(status=500)
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out).exit_code == 4  # not judged
    doc, rows = rows_of(out)
    comp = component(rows[0])
    assert comp["pass"] is False and comp["metadata"]["graderError"] is True
    assert rows[0]["failureReason"] == 1  # a grading error fails the row; it is not a provider ERROR
    assert comp["reason"].startswith("facts-grounding: all 3 judges failed: ")
    assert "score" not in comp["metadata"] and len(comp["metadata"]["judgesFailed"]) == 3
    assert doc["factcli"]["columns"][0]["gradingErrors"] == 1


# ---------------------------------------------------------------- inputs, options, prompts


def test_request_from_the_rendered_prompt_and_a_32k_token_document(fake_openai, tmp_path):
    """A ~32k-token document (130k characters) embedded in the prompt: the judges see it exactly
    once per grounding call, the request keeps a marker in its place, and the run stays fast."""
    words = [f"word{i % 997}" for i in range(24_000)]
    doc = "Alpha is red. " + " ".join(" ".join(words[i:i + 12]).capitalize() + "." for i in range(0, len(words), 12))
    assert len(doc) > 128_000
    write(tmp_path / "doc.txt", doc)
    fake_openai.add_rule(".", "Alpha is red.", model="m")
    for j in ("judge-a", "judge-b", "judge-c"):
        fake_openai.add_rule(".", scripted_judge({"Alpha": ("No Issues", ["supported"])}), model=j)
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Use only this document:\\n{{context}}\\n\\nQuestion: which colour is Alpha?"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
  - vars: {context: file://doc.txt}
    assert:
      - type: facts-grounding
        provider: [%s]
""" % ", ".join(f'{{id: "openai:chat:{j}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}'
                for j in ("judge-a", "judge-b", "judge-c")))
    out = tmp_path / "r.json"
    started = time.perf_counter()
    run("-c", cfg, "-o", out)
    elapsed = time.perf_counter() - started
    comp = component(rows_of(out)[1][0])
    assert comp["pass"] and comp["score"] == 1.0, comp["reason"]
    grounding = [_last_user(r["json"]) for r in _answered(fake_openai) if r["json"]["model"].startswith("judge")
                 and _last_user(r["json"]).startswith("Grounding check")]
    assert len(grounding) == 3 and all(g.count(doc) == 1 for g in grounding)
    request = _tag(grounding[0], "user_request")
    assert request.startswith("Use only this document:\n[the context document, given separately]")
    assert request.endswith("Question: which colour is Alpha?")
    assert elapsed < 20
    started = time.perf_counter()
    assert len(split_sentences(doc * 2)) > 4000
    assert time.perf_counter() - started < 2


def test_context_var_request_var_and_overridden_prompts(fake_openai, tmp_path):
    write(tmp_path / "elig.txt", "CUSTOM ELIGIBILITY for {{question}} / {{request}}: {{response}}")
    fake_openai.add_rule(".", "Alpha is red.", model="m")
    fake_openai.add_rule(r"^CUSTOM ELIGIBILITY for Q1 / Q1: Alpha is red\.$",
                         '```json\n{"Instruction Following": "No Issues"}\n```', model="judge-a")
    fake_openai.add_rule(r"^CUSTOM GROUNDING\nAlpha is red\. \| Q1 \| Doc says Alpha is red\.$",
                         "Final Answer: Accurate", model="judge-a")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["{{question}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
  - vars: {question: Q1, doc: "Doc says Alpha is red."}
    assert:
      - type: facts-grounding
        provider: {id: "openai:chat:judge-a", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
        config:
          context_var: doc
          request_var: question
          template: response_level
          eligibilityPrompt: file://elig.txt
          responseLevelPrompt:
            - {role: system, content: "Judge strictly."}
            - {role: user, content: "CUSTOM GROUNDING\\n{{response}} | {{request}} | {{context}}"}
""")
    out = tmp_path / "r.json"
    run("-c", cfg, "-o", out)
    comp = component(rows_of(out)[1][0])
    assert comp["pass"] and not comp["metadata"].get("graderError"), comp["reason"]
    assert [j["eligibility"] for j in comp["metadata"]["judges"]] == ["No Issues"]


def test_baseline_and_majority_tie(fake_openai, tmp_path):
    fake_openai.add_rule("^Request: ", "Alpha is red.", model="m")
    for j, label in (("judge-a", "supported"), ("judge-b", "unsupported")):
        fake_openai.add_rule("^Request: ", f"Baseline answer of {j}.", model=j)  # the baseline: the prompt itself
        fake_openai.add_rule(f"<baseline_response>\nBaseline answer of {j}.\n</baseline_response>",
                             '```json\n{"Instruction Following": "No Issues"}\n```', model=j)
        fake_openai.add_rule("Grounding check", json.dumps({"sentence": "Alpha is red.", "label": label}), model=j)
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=("judge-a", "judge-b"),
                                            assert_config="{baseline: true, aggregate: majority}"))
    out = tmp_path / "r.json"
    run("-c", cfg, "-o", out)
    comp = component(rows_of(out)[1][0])
    assert [j["eligibility"] for j in comp["metadata"]["judges"]] == ["No Issues", "No Issues"]
    assert comp["metadata"]["graderError"] and "tie" in comp["reason"]
    steps = [r["json"]["messages"] for r in _answered(fake_openai) if r["json"]["model"] == "judge-a"]
    assert len(steps) == 3  # baseline, eligibility, grounding


def test_empty_response_bad_config_and_missing_context(fake_openai, tmp_path):
    fake_openai.add_rule(".", "   ", model="m")
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=("judge-a",)))
    out = tmp_path / "r.json"
    run("-c", cfg, "-o", out)
    comp = component(rows_of(out)[1][0])
    assert comp["score"] == 0 and not comp["metadata"].get("graderError") and "empty" in comp["reason"]
    assert not [r for r in _answered(fake_openai) if r["json"]["model"] == "judge-a"]
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=("judge-a",),
                                            assert_config="{template: sentence_level}"))
    run("-c", cfg, "-o", out)
    row = rows_of(out)[1][0]
    assert row["failureReason"] == 2 and "config.template must be one of json" in row["error"]
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=("judge-a",),
                                            assert_config="{context_var: document}"))
    run("-c", cfg, "-o", out)
    assert "needs the context document in the 'document' var" in rows_of(out)[1][0]["error"]


# ---------------------------------------------------------------- example and suite


def test_offline_example_runs(tmp_path):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(ROOT / "examples/facts-grounding/promptfooconfig.yaml"),
                                 "-o", str(out), "--no-progress-bar", "--no-table"])
    assert result.exit_code == 100, result.output
    doc = json.loads(out.read_text())
    rows = doc["results"]["results"]
    careful = facts_summary([r for r in rows if r["provider"]["label"] == "careful"])
    embellishing = facts_summary([r for r in rows if r["provider"]["label"] == "embellishing"])
    assert careful["accuracy"] == pytest.approx(8 / 9) and careful["ineligible"] == 0
    assert embellishing["accuracy"] == 0 and embellishing["ineligible"] == 1
    assert set(careful["judges"]) == {"judge-strict", "judge-lenient", "judge-implicit"}
    columns = doc["factcli"]["columns"]
    assert [c["methods"]["factsGrounding"] for c in columns] == [careful, embellishing]
    assert "FACTS 88.9% ±35.6 (N=3; ineligible 0;" in " ".join(result.output.split())
    shown = runner.invoke(app, ["view", "latest"])
    assert shown.exit_code == 0 and "FACTS 0.0% ±0.0 (N=3; ineligible 1;" in " ".join(shown.output.split())


def test_ready_made_suite_runs_with_scripted_judges(fake_openai, tmp_path):
    import yaml

    data = yaml.safe_load((ROOT / "configs/facts-grounding.yaml").read_text())
    url = fake_openai.url
    data["providers"] = [{"id": "openai:chat:m", "config": {"apiBaseUrl": url}}]
    assertion = data["defaultTest"]["assert"][0]
    judges = assertion["provider"]
    assert len(judges) == 3 and assertion["config"]["profile"] == "reference"
    for j in judges:  # the same judges, served by the fake server under their model names
        j["id"], j["config"]["apiBaseUrl"] = "openai:chat:" + j["id"].split(":")[-1], url
    write(tmp_path / "facts-grounding.yaml", yaml.safe_dump(data))
    write(tmp_path / "facts-grounding-examples.csv",
          'system_instruction,user_request,context_document\n'
          f'"Answer only from the document.","Which colours?","{DOC}"\n')
    fake_openai.add_rule(".", "Alpha is red. Beta is blue.", model="m")
    script = scripted_judge({"Alpha": ("No Issues", ["supported", "supported"])})
    for j in judges:
        fake_openai.add_rule("^" + re.escape(DOC), "Alpha is red.", model=j["id"].split(":")[-1])  # its baseline
        fake_openai.add_rule(".", script, model=j["id"].split(":")[-1])
    out = tmp_path / "r.json"
    result = run("-c", tmp_path / "facts-grounding.yaml", "-o", out)
    assert result.exit_code == 0, result.output
    comp = component(json.loads(out.read_text())["results"]["results"][0])
    assert comp["score"] == 1.0 and [j["template"] for j in comp["metadata"]["judges"]] == [
        "json", "json", "implicit_span_level"]


def test_eligibility_off_and_not_facts_grounding(fake_openai, tmp_path):
    fake_openai.add_rule(".", "Alpha is red. Gamma is green.", model="m")
    fake_openai.add_rule(".", scripted_judge({"Alpha": ("Major Issue(s)", ["supported", "unsupported"])}),
                         model="judge-a")
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=("judge-a",),
                                            assert_config="{eligibility: false}").replace(
        "type: facts-grounding", "type: not-facts-grounding"))
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out).exit_code == 0
    comp = component(rows_of(out)[1][0])
    meta = comp["metadata"]
    assert comp["pass"] is True and comp["score"] == 1.0  # inverted: the response is not grounded
    assert meta["score"] == 0.0 and meta["eligible"] is True and meta["judges"][0]["eligibility"] is None
    steps = [_last_user(r["json"]).splitlines()[0] for r in _answered(fake_openai) if r["json"]["model"] == "judge-a"]
    assert steps == ["Grounding check: label every sentence"]


def test_reference_profile_asks_for_a_baseline_and_gives_each_judge_the_papers_template(fake_openai, tmp_path):
    judges = ("gpt-judge", "claude-judge")
    fake_openai.add_rule("^Request: ", "Alpha is red. Beta is blue.", model="m")
    for j in judges:
        fake_openai.add_rule("^Request: ", f"Baseline answer of {j}.", model=j)  # its own answer to the prompt
        fake_openai.add_rule(".", scripted_judge({"Alpha": ("No Issues", ["supported", "supported"])}), model=j)
    cfg = write(tmp_path / "c.yaml", config('  - vars: {request: "Colours?"}', judges=judges,
                                            assert_config="{profile: reference}"))
    out = tmp_path / "r.json"
    run("-c", cfg, "-o", out)
    comp = component(rows_of(out)[1][0])
    meta = comp["metadata"]
    assert meta["profile"] == "reference" and comp["score"] == 1.0
    # the paper's judges: json for GPT (and Gemini), implicit_span_level for Claude
    assert [(j["judge"], j["template"]) for j in meta["judges"]] == [
        ("openai:chat:gpt-judge", "json"), ("openai:chat:claude-judge", "implicit_span_level")]
    for j in judges:
        steps = [r["json"]["messages"] for r in _answered(fake_openai) if r["json"]["model"] == j]
        assert len(steps) == 3  # baseline, eligibility (with the baseline), grounding
        eligibility = next(m[-1]["content"] for m in steps if "Instruction-following check" in m[-1]["content"])
        assert f"Baseline answer of {j}." in eligibility


def test_a_steps_parts_all_run_to_their_end_and_the_error_does_not_depend_on_timing():
    """scoring/gather.gather_settled, facts-grounding's spans and eligibility: no call is cancelled while
    its server still answers it (a cancelled request freed its endpoint's maxConcurrency slot early, so the
    server saw one call more than allowed), a run-stopping error wins over a part's, and the part's error
    reported is the first in order, not the first to arrive."""
    import asyncio

    from factcli.methods.claims import JudgeError
    from factcli.scoring.gather import gather_settled

    finished = []

    async def part(i: int, delay: float, error: BaseException | None = None):
        await asyncio.sleep(delay)
        finished.append(i)
        if error is not None:
            raise error
        return i

    async def settle(*parts):
        return await gather_settled([part(*p) for p in parts], JudgeError)

    assert asyncio.run(settle((0, 0.02), (1, 0.0))) == [0, 1]
    with pytest.raises(JudgeError, match="first"):
        asyncio.run(settle((0, 0.03, JudgeError("first")), (1, 0.0, JudgeError("second")), (2, 0.05)))
    assert sorted(finished[-3:]) == [0, 1, 2]  # the slow part ran to its end
    with pytest.raises(RuntimeError, match="stop"):
        asyncio.run(settle((0, 0.0, JudgeError("part")), (1, 0.02, RuntimeError("stop"))))
