"""`safe` (SAFE's F1@K, VeriScore's verifiable claims) against stand-in search APIs on 127.0.0.1 and a
scripted judge over real HTTP: F1@K worked by hand, each backend's documented request and response
layout, the evidence the rating step sees, and searches as calls (cache, retries, keys, budget)."""

import asyncio
import json
import re

import pytest
from conftest import write
from fake_search import CX, KEY, FakeSearch
from typer.testing import CliRunner

from factcli.cli import app
from factcli.methods.safe import f1_at_k

PROMPT = "Tell me about Marie Curie."
RESPONSE = ("Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903. "
            "She won the Nobel Prize in Chemistry in 1911. She discovered radium in 1920. "
            "Paris has many cafés.")
DOCS = [
    {"title": "Marie Curie - Wikipedia", "url": "https://en.wikipedia.org/wiki/Marie_Curie",
     "text": "Marie Curie was born in Warsaw, Poland, in 1867, and moved to Paris in 1891."},
    {"title": "The Nobel Prize in Physics 1903", "url": "https://www.nobelprize.org/prizes/physics/1903/",
     "text": "The Nobel Prize in Physics 1903 was shared by Henri Becquerel, Pierre Curie and Marie Curie."},
    {"title": "The Nobel Prize in Chemistry 1911", "url": "https://www.nobelprize.org/prizes/chemistry/1911/",
     "text": "The Nobel Prize in Chemistry 1911 was awarded to Marie Curie for her discovery of radium."},
    {"title": "Radium", "url": "https://en.wikipedia.org/wiki/Radium",
     "text": "Radium was discovered by Marie and Pierre Curie in 1898, in Paris."},
]
SNIPPET_1898 = "Radium was discovered by Marie and Pierre Curie in 1898, in Paris."


def _between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def scripted_judge(body):
    """Splits by sentence, revises `She` to `Marie Curie`, finds anything about Curie relevant, searches
    the fact itself (and once more for radium, after seeing the first results), and calls a fact
    supported when every year in it appears in the results it is shown."""
    text = body["messages"][-1]["content"]
    if "This is search" in text:
        step = int(re.search(r"This is search (\d+)", text).group(1))
        fact, knowledge = _between(text, "statement"), _between(text, "results")
        if step == 1:
            return json.dumps({"query": fact})
        if step == 2 and "radium" in fact and knowledge.startswith("[1]"):
            return json.dumps({"query": "radium discovery year"})
        return json.dumps({"query": ""})
    if "<statement>" in text:
        fact, knowledge = _between(text, "statement"), _between(text, "results")
        years = re.findall(r"\b1\d{3}\b", fact)
        ok = all(y in knowledge for y in years) and knowledge != "N/A"
        return json.dumps({"verdict": "supported" if ok else "not_supported", "reason": "scripted"})
    if "<fact>" in text:
        fact = _between(text, "fact")
        return json.dumps({"fact": fact.replace("She ", "Marie Curie "), "relevant": "Curie" in fact or "She" in fact})
    if "<SOS>" in text:
        sentence = text.split("<SOS>", 1)[1].split("<EOS>", 1)[0]
        claims = [] if "cafés" in sentence else [sentence.replace("She ", "Marie Curie ")]
        return json.dumps({"claims": claims})
    response = _between(text, "response")
    return json.dumps({"facts": [s.strip() + "." for s in response.split(".") if s.strip()]})


CONFIG = """
prompts: ["{{question}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: {question: "%(prompt)s"}
    assert: [{type: safe, config: %(config)s}]
"""


@pytest.fixture
def search():
    with FakeSearch(DOCS) as server:
        yield server


@pytest.fixture
def keys(monkeypatch):
    for name in ("SERPER_API_KEY", "BRAVE_API_KEY", "TAVILY_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.setenv(name, KEY)


def serper(search, **extra) -> dict:
    return {"provider": "serper", "apiBaseUrl": f"{search.url}/serper", **extra}


def run_safe(tmp_path, fake_openai, config: dict, response: str = RESPONSE, args=("--no-cache",), name="r"):
    fake_openai.clear_rules()
    fake_openai.add_rule(".", response, model="m")
    fake_openai.add_rule(".", scripted_judge, model="judge")
    cfg = write(tmp_path / "c.yaml", CONFIG % {"prompt": PROMPT, "config": json.dumps(config)})
    out = tmp_path / f"{name}.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", *args])
    if not out.exists():
        return result, None, None
    data = json.loads(out.read_text())
    if not data["results"]["results"]:
        return result, None, data
    row = data["results"]["results"][0]
    return result, row["gradingResult"]["componentResults"][0], data


def test_f1_at_k_by_hand():
    assert f1_at_k(3, 1, 4) == (0.75, 0.75, 0.75)
    p, r, f1 = f1_at_k(3, 1, 2)
    assert (p, r, round(f1, 3)) == (0.75, 1.0, 0.857)  # K below S: recall is capped at 1
    assert f1_at_k(0, 2, 4) == (0.0, 0.0, 0.0)  # S = 0
    assert f1_at_k(0, 0, 4) == (None, 0.0, 0.0)  # every fact irrelevant: precision undefined, F1 0


@pytest.mark.parametrize("k, f1, passed", [(4, 0.75, True), (2, 0.857, True), (64, 0.088, False)])
def test_five_facts_scored_as_the_paper_does(tmp_path, fake_openai, search, keys, k, f1, passed):
    result, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": k})
    meta = c["metadata"]
    assert (meta["supported"], meta["notSupported"], meta["irrelevant"]) == (3, 1, 1)
    assert meta["precision"] == 0.75 and meta["K"] == k
    assert round(meta["f1AtK"], 3) == f1 and round(c["score"], 3) == f1 and c["pass"] is passed
    assert meta["recallAtK"] == min(3 / k, 1)
    facts = {f["revised"]: f for f in meta["facts"]}
    radium = facts["Marie Curie discovered radium in 1920."]
    assert radium["text"] == "She discovered radium in 1920." and radium["verdict"] == "not_supported"
    assert radium["queries"] == ["Marie Curie discovered radium in 1920.", "radium discovery year"]
    assert {"title": "Radium", "url": "https://en.wikipedia.org/wiki/Radium", "snippet": SNIPPET_1898} in \
        radium["evidence"]
    cafes = facts["Paris has many cafés."]
    assert (cafes["relevant"], cafes["verdict"], cafes["queries"], cafes["evidence"]) == (False, "irrelevant", [], [])
    assert facts["Marie Curie won the Nobel Prize in Physics in 1903."]["verdict"] == "supported"
    assert set(facts["Marie Curie was born in Warsaw in 1867."]) == {
        "text", "revised", "relevant", "verdict", "queries", "evidence", "reason"}
    assert c["reason"].startswith(f"F1@{k} ")
    assert "3 supported, 1 not supported, 1 irrelevant of 5 facts" in c["reason"]
    assert "not supported: Marie Curie discovered radium in 1920." in c["reason"]
    # one search per relevant fact, two for radium; the irrelevant fact is never searched
    assert len(search.by("serper")) == 5 and meta["searches"] == 5


def test_the_rating_step_receives_the_snippets_the_search_returned(tmp_path, fake_openai, search, keys):
    run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4})
    rates = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests
             if r["json"]["model"] == "judge" and "<statement>" in r["json"]["messages"][-1]["content"]
             and "This is search" not in r["json"]["messages"][-1]["content"]]
    radium = next(t for t in rates if "radium in 1920" in t)
    assert SNIPPET_1898 in radium and "URL: https://en.wikipedia.org/wiki/Radium" in radium
    assert "[1] " in radium and "Radium" in radium
    # the second query was written after seeing the first search's results
    queries = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests
               if "This is search 2." in r["json"]["messages"][-1]["content"] and "radium" in
               r["json"]["messages"][-1]["content"]]
    assert queries and "[1] " in queries[0]


def test_s_zero_scores_zero(tmp_path, fake_openai, search, keys):
    _, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4},
                       response="Marie Curie discovered radium in 1920.")
    meta = c["metadata"]
    assert (meta["supported"], meta["notSupported"], meta["precision"], meta["f1AtK"]) == (0, 1, 0.0, 0.0)
    assert c["pass"] is False and c["score"] == 0.0


def test_every_fact_irrelevant(tmp_path, fake_openai, search, keys):
    _, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4},
                       response="Paris has many cafés. The Seine flows through Paris.")
    meta = c["metadata"]
    assert (meta["irrelevant"], meta["precision"], meta["f1AtK"]) == (2, None, 0.0)
    assert "no fact is relevant to the prompt" in c["reason"] and c["pass"] is False
    assert search.requests == []  # nothing to search


def test_verifiable_mode_extracts_per_sentence_and_searches_each_claim_once(tmp_path, fake_openai, search, keys):
    _, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4, "claims": "verifiable"})
    meta = c["metadata"]
    assert meta["mode"] == "verifiable" and meta["search"] == {"provider": "serper", "results": 10}
    assert (meta["supported"], meta["notSupported"], meta["irrelevant"]) == (3, 1, 0)
    assert meta["precision"] == 0.75 and meta["f1AtK"] == 0.75
    requests = search.by("serper")
    assert len(requests) == 4 and all(r["body"]["num"] == 10 for r in requests)
    assert {r["body"]["q"] for r in requests} == {f["revised"] for f in meta["facts"]}
    extracts = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests if "<SOS>" in
                r["json"]["messages"][-1]["content"]]
    assert len(extracts) == 5  # one call per sentence, with its neighbours as context
    second = next(t for t in extracts if "<SOS>She won the Nobel Prize in Physics" in t)
    assert "Marie Curie was born in Warsaw in 1867." in second and "Chemistry in 1911" in second
    assert not any("This is search" in r["json"]["messages"][-1]["content"] for r in fake_openai.requests)


def test_column_report(tmp_path, fake_openai, search, keys):
    result, _, data = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4})
    columns = data["results"]["factcli"]["columns"] if "factcli" in data["results"] else data["factcli"]["columns"]
    summary = columns[0]["methods"]["safe"]
    assert (summary["rows"], summary["f1AtK"], summary["precision"]) == (1, 0.75, 0.75)
    assert (summary["supported"], summary["notSupported"], summary["irrelevant"], summary["searches"]) == (3, 1, 1, 5)
    assert summary["f1AtKInterval"]["low"] == 0.75
    assert "SAFE F1@4 0.750 (" in result.output


# ---------------------------------------------------------------- each backend's documented API

BACKENDS = {
    "serper": lambda url: {"provider": "serper", "apiBaseUrl": f"{url}/serper"},
    "brave": lambda url: {"provider": "brave", "apiBaseUrl": f"{url}/brave"},
    "tavily": lambda url: {"provider": "tavily", "apiBaseUrl": f"{url}/tavily"},
    "google": lambda url: {"provider": "google", "apiBaseUrl": f"{url}/google", "cx": CX},
    "searxng": lambda url: {"provider": "searxng", "apiBaseUrl": f"{url}/searxng"},
}


def _documented(backend: str, request: dict, query: str) -> None:
    """The request is the one the vendor's API reference describes."""
    headers, q, body = request["headers"], request["query"], request["body"]
    if backend == "serper":
        assert (request["method"], request["path"]) == ("POST", "/serper/search")
        assert headers["X-API-KEY"] == KEY and headers["Content-Type"].startswith("application/json")
        assert body == {"q": query, "num": 3}
    elif backend == "brave":
        assert (request["method"], request["path"]) == ("GET", "/brave/res/v1/web/search")
        assert headers["X-Subscription-Token"] == KEY and headers["Accept"] == "application/json"
        assert q == {"q": query, "count": "3"} and body is None
    elif backend == "tavily":
        assert (request["method"], request["path"]) == ("POST", "/tavily/search")
        assert headers["Authorization"] == f"Bearer {KEY}"
        assert body == {"query": query, "max_results": 3, "search_depth": "basic"}
    elif backend == "google":
        assert (request["method"], request["path"]) == ("GET", "/google/customsearch/v1")
        assert q == {"key": KEY, "cx": CX, "q": query, "num": "3"}
    else:
        assert (request["method"], request["path"]) == ("GET", "/searxng/search")
        assert q == {"q": query, "format": "json"} and "Authorization" not in headers


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_each_backend_speaks_its_vendors_api(tmp_path, fake_openai, search, keys, backend):
    result, c, _ = run_safe(tmp_path, fake_openai, {"search": BACKENDS[backend](search.url), "K": 4})
    assert result.exit_code == 0, result.output
    meta = c["metadata"]
    assert (meta["supported"], meta["notSupported"], meta["irrelevant"], meta["f1AtK"]) == (3, 1, 1, 0.75)
    requests = search.by(backend)
    assert len(requests) == 5 and len(search.requests) == 5
    _documented(backend, requests[0], requests[0]["body"]["q"] if backend == "serper" else
                (requests[0]["body"] or {}).get("query") or requests[0]["query"].get("q"))
    radium = next(f for f in meta["facts"] if "radium" in f["revised"])
    assert {"title": "Radium", "url": "https://en.wikipedia.org/wiki/Radium", "snippet": SNIPPET_1898} in \
        radium["evidence"]


def test_knowledge_backend_searches_a_local_corpus_offline(tmp_path, fake_openai, search):
    corpus = tmp_path / "corpus"
    for d in DOCS:
        write(corpus / f"{d['title'].replace('/', ' ')}.txt", d["text"])
    result, c, _ = run_safe(tmp_path, fake_openai, {"search": {"provider": "knowledge", "knowledge": "corpus"}, "K": 4})
    assert result.exit_code == 0, result.output
    meta = c["metadata"]
    assert (meta["supported"], meta["notSupported"], meta["irrelevant"], meta["f1AtK"]) == (3, 1, 1, 0.75)
    radium = next(f for f in meta["facts"] if "radium" in f["revised"])
    assert {"title": "Radium", "url": "knowledge:Radium#1", "snippet": SNIPPET_1898} in radium["evidence"]
    assert search.requests == []


# ---------------------------------------------------------------- searches are calls

def test_a_rerun_searches_nothing_and_no_cache_searches_again(tmp_path, fake_openai, search, keys):
    config = {"search": serper(search), "K": 4}
    _, first, _ = run_safe(tmp_path, fake_openai, config, args=(), name="first")
    assert len(search.requests) == 5
    _, again, _ = run_safe(tmp_path, fake_openai, config, args=(), name="again")
    assert len(search.requests) == 5  # every search came from the response cache
    assert again["metadata"]["facts"] == first["metadata"]["facts"] and again["score"] == first["score"]
    run_safe(tmp_path, fake_openai, config, args=("--no-cache",), name="fresh")
    assert len(search.requests) == 10


def test_the_cache_key_holds_backend_query_and_result_count(tmp_path, fake_openai, search, keys):
    run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4}, args=())
    run_safe(tmp_path, fake_openai, {"search": serper(search, results=4), "K": 4}, args=())
    assert len(search.requests) == 10  # another result count is another search
    assert {r["body"]["num"] for r in search.requests} == {3, 4}
    run_safe(tmp_path, fake_openai, {"search": BACKENDS["brave"](search.url), "K": 4}, args=())
    assert len(search.by("brave")) == 5  # another backend too


def test_a_missing_key_is_a_preflight_error_before_any_call(tmp_path, fake_openai, search, monkeypatch):
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    result, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search)})
    assert result.exit_code == 1 and c is None
    assert "SERPER_API_KEY" in result.output and "safe: config.search: the serper search backend needs an API key" \
        in result.output
    assert "Traceback" not in result.output
    assert search.requests == [] and fake_openai.requests == []


def test_a_named_key_variable_is_the_one_preflight_asks_for(tmp_path, fake_openai, search, monkeypatch):
    result, _, _ = run_safe(tmp_path, fake_openai, {"search": serper(search, apiKeyEnvar="MY_SERPER")})
    assert result.exit_code == 1 and "set MY_SERPER" in result.output and search.requests == []
    monkeypatch.setenv("MY_SERPER", KEY)
    result, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search, apiKeyEnvar="MY_SERPER"), "K": 4})
    assert result.exit_code == 0 and c["metadata"]["f1AtK"] == 0.75


@pytest.mark.parametrize("bad, message", [
    ({"provider": "bing"}, "config.search.provider 'bing' is unknown"),
    ({"provider": "google"}, "config.search.cx is required for google"),
    ({"provider": "searxng"}, "config.search.apiBaseUrl is required for searxng"),
    ({"provider": "knowledge", "knowledge": "nowhere"}, "knowledge source not found"),
    ({"provider": "serper", "results": 0}, "config.search.results must be a whole number"),
])
def test_bad_search_config_is_named_before_any_call(tmp_path, fake_openai, search, keys, bad, message):
    result, c, _ = run_safe(tmp_path, fake_openai, {"search": bad})
    assert result.exit_code == 1 and message in result.output, result.output
    assert fake_openai.requests == [] and search.requests == []


@pytest.mark.parametrize("status, retry_after", [(429, "0"), (503, None), (500, None)])
def test_rate_limits_and_server_errors_from_the_search_api_are_retried(tmp_path, fake_openai, search, keys,
                                                                        status, retry_after):
    search.fail(status, retry_after, times=2)
    result, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4})
    assert result.exit_code == 0, result.output
    assert c["metadata"]["f1AtK"] == 0.75 and not c["metadata"].get("graderError")
    assert len(search.requests) == 7  # five searches, two of them tried again


def test_a_search_that_keeps_failing_is_a_grading_error(tmp_path, fake_openai, search, keys, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "1")
    search.fail(503, None, times=50)
    _, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4})
    assert c["metadata"]["graderError"] is True and c["pass"] is False
    assert "HTTP 503" in c["reason"] and "(after 1 retries)" in c["reason"]


def test_a_rejected_key_aborts_the_run(tmp_path, fake_openai, search, monkeypatch):
    monkeypatch.setenv("SERPER_API_KEY", "a-wrong-key-123456")
    result, _, _ = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4})
    assert result.exit_code == 3 and "HTTP 401" in result.output
    assert "a-wrong-key-123456" not in result.output


@pytest.mark.parametrize("backend", ["google", "serper", "tavily"])
def test_no_key_in_any_stored_byte(tmp_path, fake_openai, search, keys, isolated_home, backend):
    result, _, _ = run_safe(tmp_path, fake_openai, {"search": BACKENDS[backend](search.url), "K": 4}, args=())
    assert result.exit_code == 0 and search.requests
    search.fail(500, None, times=100)  # errors too, which may quote the request
    run_safe(tmp_path, fake_openai, {"search": BACKENDS[backend](search.url), "K": 3}, args=("--no-cache",),
             name="errors")
    stored = [p for p in list(isolated_home.rglob("*")) + list(tmp_path.glob("*.json")) if p.is_file()]
    assert any(p.suffix == ".db" for p in stored) and any("cache" in str(p) for p in stored)
    for path in stored:
        assert KEY.encode() not in path.read_bytes(), path


def test_max_cost_counts_searches(tmp_path, fake_openai, search, keys):
    # a priced judge (litellm's table knows gpt-4o-mini) and a dear search: the budget stops the searches
    fake_openai.clear_rules()
    fake_openai.add_rule(".", scripted_judge, model="gpt-4o-mini")
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["{RESPONSE}"]
providers: [echo]
defaultTest:
  options:
    provider: {{id: "openai:chat:gpt-4o-mini", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}
tests:
  - assert: [{{type: safe, config: {{K: 4, concurrency: 1, search: {json.dumps(serper(search, costPerSearch=1.0))}}}}}]
""")
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--max-cost", "2.5"])
    assert "budget of $2.5 is reached" in result.output, result.output
    assert len(search.requests) == 2  # the third search could have crossed the budget: not sent


def test_dry_run_estimates_the_searches(tmp_path, fake_openai, search, keys):
    cfg = write(tmp_path / "c.yaml", CONFIG % {"prompt": PROMPT, "config": json.dumps(
        {"search": serper(search), "K": 10, "maxSearches": 3})})
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--dry-run", "--no-progress-bar"])
    assert result.exit_code == 0, result.output
    assert "search serper: up to 30 searches for 1 row by safe" in result.output
    assert "cost up to $0.0300" in result.output
    assert search.requests == [] and fake_openai.requests == []


# ---------------------------------------------------------------- show, the web cell page, the HTML report

def test_show_the_web_cell_page_and_the_html_report_show_each_fact(tmp_path, fake_openai, search, keys):
    import warnings

    warnings.filterwarnings("ignore", message=".*httpx.*")
    from starlette.testclient import TestClient

    from factcli.store.database import Store
    from factcli.web.app import create_app

    db = tmp_path / "safe.db"
    result, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4},
                            args=("--no-cache", "--db", str(db), "-o", str(tmp_path / "r.html")))
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(app, ["show", "latest", "0", "--db", str(db)])
    text = shown.output
    assert "[not_supported] She discovered radium in 1920." in text
    assert "revised: Marie Curie discovered radium in 1920." in text
    assert "query 2: radium discovery year" in text
    assert "Radium <https://en.wikipedia.org/wiki/Radium>" in text and SNIPPET_1898 in text
    assert "[irrelevant] Paris has many cafés." in text
    with Store.open(db) as store:
        run_id = store.resolve(None)["id"]
    page = TestClient(create_app(db, token="t")).get(f"/runs/{run_id}/cell/0/0/0").text
    report = (tmp_path / "r.html").read_text()
    for html in (page, report):
        assert '<a href="https://en.wikipedia.org/wiki/Radium" rel="noopener noreferrer nofollow">Radium</a>' in html
        assert "queries: Marie Curie discovered radium in 1920. · radium discovery year" in html
        assert '<span class="bad">[not_supported]</span> She discovered radium in 1920.' in html
        assert '<span class="dim">[irrelevant]</span> Paris has many cafés.' in html
        assert "5 facts (1 not supported)" in html


def test_the_longfact_suite_runs_offline(tmp_path):
    from conftest import ROOT

    out = tmp_path / "longfact.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(ROOT / "configs/longfact/promptfooconfig.yaml"),
                                      "-o", str(out), "--no-progress-bar", "--no-table"])
    assert result.exit_code == 100, result.output  # the confabulating model fails a row
    data = json.loads(out.read_text())
    columns = data["results"]["factcli"]["columns"] if "factcli" in data["results"] else data["factcli"]["columns"]
    careful, confabulating = (c["methods"]["safe"] for c in columns)
    assert (careful["supported"], careful["notSupported"], careful["irrelevant"]) == (19, 0, 3)
    assert (confabulating["supported"], confabulating["notSupported"], confabulating["irrelevant"]) == (9, 7, 1)
    assert round(careful["f1AtK"], 3) == 0.971 and round(confabulating["f1AtK"], 3) == 0.495
    assert "SAFE F1@4 0.971" in result.output and "SAFE F1@4 0.495" in result.output


def test_an_inline_api_key_is_not_stored_either(tmp_path, fake_openai, search, isolated_home, monkeypatch):
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    result, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search, apiKey=KEY), "K": 4}, args=())
    assert result.exit_code == 0 and c["metadata"]["f1AtK"] == 0.75
    stored = [p for p in list(isolated_home.rglob("*")) + list(tmp_path.glob("*.json")) if p.is_file()]
    for path in stored:
        assert KEY.encode() not in path.read_bytes(), path


def test_a_backends_rate_limit_is_its_own():
    from factcli.providers.search import create_backend
    from factcli.run.calling.limits import Limiters

    limiters = Limiters(8)
    serper_limit = limiters.for_provider(create_backend({"provider": "serper", "rpm": 30, "maxConcurrency": 2}))
    brave_limit = limiters.for_provider(create_backend({"provider": "brave"}))
    assert (serper_limit.rpm, serper_limit.ceiling, brave_limit.rpm, brave_limit.ceiling) == (30, 2, None, 8)
    assert serper_limit is not brave_limit


def test_explain_lists_the_facts_not_supported_and_leaves_out_the_irrelevant():
    from factcli.run.check import explain
    from factcli.types import Assertion, GradingResult

    facts = [{"text": "A.", "revised": "A.", "relevant": True, "verdict": "supported", "queries": ["a"],
              "evidence": [], "reason": ""},
             {"text": "B.", "revised": "B.", "relevant": True, "verdict": "not_supported", "queries": ["b"],
              "evidence": [], "reason": "no result says so"},
             {"text": "C.", "revised": "C.", "relevant": False, "verdict": "irrelevant", "queries": [],
              "evidence": [], "reason": ""}]
    child = GradingResult(False, 0.4, "F1@4 0.40 < 0.5", assertion=Assertion(type="safe"),
                          metadata={"method": "safe", "facts": facts})
    text = explain(GradingResult(False, 0.4, "", component_results=[child]))
    assert "claims not supported (1 of 2):" in text and "[not_supported] B.: no result says so" in text
    assert "C." not in text.split("claims not supported")[1]


def test_each_step_prompt_can_be_replaced(tmp_path, fake_openai, search, keys):
    rate = [{"role": "system", "content": "MY RATER. Reply JSON."},
            {"role": "user", "content": "<results>\n{{knowledge}}\n</results>\n\n<statement>\n{{fact}}\n</statement>"}]
    write(tmp_path / "split.txt", "MY SPLITTER <question>\n{{prompt}}\n</question>\n\n<response>\n{{response}}\n</response>")
    _, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4, "ratePrompt": rate,
                                               "splitPrompt": "file://split.txt"})
    assert c["metadata"]["f1AtK"] == 0.75
    sent = [r["json"]["messages"] for r in fake_openai.requests if r["json"]["model"] == "judge"]
    assert sum(m[0]["content"] == "MY RATER. Reply JSON." for m in sent) == 4
    assert sum(m[-1]["content"].startswith("MY SPLITTER") for m in sent) == 1


def test_each_step_sends_its_schema_and_cap(tmp_path, fake_openai, search, keys):
    run_safe(tmp_path, fake_openai, {"search": serper(search), "K": 4})
    sent = {}
    for r in fake_openai.requests:
        body = r["json"]
        if body["model"] == "judge":
            fmt = body["response_format"]["json_schema"]
            sent.setdefault(fmt["name"], set()).add(body["max_tokens"])
            assert fmt["strict"] is True
    assert sent == {"safe_facts": {2048}, "safe_revision": {512}, "safe_query": {256}, "safe_rating": {1024}}
    rating = next(r["json"] for r in fake_openai.requests if r["json"].get("response_format", {})
                  .get("json_schema", {}).get("name") == "safe_rating")
    assert list(rating["response_format"]["json_schema"]["schema"]["properties"]) == ["reason", "verdict"]


def test_concurrent_steps_keep_their_replies_in_the_order_of_the_steps_not_of_the_answers():
    """SAFE rates facts concurrently (FActScore's batches and factual correctness's two sides too): the
    results JSON lists each step's reply in the steps' order whichever judge answered first."""
    from factcli.methods.claims import JudgeCall, JudgeError, gather_calls

    async def step(sub: JudgeCall, name: str, delay: float, fail: bool = False) -> str:
        await asyncio.sleep(delay)
        sub.replies.append({"judge": "j", "step": name, "reply": name})
        sub.cost += 1
        if fail:
            raise JudgeError(f"{name} failed", sub.replies[-1]["reply"])
        return name

    call = JudgeCall()
    out = asyncio.run(gather_calls(call, *(lambda sub, n=n, d=d: step(sub, n, d)
                                           for n, d in (("a", 0.06), ("b", 0.03), ("c", 0)))))
    assert out == ["a", "b", "c"]
    assert [r["step"] for r in call.replies] == ["a", "b", "c"] and call.cost == 3
    call = JudgeCall()
    with pytest.raises(JudgeError) as err:
        asyncio.run(gather_calls(call, lambda sub: step(sub, "slow", 0.05), lambda sub: step(sub, "bad", 0, True)))
    assert err.value.raw == "bad" and [r["step"] for r in call.replies] == ["bad"]


# ---------------------------------------------------------------- profile: reference (SAFE's and VeriScore's flow)

def reference_judge(body):
    """SAFE's steps as separate calls: split one sentence, revise, relevance, queries (the first the fact,
    then empty ones), rating; and VeriScore's three labels."""
    text = body["messages"][-1]["content"]
    if "This is search" in text:
        step = int(re.search(r"This is search (\d+)", text).group(1))
        return json.dumps({"query": _between(text, "statement") if step == 1 else ""})
    if "<claim>" in text:  # VeriScore's ternary rating
        claim, knowledge = _between(text, "claim"), _between(text, "results")
        years = re.findall(r"\b1\d{3}\b", claim)
        return json.dumps({"reason": "scripted", "verdict": "supported" if all(y in knowledge for y in years)
                           else "contradicted"})
    if "<statement>" in text:
        return scripted_judge(body)
    if "<sentence>" in text:
        return json.dumps({"facts": [_between(text, "sentence")]})
    if "<fact>" in text and "<question>" in text:
        return json.dumps({"relevant": "Curie" in _between(text, "fact")})
    if "<fact>" in text:
        return json.dumps({"fact": _between(text, "fact").replace("She ", "Marie Curie ")})
    return scripted_judge(body)


def test_reference_profile_asks_an_empty_query_again_then_stops_searching(tmp_path, fake_openai, search, keys):
    fake_openai.clear_rules()
    fake_openai.add_rule(".", RESPONSE, model="m")
    fake_openai.add_rule(".", reference_judge, model="judge")
    cfg = write(tmp_path / "c.yaml", CONFIG % {"prompt": PROMPT, "config": json.dumps(
        {"search": serper(search), "K": 4, "profile": "reference"})})
    out = tmp_path / "r.json"
    CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    c = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]
    meta = c["metadata"]
    assert meta["profile"] == "reference"
    # 5 sentences, one split call each; 4 facts about Curie are relevant, the cafés are not
    assert (meta["supported"], meta["notSupported"], meta["irrelevant"]) == (3, 1, 1)
    relevant = [f for f in meta["facts"] if f["relevant"]]
    # SAFE's check_atomic_fact: the second query is empty, asked 11 times (max_retries 10), then the search
    # stops; the fact itself is never searched in its place
    assert all(f["queries"] == [f["revised"]] for f in relevant) and meta["searches"] == 4
    assert len(search.by("serper")) == 4
    contents = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests if r["json"]["model"] == "judge"]
    assert sum("This is search 1" in t for t in contents) == 4 and sum("This is search 2" in t for t in contents) == 44
    assert not any("This is search 3" in t for t in contents)
    assert sum("<sentence>" in t for t in contents) == 5
    revisions = [t for t in contents if "<fact>" in t and "<question>" not in t]
    relevances = [t for t in contents if "<fact>" in t and "<question>" in t]
    assert len(revisions) == 5 and len(relevances) == 5  # two calls a fact, the relevance on the revised fact
    assert any("<fact>\nMarie Curie discovered radium in 1920.\n</fact>" in t for t in relevances)
    schemas = {r["json"]["response_format"]["json_schema"]["name"] for r in fake_openai.requests
               if r["json"]["model"] == "judge"}
    assert {"safe_sentence_facts", "safe_revised", "safe_relevance", "safe_query", "safe_rating"} == schemas
    # the rater sees SAFE's knowledge: each search's snippets on one line, a line a search
    rating = next(t for t in contents if "<statement>" in t and "This is search" not in t and "1903" in t)
    assert len(_between(rating, "results").splitlines()) == 1


def test_serper_keeps_the_knowledge_graph_and_the_answer_box_takes_no_slot(tmp_path, fake_openai, search, keys):
    search.serper_extras = {
        "answerBox": {"title": "Marie Curie born", "answer": "7 November 1867", "link": "https://example.org/box"},
        "knowledgeGraph": {"title": "Marie Curie", "type": "Physicist", "description": "Polish-French physicist.",
                           "descriptionLink": "https://en.wikipedia.org/wiki/Marie_Curie",
                           "attributes": {"Born": "7 November 1867, Warsaw"}},
    }
    _, c, _ = run_safe(tmp_path, fake_openai, {"search": serper(search, results=1), "K": 4})
    facts = {f["revised"]: f for f in c["metadata"]["facts"]}
    evidence = facts["Marie Curie was born in Warsaw in 1867."]["evidence"]
    # the box and the graph, then the one organic result asked for
    assert [e["title"] for e in evidence] == ["Marie Curie born", "Marie Curie", "Marie Curie - Wikipedia"]
    assert evidence[1]["snippet"] == ("Marie Curie: Physicist. Polish-French physicist. Marie Curie Born: 7 November "
                                      "1867, Warsaw.")


def _veriscore_columns(tmp_path, fake_openai, search, answers: dict):
    """One VeriScore (reference profile, bio) row per model of `answers` (model -> its answer), judged by
    reference_judge: (the CLI result, the results JSON, its rows in the models' order)."""
    fake_openai.clear_rules()
    for model, answer in answers.items():
        fake_openai.add_rule(".", answer, model=model)
    fake_openai.add_rule(".", reference_judge, model="judge")
    providers = ", ".join(f'{{id: "openai:chat:{m}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}'
                          for m in answers)
    cfg_text = (CONFIG % {"prompt": PROMPT, "config": json.dumps(
        {"search": serper(search), "K": 64, "profile": "reference", "claims": "verifiable", "domain": "bio"})}
                ).replace('providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]',
                          f"providers: [{providers}]")
    cfg = write(tmp_path / "c.yaml", cfg_text)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    assert out.exists(), result.output
    data = json.loads(out.read_text())
    rows = sorted(data["results"]["results"], key=lambda r: r["promptIdx"])
    return result, data, rows


def test_veriscore_k_from_three_columns(tmp_path, fake_openai, search, keys):
    """VeriScore sets K per domain from every compared model's responses: here 1, 2 and 4 claims, so the
    median K is 2 and the largest 4."""
    answers = {"m1": "Marie Curie was born in Warsaw in 1867.",
               "m2": "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903.",
               "m3": ("Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903. "
                      "She won the Nobel Prize in Chemistry in 1911. She discovered radium in 1920.")}
    result, data, rows = _veriscore_columns(tmp_path, fake_openai, search, answers)
    labels = [f.get("label") for f in rows[2]["gradingResult"]["componentResults"][0]["metadata"]["facts"]]
    assert labels == ["supported", "supported", "supported", "contradicted"]  # ternary verdicts kept
    columns = data["results"]["factcli"]["columns"] if "factcli" in data["results"] else data["factcli"]["columns"]
    v = [col["methods"]["safe"]["veriscore"] for col in columns]
    assert v[0]["domains"] == {"bio": {"K": 2, "Kmax": 4, "responses": 3}}
    # F1@2 and F1@4 by hand: m1 S=1 (P 1, R 1/2 | 1/4), m2 S=2 (P 1, R 1 | 1/2), m3 S=3 N=1 (P 3/4, R 1 | 3/4)
    assert [round(x["f1AtKMedian"], 3) for x in v] == [0.667, 1.0, 0.857]
    assert [round(x["f1AtKMax"], 3) for x in v] == [0.4, 0.667, 0.75]
    line = " ".join(result.output.split())
    assert "VeriScore F1@K(median) 0.857, F1@K(max) 0.750 (K per domain from every column: bio: K=2, Kmax=4 over " \
           "3 responses)" in line


def test_veriscore_k_is_the_upper_median_and_abstentions_are_left_out(tmp_path, fake_openai, search, keys):
    """VeriScore's utils.get_stats: the claim counts sorted, K = counts[len // 2]; responses of 1, 2, 4 and 5
    claims give K 4 (statistics.median would say 3) and Kmax 5. A response on VeriScore's abstention list
    is checked by nobody and counted nowhere (as a 0-claim response it would make K 2). Serper's answer
    box is not among the results VeriScore reads."""
    s1 = "Marie Curie was born in Warsaw in 1867."
    s2 = "She won the Nobel Prize in Physics in 1903."
    s3 = "She won the Nobel Prize in Chemistry in 1911."
    s4 = "She discovered radium in 1920."  # contradicted by the results (1898)
    s5 = "She discovered radium in 1898."
    answers = {"m1": s1, "m2": f"{s1} {s2}", "m4": f"{s1} {s2} {s3} {s4}", "m5": f"{s1} {s2} {s3} {s4} {s5}",
               "m0": "  I'm sorry, but I can't fulfill that request.\n"}
    search.serper_extras = {"answerBox": {"title": "Box", "answer": "1920 1867 1903 1911 1898"}}
    result, data, rows = _veriscore_columns(tmp_path, fake_openai, search, answers)
    metas = [r["gradingResult"]["componentResults"][0]["metadata"] for r in rows]
    assert [(m.get("supported"), len(m["facts"])) for m in metas] == [(1, 1), (2, 2), (3, 4), (4, 5), (None, 0)]
    assert metas[4]["abstained"] is True and "Abstained (VeriScore's abstention list)" in \
        rows[4]["gradingResult"]["componentResults"][0]["reason"]
    # the abstaining model was never asked anything, and no answer box reached a rater
    assert not [r for r in fake_openai.requests if "I'm sorry" in json.dumps(r["json"]) and r["json"]["model"] == "judge"]
    assert all(e["title"] != "Box" for m in metas[:4] for f in m["facts"] for e in f["evidence"])
    columns = data["results"]["factcli"]["columns"] if "factcli" in data["results"] else data["factcli"]["columns"]
    v = [col["methods"]["safe"].get("veriscore") for col in columns]
    assert v[0]["domains"] == {"bio": {"K": 4, "Kmax": 5, "responses": 4}}
    # F1@4 by hand: m1 P 1 R 1/4 -> 0.4; m2 P 1 R 1/2 -> 0.667; m4 P 3/4 R 3/4 -> 0.75; m5 P 4/5 R 1 -> 0.889
    # (K 3, statistics.median: 0.5, 0.8, 0.857, 0.889); F1@5: 0.333, 0.571, 0.667, 0.8
    assert [round(x["f1AtKMedian"], 3) for x in v[:4]] == [0.4, 0.667, 0.75, 0.889]
    assert [round(x["f1AtKMax"], 3) for x in v[:4]] == [0.333, 0.571, 0.667, 0.8]
    assert v[4] is None and columns[4]["methods"]["safe"]["abstained"] == 1
    line = " ".join(result.output.split())
    assert "bio: K=4, Kmax=5 over 4 responses" in line and "SAFE F1@K n/a (1 abstained; grading errors 0)" in line


def test_safes_fallbacks_in_the_reference_profile(tmp_path, fake_openai, search, keys):
    """SAFE's code, step by step: preamble sentences ("Sure…", "Please…") give no facts; a revision never
    read keeps the fact as written and a relevance never read counts as relevant (classify_relevance.py,
    after 11 tries each); an empty query is asked 11 times, then the search stops; a rating never read
    has the fact checked anew, 3 times in all, then dropped from the counts (not the row failed)."""
    born, nobel = "Marie Curie was born in Warsaw in 1867.", "She won the Nobel Prize in Physics in 1903."
    response = f"Sure, here is what I know. {born} {nobel} Please ask if you want more."

    def judge(body):
        text = body["messages"][-1]["content"]
        if "This is search" in text:
            step = int(re.search(r"This is search (\d+)", text).group(1))
            return json.dumps({"query": _between(text, "statement") if step == 1 else ""})
        if "<statement>" in text:
            if "Nobel" in _between(text, "statement"):
                return "I would say it is probably supported."  # no verdict: never read
            return json.dumps({"reason": "scripted", "verdict": "supported"})
        if "<sentence>" in text:
            return json.dumps({"facts": [_between(text, "sentence")]})
        if "<fact>" in text and "<question>" in text:
            return "Relevant, I suppose." if "Nobel" in _between(text, "fact") else json.dumps({"relevant": True})
        if "<fact>" in text:
            fact = _between(text, "fact")
            return "Cannot revise that." if "Warsaw" in fact else json.dumps({"fact": fact.replace("She ", "Marie Curie ")})
        raise AssertionError(text[:200])

    fake_openai.clear_rules()
    fake_openai.add_rule(".", response, model="m")
    fake_openai.add_rule(".", judge, model="judge")
    cfg = write(tmp_path / "c.yaml", CONFIG % {"prompt": PROMPT, "config": json.dumps(
        {"search": serper(search), "K": 1, "profile": "reference"})})
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    c = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]
    meta = c["metadata"]
    assert not meta.get("graderError"), c["reason"]
    contents = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests if r["json"]["model"] == "judge"]
    # the two preambles were never split
    assert [_between(t, "sentence") for t in contents if "<sentence>" in t] == [born, nobel]
    # the Warsaw fact: revision unread 11 times, kept as written; rated supported
    (kept,) = meta["facts"]
    assert kept["revised"] == born and kept["verdict"] == "supported"
    assert kept["unread"] == ["revise: kept the fact as written"]
    assert sum("<fact>" in t and "<question>" not in t and "Warsaw" in _between(t, "fact") for t in contents) == 11
    # the Nobel fact: relevance unread (11 tries) so relevant, searched, rating unread (11 tries), all 3 times
    nobel_fact = "Marie Curie won the Nobel Prize in Physics in 1903."
    assert meta["dropped"] == [{"text": nobel, "revised": nobel_fact, "queries": [nobel_fact]}]
    assert sum("<fact>" in t and "<question>" in t and "Nobel" in _between(t, "fact") for t in contents) == 3 * 11
    assert sum("<statement>" in t and "This is search" not in t and "Nobel" in _between(t, "statement")
               for t in contents) == 3 * 11
    # each fact's second query came back empty 11 times, and the search stopped: one search a check
    assert sum("This is search 2" in t for t in contents) == (1 + 3) * 11
    assert not any("This is search 3" in t for t in contents) and len(search.by("serper")) == 1 + 3
    # S = 1, N = 0, the dropped fact in neither: F1@1 = 1
    assert (meta["supported"], meta["notSupported"], meta["irrelevant"], c["score"]) == (1, 0, 0, 1.0)
    assert "1 fact(s) dropped, their rating unreadable after 3 checks of 11 tries each" in c["reason"]
    assert result.exit_code == 0, result.output


def test_a_veriscore_k_of_0_is_said_not_dropped():
    from factcli.methods.safe import describe_safe, safe_summary, veriscore_k

    def row(claims: int, supported: int) -> dict:
        return {"method": "safe", "mode": "verifiable", "profile": "reference", "domain": "bio", "K": 64,
                "f1AtK": 0.0, "supported": supported, "notSupported": claims - supported,
                "facts": [{}] * claims}

    column = [row(0, 0), row(0, 0), row(3, 3)]
    ks = veriscore_k([column])
    assert ks == {"bio": {"K": 0, "Kmax": 3, "responses": 3}}  # sorted [0, 0, 3], the one at 3 // 2
    line = describe_safe(safe_summary(column, ks))
    assert "VeriScore F1@K n/a for bio: K is 0" in line
