"""Per-endpoint limits (maxConcurrency, rpm, tpm) and adaptive concurrency, against the fake server's
rate limit (429 beyond N requests per window, with and without Retry-After). Correctness only: the
time these take is measured in benchmarks/ratelimit.py."""

import asyncio
import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.run.calling.limits import Limiter, Limiters, estimate_tokens

runner = CliRunner()


def _config(n: int, provider_config: str = "", columns: int = 1) -> str:
    providers = "".join(f'  - {{id: "openai:chat:m", label: "col{c}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"'
                        f'{", " + provider_config if provider_config else ""}}}}}\n' for c in range(columns))
    tests = "".join(f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q: {i}'}}]\n" for i in range(n))
    return f'prompts: ["Q: {{{{n}}}}"]\nproviders:\n{providers}tests:\n{tests}'


def _run(tmp_path, config: str, *args: str):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", config)), "-o", str(out),
                                 "--no-cache", "--no-progress-bar", "--no-table", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result, json.loads(out.read_text())


@pytest.fixture
def limited(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("FACTCLI_BACKOFF_MS", "50")
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "20")
    return fake_openai


def test_rpm_at_the_servers_limit_is_never_throttled(limited, tmp_path):
    limited.set_rate_limit(5, per_seconds=1.0)
    result, doc = _run(tmp_path, _config(12, "rpm: 300"), "-j", "16")  # 300 rpm = 5 per second
    assert result.exit_code == 0, result.output
    assert limited.rate_limited == 0
    assert len(doc["results"]["results"]) == 12 and "throttling" not in doc["factcli"]


def test_columns_on_one_endpoint_share_its_limit(limited, tmp_path):
    limited.set_rate_limit(5, per_seconds=1.0)
    result, doc = _run(tmp_path, _config(6, "rpm: 300", columns=2), "-j", "16")
    assert result.exit_code == 0, result.output
    assert limited.rate_limited == 0 and len(doc["results"]["results"]) == 12


@pytest.mark.parametrize("retry_after", [None, "1"])
def test_without_rpm_adaptive_concurrency_finishes_every_row(limited, tmp_path, retry_after):
    limited.set_rate_limit(5, per_seconds=0.5, retry_after=retry_after)
    result, doc = _run(tmp_path, _config(20), "-j", "16")
    assert result.exit_code == 0, result.output  # every row PASS: no row lost to the 429s
    rows = doc["results"]["results"]
    assert sorted(r["testIdx"] for r in rows) == list(range(20))
    assert limited.rate_limited > 0
    throttled = doc["factcli"]["throttling"]["openai:chat:m"]
    assert throttled["throttled"] > 0 and 1 <= throttled["lowestLimit"] < 16 and throttled["limit"] == 16
    assert "Throttled: openai:chat:m asked to slow down" in result.output


def test_limits_are_not_part_of_the_cache_key(limited, tmp_path):
    cfg = tmp_path / "c.yaml"
    for provider_config in ("", "rpm: 6000, maxConcurrency: 2"):
        write(cfg, _config(3, provider_config))
        assert runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table"]).exit_code == 0
    assert len(limited.requests) == 3  # the second run was served from the cache


@pytest.mark.parametrize("value, message", [
    ("rpm: -5", "config.rpm: expected a positive number, got -5"),
    ("maxConcurrency: 2.5", "config.maxConcurrency: expected a positive whole number, got 2.5"),
    ("tpm: fast", "config.tpm: expected a positive number, got 'fast'"),
])
def test_bad_limits_are_config_errors(limited, tmp_path, value, message):
    result = runner.invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", _config(1, value)))])
    assert result.exit_code == 1 and message in result.output, result.output
    assert limited.requests == []


def test_the_limiter_halves_on_throttling_and_grows_back_by_one_per_round(monkeypatch):
    import factcli.run.calling.limits as limits

    clock = [1000.0]
    monkeypatch.setattr(limits.clock, "now", lambda: clock[0])  # the run's clock (run/calling/clock.py)

    async def scenario():
        lim = Limiter(8)
        for _ in range(6):  # six calls started in the last second
            await lim._space(0)
        await lim.throttled()
        assert lim.limit == 4 and lim.stats.lowest_limit == 4
        assert lim.rate == 3.0  # half the rate of the last second's starts
        await lim.throttled()  # answered together with the first: one cut
        assert lim.limit == 4 and lim.rate == 3.0 and lim.stats.throttled == 2
        for _ in range(3):
            clock[0] += 1.5
            await lim.throttled()
        assert lim.limit == 1 and lim.rate == 0.5  # never below 1 call in flight, nor 0.5 calls a second
        for _ in range(3):  # 1 -> 2 -> 2.5 -> 2.9: about one more per round of `limit` successes
            await lim.succeeded()
        assert 2.8 < lim.limit < 3
        for _ in range(100):
            await lim.succeeded()
        assert lim.limit == 8  # never above the ceiling
        assert lim.rate > 10  # the pace grows back too

    asyncio.run(scenario())


def test_calls_in_flight_never_exceed_the_limit():
    async def peak(lim: Limiter, calls: int) -> int:
        seen = 0

        async def call():
            nonlocal seen
            async with lim.slot():
                seen = max(seen, lim.in_flight)
                await asyncio.sleep(0.001)

        await asyncio.gather(*(call() for _ in range(calls)))
        return seen

    async def scenario():
        lim = Limiter(3)
        before = await peak(lim, 20)
        await lim.throttled()  # limit 1
        return before, await peak(lim, 5)

    assert asyncio.run(scenario()) == (3, 1)


def test_rate_spacing_reserves_evenly_spaced_starts(monkeypatch):
    """600 rpm: one start per 0.1 s (with the 5% margin), the first at once; tpm spaces by tokens."""
    import factcli.run.calling.limits as limits

    clock = [100.0]
    monkeypatch.setattr(limits.clock, "now", lambda: clock[0])  # the run's clock (run/calling/clock.py)
    slept = []

    async def fake_sleep(seconds):
        slept.append(round(seconds, 6))

    monkeypatch.setattr(limits.asyncio, "sleep", fake_sleep)

    async def scenario(lim, tokens=0):
        for _ in range(3):
            await lim._space(tokens)

    asyncio.run(scenario(Limiter(4, rpm=600)))
    assert slept == [0.105, 0.21]  # no burst: the 2nd waits one gap, the 3rd two (5% margin)
    slept.clear()
    asyncio.run(scenario(Limiter(4, tpm=60_000), tokens=500))  # 500 tokens at 1,000/s: 0.5 s apart
    assert slept == [0.525, 1.05]


def test_endpoints_and_token_estimates():
    class P:
        def __init__(self, pid, config):
            self.id, self.config = pid, config

    limiters = Limiters(default_ceiling=8)
    a = limiters.for_provider(P("openai:chat:m", {"apiBaseUrl": "http://x", "rpm": 60}))
    assert limiters.for_provider(P("openai:chat:m", {"apiBaseUrl": "http://x"})) is a  # same endpoint
    assert limiters.for_provider(P("openai:chat:m", {"apiBaseUrl": "http://y"})) is not a
    assert a.ceiling == 8 and a.rpm == 60
    assert limiters.for_provider(P("m2", {"maxConcurrency": 2})).ceiling == 2

    class Prompt:
        text = "x" * 400

    assert estimate_tokens(Prompt, {"max_tokens": 50}) == 150
