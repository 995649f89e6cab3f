"""Tests for tests/fake_openai.py, through the real openai SDK, raw aiohttp and litellm."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import openai
import pytest

from fake_openai import CREATED, EMBEDDING_DIM, FakeOpenAI, Fault

USER = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture
def server():
    with FakeOpenAI() as srv:
        yield srv


_CLIENTS: dict[tuple, openai.OpenAI] = {}


@pytest.fixture(autouse=True)
def _close_clients():
    yield
    while _CLIENTS:
        _CLIENTS.popitem()[1].close()


def client(srv: FakeOpenAI, **kw) -> openai.OpenAI:
    """An openai SDK client without retries, reused within a test and closed after it
    (building one costs ~30 ms, mostly its SSL context)."""
    kw.setdefault("max_retries", 0)
    key = (srv.url, *sorted(kw.items()))
    if key not in _CLIENTS:
        _CLIENTS[key] = openai.OpenAI(base_url=srv.url, api_key="test", **kw)
    return _CLIENTS[key]


def chat(srv: FakeOpenAI, messages=USER, model="gpt-test", **kw):
    return client(srv).chat.completions.create(model=model, messages=messages, **kw)


async def _post(session: aiohttp.ClientSession, url: str, payload: dict, **kw):
    async with session.post(url, json=payload, **kw) as resp:
        return resp.status, dict(resp.headers), await resp.read()


# --------------------------------------------------------------------------- basics


def test_default_reply_is_echo_of_last_user_message(server):
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "text", "text": "part"}]},
    ]
    r = chat(server, messages=messages, model="my-model")
    assert r.choices[0].message.content == "Echo: second\npart"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == "stop"
    assert r.model == "my-model"
    assert r.object == "chat.completion"
    assert r.created == CREATED
    assert r.id.startswith("chatcmpl-")
    # identical requests -> identical ids (golden-file friendly)
    assert chat(server, messages=messages, model="my-model").id == r.id


def test_url_port_and_paths_without_v1_prefix(server):
    assert server.url == f"http://127.0.0.1:{server.port}/v1"

    async def go():
        async with aiohttp.ClientSession() as s:
            status, _, body = await _post(s, server.root_url + "/chat/completions", {"model": "m", "messages": USER})
            assert status == 200
            assert json.loads(body)["choices"][0]["message"]["content"] == "Echo: " + USER[0]["content"]
            async with s.get(server.root_url + "/models") as resp:
                assert resp.status == 200
            async with s.get(server.url + "/nope") as resp:
                assert resp.status == 404
                assert "error" in await resp.json()

    asyncio.run(go())


def test_rules_first_match_wins_and_callable(server):
    with FakeOpenAI(rules=[(r"capital of (\w+)", "Paris"), (r"capital", "never used")]) as srv:
        assert chat(srv).choices[0].message.content == "Paris"
        srv.add_rule(r"(?i)^shout (.*)", lambda req: req["messages"][-1]["content"].upper())
        r = chat(srv, messages=[{"role": "user", "content": "shout hello"}])
        assert r.choices[0].message.content == "SHOUT HELLO"
        # only the LAST user message is searched
        msgs = [{"role": "user", "content": "capital of Peru"}, {"role": "user", "content": "other"}]
        assert chat(srv, messages=msgs).choices[0].message.content == "Echo: other"


def test_model_restricted_rule(server):
    server.add_rule("capital", "from model-a", model="model-a")
    server.add_rule("capital", "from anyone")
    assert chat(server, model="model-a").choices[0].message.content == "from model-a"
    assert chat(server, model="model-b").choices[0].message.content == "from anyone"
    ids = [m.id for m in client(server).models.list()]
    assert "model-a" in ids and "model-b" in ids


def test_usage_counts_words(server):
    server.add_rule("capital", "Paris is the capital")
    messages = [{"role": "system", "content": "You are terse."}, *USER]  # 3 + 6 words
    r = chat(server, messages=messages)
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (9, 4, 13)


def test_dict_reply_finish_reason_tool_calls_and_max_tokens(server):
    server.enqueue({"content": "cut short", "finish_reason": "length"})
    r = chat(server)
    assert (r.choices[0].message.content, r.choices[0].finish_reason) == ("cut short", "length")

    server.enqueue({"tool_calls": [{"name": "lookup", "arguments": {"q": "France"}}]})
    r = chat(server)
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"q": "France"}

    server.enqueue("one two three four")
    r = chat(server, max_tokens=2)
    assert (r.choices[0].message.content, r.choices[0].finish_reason) == ("one two", "length")


def test_logprobs(server):
    server.enqueue("Paris is nice")
    r = chat(server, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert [t.token for t in content] == ["Paris", " is", " nice"]
    assert all(t.logprob == pytest.approx(-0.1) for t in content)
    assert len(content[0].top_logprobs) == 2
    assert chat(server).choices[0].logprobs is None


def test_stream_is_rejected(server):
    with pytest.raises(openai.BadRequestError):
        chat(server, stream=True)


def test_legacy_completions(server):
    server.add_rule("^Q:", "A: yes")
    r = client(server).completions.create(model="text-model", prompt="Q: is it?")
    assert r.choices[0].text == "A: yes"
    assert r.model == "text-model"
    assert r.usage.prompt_tokens == 3 and r.usage.completion_tokens == 2
    r = client(server).completions.create(model="text-model", prompt=["hi", "Q: x"])
    assert [c.text for c in r.choices] == ["Echo: hi", "A: yes"]


# --------------------------------------------------------------------------- queue and faults


def test_queue_is_fifo_and_beats_rules(server):
    server.add_rule("capital", "rule")
    server.enqueue("first", Fault("status", status=503))
    server.enqueue("third")
    assert chat(server).choices[0].message.content == "first"
    with pytest.raises(openai.APIStatusError) as exc:
        chat(server)
    assert exc.value.status_code == 503
    assert chat(server).choices[0].message.content == "third"
    assert chat(server).choices[0].message.content == "rule"
    assert server.queue_length == 0


def test_429_with_retry_after_visible_to_client(server):
    server.enqueue_fault(429, retry_after="1")
    with pytest.raises(openai.RateLimitError) as exc:
        chat(server)
    err = exc.value
    assert err.status_code == 429
    assert err.response.headers["retry-after"] == "1"
    assert err.body["code"] == "rate_limit_exceeded"  # SDK exposes the inner "error" object
    assert chat(server).choices[0].message.content.startswith("Echo:")  # one-shot


def test_500_and_custom_body(server):
    server.enqueue_fault(500)
    with pytest.raises(openai.InternalServerError) as exc:
        chat(server)
    assert exc.value.status_code == 500
    assert "Retry-After" not in exc.value.response.headers

    server.enqueue_fault(502, body="<html>bad gateway</html>", headers={"x-should-retry": "false"})

    async def go():
        async with aiohttp.ClientSession() as s:
            return await _post(s, server.url + "/chat/completions", {"model": "m", "messages": USER})

    status, headers, body = asyncio.run(go())
    assert (status, body, headers["x-should-retry"]) == (502, b"<html>bad gateway</html>", "false")


def test_fault_times_and_sdk_retries_honour_retry_after(server):
    server.enqueue_fault(429, retry_after="0.01", times=2)  # the SDK sleeps Retry-After if 0 < it <= 60
    r = client(server, max_retries=2).chat.completions.create(model="m", messages=USER)
    assert r.choices[0].message.content.startswith("Echo:")
    assert server.request_count == 3
    assert [q["headers"].get("x-stainless-retry-count") for q in server.requests] == ["0", "1", "2"]


def test_malformed_json(server):
    server.enqueue_malformed()
    with pytest.raises(json.JSONDecodeError):  # the openai SDK lets the decode error through
        chat(server)

    server.enqueue_malformed()

    async def go():
        async with aiohttp.ClientSession() as s:
            async with s.post(server.url + "/chat/completions", json={"model": "m", "messages": USER}) as resp:
                assert resp.status == 200
                with pytest.raises(json.JSONDecodeError):
                    await resp.json()

    asyncio.run(go())


def test_dropped_connection_raises_connection_error(server):
    server.enqueue_drop()
    with pytest.raises(openai.APIConnectionError):
        chat(server)
    server.enqueue_drop()

    async def go():
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.ClientConnectionError):
                await _post(s, server.url + "/chat/completions", {"model": "m", "messages": USER})
            # the server is still fine afterwards
            status, _, _ = await _post(s, server.url + "/chat/completions", {"model": "m", "messages": USER})
            assert status == 200

    asyncio.run(go())


def test_hang_triggers_client_timeout(server):
    server.enqueue_hang(30)
    with pytest.raises(openai.APITimeoutError):
        client(server, timeout=0.2).chat.completions.create(model="m", messages=USER)
    server.enqueue_hang(30)

    async def go():
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.2)) as s:
            with pytest.raises(asyncio.TimeoutError):
                await _post(s, server.url + "/chat/completions", {"model": "m", "messages": USER})

    asyncio.run(go())
    assert chat(server).choices[0].message.content.startswith("Echo:")


def test_hang_then_reply_and_stop_wakes_hanging_request():
    srv = FakeOpenAI().start()
    try:
        srv.enqueue_hang(0.05)
        assert chat(srv).choices[0].message.content.startswith("Echo:")  # short hang, then normal reply
        srv.enqueue_hang(60)
        outcome = []
        t = threading.Thread(target=lambda: outcome.append(_try(lambda: chat(srv))))
        t.start()
        deadline = time.monotonic() + 5
        while srv.request_count < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        srv.stop()  # must not wait the 60 s out
    t.join(10)
    assert not t.is_alive() and outcome


def _try(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return exc


def test_fault_rate_is_deterministic(server):
    def run() -> list[int]:
        server.set_fault_rate(0.5, kinds=["429", "500", "503-retry-after"], seed=42)

        async def go():
            async with aiohttp.ClientSession() as s:
                out = []
                for _ in range(20):
                    status, headers, _ = await _post(s, server.url + "/chat/completions", {"model": "m", "messages": USER})
                    out.append(status)
                    if status == 503:
                        assert headers["Retry-After"] == "1"
                return out

        return asyncio.run(go())

    first, second = run(), run()
    assert first == second
    assert 200 in first and set(first) - {200}
    assert set(first) <= {200, 429, 500, 503}
    server.set_fault_rate(0)
    assert chat(server).choices[0].message.content.startswith("Echo:")
    with pytest.raises(ValueError):
        server.set_fault_rate(0.1, kinds=["teapot"])


def test_latency_is_applied(server):
    server.latency = 0.05
    start = time.monotonic()
    chat(server)
    assert time.monotonic() - start >= 0.05  # lower bound only
    server.latency = 0


# --------------------------------------------------------------------------- transport


def test_keep_alive_two_requests_on_one_connection(server):
    created, reused = [], []

    async def on_create(session, ctx, params):
        created.append(1)

    async def on_reuse(session, ctx, params):
        reused.append(1)

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(on_create)
    trace.on_connection_reuseconn.append(on_reuse)

    async def go():
        connector = aiohttp.TCPConnector(limit=1)
        async with aiohttp.ClientSession(connector=connector, trace_configs=[trace]) as s:
            for _ in range(2):
                status, headers, _ = await _post(s, server.url + "/chat/completions", {"model": "m", "messages": USER})
                assert status == 200
                assert headers.get("Connection", "").lower() != "close"

    asyncio.run(go())
    assert (len(created), len(reused)) == (1, 1)
    assert server.nodelay_seen == [True, True]


# --------------------------------------------------------------------------- embeddings


def test_embeddings_deterministic_and_rule_override(server):
    c = client(server)
    a1 = c.embeddings.create(model="emb", input=["alpha", "beta"]).data  # SDK asks for base64
    a2 = c.embeddings.create(model="emb", input="alpha").data
    assert a1[0].embedding == a2[0].embedding
    assert a1[0].embedding != a1[1].embedding
    assert len(a1[0].embedding) == EMBEDDING_DIM
    assert math.isclose(sum(v * v for v in a1[0].embedding), 1.0, rel_tol=1e-5)

    async def go():
        async with aiohttp.ClientSession() as s:
            _, _, body = await _post(s, server.url + "/embeddings", {"model": "emb", "input": "alpha"})
            return json.loads(body)

    raw = asyncio.run(go())
    assert raw["data"][0]["embedding"] == pytest.approx(a1[0].embedding, abs=1e-6)
    assert raw["usage"]["prompt_tokens"] == 1

    server.add_rule("alpha", [1.0, 0.0, 0.0])  # vector reply = embedding-only rule
    assert c.embeddings.create(model="emb", input="alpha").data[0].embedding == [1.0, 0.0, 0.0]
    assert chat(server, messages=[{"role": "user", "content": "alpha"}]).choices[0].message.content == "Echo: alpha"
    assert len(c.embeddings.create(model="emb", input="gamma", dimensions=3).data[0].embedding) == 3


def test_embeddings_base64_matches_floats(server):
    async def go(fmt):
        async with aiohttp.ClientSession() as s:
            payload = {"model": "emb", "input": "x", "encoding_format": fmt}
            _, _, body = await _post(s, server.url + "/embeddings", payload)
            return json.loads(body)["data"][0]["embedding"]

    floats, b64 = asyncio.run(go("float")), asyncio.run(go("base64"))
    decoded = struct.unpack(f"<{EMBEDDING_DIM}f", base64.b64decode(b64))
    assert list(decoded) == pytest.approx(floats, abs=1e-6)


# --------------------------------------------------------------------------- request log


def test_request_log_and_reset(server):
    server.enqueue("x", "y")
    chat(server, model="logged-model")
    log = server.requests
    assert server.request_count == 1 and len(log) == 1
    entry = log[0]
    assert entry["path"] == "/v1/chat/completions"
    assert entry["method"] == "POST"
    assert entry["json"]["model"] == "logged-model"
    assert entry["headers"]["Authorization"] == "Bearer test"
    server.add_rule("capital", "kept")
    server.reset()
    assert server.request_count == 0 and server.requests == [] and server.queue_length == 0
    assert chat(server).choices[0].message.content == "kept"  # rules survive reset


# --------------------------------------------------------------------------- litellm and CLI


def test_litellm_completion(server):
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    server.add_rule("capital of France", "Paris")
    r = litellm.completion(
        model="openai/some-model",
        api_base=server.url,
        api_key="test",
        messages=USER,
        num_retries=0,
    )
    assert r.choices[0].message.content == "Paris"
    assert server.requests[-1]["json"]["model"] == "some-model"

    server.enqueue_fault(429, retry_after="7")
    with pytest.raises(litellm.RateLimitError) as exc:
        litellm.completion(
            model="openai/some-model", api_base=server.url, api_key="test", messages=USER, num_retries=0
        )
    assert exc.value.status_code == 429
    # litellm's e.response is a stub without headers; the real ones are here:
    assert exc.value.litellm_response_headers["retry-after"] == "7"


def test_cli_runs_in_foreground_and_stops_on_sigterm(tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([["capital", "Paris"], ["hello", "hi", "only-this-model"]]))
    script = Path(__file__).with_name("fake_openai.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), "--port", "0", "--rules", str(rules), "--latency", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        c = openai.OpenAI(base_url=url, api_key="test", max_retries=0, timeout=10)
        _CLIENTS[("cli",)] = c
        r = c.chat.completions.create(model="m", messages=USER)
        assert r.choices[0].message.content == "Paris"
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
        assert r.choices[0].message.content == "Echo: hello"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
