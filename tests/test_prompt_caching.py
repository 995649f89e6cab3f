"""Prompt caching (issue 50 item 3): the vendors' caches as the stand-ins keep them, the rule that marks a
grading step's static messages for Anthropic (providers/prompt_cache.py), and facts-grounding on one long
document with many spans against the Anthropic stand-in through litellm: the input spend, priced by hand
(full-price input, writes at 1.25x, reads at 0.1x), down by more than 60% from `cache: false`."""

import asyncio
import json
import re

import aiohttp
import pytest
from conftest import write
from fake_vendors import FakeVendors, instance
from prompt_caches import AnthropicCache, OpenAIPrefixCache
from typer.testing import CliRunner

from factcli.cli import app
from factcli.providers import prompt_cache

runner = CliRunner()
SONNET = "claude-sonnet-4-5"


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


# ---------------------------------------------------------------- the stand-ins' caches


def test_openai_caches_a_prefix_of_1024_tokens_or_more_seen_before_in_128_token_steps():
    cache = OpenAIPrefixCache()
    short = [{"role": "system", "content": words(1000)}, {"role": "user", "content": "q1"}]
    assert cache.cached_tokens("gpt-4o", short) == 0
    assert cache.cached_tokens("gpt-4o", short) == 0  # 1,001 tokens: below 1,024, never cached
    long = [{"role": "system", "content": words(1300)}, {"role": "user", "content": "q1"}]
    assert cache.cached_tokens("gpt-4o", long) == 0  # first sight
    assert cache.cached_tokens("gpt-4o", long) == 1280  # 1,301 tokens: 1,024 + 2 x 128
    other_question = [{"role": "system", "content": words(1300)}, {"role": "user", "content": "q2 and more"}]
    assert cache.cached_tokens("gpt-4o", other_question) == 1280
    assert cache.cached_tokens("gpt-4o-mini", long) == 0  # another model, another cache
    shorter = [{"role": "system", "content": words(1100)}, {"role": "user", "content": "q3"}]
    assert cache.cached_tokens("gpt-4o", shorter) == 1024  # its first 1,100 tokens are the long one's: 1,024
    moved = [{"role": "user", "content": words(1300)}, {"role": "user", "content": "q1"}]
    assert cache.cached_tokens("gpt-4o", moved) == 0  # the same words under another role: another prefix
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    assert cache.cached_tokens("gpt-4o", long, schema) == 0  # another schema ahead of the same messages
    assert cache.cached_tokens("gpt-4o", long, schema) == 1280


def _body(model: str, system, *blocks, marks=()) -> dict:
    content = [{"type": "text", "text": text, **({"cache_control": {"type": "ephemeral"}} if i in marks else {})}
               for i, text in enumerate(blocks)]
    return {"model": model, "max_tokens": 10, "system": system, "messages": [{"role": "user", "content": content}]}


def _ask(cache: AnthropicCache, body: dict):
    got = cache.usage(body)
    if isinstance(got, str):
        return got
    usage, written = got
    cache.keep(usage, written)
    return usage


def test_anthropic_caches_a_marked_prefix_only_above_the_models_minimum():
    cache = AnthropicCache()
    short = _body(SONNET, "rules", words(1000), "claim one", marks=(0,))  # 1,001 tokens up to the mark
    assert _ask(cache, short) == {"input_tokens": 1003, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    assert _ask(cache, short)["cache_read_input_tokens"] == 0  # never written, silently
    long = _body(SONNET, "rules", words(1500), "claim one", marks=(0,))
    assert _ask(cache, long) == {"input_tokens": 2, "cache_creation_input_tokens": 1501, "cache_read_input_tokens": 0}
    other = _body(SONNET, "rules", words(1500), "claim two is longer", marks=(0,))
    assert _ask(cache, other) == {"input_tokens": 4, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1501}
    unmarked = _body(SONNET, "rules", words(1500), "claim two is longer")
    assert _ask(cache, unmarked)["cache_read_input_tokens"] == 0  # no breakpoint: nothing looked up
    haiku = _body("claude-haiku-4-5", "rules", words(3000), "claim", marks=(0,))  # Haiku 4.5: 4,096
    assert _ask(cache, haiku)["cache_creation_input_tokens"] == 0
    assert _ask(cache, haiku)["cache_read_input_tokens"] == 0
    assert _ask(cache, _body(SONNET, "rules", words(1500), "claim one", marks=(0,)))["cache_read_input_tokens"] == 1501
    assert _ask(cache, _body("claude-opus-4-1", "rules", words(1500), "claim one", marks=(0,)))[
        "cache_read_input_tokens"] == 0  # another model


def test_anthropic_breakpoints_entries_expire_and_parallel_requests_miss():
    now = [0.0]
    cache = AnthropicCache(clock=lambda: now[0])
    five = _body(SONNET, "rules", *[words(300, t) for t in "abcde"], "claim", marks=(0, 1, 2, 3, 4))
    assert cache.usage(five) == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    two = _body(SONNET, "rules", words(1200, "a"), words(1200, "b"), "claim", marks=(0, 1))
    assert _ask(cache, two) == {"input_tokens": 1, "cache_creation_input_tokens": 2401, "cache_read_input_tokens": 0}
    changed = _body(SONNET, "rules", words(1200, "a"), words(1200, "c"), "claim", marks=(0, 1))
    # the first breakpoint's prefix is read, the second one written
    assert _ask(cache, changed) == {"input_tokens": 1, "cache_creation_input_tokens": 1200,
                                    "cache_read_input_tokens": 1201}
    now[0] += 299
    assert _ask(cache, two)["cache_read_input_tokens"] == 2401  # a read keeps the entry 5 more minutes
    now[0] += 299
    assert _ask(cache, two)["cache_read_input_tokens"] == 2401
    now[0] += 301
    assert _ask(cache, two)["cache_read_input_tokens"] == 0  # expired: written again
    # two requests sent at once: the entry is there only once the first reply is sent, so both write it
    fresh = AnthropicCache()
    body = _body(SONNET, "rules", words(1500, "z"), "claim", marks=(0,))
    first, second = fresh.usage(body), fresh.usage(body)
    fresh.keep(*first)
    fresh.keep(*second)
    assert [u["cache_creation_input_tokens"] for u in fresh.usages] == [1501, 1501]


def test_the_stand_ins_report_their_caches_over_http():
    async def post(url, body, headers):
        async with aiohttp.ClientSession() as session:
            async with session.post(url, json=body, headers=headers) as resp:
                return resp.status, await resp.json()

    from fake_openai import FakeOpenAI

    with FakeOpenAI() as openai_server, FakeVendors() as vendors:
        chat = {"model": "gpt-4o", "messages": [{"role": "system", "content": words(1200)},
                                                {"role": "user", "content": "q"}]}
        got = [asyncio.run(post(openai_server.url + "/chat/completions", chat, {}))[1]["usage"] for _ in range(2)]
        assert [u["prompt_tokens_details"]["cached_tokens"] for u in got] == [0, 1152]
        assert got[1]["prompt_tokens"] == 1201  # every token still counted
        body = _body(SONNET, "rules", words(1500), "claim", marks=(0,))
        replies = [asyncio.run(post(vendors.url + "/v1/messages", body, {}))[1]["usage"] for _ in range(2)]
        assert [(u["cache_creation_input_tokens"], u["cache_read_input_tokens"], u["input_tokens"]) for u in replies] \
            == [(1501, 0, 1), (0, 1501, 1)]
        body = _body(SONNET, "rules", *[words(300, t) for t in "abcde"], "claim", marks=(0, 1, 2, 3, 4))
        status, error = asyncio.run(post(vendors.url + "/v1/messages", body, {}))
        assert status == 400 and "maximum of 4 blocks" in error["error"]["message"]


# ---------------------------------------------------------------- the marking rule


def test_the_static_part_is_marked_for_claude_only_when_long_enough():
    doc = words(1200)
    messages = [{"role": "system", "content": "Judge the claim."}, {"role": "user", "content": doc},
                {"role": "user", "content": "claim"}]
    marked = prompt_cache.marked(messages, "anthropic/" + SONNET, 2)
    assert marked[1]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in marked[0]
    assert "cache_control" not in messages[1]  # the step's own messages are left as they were
    assert prompt_cache.marked(messages, "anthropic/" + SONNET, 2, {"cache": False}) is messages
    assert prompt_cache.marked(messages, "openai/gpt-4o", 2) is messages  # OpenAI caches by itself
    assert prompt_cache.marked(messages, "anthropic/claude-haiku-4-5", 2) is messages  # below its 4,096
    assert prompt_cache.marked(messages, "anthropic/" + SONNET, 3) is messages  # nothing after it varies
    assert prompt_cache.marked(messages, "anthropic/" + SONNET, 0) is messages
    short = [{"role": "system", "content": "Judge."}, {"role": "user", "content": words(100)},
             {"role": "user", "content": "claim"}]
    assert prompt_cache.marked(short, "anthropic/" + SONNET, 2) is short
    blocks = [{"role": "system", "content": [{"type": "text", "text": doc}]}, {"role": "user", "content": "claim"}]
    assert prompt_cache.marked(blocks, "bedrock/anthropic.claude-sonnet-4-5", 1)[0]["content"][0]["cache_control"]
    full = [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}] * 4},
            {"role": "user", "content": doc}, {"role": "user", "content": "claim"}]
    assert prompt_cache.marked(full, "anthropic/" + SONNET, 2) is full  # the 4 breakpoints are taken
    assert prompt_cache.worth_warming(messages, 2) and not prompt_cache.worth_warming(messages, 2, {"cache": False})
    assert not prompt_cache.worth_warming(short, 2) and not prompt_cache.worth_warming(messages, 0)
    assert [prompt_cache.minimum(m) for m in ("claude-opus-4-5-20251101", "claude-3-5-haiku-latest",
                                              "claude-3-haiku-20240307", "claude-sonnet-4-5", "claude-opus-4-1",
                                              "claude-haiku-4-5")] == [4096, 2048, 2048, 1024, 1024, 4096]


# ---------------------------------------------------------------- facts-grounding, one long document


SENTENCE = "Station {i} on the Varn river recorded {n} millimetres of rain in week {i} of the survey."
SPANS = 30


def document() -> tuple[str, str]:
    """A report of 120 sentences (16 words each: 1,920) and an answer made of 30 of them."""
    sentences = [SENTENCE.format(i=i, n=i * 7 % 97) for i in range(120)]
    return " ".join(sentences), " ".join(sentences[i * 4] for i in range(SPANS))


def span_judge(body: dict, schema: dict):
    """Every span is Accurate, with itself (a sentence of the report) as the evidence."""
    if "final_answer" not in (schema.get("properties") or {}):
        return instance(schema)
    last = body["messages"][-1]["content"]
    text = last[-1]["text"] if isinstance(last, list) else last
    span = re.search(r"<span>\n(.*?)\n</span>", text, re.S).group(1)
    return {"reasoning": "The report states it.", "evidence": span, "final_answer": "Accurate"}


CONFIG = """
prompts: ["{{answer}}"]
providers: [echo]
tests:
  - vars:
      request: Summarise the rainfall survey.
      context: "%(doc)s"
      answer: "%(answer)s"
    assert:
      - type: facts-grounding
        provider: {id: "anthropic:messages:%(model)s", config: {apiBaseUrl: "%(url)s", apiKey: sk-ant-test%(cache)s}}
        config: {template: span_level}
"""


def grade(vendors, tmp_path, cache: bool) -> list[dict]:
    """One facts-grounding row against the stand-in; the bodies and usages it got, in order."""
    vendors.requests.clear()
    vendors.anthropic_cache = AnthropicCache()
    doc, answer = document()
    cfg = write(tmp_path / f"c-{cache}.yaml", CONFIG % {"doc": doc, "answer": answer, "url": vendors.url,
                                                        "model": SONNET, "cache": "" if cache else ", cache: false"})
    out = tmp_path / f"r-{cache}.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-cache", "--no-progress-bar",
                                 "--no-table", "-j", "4"])
    assert "Traceback" not in result.output, result.output
    row = json.loads(out.read_text())["results"]["results"][0]
    comp = row["gradingResult"]["componentResults"][0]
    assert not comp["metadata"].get("graderError") and comp["pass"], comp["reason"]
    assert len(comp["metadata"]["claims"]) == SPANS
    grade.tokens = row["gradingResult"]["tokensUsed"]
    grade.output, grade.doc = result.output, json.loads(out.read_text())
    return vendors.by_path("/v1/messages")


def _block_words(body: dict) -> tuple[int, int]:
    """(tokens up to and with the marked block, tokens after it) of a request, counted by hand: 0 marked when
    it has no mark."""
    blocks = [b["text"] for b in body.get("system") or []]
    marked_at = None
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else [{"text": content}]:
            blocks.append(block["text"])
            if block.get("cache_control"):
                marked_at = len(blocks)
    counts = [len(text.split()) for text in blocks]
    upto = sum(counts[:marked_at]) if marked_at else 0
    return upto, sum(counts) - upto


@pytest.fixture
def vendors():
    with FakeVendors(judge=span_judge) as server:
        server.cache_latency = 0.02  # calls sent at once all miss: only a warmed cache is read
        yield server


def test_facts_grounding_on_one_long_document_spends_under_40_percent_of_the_uncached_input(vendors, tmp_path,
                                                                                         remote_prices):
    plain = grade(vendors, tmp_path, cache=False)
    plain_usage, plain_tokens = list(vendors.anthropic_cache.usages), grade.tokens
    cached = grade(vendors, tmp_path, cache=True)
    cached_usage, cached_tokens = list(vendors.anthropic_cache.usages), grade.tokens
    spans = [b for b in cached if "<span>" in json.dumps(b["messages"][-1])]
    assert len(spans) == SPANS and len(cached) == len(plain) == SPANS + 1  # + the eligibility call
    assert not any("cache_control" in json.dumps(b) for b in plain)  # cache: false: no marks
    # every span's call marks the same static part: the instructions, the request, the report, the answer
    static = {_block_words(b)[0] for b in spans}
    assert len(static) == 1
    s = static.pop()
    assert s > 1920 + 16 * SPANS  # the report and the answer are in it
    tails = sorted(_block_words(b)[1] for b in spans)

    def spend(usage: dict) -> float:  # the input's price in units of one full-price token
        return usage["input_tokens"] + 1.25 * usage["cache_creation_input_tokens"] + 0.1 * usage[
            "cache_read_input_tokens"]

    plain_spend, cached_spend = sum(map(spend, plain_usage)), sum(map(spend, cached_usage))
    other = [spend(u) for u, b in zip(cached_usage, cached) if "<span>" not in json.dumps(b["messages"][-1])]
    # by hand: without marks every call pays its whole prompt; with them the first span writes the static
    # part (1.25x), the other 29 read it (0.1x), and each pays its own span at full price
    assert plain_spend == SPANS * s + sum(tails) + sum(other)
    assert cached_spend == pytest.approx(1.25 * s + 0.1 * (SPANS - 1) * s + sum(tails) + sum(other))
    assert sorted(u["cache_creation_input_tokens"] for u in cached_usage).count(s) == 1
    assert sorted(u["cache_read_input_tokens"] for u in cached_usage).count(s) == SPANS - 1
    assert cached_spend <= 0.4 * plain_spend, (cached_spend, plain_spend)
    # the tokens billed are the same ones, only their price differs; the row shows them, the reads as cached
    assert sum(sum(u.values()) for u in plain_usage) == sum(sum(u.values()) for u in cached_usage)
    assert plain_tokens["prompt"] == cached_tokens["prompt"] == sum(sum(u.values()) for u in cached_usage)
    assert plain_tokens["cached"] == 0 and cached_tokens["cached"] == (SPANS - 1) * s
    # priced and shown: the grader's cost is the stand-in's usage at claude-sonnet-4-5's prices (litellm's
    # table: $3 / M input, $0.30 / M cache reads, $3.75 / M cache writes, $15 / M output), by hand, within 1%
    def dollars(usages: list[dict], completion: int) -> float:
        return sum(u["input_tokens"] * 3e-6 + u["cache_read_input_tokens"] * 3e-7
                   + u["cache_creation_input_tokens"] * 3.75e-6 for u in usages) + completion * 1.5e-5

    assert grade.doc["factcli"]["cost"]["grader"] == pytest.approx(dollars(cached_usage, cached_tokens["completion"]),
                                                                   rel=0.01)
    read, written = (SPANS - 1) * s, s
    share = f"{100 * read / cached_tokens['prompt']:.1f}%"
    assert f"Prompt cache: {share} of grading input tokens read from it, {written:,} written" in grade.output


def test_the_first_span_warms_the_cache_the_others_sent_at_once_would_all_miss(vendors, tmp_path, monkeypatch):
    monkeypatch.setattr(prompt_cache, "worth_warming", lambda messages, static, config: False)
    grade(vendors, tmp_path, cache=True)
    writes = [u for u in vendors.anthropic_cache.usages if u["cache_creation_input_tokens"]]
    # -j 4: the first four spans' calls go at once, and each writes the entry (the warmed run: one)
    assert len(writes) >= 2


def test_openai_caches_the_static_first_layout_by_itself(fake_openai, tmp_path):
    def judge(body):
        if "<span>" not in body["messages"][-1]["content"]:
            return 'Analysis: fine.\n```json\n{"Instruction Following": "No Issues"}\n```'
        span = re.search(r"<span>\n(.*?)\n</span>", body["messages"][-1]["content"], re.S).group(1)
        return f"Evidence: {span}\nReasoning: stated.\nFinal Answer: Accurate"

    fake_openai.add_rule(".", judge)
    doc, answer = document()
    cfg = write(tmp_path / "c.yaml", CONFIG.replace("anthropic:messages:%(model)s", "openai:chat:gpt-4o") % {
        "doc": doc, "answer": answer, "url": fake_openai.url, "model": "", "cache": ""})
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-cache", "--no-progress-bar",
                                 "--no-table", "-j", "4"])
    assert "Traceback" not in result.output, result.output
    row = json.loads(out.read_text())["results"]["results"][0]
    assert row["gradingResult"]["componentResults"][0]["pass"]
    spans = [r["json"] for r in fake_openai.requests if "<span>" in json.dumps(r["json"]["messages"][-1])]
    assert len(spans) == SPANS and not any("cache_control" in json.dumps(b) for b in spans)  # nothing marked
    # the static part (the report alone is 1,920 tokens) is read by the 29 spans after the first, in 128s
    hits = fake_openai.prefix_cache.hits
    assert sorted(hits)[0] == 0 and sum(1 for h in hits if h >= 1920) == SPANS - 1
    assert row["gradingResult"]["tokensUsed"]["cached"] == sum(hits)
