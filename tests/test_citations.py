"""`citations` (ALCE's citation recall and precision) through the CLI against a scripted judge over real
HTTP: the issue's Marie Curie example worked by hand, the citation forms, the statements split without
a model, the column's figures, show / the web cell page / the HTML report, and grading errors apart."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.methods.citations import citation_numbers, split_statements, strip_citations

P1 = "Marie Curie won the Nobel Prize in Physics in 1903 and the Nobel Prize in Chemistry in 1911."
P2 = "Marie Curie was born in Warsaw in 1867."
P3 = "Paris is the capital of France."
ANSWER = "Marie Curie won two Nobel Prizes [1][3]. She was born in Warsaw [2]. She discovered radium."


def _between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def entail_judge(body):
    """Entailed exactly when ([1] or [1]+[3]) is the premise of the first statement, or [2] of the
    second; false otherwise (the issue's script)."""
    text = body["messages"][-1]["content"]
    premise, hypothesis = _between(text, "premise"), _between(text, "hypothesis")
    cited = [n for n, p in ((1, P1), (2, P2), (3, P3)) if p in premise]
    if hypothesis.startswith("Marie Curie won two Nobel Prizes"):
        ok = cited in ([1], [1, 3])
    elif hypothesis.startswith("She was born in Warsaw"):
        ok = cited == [2]
    else:
        ok = False
    return json.dumps({"entailed": ok, "reason": f"premise {cited}"})


CONFIG = """
prompts: ["Who was Marie Curie? Cite the passages. {{n}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars:
      n: 1
      docs: %(docs)s
    options: {disableVarExpansion: true}   # keep the list of passages one value
    assert: [{type: citations, config: {passages: docs%(cfg)s}%(extra)s}]
"""


def run(tmp_path, fake_openai, answer=ANSWER, judge=entail_judge, extra="", args=(), cfg=""):
    fake_openai.clear_rules()
    fake_openai.add_rule(".", answer, model="m")
    fake_openai.add_rule(".", judge, model="judge")
    cfg = write(tmp_path / "c.yaml", CONFIG % {"docs": json.dumps([P1, P2, P3]), "extra": extra, "cfg": cfg})
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache",
                                      *args])
    data = json.loads(out.read_text()) if out.exists() else None
    return result, data


def _component(data):
    return data["results"]["results"][0]["gradingResult"]["componentResults"][0]


def _columns(data):
    return data["results"]["factcli"]["columns"] if "factcli" in data["results"] else data["factcli"]["columns"]


def test_citation_forms_and_statements_without_a_model():
    # ALCE's `\[\d+`: every `[n` in order, duplicates kept; `[1, 3]` cites [1] only
    assert citation_numbers("a [1][3] b [1, 3] c [2,4] d [3]") == [1, 3, 1, 2, 3]
    assert strip_citations("Marie Curie won two Nobel Prizes [1][3].") == "Marie Curie won two Nobel Prizes."
    assert strip_citations("Marie Curie won two Nobel Prizes [1, 3].") == "Marie Curie won two Nobel Prizes, 3."
    assert [(s["text"], s["citations"]) for s in split_statements(ANSWER)] == [
        ("Marie Curie won two Nobel Prizes.", [1, 3]), ("She was born in Warsaw.", [2]),
        ("She discovered radium.", [])]
    # marks placed after the period belong to the sentence they follow
    assert [(s["text"], s["citations"]) for s in split_statements("Curie won two prizes. [1][3] She was born "
                                                                      "in Warsaw. [2]")] == [
        ("Curie won two prizes.", [1, 3]), ("She was born in Warsaw.", [2])]


def test_the_marie_curie_example_by_hand(tmp_path, fake_openai):
    result, data = run(tmp_path, fake_openai)
    assert result.exit_code == 0, result.output
    c = _component(data)
    meta = c["metadata"]
    # recall: statements 1 and 2 supported of 3 = 2/3; precision: [1] precise, [3] unnecessary ([1] alone
    # entails), [2] precise = 2 of 3 citations
    assert meta["citationRecall"] == pytest.approx(2 / 3) and meta["citationPrecision"] == pytest.approx(2 / 3)
    assert c["score"] == pytest.approx(2 / 3) and c["pass"] is True  # threshold 0.5
    assert meta["statements"] == [
        {"text": "Marie Curie won two Nobel Prizes.", "citations": [1, 3], "supported": True, "unnecessary": [3],
         "reason": "premise [1, 3]"},
        {"text": "She was born in Warsaw.", "citations": [2], "supported": True, "unnecessary": [],
         "reason": "premise [2]"},
        {"text": "She discovered radium.", "citations": [], "supported": False, "unnecessary": [],
         "reason": "no citation"},
    ]
    assert "Citation recall 0.67 ≥ 0.5" in c["reason"] and "unnecessary: [3] in statement 1" in c["reason"]
    # the calls: statement 1 joint ([1]+[3]), [1] alone, [3] alone, then [1] without [3]; statement 2 once;
    # statement 3 (no citation) never
    judged = [r["json"] for r in fake_openai.requests if r["json"]["model"] == "judge"]
    premises = sorted(_between(b["messages"][-1]["content"], "premise").count("[") for b in judged)
    assert len(judged) == 5 and premises == [1, 1, 1, 1, 2]
    assert all(b["response_format"]["json_schema"]["name"] == "citation_entailment" for b in judged)
    summary = _columns(data)[0]["methods"]["citations"]
    assert summary["rows"] == 1 and summary["statements"] == 3
    assert summary["citationRecall"] == pytest.approx(2 / 3) and summary["citationPrecision"] == pytest.approx(2 / 3)
    assert summary["citationRecallInterval"]["low"] == pytest.approx(2 / 3)
    line = " ".join(result.output.split())
    assert "Citations: recall 0.667 (95% CI 0.667–0.667), precision 0.667 (95% CI 0.667–0.667); 1 rows, 3 " \
           "statements" in line


def test_alces_four_readings_by_hand(tmp_path, fake_openai):
    """ALCE's eval.py, worked by hand with the scripted judge (entailed only by [1] or [1]+[3] for the
    prize statement, by [2] for Warsaw)."""
    def figures(answer):
        _, data = run(tmp_path, fake_openai, answer=answer)
        meta = _component(data)["metadata"]
        return meta["citationRecall"], meta["citationPrecision"], meta

    # 1. the answer up to its first newline: line 2's unsupported citation is not scored (whole answer: 0.5, 0.5)
    recall, precision, meta = figures("Marie Curie won two Nobel Prizes [1].\nShe discovered radium [3].")
    assert (recall, precision) == (1.0, 1.0) and len(meta["statements"]) == 1 and meta["linesNotScored"] == 1
    assert "1 line(s) after the first not scored" in _component(run(tmp_path, fake_openai, answer=(
        "Marie Curie won two Nobel Prizes [1].\nShe discovered radium [3]."))[1])["reason"]
    # 2. `[1, 3]` is read by `\[\d+` as [1]: one citation, supported and precise, in one call
    before = len(fake_openai.requests)
    recall, precision, meta = figures("Marie Curie won two Nobel Prizes [1, 3].")
    assert (recall, precision) == (1.0, 1.0) and meta["statements"][0]["citations"] == [1]
    assert len([r for r in fake_openai.requests[before:] if r["json"]["model"] == "judge"]) == 1
    # 3. at most 3 citations, duplicates included: [3][2][3][1] is judged on [3, 2, 3], which do not entail
    # it: recall 0 and precision 0/3 (counting [1] and deduplicating would give 1 and 1/3)
    recall, precision, meta = figures("Marie Curie won two Nobel Prizes [3][2][3][1].")
    assert (recall, precision, meta["citationCount"]) == (0.0, 0.0, 3)
    assert meta["statements"][0]["citations"] == [3, 2, 3]
    # 4. a citation out of range: its statement unsupported, and out of precision's denominator: 1/1, not 1/2
    recall, precision, meta = figures("Marie Curie won two Nobel Prizes [1]. She was born in Warsaw [7].")
    assert (recall, precision, meta["citationCount"]) == (0.5, 1.0, 1)


def test_the_passages_list_var_is_one_value_not_a_row_per_passage(tmp_path, fake_openai):
    # without options.disableVarExpansion: `docs`, named by config.passages, is never expanded
    fake_openai.clear_rules()
    fake_openai.add_rule(".", ANSWER, model="m")
    fake_openai.add_rule(".", entail_judge, model="judge")
    cfg = write(tmp_path / "c.yaml", CONFIG.replace("    options: {disableVarExpansion: true}   # keep the list of "
                                                    "passages one value\n", "") % {
        "docs": json.dumps([P1, P2, P3]), "extra": "", "cfg": ""})
    assert "disableVarExpansion" not in cfg.read_text()
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    rows = json.loads(out.read_text())["results"]["results"]
    assert len(rows) == 1 and rows[0]["vars"]["docs"] == [P1, P2, P3]
    meta = rows[0]["gradingResult"]["componentResults"][0]["metadata"]
    assert meta["citationRecall"] == pytest.approx(2 / 3) and meta["citationPrecision"] == pytest.approx(2 / 3)
    assert "var expansion" not in result.output


def test_threshold_and_inverse(tmp_path, fake_openai):
    _, data = run(tmp_path, fake_openai, extra=", threshold: 0.9")
    assert _component(data)["pass"] is False


def test_a_citation_out_of_range_is_unsupported_and_a_bad_reply_is_a_grading_error(tmp_path, fake_openai):
    _, data = run(tmp_path, fake_openai, answer="Marie Curie was born in Warsaw [7].")
    meta = _component(data)["metadata"]
    assert meta["statements"][0]["supported"] is False and "3 passage(s) were given" in meta["statements"][0]["reason"]
    assert meta["citationRecall"] == 0 and meta["citationPrecision"] == 0
    _, data = run(tmp_path, fake_openai, judge=lambda body: "It is entailed, I think.")
    c = _component(data)
    assert c["metadata"].get("graderError")
    summary = _columns(data)[0]["methods"]["citations"]
    assert summary["gradingErrors"] == 1 and summary["rows"] == 0


def test_passages_must_name_a_list_var(tmp_path, fake_openai):
    fake_openai.clear_rules()
    fake_openai.add_rule(".", ANSWER, model="m")
    cfg = write(tmp_path / "c.yaml", CONFIG.replace("passages: docs", "passages: nope") % {
        "docs": json.dumps([P1]), "extra": "", "cfg": ""})
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    row = json.loads(out.read_text())["results"]["results"][0]
    assert "config.passages names the var 'nope'" in json.dumps(row)
    assert result.exit_code != 0


def test_show_the_web_cell_page_and_the_html_report_show_each_statement(tmp_path, fake_openai):
    import warnings

    warnings.filterwarnings("ignore", message=".*httpx.*")
    from starlette.testclient import TestClient

    from factcli.store.database import Store
    from factcli.web.app import create_app

    db = tmp_path / "c.db"
    result, _ = run(tmp_path, fake_openai, args=("--db", str(db), "-o", str(tmp_path / "r.html")))
    assert result.exit_code == 0, result.output
    text = CliRunner().invoke(app, ["show", "latest", "0", "--db", str(db)]).output
    assert "[supported] Marie Curie won two Nobel Prizes.  cites [1][3](unnecessary)" in text
    assert "[not supported] She discovered radium." in text
    assert f"[2] {P2}" in text and f"[3] {P3}" in text
    with Store.open(db) as store:
        run_id = store.resolve(None)["id"]
    page = TestClient(create_app(db, token="t")).get(f"/runs/{run_id}/cell/0/0/0").text
    report = (tmp_path / "r.html").read_text()
    for html in (page, report):
        assert "3 statements (1 not supported by their citations)" in html
        assert '<span class="ok">[supported]</span> Marie Curie won two Nobel Prizes.' in html
        assert "cites [1][3] (unnecessary)" in html
        assert f'<div class="evidence">[1] {P1}</div>' in html


def test_the_step_prompt_can_come_from_a_file_or_a_url(tmp_path, fake_openai):
    import functools
    import http.server
    import threading

    prompt = "Premise: {{premise}}\n<premise>\n{{premise}}\n</premise>\n<hypothesis>\n{{hypothesis}}\n</hypothesis>\nMY OWN PROMPT"
    (tmp_path / "served").mkdir()
    (tmp_path / "served" / "entail.txt").write_text(prompt)
    (tmp_path / "entail.txt").write_text(prompt.replace("MY OWN PROMPT", "MY FILE PROMPT"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "served"))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/entail.txt"
        for where, mark in ((url, "MY OWN PROMPT"), ("file://entail.txt", "MY FILE PROMPT")):
            _, data = run(tmp_path, fake_openai, cfg=f', entailPrompt: "{where}"')
            assert _component(data)["metadata"]["citationRecall"] == pytest.approx(2 / 3)
            judged = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests
                      if r["json"]["model"] == "judge"]
            assert judged and any(t.endswith(mark) for t in judged), [t[-30:] for t in judged]
    finally:
        server.shutdown()


def test_passages_as_json_text_in_a_csv_cell(tmp_path, fake_openai):
    fake_openai.clear_rules()
    fake_openai.add_rule(".", ANSWER, model="m")
    fake_openai.add_rule(".", entail_judge, model="judge")
    (tmp_path / "tests.csv").write_text('n,docs\n1,"' + json.dumps([P1, P2, P3]).replace('"', '""') + '"\n')
    head = CONFIG.split("tests:")[0].replace(
        "defaultTest:\n", "defaultTest:\n  assert: [{type: citations, config: {passages: docs}}]\n")
    cfg = write(tmp_path / "c.yaml", head + "tests: file://tests.csv\n")
    out = tmp_path / "r.json"
    CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    meta = _component(json.loads(out.read_text()))["metadata"]
    assert meta["passages"] == [P1, P2, P3] and meta["citationRecall"] == pytest.approx(2 / 3)


# ---------------------------------------------------------------- the passages the bot retrieved (issue 52)

BOT = f'''
def call_api(prompt, options, context):
    return {{"output": {ANSWER!r}, "metadata": {{"contexts": {[P1, P2, P3]!r}}}}}
'''
TRANSFORMED = """
prompts: ["Who was Marie Curie? Cite the passages."]
providers: [file://bot.py]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - assert: [{type: citations, contextTransform: "%s"}]
"""


@pytest.mark.parametrize("transform", [
    "file://t.py:passages",
    pytest.param("context.metadata.contexts", marks=pytest.mark.skipif(
        __import__("shutil").which("node") is None, reason="Node.js is not installed"))])
def test_citations_reads_the_passages_from_the_providers_metadata(tmp_path, fake_openai, transform):
    """A contextTransform on citations gives it the passages the bot returned beside its answer, as every
    context-taking type reads them: the Marie Curie figures, without config.passages."""
    write(tmp_path / "bot.py", BOT)
    write(tmp_path / "t.py", "def passages(output, context):\n    return context['metadata']['contexts']\n")
    fake_openai.add_rule(".", entail_judge, model="judge")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", TRANSFORMED % transform)),
                                      "-o", str(out), "--no-progress-bar", "--no-cache"])
    assert result.exit_code == 0, result.output
    meta = _component(json.loads(out.read_text()))["metadata"]
    assert meta["passages"] == [P1, P2, P3]
    assert meta["citationRecall"] == pytest.approx(2 / 3) and meta["citationPrecision"] == pytest.approx(2 / 3)
    text = CliRunner().invoke(app, ["show", "latest", "0"]).output
    assert f"[2] {P2}" in text


def test_citations_without_passages_is_refused_before_any_call(tmp_path, fake_openai):
    write(tmp_path / "bot.py", BOT)
    cfg = write(tmp_path / "c.yaml", TRANSFORMED.replace(', contextTransform: "%s"', ""))
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache"])
    assert result.exit_code == 1
    assert "citations: config.passages is required" in result.output and "contextTransform" in result.output
    assert fake_openai.request_count == 0


def test_a_transform_that_returns_no_passages_is_an_error_row(tmp_path, fake_openai):
    write(tmp_path / "bot.py", BOT)
    write(tmp_path / "t.py", "def passages(output, context):\n    return {'not': 'a list'}\n")
    out = tmp_path / "r.json"
    CliRunner().invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", TRANSFORMED % "file://t.py:passages")),
                             "-o", str(out), "--no-progress-bar", "--no-cache"])
    row = json.loads(out.read_text())["results"]["results"][0]
    assert row["error"] == ("citations: its contextTransform must return a text or a list of texts (the passages), "
                            "got dict")
    assert not [r for r in fake_openai.requests if r["json"]["model"] == "judge"]
