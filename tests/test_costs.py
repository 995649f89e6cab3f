"""Tokens and cost of every call, model and grader, per row, per column and per run, checked by hand.

The fake server counts tokens as whitespace-separated words; gpt-4o-mini is in litellm's bundled
price table at $0.15 per million input tokens and $0.60 per million output tokens (written out
here rather than read from the table, so that the table and our reading of it are both checked).
"""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
IN, OUT = 0.15e-6, 0.60e-6
REPLY = "Paris is the capital of France."  # 6 words
VERDICT = '{"pass": true, "score": 1, "reason": "ok"}'  # 6 words


def _provider(model: str) -> str:
    return f'{{id: "openai:chat:{model}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}'


def _config(model: str = "gpt-4o-mini", grader: str | None = None) -> str:
    graded = "      - {type: llm-rubric, value: names Paris}\n" if grader else ""
    default = f"defaultTest: {{options: {{provider: {_provider(grader)}}}}}\n" if grader else ""
    tests = "".join(f"  - vars: {{n: '{i}'}}\n    assert:\n      - {{type: icontains, value: paris}}\n{graded}"
                    for i in range(3))
    return f'prompts: ["Q: <<n>>"]\nproviders: [{_provider(model)}]\n{default}tests:\n{tests}'


@pytest.fixture
def server(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule(r"^Q: ", REPLY)
    fake_openai.add_rule(r"names Paris", VERDICT)
    return fake_openai


def _run(tmp_path, text: str) -> tuple[object, dict]:
    cfg = write(tmp_path / "c.yaml", text)
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    return result, json.loads(out.read_text())


def _words(messages: list[dict]) -> int:
    return sum(len(str(m["content"]).split()) for m in messages)


def test_model_tokens_and_cost_per_row_column_and_run(server, tmp_path):
    result, doc = _run(tmp_path, _config())
    assert result.exit_code == 0, result.output
    row_cost = 2 * IN + 6 * OUT  # "Q: 0" is 2 words in, the reply 6 out
    rows = doc["results"]["results"]
    for row in rows:
        assert row["response"]["tokenUsage"]["prompt"] == 2 and row["response"]["tokenUsage"]["completion"] == 6
        assert row["cost"] == pytest.approx(row_cost)
    column = doc["results"]["prompts"][0]["metrics"]
    assert column["cost"] == pytest.approx(3 * row_cost) and column["tokenUsage"]["total"] == 3 * 8
    assert doc["factcli"]["cost"] == {"model": pytest.approx(3 * row_cost), "modelUnpricedRows": 0,
                                      "grader": 0.0, "graderUnpricedRows": 0}
    assert "cost $0.000012" in result.output.replace(",", "")  # 1.17e-5 to two significant digits, not $0.0000


def test_grader_tokens_and_cost_are_counted_per_row_and_apart(server, tmp_path):
    result, doc = _run(tmp_path, _config(grader="gpt-4o-mini"))
    assert result.exit_code == 0, result.output
    grader_requests = [r["json"] for r in server.requests if "names Paris" in json.dumps(r["json"])]
    assert len(grader_requests) == 3
    expected = [_words(body["messages"]) * IN + 6 * OUT for body in grader_requests]
    rows = doc["results"]["results"]
    assert sorted(r["factcli"]["graderCost"] for r in rows) == pytest.approx(sorted(expected))
    assert all(r["factcli"]["graderCalls"] == 1 for r in rows)
    assert all(r["tokenUsage"]["assertions"]["completion"] == 6 for r in rows)
    assert doc["factcli"]["columns"][0]["graderCost"] == pytest.approx(sum(expected))
    assert doc["factcli"]["cost"]["grader"] == pytest.approx(sum(expected))
    assert doc["factcli"]["cost"]["model"] == pytest.approx(3 * (2 * IN + 6 * OUT))  # grading is not in it


def test_an_unknown_price_is_na_never_zero(server, remote_prices, tmp_path):
    """A model of a vendor's that litellm's table does not list: n/a (a local model would cost $0)."""
    result, doc = _run(tmp_path, _config(model="my-local-model", grader="my-local-judge"))
    assert result.exit_code == 0, result.output
    assert all(r["cost"] is None for r in doc["results"]["results"])
    assert all(r["factcli"]["graderCost"] is None for r in doc["results"]["results"])
    assert doc["factcli"]["cost"] == {"model": None, "modelUnpricedRows": 3, "grader": None, "graderUnpricedRows": 3}
    out = " ".join(result.output.split())
    assert "cost n/a (+n/a grading)" in out and "$0.0000" not in out
    html = tmp_path / "r.html"
    runner.invoke(app, ["export", "latest", "-o", str(html)])
    assert "cost n/a (+n/a grading)" in html.read_text()


def test_a_reply_without_usage_is_counted_with_the_models_tokenizer(server, tmp_path):
    server.send_usage = False
    result, doc = _run(tmp_path, _config())
    assert result.exit_code == 0, result.output
    row = doc["results"]["results"][0]
    # o200k_base: "Q: 0" is 4 tokens, +3 for the message and +3 for the reply's primer; the reply is 7
    assert row["response"]["tokenUsage"] == {**row["response"]["tokenUsage"], "prompt": 10, "completion": 7,
                                             "total": 17}
    assert row["response"]["metadata"]["tokensCountedWith"] == "o200k_base"
    assert row["cost"] == pytest.approx(10 * IN + 7 * OUT)


def test_show_gives_a_failed_rows_cost_too(server, tmp_path):
    """A FAIL is an answered call: `show` prints its cost (its `error` column holds the reason)."""
    text = _config().replace("{type: icontains, value: paris}", "{type: icontains, value: rome}")
    result, doc = _run(tmp_path, text)
    assert result.exit_code == 100, result.output
    shown = runner.invoke(app, ["show", "latest", "0"])
    assert shown.exit_code == 0, shown.output
    assert "FAIL" in shown.output and "cost $0.0000039" in shown.output, shown.output


def test_a_long_text_is_counted_a_piece_at_a_time_to_the_same_count(monkeypatch):
    """--dry-run on a 50 MB var held ~10,000,000 token ids at once (issue 48): a long text is encoded a
    piece at a time, cut before a single space between words, and the pieces add up to the whole."""
    import random

    from factcli.providers import tokens

    rng = random.Random(7)
    words = ["lorem", "ipsum,", "dolor.", "sit\n", "é", "  ", "x1", "(amet)", "naïve", "'s", "\t"]
    text = " ".join(rng.choice(words) for _ in range(30000))
    whole = tokens.count_text(text, "gpt-4o")
    for piece in (997, 4096, 10000):
        monkeypatch.setattr(tokens, "COUNT_PIECE", piece)
        assert tokens.count_text(text, "gpt-4o") == whole
        assert tokens.count_text(text, "gpt-3.5-turbo") == len(tokens._encoding("cl100k_base").encode(text))
