"""RAG-style model-graded assertions: parity with promptfoo, unreadable replies, input errors."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import write
from factcli.assertions import rag
from factcli.cli import app
from parity_compare import differences

PARITY = Path(__file__).parent / "parity" / "rag"
runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", *map(str, args)])


def test_rag_parity_with_promptfoo(fake_openai, tmp_path, monkeypatch):
    for pattern, reply, model in json.loads((PARITY / "rules.json").read_text()):
        fake_openai.add_rule(pattern, reply, model=model)
    # the judge answered promptfoo in words; a server that takes no response_format is one factcli's
    # graders read in words too, as promptfoo does (with a schema sent, words are a grading error)
    fake_openai.refuse_response_format("json_schema", "json_object")
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    out = tmp_path / "ours.json"
    result = run("-c", PARITY / "promptfooconfig.yaml", "-o", out, "--no-cache")
    assert result.exit_code == 100, result.output
    ours = json.loads(out.read_text())
    assert differences(ours, json.loads((PARITY / "golden.json").read_text())) == []
    rows = {r["testIdx"]: r for r in ours["results"]["results"]}
    flagged = {i for i, r in rows.items() for c in r["gradingResult"]["componentResults"]
               if (c.get("metadata") or {}).get("graderError")}
    # the empty question, unreadable verdicts, untagged recall, blank relevance reply, two bad verdicts
    assert flagged == {3, 7, 12, 18, 23, 24}
    meta = rows[7]["gradingResult"]["componentResults"][0]["metadata"]
    assert meta["graderRaw"].startswith("I cannot tell") and "no Yes/No verdicts" in meta["graderErrorDetail"]
    meta = rows[15]["gradingResult"]["componentResults"][0]["metadata"]
    assert meta["contextUnits"] == ["CTX-RL2 Tokyo is the capital of Japan.", "Japan is an island nation.",
                                    "Sushi is popular.", "Mount Fuji is tall."]
    assert len(rows[0]["gradingResult"]["componentResults"][0]["metadata"]["generatedQuestions"]) == 3
    judge = [r["json"] for r in fake_openai.requests if (r["json"] or {}).get("model") == "judge"]
    assert judge and all(b["temperature"] == 0 and b["seed"] == 0 for b in judge)
    asked = [b for b in judge if "ANS-AR1 Paris" in b["messages"][-1]["content"] and "response_format" not in b]
    assert len(asked) == 6  # three candidate questions for each of the two rows answering ANS-AR1


# ---------------------------------------------------------------- unreadable replies and failed calls

CONFIG = """
prompts: ["Ask: {{ask}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider:
      text: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
      embedding: {id: "openai:embedding:emb", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: %s
    assert: [%s]
"""
VARS = {"ask": "where is Paris?", "query": "Where is Paris?", "context": "Paris is in France. It is big."}


def grade(fake, tmp_path, assertion: dict, judge: list[tuple[str, object]], variables: dict | None = None):
    """Run one assertion with scripted judge replies, in words as promptfoo's judge writes them, from a
    server that takes no response_format (so factcli reads words too; with a schema sent, words are a
    grading error: tests/test_judge_trouble.py); -> (component result, row)."""
    fake.refuse_response_format("json_schema", "json_object")
    fake.add_rule(".", "Paris is in France.", model="m")
    for pattern, reply in judge:
        fake.add_rule(pattern, reply, model="judge")
    cfg = write(tmp_path / "c.yaml", CONFIG % (json.dumps(variables or VARS), json.dumps(assertion)))
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out, "--no-cache")
    assert result.exit_code in (0, 4, 100), result.output
    row = json.loads(out.read_text())["results"]["results"][0]
    comps = (row.get("gradingResult") or {}).get("componentResults") or [{}]
    return comps[0], row


STATEMENTS = ("<question>", "Paris is in France.")
VERDICTS_OK = ("<statements>", "1. Paris is in France. Verdict: Yes.\nFinal verdict for each statement in order: Yes.")
RECALL_OK = ("<answer>", "1. Paris is in France. Stated. So [Attributed]")


@pytest.mark.parametrize("assertion, judge, reason", [
    # promptfoo scores these 0 and passes them at the default threshold of 0
    ({"type": "context-faithfulness"}, [STATEMENTS, ("<statements>", "No idea.")],
     "context-faithfulness could not be graded: the grader's reply has no Yes/No verdicts"),
    ({"type": "context-faithfulness"}, [("<question>", "  \n \n")],
     "context-faithfulness could not be graded: the grader wrote no statements for the output"),
    ({"type": "context-faithfulness"},
     [STATEMENTS, ("<statements>", "Final verdict for each statement in order: ...")],
     "context-faithfulness could not be graded: the grader's reply has no Yes/No verdicts"),
    ({"type": "context-recall", "value": "Paris is in France."}, [("<answer>", "Looks right to me.")],
     "context-recall could not be graded: no sentence in the grader's reply is tagged [Attributed] or "
     "[Not Attributed]"),
    ({"type": "context-relevance"}, [("<query>", " \n ")],
     "context-relevance could not be graded: the grader's reply has no sentences and does not say "
     "Insufficient Information"),
    # empty replies (promptfoo: a plain fail, "No output")
    ({"type": "context-faithfulness"}, [("<question>", "")], "No output"),
    ({"type": "context-faithfulness"}, [STATEMENTS, ("<statements>", "")], "No output"),
    ({"type": "context-recall", "value": "Paris is in France."}, [("<answer>", "")], "No output"),
    ({"type": "context-relevance"}, [("<query>", "")], "No output"),
    ({"type": "answer-relevance"}, [("<answer>", "")], "No output"),
    ({"type": "answer-relevance"}, [("<answer>", "   ")], "No output"),
    ({"type": "conversation-relevance"}, [(".", "")], "No output"),
    # garbage (promptfoo marks these as grading errors itself)
    ({"type": "conversation-relevance"}, [(".", "relevant, I think")],
     "Error parsing output: No JSON object found in response"),
    ({"type": "not-conversation-relevance"}, [(".", '{"verdict": "YES"}')],
     "Error parsing output: Conversation relevance grader returned an invalid verdict"),
])
def test_unreadable_replies_are_grading_errors(fake_openai, tmp_path, assertion, judge, reason):
    comp, row = grade(fake_openai, tmp_path, assertion, judge)
    assert (comp["pass"], comp["score"], comp["reason"]) == (False, 0, reason)
    assert comp["metadata"]["graderError"] is True
    assert row["failureReason"] == 1  # a grading error fails the row; it is not an ERROR row


def test_unreadable_reply_keeps_promptfoos_reason_when_promptfoo_fails_too(fake_openai, tmp_path):
    comp, _ = grade(fake_openai, tmp_path, {"type": "context-recall", "value": "x", "threshold": 0.25},
                    [("<answer>", "no tags here")])
    assert (comp["pass"], comp["score"], comp["reason"]) == (False, 0, "Recall 0.00 is < 0.25")
    assert comp["metadata"]["graderError"] is True and comp["metadata"]["graderRaw"] == "no tags here"


def test_insufficient_information_is_a_real_zero(fake_openai, tmp_path):
    comp, _ = grade(fake_openai, tmp_path, {"type": "context-relevance"}, [("<query>", "Insufficient Information")])
    assert (comp["pass"], comp["score"], comp["reason"]) == (True, 0, "Context relevance 0.00 is >= 0")
    assert not comp["metadata"].get("graderError")


@pytest.mark.parametrize("assertion", [
    {"type": "context-faithfulness"}, {"type": "context-recall", "value": "x"}, {"type": "context-relevance"},
    {"type": "answer-relevance"}, {"type": "conversation-relevance"},
])
def test_failed_grader_calls_are_grading_errors(fake_openai, tmp_path, monkeypatch, assertion):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    fake_openai.enqueue("Paris is in France.")  # the provider call; then the grader call fails
    fake_openai.enqueue_fault(status=500)
    comp, row = grade(fake_openai, tmp_path, assertion, [])
    assert comp["pass"] is False and comp["score"] == 0 and comp["metadata"]["graderError"] is True
    assert row["failureReason"] == 1


def test_failed_embedding_is_a_grading_error(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    # provider call, three questions, then the first embedding is refused (a 400 is never retried)
    fake_openai.enqueue("Paris is in France.", "Where is Paris?", "Where is Paris?", "Where is Paris?")
    fake_openai.enqueue_fault(status=400)
    comp, row = grade(fake_openai, tmp_path, {"type": "answer-relevance"}, [])
    assert comp["pass"] is False and comp["metadata"]["graderError"] is True and row["failureReason"] == 1


def test_not_forms_of_the_context_types_ignore_inverse_like_promptfoo(fake_openai, tmp_path):
    comp, _ = grade(fake_openai, tmp_path, {"type": "not-context-faithfulness"}, [STATEMENTS, VERDICTS_OK])
    assert (comp["pass"], comp["score"], comp["reason"]) == (True, 1, "Faithfulness 1.00 is >= 0")


def test_custom_faithfulness_prompts(fake_openai, tmp_path):
    write(tmp_path / "verdicts.txt", "STEP-TWO {{statements|join('; ')}}")
    prompts = ["STEP-ONE {{question}} / {{answer}}", {"role": "user", "content": "file://verdicts.txt"}]
    comp, _ = grade(fake_openai, tmp_path, {"type": "context-faithfulness", "rubricPrompt": prompts},
                    [("STEP-TWO Paris is in France.$", "Final verdict for each statement in order: Yes."),
                     ("^STEP-ONE Where is Paris\\? / Paris is in France\\.$", "Paris is in France.")])
    assert (comp["pass"], comp["score"]) == (True, 1)
    # a rubricPrompt that is not a list makes the row an ERROR, as in promptfoo
    _, row = grade(fake_openai, tmp_path, {"type": "context-faithfulness", "rubricPrompt": "one prompt"}, [])
    assert row["failureReason"] == 2 and "rubricPrompt must be an array" in row["error"]


# ---------------------------------------------------------------- input errors: ERROR rows


@pytest.mark.parametrize("assertion, variables, message", [
    ({"type": "context-relevance"}, {"ask": "a", "context": "c"},
     'context-relevance assertion requires a "query" variable with the user question'),
    ({"type": "context-faithfulness"}, {"ask": "a", "context": "c"},
     'context-faithfulness assertion requires a "query" variable with the user question'),
    ({"type": "context-faithfulness"}, {"ask": "a", "query": "q"}, rag.CONTEXT_REQUIRED),
    ({"type": "context-relevance"}, {"ask": "a", "query": "q", "context": [1, "two"]},
     "Invalid context: expected an array of strings, but found number at index 0"),
    ({"type": "context-relevance", "contextTransform": "file://ctx.py:number"}, {"ask": "a", "query": "q"},
     "Failed to transform context using expression '[file transform]': contextTransform must return a "
     "string or array of strings. Got number. Check your transform expression: [file transform]"),
    ({"type": "context-relevance", "contextTransform": "file://ctx.py:boom"}, {"ask": "a", "query": "q"},
     "Failed to transform context using expression '[file transform]': KeyError: 'nope'"),
    ({"type": "context-relevance", "contextTransform": "file://ctx.py:nothing"}, {"ask": "a", "query": "q"},
     "Failed to transform context using expression '[file transform]': Transform function did not return a "
     "value\n\n[file transform]"),
    ({"type": "context-relevance", "contextTransform": "file://ctx.py:empty"},
     {"ask": "a", "query": "q", "context": "from the var"}, rag.CONTEXT_REQUIRED),
    ({"type": "conversation-relevance"}, {"ask": "a", "_conversation": "not a list"},
     "the _conversation var must be a list of {input, output} turns"),
])
def test_bad_inputs_make_error_rows(fake_openai, tmp_path, assertion, variables, message):
    write(tmp_path / "ctx.py", "def number(output, context):\n    return 5\n"
                               "def boom(output, context):\n    return {}['nope']\n"
                               "def nothing(output, context):\n    return None\n"
                               "def empty(output, context):\n    return []\n")
    _, row = grade(fake_openai, tmp_path, assertion, [], variables)
    assert row["failureReason"] == 2 and row["error"] == message
    assert not [r for r in fake_openai.requests if (r["json"] or {}).get("model") == "judge"]


def test_context_transform_sees_the_output_vars_and_prompt(fake_openai, tmp_path):
    write(tmp_path / "ctx.py", "def ctx(output, context):\n"
                               "    return [output, context['vars']['ask'], context['prompt']['label']]\n")
    comp, _ = grade(fake_openai, tmp_path, {"type": "context-relevance", "contextTransform": "file://ctx.py:ctx"},
                    [("<query>", "Insufficient Information")])
    assert comp["metadata"]["context"] == ["Paris is in France.", "where is Paris?", "Ask: where is Paris?"]
    assert comp["metadata"]["totalContextUnits"] == 3


@pytest.mark.parametrize("typ", ["classifier", "pi", "moderation", "not-moderation"])
def test_unsupported_types_are_config_errors(fake_openai, tmp_path, typ):
    cfg = write(tmp_path / "c.yaml", CONFIG % (json.dumps(VARS), json.dumps({"type": typ, "value": "x"})))
    result = run("-c", cfg)
    assert result.exit_code == 1
    assert f"assertion type '{typ}' is not supported: " in result.output
    assert fake_openai.request_count == 0


# ---------------------------------------------------------------- the readers, directly


def test_faithfulness_score():
    final = "Final verdict for each statement in order:"
    assert rag.faithfulness_score(f"x {final} Yes. No. yes.", 3) == pytest.approx(2 / 3)
    assert rag.faithfulness_score(f"{final} Yes.", 3) == pytest.approx(1 / 3)  # missing verdicts count as No
    assert rag.faithfulness_score(f"{final} Yes. Yes. Yes.", 2) == 1.0  # extra verdicts: clamped
    assert rag.faithfulness_score("1. Verdict: Yes\n2. verdict: no", 3) == pytest.approx(1 / 3)
    assert rag.faithfulness_score("nothing", 2) is None
    assert rag.faithfulness_score(f"{final} . .", 2) is None
    assert rag.faithfulness_score(f"{final} Yes.", 0) is None


def test_recall_attributions():
    got = rag.recall_attributions("intro\n1. Paris is big. Yes. So [Attributed]\n"
                                  "2. Rome is small [not attributed]\nmixed [Attributed] [Not Attributed]")
    assert got == [{"sentence": "Paris is big.", "attributed": True},
                   {"sentence": "2", "attributed": False},  # no period after the sentence: promptfoo's cut
                   {"sentence": "mixed [Attributed] [Not Attributed]", "attributed": False}]


def test_relevance_units():
    assert rag.split_units("A b. C d! E?  F") == ["A b.", "C d!", "E?", "F"]
    assert rag.split_units("1. First point. 2. Second point.") == ["First point.", "Second point."]
    assert rag.split_units("\nOne paragraph. Two sentences.\n") == ["One paragraph.", "Two sentences."]
    assert rag.split_units("line one. more\nline two") == ["line one. more", "line two"]
    counts = rag.relevance_counts("A.\nA.\nB.", ["A.", "B.", " ", "C."])
    assert (counts["relevantSentenceCount"], counts["totalContextUnits"], counts["score"]) == (2, 3, 2 / 3)
    assert rag.relevance_counts("Insufficient Information. A.", "A. B.")["score"] == 0


def test_custom_prompts_for_answer_and_conversation_relevance(fake_openai, tmp_path):
    comp, _ = grade(fake_openai, tmp_path, {"type": "answer-relevance", "rubricPrompt": "QGEN {{answer}}"},
                    [("^QGEN Paris is in France\\.$", "Where is Paris?")])
    # the same text embeds to the same vector on the test server: similarity 1
    assert (comp["pass"], comp["score"], comp["reason"]) == (True, 1, "Relevance 1.00 is greater than threshold 0")
    fake_openai.clear_rules()
    comp, _ = grade(fake_openai, tmp_path, {"type": "conversation-relevance",
                                            "rubricPrompt": "CONV {{messages[0].output}} for {{ask}}"},
                    [("^CONV Paris is in France\\. for where is Paris\\?$", '{"verdict": "no", "reason": "off"}'),
                     ("off", '{"reason": "Summed up."}')])
    assert (comp["pass"], comp["score"], comp["reason"]) == (False, 0, "Summed up.")
