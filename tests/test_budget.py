"""`--max-cost`: the money spent never exceeds the budget; the run stops starting calls, keeps what
finished, ends interrupted (exit 130), and a resumed run with a larger budget ends complete without
repeating a call. Priced against litellm's bundled table for a model id the fake server answers."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.providers.pricing import cost as price
from factcli.run.budget import Budget, BudgetReached, worst_cost

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


def test_a_model_without_a_price_cannot_be_budgeted(priced, tmp_path):
    cfg = write(tmp_path / "c.yaml", _config(model="no-such-model"))
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", "1"])
    assert result.exit_code == 1 and "--max-cost: no price is known for openai:chat:no-such-model" in result.output
    assert priced.requests == []


def test_a_call_without_a_reply_cap_is_sent_with_one(priced, tmp_path):
    cfg = write(tmp_path / "c.yaml", _config().replace(", max_tokens: 50", ""))
    runner.invoke(app, ["eval", "-c", str(cfg), "--max-cost", "1", "--filter-first-n", "1", "--no-progress-bar"])
    assert priced.requests[0]["json"]["max_tokens"] == 4096


def test_budget_arithmetic():
    b = Budget(1.0, spent=0.25)
    b.reserve(0.5)
    with pytest.raises(BudgetReached):
        b.reserve(0.3)  # 0.25 + 0.5 in flight + 0.3 > 1
    b.settle(0.5, 0.1)  # it cost less than its worst case
    b.reserve(0.3)
    b.settle(0.3, None)  # an unreported cost counts as its worst case
    assert b.spent == pytest.approx(0.65) and b.reserved == pytest.approx(0.0)

    class P:
        config = {"max_tokens": 10}
        free = False
        price_model = MODEL

    messages = [{"role": "user", "content": "x" * 100}]
    assert worst_cost(P, messages, {}) == pytest.approx(price(MODEL, 108, 10))
    assert worst_cost(P, messages, {"max_tokens": 20}) == pytest.approx(price(MODEL, 108, 20))


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
