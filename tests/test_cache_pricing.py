"""True cost (issue 50 item 4): input tokens read from a provider's prompt cache at the cache-read price,
tokens written to it at the cache-write price, batched calls at the batch price, by one rule
(providers/pricing.Price.cost_of) wherever cost is printed, estimated (--dry-run) and budgeted (--max-cost).

The stand-ins count a token as a whitespace-separated word. The prices are litellm's bundled table's,
written out here (not read from it) so that the table and factcli's reading of it are both checked:
gpt-4o-mini $0.15 per million input tokens, $0.075 cached, $0.60 output, batch half of each;
claude-haiku-4-5 $1 input, $0.10 cache read, $1.25 cache write (5 minutes), $5 output, batch half.
"""

import json

import pytest
from conftest import write
from fake_vendors import FakeVendors
from starlette.testclient import TestClient
from typer.testing import CliRunner

from factcli.cli import app
from factcli.providers import pricing
from factcli.types import ProviderResponse, ProviderSpec, TokenUsage
from factcli.web.app import create_app

runner = CliRunner()
MINI = {"input": 0.15e-6, "cached": 0.075e-6, "output": 0.60e-6}
HAIKU = {"input": 1e-6, "read": 0.1e-6, "write": 1.25e-6, "output": 5e-6}
REPLY = "Paris is the capital of France."  # 6 words
VERDICT = '{"pass": true, "score": 1, "reason": "ok"}'  # 6 words
DOCUMENT = " ".join(f"w{i}" for i in range(30))  # 30 words every prompt shares


def _provider(pid: str, **config):
    from factcli.providers.registry import create_provider

    return create_provider(ProviderSpec(id=pid, config=config))


def _words(body: dict) -> int:
    """The stand-ins' count of a request's input: the words of its messages' texts (a content that is a
    list of blocks, as litellm sends Anthropic's: their texts), and of Anthropic's `system`."""
    def text(content):
        return " ".join(p.get("text", "") for p in content) if isinstance(content, list) else str(content)

    return sum(len(text(m["content"]).split()) for m in body["messages"]) + len(text(body.get("system", "")).split())


def _eval(tmp_path, text: str, *extra) -> tuple[object, dict]:
    cfg = write(tmp_path / "c.yaml", text)
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache", *extra])
    assert "Traceback" not in result.output, result.output
    return result, json.loads(out.read_text())


# ------------------------------------------------------------------ OpenAI: cached_tokens


@pytest.fixture
def openai_server(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule(r"^Q: ", REPLY)
    fake_openai.add_rule(r"names Paris", VERDICT)
    return fake_openai


OPENAI_CONFIG = f"""
prompts: ["Q: <<n>> {DOCUMENT}"]
providers: [{{id: "openai:chat:gpt-4o-mini", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
defaultTest:
  options:
    provider: {{id: "openai:chat:gpt-4o-mini", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}
tests:
""" + "".join(f"  - vars: {{n: '{i}'}}\n    assert:\n      - {{type: llm-rubric, value: names Paris}}\n"
              for i in range(3))


def test_an_openai_reply_reporting_cached_tokens_is_billed_at_the_cache_price(openai_server, tmp_path):
    """Must show: cached tokens priced at the cache price for an OpenAI reply reporting `cached_tokens`
    (factcli's own OpenAI client, the model's calls and the grader's)."""
    openai_server.cached_tokens = 24
    result, doc = _eval(tmp_path, OPENAI_CONFIG)
    assert result.exit_code == 0, result.output
    rows = doc["results"]["results"]
    # "Q: 0" and the 30 shared words: 32 prompt tokens, 24 of them from the cache, a 6-word reply
    row_cost = (32 - 24) * MINI["input"] + 24 * MINI["cached"] + 6 * MINI["output"]  # $0.0000066
    assert row_cost == pytest.approx(6.6e-6)
    for row in rows:
        usage = row["response"]["tokenUsage"]
        assert (usage["prompt"], usage["cached"], usage["completion"]) == (32, 24, 6)
        assert row["cost"] == pytest.approx(row_cost, rel=0.01)
        assert row["cost"] < 32 * MINI["input"] + 6 * MINI["output"]  # what it was billed before: $0.0000084
    graded = [r["json"] for r in openai_server.requests if "names Paris" in json.dumps(r["json"])]
    assert len(graded) == 3
    grader_costs = sorted((_words(b) - 24) * MINI["input"] + 24 * MINI["cached"] + 6 * MINI["output"]
                          for b in graded)
    assert sorted(r["factcli"]["graderCost"] for r in rows) == pytest.approx(grader_costs, rel=0.01)
    assert doc["factcli"]["cost"]["model"] == pytest.approx(3 * row_cost, rel=0.01)
    assert doc["factcli"]["cost"]["grader"] == pytest.approx(sum(grader_costs), rel=0.01)
    # the summary says what share of the input the cache served, the model's and the graders'
    grader_share = 3 * 24 / sum(_words(b) for b in graded)
    line = f"Prompt cache: 75.0% of input tokens read from it (grading {grader_share * 100:.1f}%)"
    assert line in result.output, result.output
    # stored with the run: `view` and `show` print them too
    viewed = runner.invoke(app, ["view", "latest"])
    assert line in viewed.output, viewed.output
    shown = runner.invoke(app, ["show", "latest", "0"])
    assert "tokens 38 (24 from the prompt cache)" in shown.output, shown.output
    as_json = json.loads(runner.invoke(app, ["show", "latest", "0", "--json"]).output)
    assert as_json[0]["tokens"]["cacheRead"] == 24 and as_json[0]["tokens"]["gradingCacheRead"] == 24


def test_cached_tokens_through_litellm_are_billed_at_the_cache_price_too(openai_server, remote_prices, tmp_path):
    """The same reply read by litellm (a `litellm:` id): its prompt_tokens_details.cached_tokens."""
    openai_server.cached_tokens = 24
    text = f"""
prompts: ["Q: <<n>> {DOCUMENT}"]
providers: [{{id: "litellm:openai/gpt-4o-mini", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
tests: [{{vars: {{n: '0'}}}}]
"""
    result, doc = _eval(tmp_path, text)
    assert result.exit_code == 0, result.output
    row = doc["results"]["results"][0]
    assert (row["response"]["tokenUsage"]["prompt"], row["response"]["tokenUsage"]["cached"]) == (32, 24)
    assert row["cost"] == pytest.approx(8 * MINI["input"] + 24 * MINI["cached"] + 6 * MINI["output"], rel=0.01)


def test_without_cached_tokens_nothing_changes(openai_server, tmp_path):
    result, doc = _eval(tmp_path, OPENAI_CONFIG)
    assert result.exit_code == 0, result.output
    assert all(r["cost"] == pytest.approx(32 * MINI["input"] + 6 * MINI["output"]) for r in doc["results"]["results"])
    assert "Prompt cache" not in result.output and "Batch APIs" not in result.output


# ------------------------------------------------------------------ Anthropic through litellm


@pytest.fixture(scope="module")
def _vendors():
    with FakeVendors() as server:
        yield server


@pytest.fixture
def vendors(_vendors, remote_prices):
    _vendors.requests.clear()
    _vendors.cache_tokens = (0, 0)
    yield _vendors
    _vendors.cache_tokens = (0, 0)


def test_anthropic_cache_reads_and_writes_through_litellm_are_priced_by_hand(vendors, tmp_path, isolated_home):
    """Anthropic's input_tokens leaves out the tokens read from and written to its cache: factcli's
    prompt count holds them all, each billed at its own price."""
    vendors.cache_tokens = (10, 20)  # of each prompt's tokens, 10 written to the cache and 20 read from it
    text = f"""
prompts: ["Q: <<n>> {DOCUMENT}"]
providers: [{{id: "anthropic:messages:claude-haiku-4-5", config: {{apiBaseUrl: "{vendors.url}", apiKey: sk-ant-test}}}}]
tests:
  - vars: {{n: '0'}}
  - vars: {{n: '1'}}
"""
    result, doc = _eval(tmp_path, text)
    assert result.exit_code == 0, result.output
    bodies = vendors.by_path("/v1/messages")
    assert len(bodies) == 2
    prompt = _words(bodies[0])
    assert prompt == 32  # "Q: 0" and the 30 words; litellm sends no system prompt
    # 2 tokens at the input price, 20 at the cache-read price, 10 at the cache-write price; "A Paris is big."
    row_cost = 2 * HAIKU["input"] + 20 * HAIKU["read"] + 10 * HAIKU["write"] + 4 * HAIKU["output"]
    assert row_cost == pytest.approx(3.65e-5)
    for row in doc["results"]["results"]:
        usage = row["response"]["tokenUsage"]
        assert (usage["prompt"], usage["cached"], usage["factcli"], usage["completion"]) == (
            32, 20, {"cacheWrite": 10}, 4)
        assert row["cost"] == pytest.approx(row_cost, rel=0.01)
    assert doc["factcli"]["cost"]["model"] == pytest.approx(2 * row_cost, rel=0.01)
    line = "Prompt cache: 62.5% of input tokens read from it, 20 written"
    assert line in result.output, result.output
    assert line in runner.invoke(app, ["view", "latest"]).output
    header = json.loads(runner.invoke(app, ["view", "latest", "--json"]).output)["run"]
    assert (header["savings"], header["cacheRead"], header["cacheWrite"]) == (line, 40, 20)
    shown = runner.invoke(app, ["show", "latest", "1"]).output
    assert "(20 from the prompt cache, 10 written to it)" in shown, shown
    html = tmp_path / "r.html"
    assert runner.invoke(app, ["export", "latest", "-o", str(html)]).exit_code == 0
    assert line in html.read_text() and "(20 from the prompt cache, 10 written to it)" in html.read_text()
    client = TestClient(create_app(isolated_home / "factcli.db", token="t" * 16))
    auth = {"Authorization": "Bearer " + "t" * 16}
    assert line in client.get(f"/runs/{doc['evalId']}", headers=auth).text
    cell = client.get(f"/runs/{doc['evalId']}/cell/0/0/0", headers=auth).text
    assert "(20 from the prompt cache, 10 written to it)" in cell


def test_an_anthropic_reply_without_cache_tokens_is_billed_at_the_input_price(vendors, tmp_path):
    text = f"""
prompts: ["Q: <<n>> {DOCUMENT}"]
providers: [{{id: "anthropic:messages:claude-haiku-4-5", config: {{apiBaseUrl: "{vendors.url}", apiKey: sk-ant-test}}}}]
tests: [{{vars: {{n: '0'}}}}]
"""
    result, doc = _eval(tmp_path, text)
    assert result.exit_code == 0, result.output
    row = doc["results"]["results"][0]
    assert row["response"]["tokenUsage"]["prompt"] == 32 and "factcli" not in row["response"]["tokenUsage"]
    assert row["cost"] == pytest.approx(32 * HAIKU["input"] + 4 * HAIKU["output"], rel=0.01)


# ------------------------------------------------------------------ the rule, batch prices, config overrides


def test_the_one_rule_by_hand():
    haiku = pricing.table_price("claude-haiku-4-5")
    assert (haiku.input, haiku.cache_read, haiku.cache_write, haiku.output) == pytest.approx(
        (HAIKU["input"], HAIKU["read"], HAIKU["write"], HAIKU["output"]))
    usage = TokenUsage(prompt=1000, cached=600, cache_write=300, completion=50)
    full = 100 * 1e-6 + 600 * 0.1e-6 + 300 * 1.25e-6 + 50 * 5e-6  # $0.000785
    assert haiku.cost_of(usage) == pytest.approx(full)
    # batched: every price halved, cache reads and writes too (Anthropic stacks the discounts)
    assert haiku.cost_of(usage, batch=True) == pytest.approx(full / 2)
    mini = pricing.table_price("gpt-4o-mini")
    assert mini.cost_of(TokenUsage(prompt=2000, cached=1536, completion=100)) == pytest.approx(
        464 * 0.15e-6 + 1536 * 0.075e-6 + 100 * 0.6e-6)
    # a reply claiming more cache reads than it sent: nothing is billed below zero
    assert mini.cost_of(TokenUsage(prompt=10, cached=20)) == pytest.approx(20 * 0.075e-6)
    # unknown cache and batch prices: the input and output prices (no discount assumed)
    plain = pricing.Price(1e-6, 2e-6, None, "config")
    assert plain.cost_of(TokenUsage(prompt=100, cached=50, cache_write=10, completion=10), batch=True) == \
        pytest.approx(100 * 1e-6 + 10 * 2e-6)


def test_config_prices_by_hand_override_and_keep_the_tables_proportions():
    own = pricing.price_of(_provider("anthropic:messages:claude-haiku-4-5", cacheReadCost=0.05e-6,
                                     batchInputCost=0.4e-6))
    assert (own.input, own.cache_read, own.cache_write, own.batch_input, own.batch_output) == pytest.approx(
        (1e-6, 0.05e-6, 1.25e-6, 0.4e-6, 2.5e-6))
    # a price by hand keeps the table's proportions for what it does not give: cache reads at 0.1x input
    hand = pricing.price_of(_provider("anthropic:messages:claude-haiku-4-5", inputCost=2e-6, outputCost=10e-6))
    assert (hand.cache_read, hand.cache_write, hand.batch_input, hand.batch_output) == pytest.approx(
        (0.2e-6, 2.5e-6, 1e-6, 5e-6))
    # a model the table does not know: only what the config says
    custom = pricing.price_of(_provider("openai:chat:my-fine-tune", inputCost=1e-6, outputCost=1e-6,
                                        cacheWriteCost=3e-6))
    assert (custom.cache_read, custom.cache_write, custom.batch_input) == (None, 3e-6, None)


def test_a_batched_reply_is_billed_at_the_batch_price_and_says_what_it_saved():
    from factcli.report.figures import savings_text
    from factcli.scoring.grading import GraderLedger, note_grader_spend
    from factcli.types import GradingResult

    provider = _provider("openai:chat:gpt-4o-mini")
    resp = ProviderResponse(output="x", token_usage=TokenUsage(prompt=1000, cached=512, completion=200))
    pricing.bill(provider, resp, batch=True)
    full = 488 * 0.15e-6 + 512 * 0.075e-6 + 200 * 0.6e-6
    assert resp.cost == pytest.approx(full / 2)
    assert resp.metadata == {"batch": True, "batchSaved": pytest.approx(full / 2)}
    ledger = GraderLedger()
    ledger.add(provider, resp)
    result = GradingResult(True, 1.0)
    note_grader_spend(result, ledger)
    assert result.metadata["graderBatched"] == 1 and result.metadata["graderBatchSaved"] == pytest.approx(full / 2)
    assert savings_text(TokenUsage(), resp.token_usage, 1, full / 2) == (
        "Prompt cache: 51.2% of grading input tokens read from it · Batch APIs: 1 call, $0.00012 saved")
    assert full / 2 == pytest.approx(0.0001158)


def test_dry_run_and_budget_use_the_same_price_batched_or_not(tmp_path, openai_server):
    from factcli.run.calling.budget import worst_cost

    mini = _provider("openai:chat:gpt-4o-mini", max_tokens=100)
    messages = [{"role": "user", "content": "x" * 92}]  # 92 characters + 8 for the message: 100 tokens at most
    assert worst_cost(mini, messages, None) == pytest.approx(100 * 0.15e-6 + 100 * 0.6e-6)
    assert worst_cost(mini, messages, None, batch=True) == pytest.approx((100 * 0.15e-6 + 100 * 0.6e-6) / 2)
    # a Claude call may write everything it sends to the cache: its input's worst case is the write price
    haiku = _provider("anthropic:messages:claude-haiku-4-5", max_tokens=100)
    assert worst_cost(haiku, messages, None) == pytest.approx(100 * 1.25e-6 + 100 * 5e-6)

    # --dry-run: the same prices; the batch flag (the batch engineer's --batch) halves both ends
    from factcli.run.planning import estimate

    seen = {}
    original = estimate.describe

    def describe(run, batch=False):
        seen["full"], seen["batch"] = estimate.plan(run), estimate.plan(run, batch=True)
        seen["by_provider"] = estimate.plan(run, batch=lambda provider: provider.id != "openai:chat:gpt-4o-mini")
        return original(run, batch)

    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG.replace("apiBaseUrl", "max_tokens: 100, apiBaseUrl"))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(estimate, "describe", describe)
        out = runner.invoke(app, ["eval", "-c", str(cfg), "--dry-run"])
    assert out.exit_code == 0, out.output
    (model,), _ = seen["full"]
    assert model.calls == 3 and model.input_tokens > 0
    assert model.low == pytest.approx(model.input_tokens * 0.15e-6)
    assert model.high == pytest.approx(model.input_tokens * 0.15e-6 + 3 * 100 * 0.6e-6)
    (batched,), graders = seen["batch"]
    assert (batched.low, batched.high) == pytest.approx((model.low / 2, model.high / 2))
    assert graders[0].high == pytest.approx(seen["full"][1][0].high / 2)
    assert seen["by_provider"][0][0].high == pytest.approx(model.high)  # a provider not batched: full price
