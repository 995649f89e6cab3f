"""A reply that says the context window was exceeded is permanent whatever its status: the call is
made once, and the row's error says what overflowed and what to change."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.providers.base import CONTEXT
from factcli.providers.litellm_provider import classify

runner = CliRunner()

OPENAI_400 = {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages "
                                   "resulted in 9000 tokens.", "type": "invalid_request_error",
                        "param": "messages", "code": "context_length_exceeded"}}
LLAMA_CPP_500 = {"error": {"code": 500, "message": "Context size has been exceeded.",
                           "type": "exceed_context_size_error"}}
VLLM_400 = {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you "
                                          "requested 4196 tokens.", "type": "BadRequestError", "code": 400}

CONFIG = """
prompts: ["Q: <<n>>"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
  - vars: {n: "1"}
    assert: [{type: contains, value: "Q"}]
"""

GRADED = """
prompts: ["Q: <<n>>"]
providers: [echo]
tests:
  - vars: {n: "1"}
    assert:
      - type: llm-rubric
        value: says Q
        provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
"""


def _run(tmp_path, config, code=100):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(write(tmp_path / "c.yaml", config)), "-o", str(out),
                                 "--no-cache", "--no-progress-bar", "--no-table"])
    assert result.exit_code == code, result.output
    return json.loads(out.read_text())["results"]["results"][0]


@pytest.mark.parametrize("status, body", [(400, OPENAI_400), (500, LLAMA_CPP_500), (400, VLLM_400)],
                         ids=["openai-400", "llama.cpp-500", "vllm-400"])
def test_the_model_under_test_is_asked_once(tmp_path, fake_openai, monkeypatch, status, body):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("FACTCLI_BACKOFF_MS", "1")
    fake_openai.enqueue_fault(status, body=body, times=5)
    row = _run(tmp_path, CONFIG)
    assert len(fake_openai.requests) == 1
    assert row["error"].startswith("the prompt sent to openai:chat:m exceeded the model's context window "
                                   "(not retried): HTTP ")
    assert "shorten the prompt, lower the provider's max_tokens" in row["error"]


def test_a_grader_that_overflows_is_named(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("FACTCLI_BACKOFF_MS", "1")
    fake_openai.enqueue_fault(500, body=LLAMA_CPP_500, times=5)
    row = _run(tmp_path, GRADED, code=4)  # the judge could not judge the row
    assert len(fake_openai.requests) == 1
    reason = row["gradingResult"]["componentResults"][0]["reason"]
    assert "the grader openai:chat:judge exceeded the model's context window (not retried)" in reason
    assert "lower the grader's max_tokens" in reason


def test_an_ordinary_500_is_still_retried(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("FACTCLI_BACKOFF_MS", "1")
    fake_openai.enqueue_fault(500, times=1)
    row = _run(tmp_path, CONFIG, code=0)
    assert len(fake_openai.requests) == 2 and row["success"]


def test_litellm_errors_are_classified_too():
    class ContextWindowExceededError(Exception):
        status_code = 400

    class InternalServerError(Exception):
        status_code = 500

    assert classify(ContextWindowExceededError("too long")).kind == CONTEXT
    assert classify(InternalServerError("Context size has been exceeded.")).kind == CONTEXT
    assert classify(InternalServerError("boom")).kind != CONTEXT


def test_a_call_that_times_out_is_cancelled(tmp_path, fake_openai, monkeypatch):
    """The connection is closed, so the server stops generating for it (it sees the client leave)."""
    import time

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("FACTCLI_TIMEOUT_MS", "300")
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    fake_openai.enqueue_hang(5)
    row = _run(tmp_path, CONFIG)
    assert "timed out after 0.3 s" in row["error"]
    deadline = time.monotonic() + 3
    while fake_openai.abandoned < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake_openai.abandoned == 1
