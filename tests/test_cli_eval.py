"""End-to-end `factcli eval` through the CLI against the fake OpenAI server."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ROOT, ctrl_c_as_in_a_terminal, write
from factcli.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", *map(str, args)])


OPENAI_CONFIG = """
prompts: ["Q: {{question}}"]
providers:
  - id: openai:chat:m1
    config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", apiKey: sk-test-secret-123456}
tests:
  - vars: {question: hello}
    assert: [{type: contains, value: hello}]
"""


def test_quickstart_runs_offline(tmp_path):
    out = tmp_path / "r.json"
    result = run("-c", ROOT / "examples/quickstart/promptfooconfig.yaml", "-o", out)
    assert result.exit_code == 100, result.output  # the folk-wisdom model fails, by design
    doc = json.loads(out.read_text())
    stats = doc["results"]["stats"]
    assert (stats["successes"], stats["failures"], stats["errors"]) == (6, 6, 0)
    careful, folk = doc["results"]["prompts"]
    assert careful["metrics"]["namedScores"]["truthfulness"] == pytest.approx(1.0)
    assert folk["metrics"]["namedScores"]["truthfulness"] == 0
    assert "[PASS]" in result.output and "[FAIL]" in result.output


def test_all_pass_exits_0_and_threshold_env(tmp_path, fake_openai, monkeypatch):
    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG)
    assert run("-c", cfg).exit_code == 0
    fake_openai.add_rule("hello", "bye")
    assert run("-c", cfg, "--no-cache").exit_code == 100
    monkeypatch.setenv("FACTCLI_FAILED_TEST_EXIT_CODE", "7")
    assert run("-c", cfg, "--no-cache").exit_code == 7
    monkeypatch.setenv("FACTCLI_PASS_RATE_THRESHOLD", "0")
    assert run("-c", cfg, "--no-cache").exit_code == 0


def test_401_aborts_with_exit_3_and_keeps_secret_out(tmp_path, fake_openai):
    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG)
    fake_openai.enqueue_fault(status=401)
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out)
    assert result.exit_code == 3, result.output
    assert "Aborted" in result.output and "401" in result.output
    text = out.read_text()
    assert json.loads(text)["factcli"]["status"] == "aborted"
    assert "sk-test-secret-123456" not in text


def test_429_with_retry_after_is_retried(tmp_path, fake_openai):
    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG)
    fake_openai.enqueue_fault(status=429, retry_after="0")
    fake_openai.enqueue_fault(status=503)
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out, "--no-cache")
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["factcli"]["retries"] == 2
    assert doc["results"]["results"][0]["factcli"]["retries"] == 2
    assert fake_openai.request_count == 3


def test_retries_exhausted_gives_error_row(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "2")
    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG)
    fake_openai.enqueue_fault(status=500, times=3)
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out, "--no-cache")
    assert result.exit_code == 100
    row = json.loads(out.read_text())["results"]["results"][0]
    assert row["failureReason"] == 2 and row["success"] is False and row["score"] == 0
    assert "after 2 retries" in row["error"]
    assert fake_openai.request_count == 3


def test_bad_request_is_an_error_row_not_retried(tmp_path, fake_openai):
    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG)
    fake_openai.enqueue_fault(status=400)
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out, "--no-cache").exit_code == 100
    assert json.loads(out.read_text())["results"]["stats"]["errors"] == 1
    assert fake_openai.request_count == 1


def test_cache_serves_second_run_without_requests(tmp_path, fake_openai):
    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG)
    out = tmp_path / "r.json"
    assert run("-c", cfg).exit_code == 0
    assert fake_openai.request_count == 1
    assert run("-c", cfg, "-o", out).exit_code == 0
    assert fake_openai.request_count == 1
    row = json.loads(out.read_text())["results"]["results"][0]
    assert row["response"]["cached"] is True
    # the secret is neither in the cache key material nor in the stored values
    cache_dir = Path(__import__("os").environ["FACTCLI_HOME"]) / "cache"
    blob = b"".join(p.read_bytes() for p in cache_dir.rglob("*") if p.is_file())
    assert b"sk-test-secret-123456" not in blob
    assert run("-c", cfg, "--no-cache").exit_code == 0
    assert fake_openai.request_count == 2
    assert runner.invoke(app, ["cache", "clear"]).exit_code == 0
    assert run("-c", cfg).exit_code == 0
    assert fake_openai.request_count == 3


def test_repeat_makes_distinct_requests_and_test_entries(tmp_path, fake_openai):
    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG)
    out = tmp_path / "r.json"
    assert run("-c", cfg, "--repeat", "3", "-o", out).exit_code == 0
    assert fake_openai.request_count == 3
    rows = json.loads(out.read_text())["results"]["results"]
    assert [r["testIdx"] for r in rows] == [0, 1, 2]


def test_concurrency_is_bounded(tmp_path, fake_openai):
    import threading
    import time

    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def slow(body):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return "ok"

    fake_openai.add_rule(".", slow)
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
""" + "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(12)))
    assert run("-c", cfg, "-j", "3", "--no-cache").exit_code == 0
    assert fake_openai.request_count == 12
    assert state["peak"] <= 3


def test_openai_base_url_env_is_honoured(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-abcdef")
    fake_openai.add_rule("capital", "Sacramento is the capital.")
    cfg = write(tmp_path / "c.yaml", """
providers: [openai:gpt-5-mini]
prompts: ["What is the capital of {{location}}?"]
tests:
  - vars: {location: California}
    assert: [{type: icontains, value: sacramento}]
""")
    assert run("-c", cfg).exit_code == 0
    req = fake_openai.requests[0]
    assert req["json"]["model"] == "gpt-5-mini"
    assert req["headers"].get("Authorization") == "Bearer sk-env-key-abcdef"


def test_var_flag_and_env_file(tmp_path, fake_openai):
    env = write(tmp_path / ".env", "GREETING_WORD=howdy\n")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["{{ env.GREETING_WORD }} {{name}}"]
providers: [echo]
tests: [{assert: [{type: equals, value: "howdy Ada"}]}]
""")
    assert run("-c", cfg, "--env-file", env, "--var", "name=Ada").exit_code == 0


def test_python_and_exec_providers(tmp_path):
    write(tmp_path / "prov.py", "def call_api(prompt, options, context):\n"
          "    return {'output': prompt.upper() + options['config'].get('suffix', '')}\n")
    write(tmp_path / "shout.py", "import sys\nprint(sys.argv[1][::-1])\n")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["abc"]
providers:
  - {id: "file://prov.py", config: {suffix: "!"}}
  - "exec: python shout.py"
tests:
  - assert: [{type: contains-any, value: ["ABC!", "cba"]}]
""")
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out)
    assert result.exit_code == 0, result.output
    outputs = [r["response"]["output"] for r in json.loads(out.read_text())["results"]["results"]]
    assert outputs == ["ABC!", "cba"]


def test_provider_exception_is_an_error_row(tmp_path):
    write(tmp_path / "prov.py", "def call_api(prompt, options, context):\n    raise RuntimeError('boom')\n")
    cfg = write(tmp_path / "c.yaml", "prompts: [x]\nproviders: ['python:prov.py']\ntests: [{vars: {}}]\n")
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out)
    assert result.exit_code == 100
    row = json.loads(out.read_text())["results"]["results"][0]
    assert row["failureReason"] == 2 and "boom" in row["error"]


def test_chat_prompt_file_rendered_message_by_message(tmp_path, fake_openai):
    write(tmp_path / "chat.json", json.dumps([
        {"role": "system", "content": "You answer about {{topic}}."},
        {"role": "user", "content": "Tell me about <<topic>> and {{ payload }}"},
    ]))
    cfg = write(tmp_path / "c.yaml", """
prompts: [file://chat.json]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests: [{vars: {topic: owls, payload: "{{ not rendered }}"}}]
""")
    assert run("-c", cfg, "--no-cache").exit_code == 0
    messages = fake_openai.requests[0]["json"]["messages"]
    assert messages == [{"role": "system", "content": "You answer about owls."},
                        {"role": "user", "content": "Tell me about owls and {{ not rendered }}"}]


def test_model_outputs_mode(tmp_path):
    asserts = write(tmp_path / "asserts.yaml", "- type: icontains\n  value: paris\n- type: not-contains\n  value: zzz\n")
    outputs = write(tmp_path / "outputs.json", json.dumps(
        ["Paris is the capital", {"output": "Lyon {{x}}", "tags": ["a", "b"]}]))
    out = tmp_path / "r.json"
    # absolute paths work and outputs are used literally (no template rendering)
    result = runner.invoke(app, ["eval", "--no-progress-bar", "--assertions", str(asserts.resolve()),
                                 "--model-outputs", str(outputs.resolve()), "-o", str(out)])
    assert result.exit_code == 100, result.output
    rows = json.loads(out.read_text())["results"]["results"]
    assert [r["success"] for r in rows] == [True, False]
    assert rows[1]["response"]["output"] == "Lyon {{x}}"
    assert rows[1]["vars"]["tags"] == "a, b"


def test_model_outputs_without_a_grader_name_the_assertions_file(tmp_path, monkeypatch):
    """A model-graded assertion and no grader: the one-line error names the assertions file (the fuzz
    test's case, which named only `assert[0]`)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("FACTCLI_GRADER", raising=False)
    asserts = write(tmp_path / "asserts.yaml", "- type: llm-rubric\n  value: is polite\n")
    outputs = write(tmp_path / "outputs.json", json.dumps(["Hello"]))
    result = run("--assertions", asserts, "--model-outputs", outputs, "--no-write")
    assert result.exit_code == 1, result.output
    assert f"error: {asserts}: assert[0]: no grader for a model-graded assertion" in result.output


def test_the_entry_point_leaves_what_is_left_to_the_process_exit(monkeypatch, capsys):
    """main() freezes the collector's generations as the process ends, so that the shutdown's
    collections do not walk a large suite's objects (benchmarks/README.md: ~85 ms of 10,000 rows)."""
    import gc

    from factcli.cli.main import main

    gc.unfreeze()
    monkeypatch.setattr("sys.argv", ["factcli", "--version"])
    try:
        with pytest.raises(SystemExit):
            main()
        assert capsys.readouterr().out.startswith("factcli ")
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # this test process goes on


def test_help_and_version():
    assert runner.invoke(app, ["--version"]).output.startswith("factcli ")
    help_text = runner.invoke(app, ["eval", "--help"]).output
    for flag in ("-c", "-o", "--max-concurrency", "--repeat", "--delay", "--no-cache", "--no-table",
                 "--no-progress-bar", "--env-file", "--var", "--description", "--filter-pattern",
                 "--filter-first-n", "--filter-sample", "--assertions", "--model-outputs"):
        assert flag in help_text


def test_ctrl_c_keeps_finished_rows_and_exits_130(tmp_path, fake_openai):
    import os
    import signal
    import subprocess
    import sys
    import time

    fake_openai.latency = 0.2
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
""" + "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(40)))
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "-o", str(out), "-j", "1",
                             "--no-progress-bar", "--no-table"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ), preexec_fn=ctrl_c_as_in_a_terminal)
    deadline = time.time() + 30
    while fake_openai.request_count < 3 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr.decode()
    doc = json.loads(out.read_text())
    assert doc["factcli"]["status"] == "interrupted"
    rows = doc["results"]["results"]
    assert 2 <= len(rows) < 40
    assert b"Traceback" not in stderr


def test_python_api_returns_the_run(tmp_path, fake_openai):
    import factcli

    fake_openai.add_rule("hello", "hello back")
    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG)
    run_ = factcli.evaluate(str(cfg))
    assert (run_.successes, run_.failures, run_.errors) == (1, 0, 0)
    doc = run_.to_promptfoo()
    row = doc["results"]["results"][0]
    assert row["response"]["output"] == "hello back"
    assert row["cost"] == 0  # a model on a server at a loopback address is local: $0 unless priced by hand
    assert row["response"]["tokenUsage"]["total"] > 0
    assert row["response"]["finishReason"] == "stop"
    run2 = factcli.evaluate({"prompts": ["x <<v>>"], "providers": ["echo"],
                             "tests": [{"vars": {"v": "1"}, "assert": [{"type": "equals", "value": "x 1"}]}]})
    assert run2.pass_rate == 1.0


@pytest.mark.parametrize("fault", ["hang", "drop", "malformed", "429"])
def test_transient_faults_are_retried(tmp_path, fake_openai, monkeypatch, fault):
    monkeypatch.setenv("FACTCLI_TIMEOUT_MS", "500")
    cfg = write(tmp_path / "c.yaml", OPENAI_CONFIG)
    {"hang": lambda: fake_openai.enqueue_hang(5), "drop": fake_openai.enqueue_drop,
     "malformed": fake_openai.enqueue_malformed, "429": lambda: fake_openai.enqueue_fault(429)}[fault]()
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out, "--no-cache")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["factcli"]["retries"] == 1


def test_max_concurrency_from_the_environment(tmp_path, monkeypatch):
    cfg = write(tmp_path / "c.yaml", "prompts: ['hi {{x}}']\nproviders: [echo]\nevaluateOptions: {maxConcurrency: 2}\n"
                "tests: [{vars: {x: 1}}]\n")
    out = tmp_path / "r.json"
    monkeypatch.setenv("FACTCLI_MAX_CONCURRENCY", "7")
    assert CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar"]).exit_code == 0
    assert json.loads(out.read_text())["runtimeOptions"]["maxConcurrency"] == 7
    assert CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "-j", "3"]).exit_code == 0
    assert json.loads(out.read_text())["runtimeOptions"]["maxConcurrency"] == 3
    monkeypatch.setenv("FACTCLI_MAX_CONCURRENCY", "many")
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg)])
    assert result.exit_code == 1 and "FACTCLI_MAX_CONCURRENCY: expected a whole number" in result.output
