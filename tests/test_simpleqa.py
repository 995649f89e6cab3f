"""`simpleqa`: every grade against a scripted grader on the fake server, unreadable replies as
grading errors, and the column's SimpleQA figures."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.methods.simpleqa import format_simpleqa, read_grade, simpleqa_summary

CONFIG = """
prompts: ["<<answer>>"]
providers: [echo]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - {description: right, vars: {question: "Capital of France?", answer: "Paris."}, assert: [{type: simpleqa, value: Paris}]}
  - {description: word, vars: {question: "Capital of France?", answer: "It is Paris"}, assert: [{type: simpleqa, value: Paris}]}
  - {description: wrong, vars: {question: "Capital of France?", answer: "Lyon."}, assert: [{type: simpleqa, value: Paris}]}
  - {description: json-wrong, vars: {question: "Capital of France?", answer: "Marseille."}, assert: [{type: simpleqa, value: Paris}]}
  - {description: declines, vars: {question: "Capital of France?", answer: "I do not know."}, assert: [{type: simpleqa, value: Paris}]}
  - {description: hedges, vars: {question: "Capital of France?", answer: "Maybe Paris or Lyon."}, assert: [{type: simpleqa, value: Paris}]}
  - {description: garbage, vars: {question: "Capital of France?", answer: "Nice."}, assert: [{type: simpleqa, value: Paris}]}
  - {description: two-letters, vars: {question: "Capital of France?", answer: "Toulouse."}, assert: [{type: simpleqa, value: Paris}]}
"""

# the scripted grader: the answer it is shown decides its reply
REPLIES = [
    (r"Answer to grade: Paris\.", "A"),
    (r"Answer to grade: It is Paris", "CORRECT"),
    (r"Answer to grade: Lyon\.", " B. "),
    (r"Answer to grade: Marseille\.", '{"grade": "INCORRECT", "reason": "names another city"}'),
    (r"Answer to grade: I do not know\.", "C"),
    (r"Answer to grade: Maybe Paris", '{"grade": "C", "reason": "two candidates, no commitment"}'),
    (r"Answer to grade: Nice\.", "The answer is wrong."),
    (r"Answer to grade: Toulouse\.", "A or B"),
]


@pytest.fixture
def run(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for pattern, reply in REPLIES:
        fake_openai.add_rule(pattern, reply)
    cfg = write(tmp_path / "c.yaml", CONFIG)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar"])
    return result, json.loads(out.read_text())

@pytest.fixture(autouse=True)
def _judges_answer_in_words(fake_openai):
    """The scripted judges here answer in the method's own words (a letter, FACTS' labels), as its
    reference prompts ask: a server that takes no response_format, whose words are read. Sent the
    step's schema, a reply in words is a grading error (tests/test_judge_trouble.py)."""
    fake_openai.refuse_response_format("json_schema", "json_object")



def test_every_grade_and_unreadable_replies(run):
    result, doc = run
    assert result.exit_code == 100, result.output
    rows = {r["testCase"]["description"]: r for r in doc["results"]["results"]}
    graded = {name: r["gradingResult"]["componentResults"][0] for name, r in rows.items()}
    grades = {name: g["metadata"].get("grade") for name, g in graded.items()}
    assert grades == {"right": "CORRECT", "word": "CORRECT", "wrong": "INCORRECT", "json-wrong": "INCORRECT",
                      "declines": "NOT_ATTEMPTED", "hedges": "NOT_ATTEMPTED", "garbage": None,
                      "two-letters": None}
    assert {name for name, r in rows.items() if r["success"]} == {"right", "word"}
    assert graded["json-wrong"]["reason"] == "SimpleQA grade: incorrect: names another city"
    assert graded["hedges"]["metadata"]["graderReason"] == "two candidates, no commitment"
    # never a silent pass or fail: a grading error, the raw reply kept
    for name, raw in (("garbage", "The answer is wrong."), ("two-letters", "A or B")):
        assert graded[name]["metadata"]["graderError"] is True and graded[name]["metadata"]["graderRaw"] == raw
    assert graded["wrong"]["metadata"]["graderRaw"] == " B. "


def test_the_column_figures(run):
    result, doc = run
    column = doc["factcli"]["columns"][0]["methods"]["simpleqa"]
    assert column["n"] == 6 and column["gradingErrors"] == 2
    assert column["correct"]["count"] == 2 and column["correct"]["rate"] == pytest.approx(2 / 6)
    assert column["incorrect"]["rate"] == pytest.approx(2 / 6)
    assert column["notAttempted"]["rate"] == pytest.approx(2 / 6)
    assert column["correctGivenAttempted"] == pytest.approx(0.5)
    assert column["f"] == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))  # 0.4
    shown = " ".join(result.output.split())  # the summary wraps at the terminal's width
    assert "SimpleQA (n=6): correct 33.3% [" in shown
    assert "correct given attempted 50.0%, F 40.0%; 2 grading errors left out" in shown


@pytest.mark.parametrize("reply, grade", [
    ("A", "CORRECT"), ("b", None), ('"C"', "NOT_ATTEMPTED"), ("(B)", "INCORRECT"), ("NOT ATTEMPTED", "NOT_ATTEMPTED"),
    ('{"grade": "a"}', "CORRECT"), ('{"grade": "maybe"}', None), ('{"reason": "x"}', None), ("", None),
    ("A\nB", None), ("The grade is A", None),
])
def test_reading_a_reply(reply, grade):
    read = read_grade(reply)
    assert (read[0] if read else None) == grade


def test_figures_by_hand():
    metas = [{"grade": g} for g in ["CORRECT"] * 6 + ["INCORRECT"] * 3 + ["NOT_ATTEMPTED"]] + [{"graderError": True}]
    s = simpleqa_summary(metas)
    assert s["n"] == 10 and s["gradingErrors"] == 1
    assert s["correct"]["rate"] == 0.6 and s["correctGivenAttempted"] == pytest.approx(6 / 9)
    assert s["f"] == pytest.approx(2 * 0.6 * (6 / 9) / (0.6 + 6 / 9))
    z = 1.96  # Wilson's interval, by hand: (p + z²/2n ± z·√(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    centre, half = (0.6 + z * z / 20) / (1 + z * z / 10), z * (0.6 * 0.4 / 10 + z * z / 400) ** 0.5 / (1 + z * z / 10)
    assert s["correct"]["ci95"] == pytest.approx([centre - half, centre + half])
    # all correct: an interval that says what 10 rows can say, never "certain" (issue 40)
    perfect = simpleqa_summary([{"grade": "CORRECT"}] * 10)
    assert perfect["correct"]["ci95"][0] < 0.75 and perfect["correct"]["ci95"][1] == 1.0
    assert perfect["incorrect"]["ci95"][0] == 0.0 and perfect["incorrect"]["ci95"][1] > 0.25
    # nothing attempted: correct given attempted and F have no denominator
    none = simpleqa_summary([{"grade": "NOT_ATTEMPTED"}] * 3)
    assert none["correctGivenAttempted"] is None and none["f"] is None
    assert "correct given attempted n/a, F n/a" in format_simpleqa(none)
    # attempted, never right: F is 0, not n/a
    assert simpleqa_summary([{"grade": "INCORRECT"}] * 2)["f"] == 0.0


def test_the_figures_in_view_and_the_html_report(run, tmp_path):
    runner = CliRunner()
    shown = " ".join(runner.invoke(app, ["view", "latest"]).output.split())
    assert "SimpleQA (n=6): correct 33.3% [" in shown
    page = tmp_path / "r.html"
    assert runner.invoke(app, ["export", "latest", "-o", str(page)]).exit_code == 0
    assert "<h2>Methods</h2>" in page.read_text() and "F 40.0%; 2 grading errors left out" in page.read_text()


def test_the_shipped_suite_runs_offline(tmp_path):
    """configs/simpleqa-truthfulqa: the guesser and the humble model are right about as often; SimpleQA
    tells them apart, and the factuality pass rates come corrected for the (weak) stand-in judge."""
    from conftest import ROOT

    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(ROOT / "configs/simpleqa-truthfulqa/promptfooconfig.yaml"),
                                      "-o", str(out), "--no-progress-bar"])
    assert result.exit_code == 100, result.output
    columns = json.loads(out.read_text())["factcli"]["columns"]
    careful, guesser, humble = (c["methods"]["simpleqa"] for c in columns)
    assert careful["correct"]["rate"] == 1.0
    assert abs(guesser["correct"]["rate"] - humble["correct"]["rate"]) <= 0.1
    assert humble["incorrect"]["rate"] == 0.0 and humble["f"] > guesser["f"]
    for c in columns:
        (corrected,) = c["judgeCorrected"]
        assert corrected["calibrationN"] == {"pass": 75, "fail": 75} and corrected["correctedPassRate"] is not None


def test_factuality_rows_that_abstain_count_as_not_attempted(fake_openai, tmp_path, monkeypatch):
    """With config.abstain (FActScore's rules), a factuality column gets the SimpleQA figures too:
    an abstaining output is not attempted whatever the judge said, the others correct or incorrect."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule(r"<submitted_answer>\nParis", '{"category": "A", "reason": "same"}')
    fake_openai.add_rule(r"<submitted_answer>", '{"category": "D", "reason": "differs"}')
    cfg = write(tmp_path / "c.yaml", """
prompts: ["<<answer>>"]
providers: [echo]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
  assert: [{type: factuality, value: Paris, config: {abstain: auto}}]
tests:
  - vars: {question: "Capital of France?", answer: "Paris."}
  - vars: {question: "Capital of France?", answer: "Lyon."}
  - vars: {question: "Capital of France?", answer: "I'm sorry, I cannot tell."}
""")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar"])
    assert result.exit_code == 100, result.output
    doc = json.loads(out.read_text())
    metas = [r["gradingResult"]["componentResults"][0]["metadata"] for r in doc["results"]["results"]]
    assert [m["abstained"] for m in metas] == [False, False, True]
    assert metas[2]["abstainReason"] == "starts with \"I'm sorry\""
    figures = doc["factcli"]["columns"][0]["methods"]["simpleqa"]
    assert [figures[k]["count"] for k in ("correct", "incorrect", "notAttempted")] == [1, 1, 1]
    assert figures["from"] == {"factuality": 3}


def test_factscore_rows_join_a_column_that_has_simpleqa_figures():
    from factcli.methods.simpleqa import select
    from factcli.types import Assertion, GradingResult

    def graded(passed, **meta):
        return GradingResult(passed, 1.0 if passed else 0.0, "", assertion=Assertion(type="factscore"), metadata=meta)

    items = [select(graded(True, method="factscore", abstained=False)),
             select(graded(False, method="factscore", abstained=True)),
             select(graded(False, method="factscore", abstained=False))]
    assert [i["grade"] for i in items] == ["CORRECT", "NOT_ATTEMPTED", "INCORRECT"]
    assert simpleqa_summary(items) is None  # factscore rows alone keep their own report
    # beside simpleqa rows, the figures are the simpleqa rows' alone: F is not pooled over two measurements
    both = simpleqa_summary(items + [{"grade": "CORRECT", "from": "simpleqa"}])
    assert both["n"] == 1 and both["from"] == {"simpleqa": 1} and both["notCounted"] == {"factscore": 3}
    assert both["f"] == 1.0
    assert "3 factscore rows not counted (the figures are over simpleqa rows only)" in format_simpleqa(both)
    factuality = [{"grade": "NOT_ATTEMPTED", "from": "factuality"}, {"grade": "INCORRECT", "from": "factuality"}]
    assert simpleqa_summary(factuality + items)["n"] == 5  # without simpleqa rows they give the figures
    # a factuality row that did not check abstention is not counted
    assert select(GradingResult(True, 1.0, "", assertion=Assertion(type="factuality"))) is None


def test_a_bad_abstain_setting_is_named_before_any_call(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["<<answer>>"]
providers: [echo]
tests:
  - vars: {answer: "Paris."}
    assert: [{type: factuality, value: Paris, config: {abstain: sometimes},
              provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}}]
""")
    out = tmp_path / "r.json"
    CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar"])
    row = json.loads(out.read_text())["results"]["results"][0]
    assert row["error"] == ("factuality: config.abstain must be one of auto, generic, perplexity_ai, none, "
                            "got 'sometimes'")
    assert fake_openai.requests == []  # checked before the grader is asked


def test_the_reference_profile_counts_an_unparseable_grade_as_not_attempted(fake_openai, tmp_path, monkeypatch):
    """simple-evals takes the first A, B or C anywhere in the reply, and a reply without one as C."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for pattern, reply in REPLIES:
        fake_openai.add_rule(pattern.replace("Answer to grade:", "Predicted answer:"), reply)
    cfg = write(tmp_path / "c.yaml", CONFIG.replace("type: simpleqa, value: Paris}",
                                                    "type: simpleqa, value: Paris, config: {profile: reference}}"))
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar"])
    doc = json.loads(out.read_text())
    graded = {r["testCase"]["description"]: r["gradingResult"]["componentResults"][0] for r in doc["results"]["results"]}
    grades = {name: g["metadata"].get("grade") for name, g in graded.items()}
    # "The answer is wrong." has no capital A, B or C: not attempted; "A or B": the first letter, A;
    # "CORRECT" starts with C; " B. " is B; the JSON replies: their first capital A, B or C ("INCORRECT": C)
    assert grades == {"right": "CORRECT", "word": "NOT_ATTEMPTED", "wrong": "INCORRECT", "json-wrong": "NOT_ATTEMPTED",
                      "declines": "NOT_ATTEMPTED", "hedges": "NOT_ATTEMPTED", "garbage": "NOT_ATTEMPTED",
                      "two-letters": "CORRECT"}
    assert graded["garbage"]["metadata"]["unparsed"] is True and not graded["garbage"]["metadata"].get("graderError")
    assert "counted as not attempted, as simple-evals does" in graded["garbage"]["reason"]
    figures = doc["factcli"]["columns"][0]["methods"]["simpleqa"]
    # n = 8 (nothing left out): correct 2, incorrect 1, not attempted 5; correct given attempted 2/3;
    # F = 2·(2/8)·(2/3)/(2/8 + 2/3) = 4/11
    assert figures["n"] == 8 and figures["gradingErrors"] == 0 and figures["unparsed"] == 1
    assert [figures[k]["count"] for k in ("correct", "incorrect", "notAttempted")] == [2, 1, 5]
    assert figures["f"] == pytest.approx(4 / 11)
    assert "1 unparseable grades counted as not attempted (the reference's rule)" in " ".join(result.output.split())
    # the reference's rules are in the prompt
    prompts = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests]
    assert all("last significant figure" in p for p in prompts)
