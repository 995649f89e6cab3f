"""factscore: atomic facts checked against a knowledge source, through the real CLI and a scripted
judge on the fake OpenAI-compatible server; retrieval, knowledge formats, abstention and the summary."""

import json
import math
import re
import sqlite3
import time

import pytest
from typer.testing import CliRunner

from conftest import ROOT, write
from factcli.methods.factscore import factscore_summary, format_factscore_summary, length_penalty, response_sentences
from factcli.scoring.abstention import detect_abstention
from factcli.cli import app
from factcli.providers.search.knowledge import KnowledgeError, open_source, text_source
from factcli.stats.text import FACTSCORE_SEPARATOR, split_passages, split_sentences

runner = CliRunner()

DOCS = {
    "Marie Curie": (
        "Curie was a Polish and naturalised-French physicist and chemist who conducted pioneering research on "
        "radioactivity. Curie was born in Warsaw, in what was then the Kingdom of Poland, on 7 November 1867.\n\n"
        "Curie was the first woman to win a Nobel Prize. In 1903 she shared the Nobel Prize in Physics with her "
        "husband Pierre Curie and the scientist Henri Becquerel for their work on radiation.\n\n"
        "In 1911 Curie received the Nobel Prize in Chemistry for her discovery of the elements polonium and "
        "radium. She died on 4 July 1934 at a sanatorium in Passy, in the south of France."
    ),
    "Alan Turing": (
        "Alan Turing was an English mathematician, computer scientist and cryptanalyst. Turing was born in "
        "Maida Vale, London, on 23 June 1912.\n\n"
        "During the Second World War Turing worked at Bletchley Park, where he devised techniques for breaking "
        "German ciphers, including the Enigma machine."
    ),
    "Pierre Curie": (
        "Pierre Curie was a French physicist. In 1903 he shared the Nobel Prize in Physics with his wife and "
        "Henri Becquerel. He died in Paris in 1906 after a street accident."
    ),
}

RESPONSES = {
    "Marie Curie": ("Marie Curie was a Polish physicist and chemist. She was born in Krakow in 1867. She won the "
                    "Nobel Prize in Physics in 1903 and the Nobel Prize in Chemistry in 1911. She discovered "
                    "polonium and radium. She died in 1934 in London."),
    "Alan Turing": ("Sure, here is a short bio of Alan Turing.\nAlan Turing was an English mathematician. "
                    "He was born in 1912 in London. He invented the telephone."),
    "Zyx Qwerty": "I'm sorry, but I could not find reliable information about Zyx Qwerty.",
}

# sentence -> atomic facts (what a decomposing judge would return)
SENTENCE_FACTS = {
    "Marie Curie was a Polish physicist and chemist.": [
        "Marie Curie was Polish.", "Marie Curie was a physicist.", "Marie Curie was a chemist."],
    "She was born in Krakow in 1867.": ["Marie Curie was born in Krakow.", "Marie Curie was born in 1867."],
    "She won the Nobel Prize in Physics in 1903 and the Nobel Prize in Chemistry in 1911.": [
        "Marie Curie won the Nobel Prize in Physics.", "Marie Curie won the Nobel Prize in Physics in 1903.",
        "Marie Curie won the Nobel Prize in Chemistry.", "Marie Curie won the Nobel Prize in Chemistry in 1911."],
    "She discovered polonium and radium.": ["Marie Curie discovered polonium.", "Marie Curie discovered radium."],
    "She died in 1934 in London.": ["Marie Curie died in 1934.", "Marie Curie died in London."],
    "Alan Turing was an English mathematician.": ["Alan Turing was English.", "Alan Turing was a mathematician."],
    "He was born in 1912 in London.": ["Alan Turing was born in 1912.", "Alan Turing was born in London."],
    "He invented the telephone.": ["Alan Turing invented the telephone."],
}

# fact -> (supported, a phrase of the passage that decides it, the passage BM25 must rank first)
TRUTH = {
    "Marie Curie was Polish.": (True, "Polish and naturalised-French", "Marie Curie#1"),
    "Marie Curie was a physicist.": (True, "Polish and naturalised-French", "Marie Curie#1"),
    "Marie Curie was a chemist.": (True, "Polish and naturalised-French", "Marie Curie#1"),
    "Marie Curie was born in Krakow.": (False, "born in Warsaw", "Marie Curie#1"),
    "Marie Curie was born in 1867.": (True, "born in Warsaw", "Marie Curie#1"),
    "Marie Curie won the Nobel Prize in Physics.": (True, "Nobel Prize in Physics", "Marie Curie#2"),
    "Marie Curie won the Nobel Prize in Physics in 1903.": (True, "Nobel Prize in Physics", "Marie Curie#2"),
    "Marie Curie won the Nobel Prize in Chemistry.": (True, "Nobel Prize in Chemistry", "Marie Curie#3"),
    "Marie Curie won the Nobel Prize in Chemistry in 1911.": (True, "Nobel Prize in Chemistry", "Marie Curie#3"),
    "Marie Curie discovered polonium.": (True, "polonium", "Marie Curie#3"),
    "Marie Curie discovered radium.": (True, "polonium", "Marie Curie#3"),
    "Marie Curie died in 1934.": (True, "4 July 1934", "Marie Curie#3"),
    "Marie Curie died in London.": (False, "4 July 1934", "Marie Curie#3"),
    "Alan Turing was English.": (True, "English mathematician", "Alan Turing#1"),
    "Alan Turing was a mathematician.": (True, "English mathematician", "Alan Turing#1"),
    "Alan Turing was born in 1912.": (True, "23 June 1912", "Alan Turing#1"),
    "Alan Turing was born in London.": (True, "23 June 1912", "Alan Turing#1"),
    "Alan Turing invented the telephone.": (False, None, None),
}


def _block(text, tag):
    return text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def _numbered(block):
    return [re.sub(r"^\d+\. ", "", line) for line in block.splitlines()]


def _passages(block):
    """[(number, title, text)] from the default verification prompt's passage block."""
    out = []
    for chunk in block.split("\n\n"):
        head, text = chunk.split("\n", 1)
        n, title = re.match(r"\[(\d+)\] Title: (.*)", head).groups()
        out.append((int(n), title, text))
    return out


def decompose(body):
    sentences = _numbered(_block(body["messages"][-1]["content"], "sentences"))
    return json.dumps({"facts": [f for s in sentences for f in SENTENCE_FACTS.get(s, [])]})


def verify(body, always_true=False):
    text = body["messages"][-1]["content"]
    passages = _passages(_block(text, "passages"))
    verdicts = []
    for fact in _numbered(_block(text, "facts")):
        supported, phrase, _ = TRUTH[fact]
        evidence = next((n for n, _, t in passages if phrase and phrase in t), None)
        verdicts.append({"fact": fact, "verdict": True if always_true else supported,
                         "reason": "scripted", "evidence": evidence})
    return json.dumps({"verdicts": verdicts})


def script_judge(fake_openai, model="judge", verifier=verify):
    fake_openai.add_rule("<sentences>", decompose, model=model)
    fake_openai.add_rule("<passages>", verifier, model=model)


def script_models(fake_openai):
    for topic, answer in RESPONSES.items():
        fake_openai.add_rule(f"bio of {topic}", answer, model="m")


def make_knowledge(tmp_path, fmt):
    if fmt == "folder":
        for title, text in DOCS.items():
            write(tmp_path / "kb" / (f"{title}.md" if title == "Alan Turing" else f"{title}.txt"), text)
        return tmp_path / "kb"
    if fmt == "jsonl":
        path = tmp_path / "kb.jsonl"
        path.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in DOCS.items()))
        return path
    path = tmp_path / "kb.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE documents (title PRIMARY KEY, text)")
        conn.executemany("INSERT INTO documents VALUES (?, ?)", list(DOCS.items()))
    conn.close()
    return path


CONFIG = """
prompts: ["Tell me a bio of {{topic}}."]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
  assert:
    - type: factscore
      threshold: 0.5
      metric: factscore
      config: %(config)s
tests:
  - vars: {topic: Marie Curie}
  - vars: {topic: Alan Turing}
  - vars: {topic: Zyx Qwerty}
"""


def run_eval(tmp_path, config_text, *extra):
    cfg = write(tmp_path / "c.yaml", config_text)
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache", *extra])
    assert out.exists(), result.output
    rows = sorted(json.loads(out.read_text())["results"]["results"], key=lambda r: r["testIdx"])
    return result, rows


def component(row, i=0):
    return row["gradingResult"]["componentResults"][i]


CURIE = 11 / 13  # 13 facts, 11 supported, 13 > γ: no penalty
TURING = 4 / 5 * math.exp(1 - 10 / 5)  # 5 facts, 4 supported, penalty e^(1 - 10/5) = e^-1


@pytest.mark.parametrize("fmt", ["folder", "jsonl", "sqlite"])
def test_factscore_reproduces_hand_computed_scores(tmp_path, fake_openai, fmt):
    kb = make_knowledge(tmp_path, fmt)
    script_models(fake_openai)
    script_judge(fake_openai)
    config = json.dumps({"knowledge": str(kb), "k": 1, "passage_words": 40})
    result, (curie, turing, abstained) = run_eval(tmp_path, CONFIG % {"config": config})
    assert result.exit_code == 100, result.output

    c = component(curie)
    assert c["pass"] is True and c["score"] == pytest.approx(CURIE)
    m = c["metadata"]
    assert (m["supported"], m["total"], m["penalty"], m["abstained"]) == (11, 13, 1.0, False)
    assert m["factscore"] == pytest.approx(0.846154, abs=1e-6) and m["document"] == "Marie Curie"
    # BM25 ranks the deciding passage first for every fact (k = 1), and the evidence is that passage
    for fact in m["facts"]:
        expected = TRUTH[fact["text"]][2]
        assert fact["retrieved"] == [expected], fact
        assert fact["evidenceId"] == expected and TRUTH[fact["text"]][1] in fact["evidence"]
        assert fact["verdict"] == ("SUPPORTED" if TRUTH[fact["text"]][0] else "NOT_SUPPORTED")
        assert fact["reason"] == "scripted" and fact["judge"] == "openai:chat:judge"
    assert "not supported: Marie Curie was born in Krakow.; Marie Curie died in London." in c["reason"]

    t = component(turing)
    assert t["pass"] is False and t["score"] == pytest.approx(TURING)
    assert t["score"] == pytest.approx(0.294304, abs=1e-6)
    m = t["metadata"]
    assert (m["supported"], m["total"]) == (4, 5)
    assert m["penalty"] == pytest.approx(math.exp(-1)) and m["initScore"] == pytest.approx(0.8)
    assert "length penalty 0.37 for 5 facts (γ=10)" in t["reason"]
    telephone = next(f for f in m["facts"] if "telephone" in f["text"])
    assert telephone["evidence"] is None and telephone["supported"] is False

    a = component(abstained)
    assert a["pass"] is False and a["metadata"]["abstained"] is True and a["metadata"]["factscore"] is None
    assert a["metadata"]["abstainReason"] == 'starts with "I\'m sorry"' and a["reason"].startswith("Abstained")

    # the preamble sentence was never sent for decomposition; one decomposition per responding row and
    # verification calls of at most 10 facts (Curie's 13: 10 + 3; Turing's 5: one)
    judge_calls = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests
                   if r["json"].get("model") == "judge"]
    assert len(judge_calls) == 5
    assert not any("Sure, here is" in c for c in judge_calls)

    summary = factscore_summary(component(r) for r in (curie, turing, abstained))
    assert summary["factscore"] == pytest.approx((CURIE + TURING) / 2)
    assert summary["factscore"] == pytest.approx(0.570229, abs=1e-6)
    assert summary["initScore"] == pytest.approx((CURIE + 0.8) / 2)
    assert summary["respondRatio"] == pytest.approx(2 / 3)
    assert summary["factsPerResponse"] == 9.0
    assert (summary["responding"], summary["abstained"], summary["gradingErrors"]) == (2, 1, 0)


def test_one_verification_call_per_fact_without_batching_and_per_sentence_decomposition(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    script_judge(fake_openai)
    config = json.dumps({"knowledge": str(kb), "k": 1, "passage_words": 40, "batch": False,
                         "decompose": "sentence"})
    _, (curie, turing, _) = run_eval(tmp_path, CONFIG % {"config": config})
    assert component(curie)["score"] == pytest.approx(CURIE)
    assert component(turing)["score"] == pytest.approx(TURING)
    bodies = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests if r["json"].get("model") == "judge"]
    assert sum("<sentences>" in b for b in bodies) == 5 + 3  # one per sentence (the preamble skipped)
    assert sum("<passages>" in b for b in bodies) == 13 + 5  # one per fact
    facts = component(curie)["metadata"]["facts"]
    assert [f["sentence"] for f in facts[:5]] == [1, 1, 1, 2, 2]


def test_gamma_zero_turns_the_penalty_off(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "jsonl")
    script_models(fake_openai)
    script_judge(fake_openai)
    config = json.dumps({"knowledge": str(kb), "gamma": 0})
    _, (_, turing, _) = run_eval(tmp_path, CONFIG % {"config": config})
    assert component(turing)["score"] == pytest.approx(0.8) and component(turing)["metadata"]["penalty"] == 1.0


def test_judge_panel_scores_each_judge_and_averages(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    script_judge(fake_openai, "judge")
    script_judge(fake_openai, "judge2", lambda body: verify(body, always_true=True))
    config = CONFIG.replace("      threshold: 0.5\n", "      threshold: 0.5\n      provider:\n"
                            "        - {id: 'openai:chat:judge', config: {apiBaseUrl: '{{ env.FAKE_OPENAI_URL }}'}}\n"
                            "        - {id: 'openai:chat:judge2', config: {apiBaseUrl: '{{ env.FAKE_OPENAI_URL }}'}}\n")
    _, (curie, turing, _) = run_eval(tmp_path, config % {"config": json.dumps({"knowledge": str(kb)})})
    c = component(curie)
    judges = {j["judge"]: j["score"] for j in c["metadata"]["judges"]}
    assert judges == {"openai:chat:judge": pytest.approx(CURIE), "openai:chat:judge2": pytest.approx(1.0)}
    assert c["score"] == pytest.approx((CURIE + 1.0) / 2)
    assert len(c["metadata"]["facts"]) == 26  # 13 facts, verified by each judge
    t = component(turing)
    assert t["score"] == pytest.approx((0.8 + 1.0) / 2 * math.exp(-1))
    # the first judge decomposes; both verify the same facts
    by_model = {}
    for r in fake_openai.requests:
        text = r["json"]["messages"][-1]["content"]
        by_model.setdefault(r["json"].get("model"), []).append("decompose" if "<sentences>" in text else "verify")
    assert by_model["judge"].count("decompose") == 2 and "decompose" not in by_model["judge2"]
    assert by_model["judge2"].count("verify") == 3  # Curie's 13 facts in two calls (10 + 3), Turing's in one
    summary = factscore_summary([component(curie), component(turing)])
    assert summary["judges"]["openai:chat:judge2"] == pytest.approx((1.0 + math.exp(-1)) / 2)


def test_a_failing_judge_is_left_out_and_counted_in_the_summary(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    script_judge(fake_openai, "judge")
    script_judge(fake_openai, "judge2", lambda body: verify(body, always_true=True))
    script_judge(fake_openai, "judge3", _bad_verdicts("prose"))
    config = CONFIG.replace("      threshold: 0.5\n", "      threshold: 0.5\n      provider:\n" + "".join(
        f"        - {{id: 'openai:chat:{j}', config: {{apiBaseUrl: '{{{{ env.FAKE_OPENAI_URL }}}}'}}}}\n"
        for j in ("judge", "judge2", "judge3")))
    _, (curie, turing, _) = run_eval(tmp_path, config % {"config": json.dumps({"knowledge": str(kb)})})
    c = component(curie)
    m = c["metadata"]
    assert not m.get("graderError") and c["score"] == pytest.approx((CURIE + 1.0) / 2)
    assert m["judgesFailed"] == ["openai:chat:judge3"]
    assert "no JSON object" in m["judges"][2]["error"] and "score" not in m["judges"][2]
    assert "1 of 3 judges failed and was left out: openai:chat:judge3" in c["reason"]
    summary = factscore_summary([component(curie), component(turing)])
    assert summary["rowsWithFailedJudges"] == 2 and summary["judgesFailed"] == {"openai:chat:judge3": 2}
    assert "openai:chat:judge3" not in summary["judges"]
    assert "a judge failed and was left out in 2 row(s)" in format_factscore_summary(summary)


def _bad_verdicts(kind):
    def reply(body):
        verdicts = json.loads(verify(body))["verdicts"]
        if kind == "short":
            verdicts = verdicts[:-1]
        elif kind == "swapped":
            verdicts[0], verdicts[1] = verdicts[1], verdicts[0]
        elif kind == "maybe":
            verdicts[0]["verdict"] = "maybe"
        elif kind == "evidence":
            verdicts[0]["evidence"] = 99
        elif kind == "prose":
            return "All of these look right to me."
        return json.dumps({"verdicts": verdicts})
    return reply


@pytest.mark.parametrize("kind, message", [
    ("short", "verdicts for"),  # a batch of 10 (or 3) facts short of one verdict
    ("swapped", "out of order"),
    ("maybe", "fact_verdicts.verdicts[0].verdict must be true or false"),  # outside the step's schema
    ("evidence", "cites passage 99"),
    ("prose", "no JSON object"),
])
def test_malformed_or_mismatched_verdicts_are_grading_errors(tmp_path, fake_openai, kind, message):
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    script_judge(fake_openai, verifier=_bad_verdicts(kind))
    _, (curie, _, _) = run_eval(tmp_path, CONFIG % {"config": json.dumps({"knowledge": str(kb)})})
    c = component(curie)
    assert c["pass"] is False and c["score"] == 0
    assert c["metadata"]["graderError"] is True and message in c["reason"]
    assert c["metadata"]["graderRaw"]  # the reply is kept
    assert curie["failureReason"] == 1
    summary = factscore_summary([component(curie)])
    assert summary["gradingErrors"] == 1 and summary["factscore"] is None


def test_bad_decomposition_is_a_grading_error(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    fake_openai.add_rule("<sentences>", '{"facts": "Marie Curie was Polish."}', model="judge")
    _, (curie, _, _) = run_eval(tmp_path, CONFIG % {"config": json.dumps({"knowledge": str(kb)})})
    c = component(curie)
    assert c["metadata"]["graderError"] and "facts.facts must be a list" in c["reason"]  # outside the schema


def test_an_empty_decomposition_is_a_grading_error_not_an_abstention(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    fake_openai.add_rule("<sentences>", '{"facts": []}', model="judge")
    config = {"knowledge": str(kb), "on_abstain": "pass", "retriever": "bm25"}
    _, (curie, _, _) = run_eval(tmp_path, CONFIG % {"config": json.dumps(config)})
    c = component(curie)
    assert c["pass"] is False and c["metadata"]["graderError"] is True and not c["metadata"].get("abstained")
    assert "the decomposer returned no atomic facts for 5 sentence(s)" in c["reason"]
    summary = factscore_summary([c])
    assert summary["gradingErrors"] == 1 and summary["abstained"] == 0


def test_reference_profile_counts_a_response_without_facts_as_not_responding(tmp_path, fake_openai):
    """FActScore (abstention detection off, its default): the declining answer is decomposed, gives no atomic
    facts, and is not responding: respond ratio 2/3, no grading error (it was "responded 2/2; grading
    errors 1")."""
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    fake_openai.add_rule("bio of Pierre Curie", "I'm sorry, I do not know who Pierre Curie is.", model="m")
    script_judge(fake_openai)
    config = {"knowledge": str(kb), "profile": "reference", "retriever": "bm25"}
    result, (curie, turing, zyx) = run_eval(tmp_path, (CONFIG % {"config": json.dumps(config)}).replace(
        "topic: Zyx Qwerty", "topic: Pierre Curie"))
    z = component(zyx)
    assert z["metadata"]["abstained"] is True and not z["metadata"].get("graderError")
    assert "no atomic facts: not responding" in z["reason"]
    sentences = [_block(r["json"]["messages"][-1]["content"], "sentences") for r in fake_openai.requests
                 if r["json"]["model"] == "judge" and "<sentences>" in r["json"]["messages"][-1]["content"]]
    assert any("Pierre Curie is" in t for t in sentences)  # decomposed: no abstention rule in the reference
    summary = factscore_summary(component(r) for r in (curie, turing, zyx))
    assert (summary["responding"], summary["abstained"], summary["gradingErrors"]) == (2, 1, 0)
    assert summary["respondRatio"] == pytest.approx(2 / 3)
    assert "responded 2/3" in " ".join(result.output.split())


def test_unknown_topic_is_an_error_before_any_judge_call(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "folder")
    fake_openai.add_rule("bio of", "Ada Lovelace was an English mathematician.", model="m")
    script_judge(fake_openai)
    config = CONFIG.replace("  - vars: {topic: Alan Turing}\n  - vars: {topic: Zyx Qwerty}\n", "")
    _, (row,) = run_eval(tmp_path, config.replace("Marie Curie", "Ada Lovelace") % {
        "config": json.dumps({"knowledge": str(kb)})})
    assert row["failureReason"] == 2 and "'Ada Lovelace' is not a document title" in row["error"]
    assert not [r for r in fake_openai.requests if r["json"].get("model") == "judge"]


def test_prompts_can_be_overridden(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    write(tmp_path / "verify.txt", "CUSTOM {{topic}}\n<passages>\n{{passages}}\n</passages>\n\n<facts>\n{{facts_numbered}}\n</facts>")
    fake_openai.add_rule("^SPLIT: ", lambda body: json.dumps({"facts": ["Alan Turing was English."]}), model="judge")
    fake_openai.add_rule("^CUSTOM Alan Turing", verify, model="judge")
    config = json.dumps({"knowledge": str(kb), "decompositionPrompt": "SPLIT: {{sentences}}",
                         "verificationPrompt": "file://verify.txt"})
    _, (_, turing, _) = run_eval(tmp_path, CONFIG % {"config": config})
    t = component(turing)
    assert t["metadata"]["total"] == 1 and t["metadata"]["supported"] == 1, t
    assert t["score"] == pytest.approx(math.exp(1 - 10))


def test_reference_value_and_context_var_as_knowledge(tmp_path, fake_openai):
    script_models(fake_openai)
    script_judge(fake_openai)
    config = """
prompts: ["Tell me a bio of {{topic}}."]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: {topic: Alan Turing}
    assert: [{type: factscore, value: %(doc)s}]
  - vars: {topic: Alan Turing, context: %(doc)s}
    assert: [{type: factscore, config: {gamma: 0}}]
""" % {"doc": json.dumps(DOCS["Alan Turing"])}
    _, (by_value, by_context) = run_eval(tmp_path, config)
    assert component(by_value)["score"] == pytest.approx(TURING)
    assert component(by_value)["metadata"]["knowledge"] == "value"
    assert component(by_context)["score"] == pytest.approx(0.8)
    assert component(by_context)["metadata"]["knowledge"] == "context"


def test_a_32k_token_context_works(tmp_path, fake_openai):
    """~25,000 words (about 32k tokens) of context: passages, retrieval and the judge call."""
    filler = [f"Paragraph {i} records that the harbour office logged {i * 7} ships and {i * 3} storms in year "
              f"{1000 + i}, with routine notes on tides, cargo and weather for the season." for i in range(950)]
    needle = "Alan Turing was an English mathematician, born in Maida Vale, London, on 23 June 1912."
    filler.insert(600, needle)
    context = "\n\n".join(filler)
    assert len(context.split()) > 24000
    fake_openai.add_rule("bio of", "Alan Turing was an English mathematician. He was born in 1912 in London.",
                         model="m")
    script_judge(fake_openai)
    path = write(tmp_path / "context.txt", context)
    config = """
prompts: ["Tell me a bio of {{topic}}."]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: {topic: Alan Turing, context: file://context.txt}
    assert: [{type: factscore, config: {gamma: 0}}]
"""
    start = time.perf_counter()
    _, (row,) = run_eval(tmp_path, config)
    elapsed = time.perf_counter() - start
    c = component(row)
    assert c["score"] == 1.0 and c["metadata"]["total"] == 4, c
    assert all(needle in f["evidence"] for f in c["metadata"]["facts"])
    assert elapsed < 20
    source = text_source([("Alan Turing", context)])
    assert max(p.words for p in source.passages("Alan Turing")) <= 256
    assert path.exists()


# ---------------------------------------------------------------- knowledge sources


@pytest.mark.parametrize("fmt", ["folder", "jsonl", "sqlite"])
def test_knowledge_formats_load_the_same_documents(tmp_path, fmt):
    kb = make_knowledge(tmp_path, fmt)
    source = open_source(kb, 40)
    assert sorted(source.titles()) == sorted(DOCS)
    assert [p.id for p in source.passages("Marie Curie")] == ["Marie Curie#1", "Marie Curie#2", "Marie Curie#3"]
    assert source.resolve_title("Marie_Curie") == "Marie Curie"
    assert open_source(kb, 40) is source  # loaded and indexed once per process
    assert open_source(kb, 256) is not source  # another passage size is another index


def test_bm25_picks_the_right_passage_and_topic_restricts_retrieval(tmp_path):
    source = open_source(make_knowledge(tmp_path, "jsonl"), 40)
    assert source.retrieve("Marie Curie received the Nobel Prize in Chemistry", 1, "Marie Curie")[0].id == "Marie Curie#3"
    assert source.retrieve("Marie Curie was born in Warsaw", 1, "Marie Curie")[0].id == "Marie Curie#1"
    # Pierre Curie's page matches this query best, but the topic keeps retrieval on Marie Curie's page
    query = "Curie died in Paris in 1906 after a street accident"
    assert source.retrieve(query, 1)[0].title == "Pierre Curie"
    restricted = source.retrieve(query, 5, "Marie Curie")
    assert restricted and {p.title for p in restricted} == {"Marie Curie"}
    assert len(source.retrieve("Nobel Prize", 5)) == 5 and len(restricted) == 3
    with pytest.raises(KnowledgeError, match="not a document title"):
        source.retrieve("x", 1, "Nobody")


def test_changed_knowledge_is_reindexed(tmp_path):
    kb = make_knowledge(tmp_path, "folder")
    first = open_source(kb)
    write(kb / "Ada Lovelace.txt", "Ada Lovelace was an English mathematician.")
    second = open_source(kb)
    assert second is not first and "Ada Lovelace" in second.titles()


def test_bad_knowledge_sources(tmp_path):
    with pytest.raises(KnowledgeError, match="not found"):
        open_source(tmp_path / "missing")
    with pytest.raises(KnowledgeError, match="title"):
        open_source(write(tmp_path / "bad.jsonl", '{"text": "no title"}\n'))
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE pages (name, body)")
    conn.close()
    with pytest.raises(KnowledgeError, match=r"documents\(title, text\)"):
        open_source(db)
    with pytest.raises(KnowledgeError, match="knowledge source is a folder"):
        open_source(write(tmp_path / "notes.csv", "a,b\n"))


def test_passages_are_at_most_the_limit_and_keep_factscore_separators():
    text = " ".join(f"Sentence number {i} has exactly seven words." for i in range(100))
    passages = split_passages(text, 20)
    assert all(len(p.split()) <= 20 for p in passages) and len(passages) == 50
    assert " ".join(passages) == text
    long_sentence = " ".join(["word"] * 600)
    assert [len(p.split()) for p in split_passages(long_sentence)] == [256, 256, 88]
    pre_chunked = f"First passage. Still first.{FACTSCORE_SEPARATOR}Second passage."
    assert split_passages(pre_chunked) == ["First passage. Still first.", "Second passage."]


def test_sentence_splitting_without_a_tokenizer_download():
    assert split_sentences("J. K. Rowling met Dr. Smith in the U.S. in 1990. She wrote seven books.") == [
        "J. K. Rowling met Dr. Smith in the U.S. in 1990.", "She wrote seven books."]
    # FActScore's fix: a one-word "sentence" joins its neighbour
    assert split_sentences("It costs 3.5 million. Really? Yes.") == ["It costs 3.5 million. Really? Yes."]
    assert response_sentences("Sure! Here is a bio.\n- Alan Turing was English.\n- He was born in 1912.") == [
        "Alan Turing was English.", "He was born in 1912."]
    assert response_sentences("Here are some facts:\n1. Turing was English.") == ["Turing was English."]
    # FActScore's rules: "Sure", "Please" anywhere, "Here are" first; "Here is" only in the default profile
    text = "Here is a bio. Turing was English. Please ask more. Sure thing."
    assert response_sentences(text) == ["Turing was English."]
    assert response_sentences(text, reference=True) == ["Here is a bio.", "Turing was English."]
    assert response_sentences("Turing was English. Here are more facts.", reference=True) == [
        "Turing was English.", "Here are more facts."]


def test_length_penalty_formula():
    assert length_penalty(5, 10) == pytest.approx(math.exp(-1))
    assert length_penalty(10, 10) == 1.0
    assert length_penalty(11, 10) == 1.0
    assert length_penalty(1, 10) == pytest.approx(math.exp(-9))
    assert length_penalty(3, 0) == 1.0 and length_penalty(3, None) == 1.0


def test_abstention_rules():
    assert detect_abstention("I'm sorry, I don't know who that is.")
    assert detect_abstention("Could you provide more context about this person?")
    assert detect_abstention("I could not find any information on Zyx Qwerty [1].")
    assert detect_abstention("There is no information about him.\n\nHe might be a painter.")
    assert detect_abstention("I’m sorry, no idea.")  # curly apostrophe
    assert detect_abstention("Marie Curie was a physicist.") is None
    assert detect_abstention("I'm sorry, I don't know.", mode="none") is None
    assert detect_abstention("Unknown person.", mode="none", phrases=["unknown person"])
    assert detect_abstention("I'm sorry to say Curie died in 1934.", mode="perplexity_ai") is None
    assert detect_abstention("")


def test_summary_of_a_column():
    rows = [
        {"method": "factscore", "abstained": False, "factscore": 0.5, "initScore": 0.5, "total": 20},
        {"metadata": {"method": "factscore", "abstained": False, "factscore": 0.25, "initScore": 0.5, "total": 6}},
        {"method": "factscore", "abstained": True, "factscore": None, "total": 0},
        {"method": "factscore", "graderError": True},
        {"method": "factual-correctness", "score": 1.0},
        None,
    ]
    s = factscore_summary(rows)
    assert s["factscore"] == pytest.approx(0.375) and s["initScore"] == pytest.approx(0.5)
    assert s["respondRatio"] == pytest.approx(2 / 3) and s["factsPerResponse"] == 13
    assert (s["rows"], s["gradingErrors"]) == (3, 1)
    empty = factscore_summary([])
    assert empty["factscore"] is None and empty["respondRatio"] is None


def test_example_runs_offline(tmp_path):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(ROOT / "examples/factscore/promptfooconfig.yaml"), "-o", str(out),
                                 "--no-progress-bar", "--no-cache"])
    assert result.exit_code == 100, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    metas = {}
    for r in rows:
        meta = r["gradingResult"]["componentResults"][0]["metadata"]
        metas.setdefault(r["provider"]["label"], []).append(meta)
    careful = factscore_summary(metas["careful"])
    loose = factscore_summary(metas["confabulating"])
    assert careful["gradingErrors"] == loose["gradingErrors"] == 0
    assert careful["factscore"] > loose["factscore"]
    assert careful["respondRatio"] < 1 and loose["respondRatio"] == 1
    # the same report, per column, in the summary, the results JSON and `view`
    columns = json.loads(out.read_text())["factcli"]["columns"]
    assert [c["methods"]["factscore"] for c in columns] == [careful, loose]
    assert f"FActScore {careful['factscore']:.3f} (init" in " ".join(result.output.split())
    shown = runner.invoke(app, ["view", "latest"])
    assert shown.exit_code == 0 and f"FActScore {loose['factscore']:.3f}" in " ".join(shown.output.split())


def test_bios_suite_runs_with_a_knowledge_source_from_the_environment(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("FACTSCORE_KNOWLEDGE", str(make_knowledge(tmp_path, "jsonl")))
    fake_openai.add_rule("bio of Marie Curie", RESPONSES["Marie Curie"], model="gpt-5-mini")
    script_judge(fake_openai, "gpt-5")
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(ROOT / "configs/factscore-bios.yaml"), "-o", str(out),
                                 "--no-progress-bar", "--no-cache", "--filter-first-n", "1"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["results"]["results"]
    assert component(row)["score"] == pytest.approx(CURIE)


def test_an_unset_knowledge_variable_is_reported(tmp_path, fake_openai):
    script_models(fake_openai)
    script_judge(fake_openai)
    cfg = write(tmp_path / "c.yaml", CONFIG % {"config": json.dumps({"knowledge": "${NO_SUCH_KB}"})})
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache"])
    # found by the preflight: before any model is called, not after paying for every answer
    assert result.exit_code == 1 and "environment variable NO_SUCH_KB, which is not set" in result.output
    assert fake_openai.request_count == 0


def test_not_factscore_inverts_pass_and_score_but_not_abstention(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    script_judge(fake_openai)
    config = (CONFIG % {"config": json.dumps({"knowledge": str(kb)})}).replace("type: factscore", "type: not-factscore")
    _, (curie, turing, abstained) = run_eval(tmp_path, config)
    assert component(curie)["pass"] is False and component(curie)["score"] == pytest.approx(1 - CURIE)
    assert component(turing)["pass"] is True and component(turing)["score"] == pytest.approx(1 - TURING)
    assert component(abstained)["pass"] is False and component(abstained)["metadata"]["abstained"] is True


# ---------------------------------------------------------------- profile: reference (FActScore's code)

CURIE_DOC = ("Marie Curie was born in Warsaw in 1867.\n\nIn 1903 Marie Curie shared the Nobel Prize in Physics.\n\n"
             "In 1911 Marie Curie received the Nobel Prize in Chemistry.")
CURIE_ANSWER = ("Marie Curie was born in Warsaw. She won the Nobel Prize in Physics. "
                "She won the Nobel Prize in Chemistry.")
CURIE_FACTS = {"Marie Curie was born in Warsaw.": "Marie Curie was born in Warsaw.",
               "She won the Nobel Prize in Physics.": "Marie Curie won the Nobel Prize in Physics.",
               "She won the Nobel Prize in Chemistry.": "Marie Curie won the Nobel Prize in Chemistry."}
PASSAGE = {"born": "Marie Curie was born in Warsaw in 1867.",
           "Physics": "In 1903 Marie Curie shared the Nobel Prize in Physics.",
           "Chemistry": "In 1911 Marie Curie received the Nobel Prize in Chemistry."}


def test_reference_profile_verifies_each_fact_against_its_own_passages(tmp_path, fake_openai):
    write(tmp_path / "kb" / "Marie Curie.txt", CURIE_DOC)
    fake_openai.add_rule("bio of", CURIE_ANSWER, model="m")
    # the embedding model: a passage or query about birth, physics or chemistry points one way each
    for word, vector in (("born", [1.0, 0, 0]), ("Physics", [0, 1.0, 0]), ("Chemistry", [0, 0, 1.0])):
        fake_openai.add_rule(word, vector, model="emb")

    def decompose_one(body):
        sentence = _numbered(_block(body["messages"][-1]["content"], "sentences"))
        assert len(sentence) == 1  # sentence by sentence, as FActScore's code
        return json.dumps({"facts": [CURIE_FACTS[sentence[0]]]})

    def verify_own(body):
        text = body["messages"][-1]["content"]
        facts = _numbered(_block(text, "facts"))
        return json.dumps({"verdicts": [{"fact": f, "verdict": True, "reason": "own", "evidence": 2}
                                        for f in facts]})

    fake_openai.add_rule("<sentences>", decompose_one, model="judge")
    fake_openai.add_rule("<passages>", verify_own, model="judge")
    emb = {"id": "openai:embedding:emb", "config": {"apiBaseUrl": "{{ env.FAKE_OPENAI_URL }}"}}
    config = {"knowledge": str(tmp_path / "kb"), "profile": "reference", "k": 2, "passage_words": 10,
              "embeddingProvider": emb}
    cfg = CONFIG.split("tests:")[0] + "tests:\n  - vars: {topic: Marie Curie}\n"
    out = tmp_path / "ref.json"
    runner.invoke(app, ["eval", "-c", str(write(tmp_path / "ref.yaml", cfg % {"config": json.dumps(config)})),
                        "-o", str(out), "--no-progress-bar", "--no-cache"])
    row = json.loads(out.read_text())["results"]["results"][0]
    c = component(row)
    m = c["metadata"]
    assert m["profile"] == "reference" and m["retriever"] == "dense"
    # 3 facts, all supported, 3 < γ = 10: score = exp(1 - 10/3)
    assert (m["supported"], m["total"]) == (3, 3) and c["score"] == pytest.approx(math.exp(1 - 10 / 3))
    verifications = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests
                     if r["json"].get("model") == "judge" and "<passages>" in r["json"]["messages"][-1]["content"]]
    assert len(verifications) == 3  # one call a fact
    for text in verifications:
        (fact,) = _numbered(_block(text, "facts"))
        own = next(p for w, p in PASSAGE.items() if w in fact)
        shown = [t for _, _, t in _passages(_block(text, "passages"))]
        # its own k = 2 passages only, best (the inner product's first) last, the third never shown
        assert len(shown) == 2 and shown[-1] == own
        others = [p for p in PASSAGE.values() if p != own]
        assert shown[0] == others[0] and others[1] not in text
    # the query is "<topic> <fact>" and each passage "<title> <text>", embedded once each
    embedded = [r["json"]["input"] for r in fake_openai.requests if r["json"].get("model") == "emb"]
    flat = [x if isinstance(x, str) else x[0] for x in embedded]
    assert "Marie Curie Marie Curie was born in Warsaw." in flat
    assert f"Marie Curie {PASSAGE['born']}" in flat and len(flat) == len(set(flat)) == 6
    decompositions = [r for r in fake_openai.requests if r["json"].get("model") == "judge"
                      and "<sentences>" in r["json"]["messages"][-1]["content"]]
    assert len(decompositions) == 3


def test_reference_profile_without_an_embedding_provider_says_what_to_set(tmp_path, fake_openai):
    kb = make_knowledge(tmp_path, "folder")
    script_models(fake_openai)
    for profile, message in (("reference", "factscore: dense retrieval (config.retriever: dense, the reference "
                                           "profile's default, as FActScore's gtr-t5-large) needs "
                                           "config.embeddingProvider"),
                             ("papers", "factscore: config.profile must be default or reference, got 'papers'")):
        cfg = write(tmp_path / "c.yaml", CONFIG % {"config": json.dumps({"knowledge": str(kb), "profile": profile})})
        result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache"])
        assert result.exit_code == 1 and message in " ".join(result.output.split())
        assert "(found before any call; nothing was sent)" in result.output
