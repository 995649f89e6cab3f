"""What a judge's reply must contain to count as a judgment (issue 52 item 3), through the CLI against a
scripted stand-in judge (tests/fake_openai.py, which takes `response_format` and answers by its rules, as a
small local judge that fills the schema with the prompt's own template does): sentences, statements, claims
and facts that are not from the text they were asked about, the prompt's placeholders and examples copied,
and verdicts that echo another claim are grading errors with a reason; a faithful paraphrase is read."""

import json

from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.scoring.content import COPIED, RESTATED, Sent, Source

runner = CliRunner()
JUDGE = '{id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'


def run(tmp_path, fake, answer: str, tests: str, judge: list, prompt: str = "{{ask}}"):
    """One config: the model answers `answer`, the judge by `judge` [(pattern, reply)]; -> (exit code, rows)."""
    fake.add_rule(".", answer, model="m")
    for pattern, reply in judge:
        fake.add_rule(pattern, reply, model="judge")
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["{prompt}"]
providers: [{{id: "openai:chat:m", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
defaultTest: {{options: {{provider: {JUDGE}}}}}
tests:
{tests}""")
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-table",
                                 "--no-cache"])
    assert out.exists(), result.output
    rows = sorted(json.loads(out.read_text())["results"]["results"], key=lambda r: r["testIdx"])
    return result.exit_code, rows


def first(row, i=0):
    return row["gradingResult"]["componentResults"][i]


def judge_calls(fake):
    return [r["json"] for r in fake.requests if (r["json"] or {}).get("model") == "judge"]


# ---------------------------------------------------------------- context-relevance

RELEVANCE = """  - vars: {ask: "Where is Paris?", query: "Where is Paris?", context: "Paris is in France. It is big."}
    assert: [{type: context-relevance}]
"""


def test_context_relevance_sentences_not_in_the_context_are_a_grading_error(tmp_path, fake_openai):
    # the reply the issue quotes: it fits the schema, and promptfoo's count of lines scored it 1.00
    reply = json.dumps({"sentences": ["None of the context is relevant to the query.", "N/A"]})
    code, (row,) = run(tmp_path, fake_openai, "Paris is in France.", RELEVANCE, [(".", reply)])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True and c["score"] == 0
    assert "sentence 1 ('None of the context is relevant to the query.') is not from the context" in c["reason"]
    assert "0% of its content words are there, at least 60% are needed" in c["reason"]


def test_context_relevance_copied_sentences_are_read_and_an_empty_list_is_nothing_relevant(tmp_path, fake_openai):
    # one of the two sentences, copied with another case and no full stop: read, 1/2
    code, (row,) = run(tmp_path, fake_openai, "Paris is in France.", RELEVANCE,
                       [(".", json.dumps({"sentences": ["paris is in France"]}))])
    c = first(row)
    assert code == 0 and not c["metadata"].get("graderError") and c["score"] == 0.5
    # an empty list is the schema's "Insufficient Information": a judgment of 0, as docs/scoring.md says
    fake_openai.clear_rules()
    code, (row,) = run(tmp_path, fake_openai, "Paris is in France.", RELEVANCE, [(".", '{"sentences": []}')])
    c = first(row)
    assert code == 0 and not c["metadata"].get("graderError") and c["score"] == 0
    assert c["metadata"]["insufficientInformation"] is True


# ---------------------------------------------------------------- context-faithfulness

FAITHFULNESS = """  - vars: {ask: "Where is Paris?", query: "Where is Paris?",
            context: "Paris is the capital of France."}
    assert: [{type: context-faithfulness}]
"""
VERDICTS = json.dumps({"verdicts": [{"reason": "The context says Paris is in France.", "verdict": "Yes"},
                                    {"reason": "The context does not mention the Seine.", "verdict": "No"}]})


def test_a_faithful_decontextualised_paraphrase_is_read(tmp_path, fake_openai):
    # "It" becomes Paris (from the question), "lies on" becomes "is located on": both statements are read
    statements = json.dumps({"statements": ["Paris is located in France.", "Paris lies on the river Seine."]})
    code, (row,) = run(tmp_path, fake_openai, "It is in France, on the Seine.", FAITHFULNESS,
                       [("<question>", statements), ("<statements>", VERDICTS)])
    c = first(row)
    assert code == 0 and not c["metadata"].get("graderError") and c["score"] == 0.5
    assert c["metadata"]["statements"] == ["Paris is located in France.", "Paris lies on the river Seine."]


def test_fabricated_statements_and_the_prompts_example_are_grading_errors(tmp_path, fake_openai):
    fabricated = json.dumps({"statements": ["Paris is in France.", "The moon is made of green cheese."]})
    code, (row,) = run(tmp_path, fake_openai, "It is in France, on the Seine.", FAITHFULNESS,
                       [("<question>", fabricated), ("<statements>", VERDICTS)])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True
    assert "statement 2 ('The moon is made of green cheese.') is not from the answer" in c["reason"]
    # no verdicts were asked for statements that are no judgment
    assert not any("<statements>" in b["messages"][-1]["content"] for b in judge_calls(fake_openai))
    # the statements prompt's own example, copied word for word
    fake_openai.clear_rules()
    example = json.dumps({"statements": ["The Danube flows through Vienna."]})
    code, (row,) = run(tmp_path, fake_openai, "It is in France, on the Seine.", FAITHFULNESS,
                       [("<question>", example), ("<statements>", VERDICTS)])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True
    assert "statement 1 ('The Danube flows through Vienna.') is the prompt's own example" in c["reason"]


def test_statements_in_words_from_a_server_without_the_schema_are_checked_too(tmp_path, fake_openai):
    fake_openai.refuse_response_format("json_schema", "json_object")
    code, (row,) = run(tmp_path, fake_openai, "It is in France, on the Seine.", FAITHFULNESS,
                       [("<question>", "Paris is in France.\nBananas are rich in potassium."),
                        ("<statements>", "1. x\nVerdict: Yes.\n2. y\nVerdict: No.")])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True
    assert "statement 2 ('Bananas are rich in potassium.') is not from the answer" in c["reason"]


def test_context_recall_sentences_must_be_the_expected_answers(tmp_path, fake_openai):
    tests = """  - vars: {ask: "Where is Paris?", context: "Paris is the capital of France."}
    assert: [{type: context-recall, value: "Paris is the capital of France. It lies on the Seine."}]
"""

    def judge(sentences):
        return json.dumps({"sentences": [{"sentence": x, "reason": "The context says so.", "attributed": True}
                                         for x in sentences]})

    code, (row,) = run(tmp_path, fake_openai, "Paris.", tests,
                       [(".", judge(["Paris is the capital of France.", "It lies on the Seine."]))])
    assert code == 0 and first(row)["score"] == 1.0 and not first(row)["metadata"].get("graderError")
    fake_openai.clear_rules()
    # the recall prompt's own example sentence, then a sentence of nothing sent
    code, (row,) = run(tmp_path, fake_openai, "Paris.", tests,
                       [(".", judge(["Marie Curie was born in 1867.", "Rome is in Italy."]))])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True
    assert "sentence 1 ('Marie Curie was born in 1867.') is the prompt's own example" in c["reason"]


# ---------------------------------------------------------------- factual-correctness

FC = """  - vars: {ask: "When was the Eiffel Tower completed?"}
    assert: [{type: factual-correctness, value: "The Eiffel Tower was completed in 1889."}]
"""
ANSWER = "It was completed in 1889."


def echo_judge(claims):
    """Decomposes into `claims` (text -> list) and verifies every claim it is sent as SUPPORTED, echoing it."""

    def judge(body):
        text = body["messages"][-1]["content"]
        if text.startswith("<text>"):
            return json.dumps({"claims": claims[text.split("<text>\n", 1)[1].rsplit("\n</text>", 1)[0]]})
        sent = [line.split(". ", 1)[1] for line in text.split("<claims>\n", 1)[1].split("\n</claims>")[0].splitlines()]
        return json.dumps({"verdicts": [{"claim": c, "verdict": "SUPPORTED", "reason": "The premise says so."}
                                        for c in sent]})

    return judge


def test_factual_correctness_reads_a_decontextualised_paraphrase(tmp_path, fake_openai):
    # the answer says "It"; the claim names the Eiffel Tower (from the question) and says "finished"
    judge = echo_judge({ANSWER: ["The Eiffel Tower was finished in 1889."],
                        "The Eiffel Tower was completed in 1889.": ["The Eiffel Tower was completed in 1889."]})
    code, (row,) = run(tmp_path, fake_openai, ANSWER, FC, [(".", judge)])
    c = first(row)
    assert code == 0 and not c["metadata"].get("graderError") and c["score"] == 1.0


def test_factual_correctness_fabricated_claims_are_a_grading_error(tmp_path, fake_openai):
    judge = echo_judge({ANSWER: ["Albert Einstein was born in Ulm in 1879."],
                        "The Eiffel Tower was completed in 1889.": ["The Eiffel Tower was completed in 1889."]})
    code, (row,) = run(tmp_path, fake_openai, ANSWER, FC, [(".", judge)])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True
    assert ("decompose response: claim 1 ('Albert Einstein was born in Ulm in 1879.') is not from the text it was "
            "asked to decompose (0% of its content words are there, at least 50% are needed)") in c["reason"]


def gemma_like(body):
    """What the llama.cpp judge of the issue (gemma-3-270m) sent: the prompt's template, filled in: every claim
    `<claim>`, every reason `<one sentence>`, verdicts cycling in the order the prompt lists them."""
    text = body["messages"][-1]["content"]
    if text.startswith("<text>"):
        return json.dumps({"claims": ["<claim>", "<claim>"]})
    n = len(text.split("<claims>\n", 1)[1].split("\n</claims>")[0].splitlines())
    cycle = ["CONTRADICTED", "NEUTRAL", "SUPPORTED"]
    return json.dumps({"verdicts": [{"claim": "<claim>", "verdict": cycle[i % 3], "reason": "<one sentence>"}
                                    for i in range(n)]})


def test_the_prompts_placeholders_copied_are_a_grading_error(tmp_path, fake_openai):
    code, (row,) = run(tmp_path, fake_openai, ANSWER, FC, [(".", gemma_like)])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True and c["score"] == 0
    assert "claims.claims[0] is '<claim>', the prompt's own placeholder" in c["reason"]
    # with the claims right, the verdicts' placeholders are refused in turn
    fake_openai.clear_rules()

    def verdicts_only(body):
        text = body["messages"][-1]["content"]
        if text.startswith("<text>"):
            return json.dumps({"claims": ["The Eiffel Tower was completed in 1889."]})
        return gemma_like(body)

    code, (row,) = run(tmp_path, fake_openai, ANSWER, FC, [(".", verdicts_only)])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True
    assert "claim_verdicts.verdicts[0].claim is '<claim>', the prompt's own placeholder" in c["reason"]


def test_an_echoed_claim_that_is_not_the_claim_sent_is_a_grading_error(tmp_path, fake_openai):
    def judge(body):
        text = body["messages"][-1]["content"]
        if text.startswith("<text>"):
            return json.dumps({"claims": ["The Eiffel Tower was completed in 1889."]})
        return json.dumps({"verdicts": [{"claim": "The Statue of Liberty was dedicated in 1886.",
                                         "verdict": "SUPPORTED", "reason": "The premise says so."}]})

    code, (row,) = run(tmp_path, fake_openai, ANSWER, FC, [(".", judge)])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True
    assert ("verdict 1 is about 'The Statue of Liberty was dedicated in 1886.', not the claim it was sent "
            "('The Eiffel Tower was completed in 1889.')") in c["reason"]


def test_a_rows_reason_names_the_assertion_that_decided_it_not_a_grading_error_beside_it(tmp_path, fake_openai):
    tests = """  - vars: {ask: "When was the Eiffel Tower completed?"}
    assert:
      - {type: contains, value: "1887"}
      - {type: factual-correctness, value: "The Eiffel Tower was completed in 1889."}
"""
    code, (row,) = run(tmp_path, fake_openai, ANSWER, tests, [(".", gemma_like)])
    assert first(row, 1)["metadata"]["graderError"] is True
    # the row fails on contains whatever the judge says (an assertion failure, exit 100), and says so
    assert code == 100 and row["gradingResult"]["reason"] == 'Expected output to contain "1887"'


# ---------------------------------------------------------------- factscore

FACTSCORE = """  - vars: {ask: "Tell me a bio of Marie Curie.", topic: Marie Curie}
    assert:
      - type: factscore
        value: "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903."
        config: {gamma: 0}
"""
CURIE = "Marie Curie was born in Warsaw. She won the Nobel Prize in 1903."


def factscore_judge(facts, echo=None):
    def judge(body):
        text = body["messages"][-1]["content"]
        if "<sentences>" in text:
            return json.dumps({"facts": facts})
        sent = [line.split(". ", 1)[1] for line in text.split("<facts>\n", 1)[1].split("\n</facts>")[0].splitlines()]
        return json.dumps({"verdicts": [{"fact": echo or f, "verdict": True, "reason": "The passage says so.",
                                         "evidence": 1} for f in sent]})

    return judge


def test_factscore_reads_facts_from_the_response_and_refuses_fabricated_ones(tmp_path, fake_openai):
    good = ["Marie Curie was born in Warsaw.", "Marie Curie won the Nobel Prize in 1903."]
    code, (row,) = run(tmp_path, fake_openai, CURIE, FACTSCORE, [(".", factscore_judge(good))])
    c = first(row)
    assert not c["metadata"].get("graderError") and c["score"] == 1.0, c["reason"]
    fake_openai.clear_rules()
    bad = ["Marie Curie was born in Warsaw.", "Isaac Newton formulated the laws of motion."]
    code, (row,) = run(tmp_path, fake_openai, CURIE, FACTSCORE, [(".", factscore_judge(bad))])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True
    assert "fact 2 ('Isaac Newton formulated the laws of motion.') is not from the sentences it was" in c["reason"]


def test_factscore_verdicts_must_echo_the_fact_sent(tmp_path, fake_openai):
    good = ["Marie Curie was born in Warsaw.", "Marie Curie won the Nobel Prize in 1903."]
    code, (row,) = run(tmp_path, fake_openai, CURIE, FACTSCORE,
                       [(".", factscore_judge(good, echo="Pierre Curie died in Paris in 1906."))])
    c = first(row)
    assert code == 4 and c["metadata"]["graderError"] is True
    assert "verdict 1 is about 'Pierre Curie died in Paris in 1906.', not the fact it was sent" in c["reason"]


# ---------------------------------------------------------------- the rule itself, by hand


def test_the_comes_from_rule_by_hand():
    answer = Source("It was completed in 1889.", "When was the Eiffel Tower completed?")
    # content words: eiffel, tower, finish, 1889 -> 3 of 4 in the answer or question
    assert answer.share("The Eiffel Tower was finished in 1889.") == 0.75
    assert answer.holds("The Eiffel Tower was finished in 1889.", RESTATED)
    # einstein, born, ulm, 1879: none
    assert answer.share("Albert Einstein was born in Ulm in 1879.") == 0.0
    context = Source("Paris is in France. It is big.")
    assert context.holds("Paris is in France", COPIED) and not context.holds("N/A", COPIED)
    assert context.share("N/A") is None  # no content words: only word for word
    # a script without spaces: its characters are its words (a decontextualised claim is read, another is not)
    chinese = Source("它建于1889年。", "埃菲尔铁塔是什么时候建成的？")
    assert chinese.share("埃菲尔铁塔建于1889年") == 1.0 and chinese.share("爱因斯坦出生于乌尔姆") == 0.2
    sent = Sent.of("answer", "It was completed in 1889.").about(
        [{"role": "system", "content": 'Reply {"claims": ["<claim>"]}. Example: The Danube flows through Vienna.'},
         {"role": "user", "content": "<text>\nIt was completed in 1889.\n</text>"}])
    assert sent.copied("The Danube flows through Vienna.") and not sent.copied("It was completed in 1889.")


# ---------------------------------------------------------------- SAFE and VeriScore


def test_safe_facts_and_veriscore_claims_must_come_from_the_response(tmp_path, fake_openai, monkeypatch):
    from fake_search import KEY, FakeSearch

    monkeypatch.setenv("SERPER_API_KEY", KEY)
    answer = "Marie Curie was born in Warsaw in 1867."
    with FakeSearch([]) as search:
        split = ("<response>", json.dumps({"facts": ["Marie Curie was born in Warsaw."]}))
        for mode, judge, said in [
            ("all", [("<response>", json.dumps({"facts": ["<fact>"]}))],
             "safe_facts.facts[0] is '<fact>', the prompt's own placeholder"),
            ("all", [("<response>", json.dumps({"facts": ["Marie Curie was born in Warsaw.",
                                                          "Gold is a chemical element."]}))],
             "split: fact 2 ('Gold is a chemical element.') is not from the response"),
            ("all", [("<fact>", json.dumps({"fact": "Mount Everest is the highest mountain.", "relevant": True})),
                     split],
             "revise: revised fact 1 ('Mount Everest is the highest mountain.') is not from the fact, the response"),
            # a rating that copies its prompt's placeholder for a reason: no judgment, whatever its verdict
            ("all", [("This is search", json.dumps({"query": ""})),
                     ("<statement>", json.dumps({"reason": "<what the results you relied on say, with their numbers>",
                                                 "verdict": "supported"})),
                     ("<fact>", json.dumps({"fact": "Marie Curie was born in Warsaw.", "relevant": True})), split],
             "safe_rating.reason is '<what the results you relied on say, with their numbers>', the prompt's own"),
            ("verifiable", [("<SOS>", json.dumps({"claims": ["The Great Wall of China is visible from space."]}))],
             "extract sentence 1: claim 1 ('The Great Wall of China is visible from space.') is not from the response"),
        ]:
            fake_openai.clear_rules()
            tests = f"""  - vars: {{ask: "Tell me about Marie Curie."}}
    assert:
      - type: safe
        config: {{claims: {mode}, search: {{provider: serper, apiBaseUrl: "{search.url}/serper"}}}}
"""
            code, (row,) = run(tmp_path, fake_openai, answer, tests, judge)
            c = first(row)
            assert code == 4 and c["metadata"]["graderError"] is True, c["reason"]
            assert said in c["reason"], c["reason"]
        assert search.requests == []  # nothing searched for facts that are no judgment
