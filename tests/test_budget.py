"""`--max-cost`: the money spent never exceeds the budget; the run stops starting calls, keeps what
finished, ends interrupted (exit 130), and a resumed run with a larger budget ends complete without
repeating a call. Priced against litellm's bundled table for a model id the fake server answers."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.providers.pricing import cost as price
from factcli.providers.base import RenderedPrompt
from factcli.providers.request import CallRequest, Reasoning
from factcli.run.calling.budget import Budget, BudgetReached, worst_cost

runner = CliRunner()
N = 40
MODEL = "gpt-4o-mini"


def _config(model: str = MODEL, extra: str = "") -> str:
    tests = "".join(f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q'}}]\n" for i in range(N))
    return (f'prompts: ["Q: <<n>>"]\nproviders: [{{id: "openai:chat:{model}", config: {{apiBaseUrl: '
            f'"{{{{ env.FAKE_OPENAI_URL }}}}", max_tokens: 50}}}}]\n{extra}tests:\n{tests}')


def _spent(fake_openai) -> float:
    """What the server's replies cost, by the same table: words in, words out (the fake server's usage)."""
    total = 0.0
    for r in fake_openai.requests:
        prompt = " ".join(m["content"] for m in r["json"]["messages"])
        total += price(MODEL, len(prompt.split()), len(f"Echo: {prompt}".split()))
    return total


@pytest.fixture
def priced(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return fake_openai


def test_the_budget_is_never_exceeded_and_a_resume_finishes_without_repeating(priced, tmp_path):
    budget = 5e-5
    cfg = write(tmp_path / "c.yaml", _config())
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", str(budget), "-j", "4", "--no-progress-bar",
                                 "--no-table"])
    assert result.exit_code == 130, result.output
    assert "Stopped: the budget of $5e-05 is reached" in " ".join(result.output.split())
    asked = len(priced.requests)
    assert 0 < asked < N and _spent(priced) <= budget
    stored = json.loads(runner.invoke(app, ["list", "--json"]).output)[0]
    assert stored["status"] == "interrupted" and stored["rows"] == asked  # every call that started was kept

    result = runner.invoke(app, ["eval", "--resume", "latest", "--max-cost", "1", "--no-progress-bar", "--no-table"])
    assert result.exit_code == 0, result.output
    prompts = [r["json"]["messages"][0]["content"] for r in priced.requests]
    assert sorted(prompts) == sorted(f"Q: {i}" for i in range(N))  # each row's call made exactly once


def test_evaluate_options_max_cost_and_a_budget_of_nothing(priced, tmp_path):
    cfg = write(tmp_path / "c.yaml", _config(extra="evaluateOptions: {maxCost: 0}\n"))
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table"])
    assert result.exit_code == 130 and priced.requests == []


def test_a_model_without_a_price_cannot_be_budgeted(priced, remote_prices, tmp_path):
    cfg = write(tmp_path / "c.yaml", _config(model="no-such-model"))
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", "1"])
    out = " ".join(result.output.split())
    assert result.exit_code == 1 and "--max-cost: no price is known for openai:chat:no-such-model" in out
    assert "add its price in USD per token to providers[0].config, e.g. inputCost:" in out
    assert priced.requests == []  # refused before any call
    dry = runner.invoke(app, ["eval", "-c", str(cfg), "--dry-run"])
    assert "n/a: no price is known (add inputCost and outputCost" in " ".join(dry.output.split())


def test_a_price_by_hand_makes_a_model_budgetable(priced, remote_prices, tmp_path):
    cfg = write(tmp_path / "c.yaml", _config(model="no-such-model").replace(
        "max_tokens: 50", "max_tokens: 50, inputCost: 0.000001, outputCost: 0.000002"))
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", "1", "--filter-first-n", "2", "-o",
                                 str(tmp_path / "r.json"), "--no-progress-bar"])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "r.json").read_text())["results"]["results"]
    assert rows[0]["cost"] == pytest.approx(2 * 1e-6 + 3 * 2e-6)  # "Q: 0" in, "Echo: Q: 0" out (words)


def test_a_local_server_costs_nothing(priced, tmp_path):
    """An OpenAI-compatible server on this machine, with a model OpenAI does not sell: $0, budgeted."""
    cfg = write(tmp_path / "c.yaml", _config(model="llama3-local"))
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", "0.0001", "--filter-first-n", "3", "-o",
                                 str(tmp_path / "r.json"), "--no-progress-bar"])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "r.json").read_text())["results"]["results"]
    assert [r["cost"] for r in rows] == [0, 0, 0] and len(priced.requests) == 3


@pytest.mark.parametrize("pid, key", [
    ("anthropic:messages:claude-sonnet-4-5", "claude-sonnet-4-5"),
    ("anthropic:claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"),
    ("anthropic:claude-3-5-haiku-20241022", "anthropic.claude-3-5-haiku-20241022-v1:0"),
    ("anthropic:messages:claude-3-5-haiku-latest", "anthropic.claude-3-5-haiku-20241022-v1:0"),
    ("bedrock:anthropic.claude-3-5-haiku-20241022-v1:0", "anthropic.claude-3-5-haiku-20241022-v1:0"),
    ("vertex:claude-sonnet-4-5@20250929", "vertex_ai/claude-sonnet-4-5@20250929"),
    ("openai:chat:gpt-4o-mini-2024-07-18", "gpt-4o-mini-2024-07-18"),
])
def test_every_provider_spelling_finds_its_price(pid, key):
    from factcli.providers.pricing import price_of
    from factcli.providers.registry import create_provider
    from factcli.types import ProviderSpec

    price = price_of(create_provider(ProviderSpec(id=pid)))
    assert price is not None and price.source == key and price.input > 0 and price.max_output


def test_azure_is_priced_by_its_deployments_model_and_local_providers_are_free():
    from factcli.providers.pricing import price_of
    from factcli.providers.registry import create_provider
    from factcli.types import ProviderSpec

    azure = price_of(create_provider(ProviderSpec(id="azure:chat:my-deployment", config={"base_model": "gpt-4o-mini"})))
    assert azure.source == "azure/gpt-4o-mini"
    assert price_of(create_provider(ProviderSpec(id="azure:chat:my-deployment"))) is None
    for pid in ("ollama:chat:llama3.2", "ollama:some-model-of-mine", "echo"):
        assert price_of(create_provider(ProviderSpec(id=pid))).cost(1000, 1000) == 0
    ollama_priced = create_provider(ProviderSpec(id="ollama:llama3", config={"cost": 1e-6}))
    assert price_of(ollama_priced).cost(10, 10) == pytest.approx(2e-5)


def test_the_worst_case_uses_the_models_output_limit_not_a_fixed_cap(priced, tmp_path):
    """gpt-4o-mini replies with at most 16,384 tokens (litellm's table): no max_tokens is sent, and the
    reservation is priced at that limit."""
    cfg = write(tmp_path / "c.yaml", _config().replace(", max_tokens: 50", ""))
    runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", "1", "--filter-first-n", "1", "--no-progress-bar"])
    assert "max_tokens" not in priced.requests[0]["json"]

    class P:
        config: dict = {}
        free = False
        price_model = MODEL

    messages = [{"role": "user", "content": "x" * 100}]
    assert worst_cost(P, messages) == pytest.approx(price(MODEL, 108, 16384))


def test_a_model_without_a_known_output_limit_is_sent_with_a_cap(priced, tmp_path):
    cfg = write(tmp_path / "c.yaml", _config(model="local-model").replace(", max_tokens: 50", ", cost: 0.000001"))
    runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", "1", "--filter-first-n", "1", "--no-progress-bar"])
    assert priced.requests[0]["json"]["max_tokens"] == 4096


def test_the_stop_message_adds_up_and_is_said_once_on_stderr(priced, tmp_path):
    """At -j 4 with a reply cap of 16,384 tokens a call's worst case is about $0.0098: with a budget of
    $0.0099 the calls wait for each other's reservations to settle, and the run stops once what was
    spent leaves no room for one more worst case."""
    import re

    cfg = write(tmp_path / "c.yaml", _config().replace(", max_tokens: 50", ""))
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", "0.0099", "-j", "4",
                                 "--no-progress-bar", "--no-table"])
    assert result.exit_code == 130
    err = " ".join(result.stderr.split())
    assert "Aborted" not in result.stdout and "Stopped" not in result.stdout and err.count("Stopped:") == 1
    m = re.search(r"\$([\d.]+) spent \+ \$([\d.]+) reserved for the (\d+) calls? in flight \+ \$([\d.]+) for the next "
                  r"call at its worst case = \$([\d.]+), more than \$0.0099", err)
    assert m, err
    spent, reserved, _, worst, total = (float(m.group(i)) for i in range(1, 6))
    assert spent + reserved + worst == pytest.approx(total, abs=2e-4) and total >= 0.0099
    rows = len(priced.requests)
    assert f"{rows} of {N} rows finished and were kept" in err
    assert 2 <= rows < N and _spent(priced) <= 0.0099  # one worst case at a time fits, rows keep finishing


def test_budget_arithmetic():
    b = Budget(1.0, spent=0.25)
    assert b.try_reserve(0.5)
    assert not b.try_reserve(0.3)  # 0.25 + 0.5 in flight + 0.3 > 1: it would fit once the call in flight settles
    with pytest.raises(BudgetReached):
        b.try_reserve(0.8)  # 0.25 + 0.8 > 1 whatever the call in flight costs
    b.settle(0.5, 0.1)  # it cost less than its worst case
    assert b.try_reserve(0.3)
    b.settle(0.3, None)  # an unreported cost counts as its worst case
    assert b.spent == pytest.approx(0.65) and b.reserved == pytest.approx(0.0)

    class P:
        config = {"max_tokens": 10}
        free = False
        price_model = MODEL

    messages = [{"role": "user", "content": "x" * 100}]
    assert worst_cost(P, messages) == pytest.approx(price(MODEL, 108, 10))
    asked = CallRequest(RenderedPrompt(text="x" * 100, messages=messages), max_tokens=20)
    assert worst_cost(P, messages, asked) == pytest.approx(price(MODEL, 108, 20))
    # a reasoning grader's worst case is its reply cap on top of its reasoning budget
    thinking = CallRequest(asked.prompt, reasoning=Reasoning("openai", 20, 2048))
    assert worst_cost(P, messages, thinking) == pytest.approx(price(MODEL, 108, 2068))


@pytest.mark.parametrize("value, message", [
    ("maxCost: -1", "evaluateOptions.maxCost: expected a budget in USD (0 or more), got -1"),
    ("maxCost: lots", "evaluateOptions.maxCost: expected a budget in USD (0 or more), got 'lots'"),
])
def test_a_bad_max_cost_is_a_config_error(priced, tmp_path, value, message):
    cfg = write(tmp_path / "c.yaml", _config(extra=f"evaluateOptions: {{{value}}}\n"))
    result = runner.invoke(app, ["eval", "-c", str(cfg)])
    assert result.exit_code == 1 and message in result.output, result.output
    assert priced.requests == []


def test_a_negative_max_cost_on_the_command_line_is_a_usage_error(priced, tmp_path):
    result = runner.invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", _config())), "--max-cost", "-1"])
    assert result.exit_code == 2 and priced.requests == []


def test_the_docs_own_models_can_be_budgeted_in_a_dry_run(fake_openai, tmp_path, monkeypatch):
    """`--max-cost` used to refuse these: now each has a price (Ollama's is $0), and nothing is called."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q: {{q}}"]
providers: ["anthropic:messages:claude-sonnet-4-5", "anthropic:claude-3-5-haiku-20241022", "ollama:chat:llama3.2"]
tests: [{vars: {q: hi}}]
""")
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--dry-run", "--max-cost", "1"])
    out = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "no price" not in out and "n/a" not in out
    assert "model anthropic:messages:claude-sonnet-4-5: 1 call;" in out and "replies up to 64,000 tokens each" in out
    assert "model ollama:chat:llama3.2: 1 call;" in out and out.split("ollama:chat:llama3.2:")[1].split(
        "Estimated")[0].strip().endswith("cost $0")
    assert fake_openai.request_count == 0


def test_the_stop_message_names_the_reply_reservation_and_max_tokens(priced, tmp_path):
    """5 rows of gpt-4o-mini without max_tokens under --max-cost 0.009: each reply is reserved at the model's
    output limit, 16,384 tokens ($0.60 per million output tokens: about $0.0098 a call), so the run stops
    before its first call though the whole run costs about $0.00001; the message says why and what to set.
    With max_tokens: 1024 (about $0.0006 a call at worst), the same budget runs every row."""
    tests = "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(5))
    cfg = write(tmp_path / "c.yaml", f'prompts: ["Q: <<n>>"]\nproviders: [{{id: "openai:chat:{MODEL}", config: '
                                     f'{{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]\ntests:\n{tests}')
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", "0.009", "-j", "1", "--no-progress-bar",
                                 "--no-table"])
    assert result.exit_code == 130, result.output
    err = " ".join(result.stderr.split())
    assert (f"(each reply of {MODEL} is reserved at 16,384 tokens, the model's output limit, as max_tokens is not "
            "set; set max_tokens in the provider's config (e.g. max_tokens: 1024) to reserve less)") in err, err
    assert len(priced.requests) == 0

    priced.reset()
    capped = write(tmp_path / "d.yaml", cfg.read_text().replace('"}}]', '", max_tokens: 1024}}]'))
    result = runner.invoke(app, ["eval", "-c", str(capped), "--max-cost", "0.009", "-j", "1", "--no-progress-bar",
                                 "--no-table"])
    assert result.exit_code == 0, result.output
    assert len(priced.requests) == 5
