"""--batch (run/calling/batches.py) against the OpenAI files+batches stand-in (tests/fake_batches.py), reached by the
real `openai` SDK: verdicts equal a direct run's at the batch price, one batch round per stage, failed
and expired lines asked again, a killed run resumed without a line submitted twice. The 1,000-row
figures are benchmarks/batch_cost.py's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
from batch_judge import config, scripted
from conftest import write
from fake_batches import FakeBatchOpenAI
from typer.testing import CliRunner

from factcli.cli import app
from factcli.providers.pricing import table_price

ROOT = Path(__file__).resolve().parent.parent
ROWS = 6
FAST = {"FACTCLI_BATCH_QUIET_MS": "100", "FACTCLI_BATCH_POLL_MS": "50"}


@pytest.fixture
def stand_in(monkeypatch):
    for k, v in FAST.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeBatchOpenAI(rules=[(".", scripted)]) as server:
        yield server


def run_eval(tmp_path: Path, server, *args: str, name: str = "r.json", rows: int = ROWS):
    cfg = write(tmp_path / "c.yaml", config(rows, server.url))
    out = tmp_path / name
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache",
                                      *args])
    assert result.exit_code in (0, 100), result.output
    return result, json.loads(out.read_text())["results"]["results"]


def verdicts(rows) -> list:
    return [(r["testIdx"], r["success"], r["score"], r["namedScores"]) for r in sorted(rows, key=lambda r: r["testIdx"])]


def cost(rows) -> float:
    return sum((r["response"].get("cost") or 0) + (r["factcli"].get("graderCost") or 0) for r in rows)


def test_batched_run_judges_as_the_direct_run_at_the_batch_price(tmp_path, stand_in):
    _, direct = run_eval(tmp_path, stand_in, name="direct.json")
    assert not stand_in.batches
    result, batched = run_eval(tmp_path, stand_in, "--batch", name="batch.json")
    assert verdicts(batched) == verdicts(direct)
    assert all(r["response"]["metadata"].get("batch") is True for r in batched)
    # one round per stage: the model's answers; factuality + both decompositions; the verifications
    sizes = [b["request_counts"]["total"] for b in sorted(stand_in.batches.values(), key=lambda b: b["id"])]
    assert sizes == [ROWS, 3 * ROWS, 2 * ROWS]
    assert "round 1: 1 batch(es), round 2: 1 batch(es), round 3: 1 batch(es)" in result.output
    # priced by hand: every answered line's usage at litellm's batch prices for gpt-4o-mini
    price = table_price("gpt-4o-mini")
    assert (price.batch_input, price.batch_output) == (7.5e-08, 3e-07)
    prompt = completion = 0
    for b in stand_in.batches.values():
        for line in stand_in.files[b["output_file_id"]]["data"].decode().splitlines():
            usage = json.loads(line)["response"]["body"]["usage"]
            prompt, completion = prompt + usage["prompt_tokens"], completion + usage["completion_tokens"]
    assert cost(batched) == pytest.approx(prompt * 7.5e-08 + completion * 3e-07, rel=1e-9)
    assert cost(batched) == pytest.approx(cost(direct) / 2, rel=1e-9)
    from factcli.report.figures import money

    saved = money(cost(direct) - cost(batched))
    assert f"billed {money(cost(batched))}, {saved} less than sent directly" in " ".join(result.output.split())


def test_a_provider_can_refuse_batching(tmp_path, stand_in):
    cfg = config(2, stand_in.url).replace('config: {apiBaseUrl', 'config: {batch: false, apiBaseUrl')
    write(tmp_path / "c.yaml", cfg)
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--no-progress-bar", "--no-cache",
                                      "--batch"])
    assert result.exit_code in (0, 100), result.output
    assert not stand_in.batches


def test_a_failed_line_is_asked_again_in_the_next_batch(tmp_path, stand_in):
    _, direct = run_eval(tmp_path, stand_in, name="direct.json", rows=2)
    stand_in.enqueue_fault(500)  # the first line of the first batch fails (error file, status 500)
    _, batched = run_eval(tmp_path, stand_in, "--batch", name="batch.json", rows=2)
    assert verdicts(batched) == verdicts(direct)
    retried = [c for c in stand_in.batch_lines if c.endswith("_r1")]
    assert len(retried) == 1 and retried[0].removesuffix("_r1") in stand_in.batch_lines


def test_expired_lines_are_submitted_again(tmp_path, stand_in):
    _, direct = run_eval(tmp_path, stand_in, name="direct.json", rows=3)
    stand_in.expire_after = 1  # the first batch answers one line, then expires
    _, batched = run_eval(tmp_path, stand_in, "--batch", name="batch.json", rows=3)
    assert verdicts(batched) == verdicts(direct)
    first = min(stand_in.batches.values(), key=lambda b: b["id"])
    assert first["status"] == "expired" and first["request_counts"] == {"total": 3, "completed": 1, "failed": 2}
    assert sum(c.endswith("_r1") for c in stand_in.batch_lines) == 2


def test_batch_retry_direct_sends_a_failed_line_directly(tmp_path, stand_in):
    cfg = config(2, stand_in.url, ", batchRetry: direct")
    write(tmp_path / "c.yaml", cfg)
    stand_in.enqueue_fault(500)
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--no-progress-bar", "--no-cache",
                                      "--batch", "-o", str(tmp_path / "r.json")])
    assert result.exit_code in (0, 100), result.output
    assert not any("_r" in c for c in stand_in.batch_lines)
    direct = [r for r in stand_in.requests if r["path"].endswith("/chat/completions")
              and "X-Fake-Batch-Line" not in r["headers"]]
    assert len(direct) == 1  # the failed line, asked again outside a batch


def test_a_bad_batch_option_is_one_line(tmp_path, stand_in):
    write(tmp_path / "c.yaml", config(1, stand_in.url, ", batchRetry: later"))
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--batch"])
    assert result.exit_code == 1
    assert "evaluateOptions.batchRetry" in result.output and "expected batch or direct" in result.output
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--detach"])
    assert result.exit_code == 1 and "--detach" in result.output and "Traceback" not in result.output


def _factcli(home: Path, *args: str, wait: bool = True):
    env = dict(os.environ, FACTCLI_HOME=str(home), PYTHONPATH=str(ROOT), OPENAI_API_KEY="sk-test", **FAST)
    cmd = [sys.executable, "-m", "factcli", *args]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("when", ["recorded", "submitting"])
def test_killed_while_batches_run_then_resumed(tmp_path, stand_in, when):
    """SIGKILLed while its first batch runs; `submitting`: as if killed between the vendor's taking the batch
    and the store's recording its id (the store holds it under its made-up `pending-TAG` id, as it does
    until the vendor answers): found again at the vendor by its tag, not submitted twice."""
    _, uninterrupted = run_eval(tmp_path, stand_in, "--batch", name="whole.json")
    lines_whole = len(stand_in.batch_lines)
    stand_in.batch_lines.clear()
    cfg = tmp_path / "c.yaml"
    stand_in.hold()
    proc = _factcli(tmp_path / "home", "eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--batch",
                    wait=False)
    deadline = time.monotonic() + 60
    while len(stand_in.batches) < 4 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # its first batch is submitted and recorded; it waits on it
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(stand_in.batch_lines) == ROWS  # the model's answers, in one batch, in_progress
    if when == "submitting":
        import sqlite3

        newest = max(stand_in.batches.values(), key=lambda b: b["id"])
        pending = "pending-" + newest["metadata"]["factcli_submission"]
        with sqlite3.connect(tmp_path / "home" / "factcli.db") as conn:
            conn.execute("UPDATE batches SET batch_id = ?, status = 'submitting' WHERE batch_id = ?",
                         (pending, newest["id"]))
            conn.execute("UPDATE batch_lines SET batch_id = ? WHERE batch_id = ?", (pending, newest["id"]))
    stand_in.release()
    done = _factcli(tmp_path / "home", "eval", "--resume", "latest", "--no-progress-bar", "-o",
                    str(tmp_path / "resumed.json"))
    assert done.returncode in (0, 100), done.stdout + done.stderr
    assert f"{ROWS} collected from batches submitted before --resume" in done.stderr
    assert len(stand_in.batch_lines) == len(set(stand_in.batch_lines)) == lines_whole  # no line twice
    resumed = json.loads((tmp_path / "resumed.json").read_text())["results"]["results"]
    assert verdicts(resumed) == verdicts(uninterrupted)
    assert cost(resumed) == pytest.approx(cost(uninterrupted), rel=1e-9)


# ---------------------------------------------------------------- the stand-in itself, through the SDK


def _lines(*bodies, url="/v1/chat/completions", ids=None) -> bytes:
    ids = ids or [f"c{i}" for i in range(len(bodies))]
    return "".join(json.dumps({"custom_id": c, "method": "POST", "url": url, "body": b}) + "\n"
                   for c, b in zip(ids, bodies)).encode()


def _wait(client, batch_id: str, *statuses: str):
    for _ in range(400):
        b = client.batches.retrieve(batch_id)
        if b.status in statuses:
            return b
        time.sleep(0.01)
    raise AssertionError(f"batch {batch_id} stayed {b.status}")


def test_the_stand_in_speaks_openais_batch_api(stand_in):
    client = openai.OpenAI(base_url=stand_in.url, api_key="sk-test", max_retries=0)
    hello = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Question 3: hi"}]}
    f = client.files.create(file=("in.jsonl", _lines(hello, hello)), purpose="batch")
    assert f.purpose == "batch" and f.bytes > 0
    stand_in.enqueue_fault(400)  # the first line's request is refused: it goes to the error file
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert b.status == "validating"
    b = _wait(client, b.id, "completed")
    assert (b.request_counts.total, b.request_counts.completed, b.request_counts.failed) == (2, 1, 1)
    out = [json.loads(x) for x in client.files.content(b.output_file_id).text.splitlines()]
    assert out[0]["custom_id"] == "c1" and out[0]["response"]["status_code"] == 200
    assert out[0]["response"]["body"]["choices"][0]["message"]["content"] == scripted(hello)
    err = [json.loads(x) for x in client.files.content(b.error_file_id).text.splitlines()]
    assert err[0]["custom_id"] == "c0" and err[0]["response"]["status_code"] == 400


@pytest.mark.parametrize("lines, code", [
    (_lines({"model": "m", "messages": []}, {"model": "m", "messages": []}, ids=["a", "a"]), "duplicate_custom_id"),
    (_lines({"model": "m", "messages": []}, url="/v1/embeddings"), "mismatched_endpoint"),
    (_lines({"model": "m", "messages": []}, {"model": "other", "messages": []}), "mismatched_model"),
    (b"not json\n", "invalid_json_line"),
])
def test_a_bad_line_fails_validation(stand_in, lines, code):
    client = openai.OpenAI(base_url=stand_in.url, api_key="sk-test", max_retries=0)
    f = client.files.create(file=("in.jsonl", lines), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    b = _wait(client, b.id, "failed")
    assert b.errors.data[0].code == code and b.errors.data[0].line >= 1
    assert b.output_file_id is None


def test_the_stand_in_cancels_and_expires(stand_in):
    client = openai.OpenAI(base_url=stand_in.url, api_key="sk-test", max_retries=0)
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    stand_in.hold()
    f = client.files.create(file=("in.jsonl", _lines(body, body)), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    _wait(client, b.id, "in_progress")
    assert client.batches.cancel(b.id).status == "cancelling"
    stand_in.release()
    b = _wait(client, b.id, "cancelled")
    err = [json.loads(x) for x in client.files.content(b.error_file_id).text.splitlines()]
    assert [e["error"]["code"] for e in err] == ["batch_cancelled", "batch_cancelled"]
    stand_in.expire_after = 1
    f = client.files.create(file=("in.jsonl", _lines(body, body)), purpose="batch")
    b = _wait(client, client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                            completion_window="24h").id, "expired")
    assert (b.request_counts.completed, b.request_counts.failed) == (1, 1)
    err = json.loads(client.files.content(b.error_file_id).text)
    assert err["error"]["code"] == "batch_expired" and err["custom_id"] == "c1"


# ---------------------------------------------------------------- Anthropic's Message Batches


ANTHROPIC = """
prompts: ["Answer {{i}}: the city {{i}} has a bridge."]
providers: [echo]
defaultTest:
  options:
    provider: {id: anthropic:messages:claude-haiku-4-5, config: {apiBaseUrl: '%s', apiKey: sk-ant-test, inputCost: 0.000001, outputCost: 0.000005,
                                                          batchInputCost: 0.0000005, batchOutputCost: 0.0000025}}
tests:
%s"""


def anthropic_config(tmp_path, url: str, rows: int) -> Path:
    tests = "".join(f"  - vars: {{i: {i}}}\n    assert: [{{type: factuality, value: 'City {i} has a bridge.'}}, "
                    f"{{type: factual-correctness, value: 'City {i} has a bridge.'}}]\n" for i in range(rows))
    return write(tmp_path / "a.yaml", ANTHROPIC % (url, tests))


def anthropic_judge(body: dict, schema: dict):
    """batch_judge.scripted's verdicts for an Anthropic request (its last message's text parts)."""
    content = body["messages"][-1]["content"]
    text = content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)
    return json.loads(scripted({"messages": [{"content": text}]}))


def test_anthropic_message_batches_judge_as_direct_calls_at_the_batch_price(tmp_path, monkeypatch):
    from fake_batches import FakeAnthropicBatches

    for k, v in FAST.items():
        monkeypatch.setenv(k, v)
    with FakeAnthropicBatches(anthropic_judge) as server:
        cfg = anthropic_config(tmp_path, server.url, 3)
        runs = {}
        for name, extra in (("direct", []), ("batch", ["--batch"])):
            out = tmp_path / f"{name}.json"
            result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar",
                                              "--no-cache", *extra])
            assert result.exit_code in (0, 100), result.output
            runs[name] = json.loads(out.read_text())["results"]["results"]
        assert verdicts(runs["batch"]) == verdicts(runs["direct"])
        assert all(r["factcli"]["graderCost"] > 0 for r in runs["direct"])
        assert cost(runs["batch"]) == pytest.approx(cost(runs["direct"]) / 2, rel=1e-9)
        # factuality and the decompositions, then the verifications: two rounds
        assert [sum(b["request_counts"].values()) for b in server.batches.values()] == [9, 6]
        params = [r["json"] for r in server.requests if r["path"] == "/v1/messages"]
        direct, batched = params[:len(params) // 2], params[len(params) // 2:]
        key = lambda p: json.dumps(p, sort_keys=True)  # noqa: E731
        assert sorted(map(key, batched)) == sorted(map(key, direct))  # the same request, line or call


def test_the_anthropic_stand_in_through_the_sdk():
    import anthropic
    from fake_batches import FakeAnthropicBatches

    with FakeAnthropicBatches() as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0)
        good = {"model": "claude-haiku-4-5", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
        bad = {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}]}  # no max_tokens
        with pytest.raises(anthropic.BadRequestError):
            client.messages.batches.create(requests=[{"custom_id": "a.b", "params": good}])
        server.expire_after = 2
        b = client.messages.batches.create(requests=[{"custom_id": "a", "params": good},
                                                     {"custom_id": "b", "params": bad},
                                                     {"custom_id": "c", "params": good}])
        for _ in range(400):
            b = client.messages.batches.retrieve(b.id)
            if b.processing_status == "ended":
                break
            time.sleep(0.01)
        assert (b.request_counts.succeeded, b.request_counts.errored, b.request_counts.expired) == (1, 1, 1)
        results = {r.custom_id: r.result for r in client.messages.batches.results(b.id)}
        assert results["a"].type == "succeeded" and results["a"].message.usage.output_tokens > 0
        assert results["b"].type == "errored" and results["b"].error.error.type == "invalid_request_error"
        assert results["c"].type == "expired"
        server.hold()
        b = client.messages.batches.create(requests=[{"custom_id": "x", "params": good}])
        assert client.messages.batches.cancel(b.id).processing_status == "canceling"
        server.release()
        for _ in range(400):
            b = client.messages.batches.retrieve(b.id)
            if b.processing_status == "ended":
                break
            time.sleep(0.01)
        assert [r.result.type for r in client.messages.batches.results(b.id)] == ["canceled"]


def test_detach_list_show_cancel_and_resume(tmp_path, stand_in, monkeypatch, db_target):
    monkeypatch.setenv("FACTCLI_DB", db_target)  # the batches in either store
    _, direct = run_eval(tmp_path, stand_in, name="direct.json", rows=3)
    stand_in.hold()
    result, _ = None, None
    cfg = tmp_path / "c.yaml"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--batch",
                                      "--detach"])
    assert result.exit_code == 0, result.output
    assert "detached: `factcli eval --resume eval-" in result.output
    listed = CliRunner().invoke(app, ["list"])
    assert "waiting" in listed.output and "waits on 1 batch:" in listed.output
    assert "(openai, round 1): in_progress 0/3 done" in listed.output
    as_json = json.loads(CliRunner().invoke(app, ["list", "--json"]).output)
    assert as_json[0]["status"] == "waiting" and len(as_json[0]["waitingOn"]) == 1
    shown = CliRunner().invoke(app, ["show", "latest"])
    assert "Batches (1):" in shown.output, shown.output
    cancelled = CliRunner().invoke(app, ["cancel", "latest"])
    assert cancelled.exit_code == 0 and ": cancelling" in cancelled.output, cancelled.output
    stand_in.release()
    deadline = time.monotonic() + 10
    while set(stand_in.statuses().values()) != {"cancelled"} and time.monotonic() < deadline:
        time.sleep(0.02)
    resumed = CliRunner().invoke(app, ["eval", "--resume", "latest", "--no-progress-bar", "-o",
                                       str(tmp_path / "resumed.json")])
    assert resumed.exit_code in (0, 100), resumed.output
    rows = json.loads((tmp_path / "resumed.json").read_text())["results"]["results"]
    assert verdicts(rows) == verdicts(direct)
    first = stand_in.batch_lines[:3]
    assert [c + "_r1" for c in first] == stand_in.batch_lines[3:6]  # the cancelled lines, submitted again
    assert len(stand_in.batch_lines) == len(set(stand_in.batch_lines))
    assert "waits on" not in CliRunner().invoke(app, ["list"]).output


def test_a_budget_holds_batched_calls_too(tmp_path, stand_in):
    """Each batched call's worst case is reserved before its line is queued, as a direct call's is before
    it is sent: a budget below one call's worst case submits nothing; one that allows one model call at a
    time (the model's calls have no max_tokens: each is reserved at the model's reply limit) finishes the
    run with its model calls in batches of one line."""
    write(tmp_path / "c.yaml", config(2, stand_in.url))
    stopped = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--no-progress-bar", "--no-cache",
                                       "--batch", "--max-cost", "0.00001"])
    assert stopped.exit_code == 130, stopped.output
    assert not stand_in.batches
    worst = 16_384 * 3e-07  # gpt-4o-mini's reply limit at its batch output price: each call's worst case
    done = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--no-progress-bar", "--no-cache",
                                    "--batch", "--max-cost", f"{1.5 * worst:.6f}"])
    assert done.exit_code in (0, 100), done.output
    assert "Errors: 0" in done.output and "2/2 rows" in done.output
    model_lines = [i for i, body in enumerate(stand_in.line_bodies)
                   if body["messages"][-1]["content"].startswith("Question ")]
    sizes = [b["request_counts"]["total"] for b in sorted(stand_in.batches.values(), key=lambda b: b["id"])]
    assert len(model_lines) == 2 and sizes[0] == 1  # the second model call waited for the first's reply


def test_the_dry_run_prices_batched_calls_at_the_batch_price(tmp_path, stand_in):
    """--dry-run with --batch estimates what --batch bills: gpt-4o-mini's batch prices are half its
    direct ones (litellm's table), so every figure of the estimate is half the direct run's."""
    import re

    write(tmp_path / "c.yaml", config(2, stand_in.url))
    figures = []
    for extra in ([], ["--batch"]):
        out = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--no-progress-bar", "--dry-run",
                                       *extra])
        assert out.exit_code == 0, out.output
        figures.append([float(x) for x in re.findall(r"\$([0-9.]+)", out.output)])
    direct, batched = figures
    assert direct and len(direct) == len(batched)
    assert batched == pytest.approx([x / 2 for x in direct], rel=0.03)  # (figures printed to 2 significant digits)
    assert not stand_in.batches  # a dry run submits nothing


def test_a_line_refused_for_its_schema_is_asked_again_in_a_simpler_form(tmp_path, stand_in):
    """A server without structured output answers each json_schema line 400 naming response_format: those
    lines are submitted again with json_object, as a direct call would be asked again, and the endpoint's
    later lines go in that form at once (FormatMemory)."""
    _, direct = run_eval(tmp_path, stand_in, name="direct.json", rows=2)
    stand_in.refuse_response_format("json_schema")
    _, batched = run_eval(tmp_path, stand_in, "--batch", name="batch.json", rows=2)
    assert verdicts(batched) == verdicts(direct)
    forms = [(b.get("response_format") or {}).get("type") for b in stand_in.line_bodies]
    refused = forms.count("json_schema")
    assert refused and forms.count("json_object") >= refused
    last = [(b.get("response_format") or {}).get("type") for b in stand_in.line_bodies[-4:]]
    assert "json_schema" not in last  # the verification round went in the learnt form


def test_batched_replies_are_cached_as_direct_ones(tmp_path, stand_in):
    """The response cache's rule is Caller's: a second run of the same config with --batch is answered
    from the cache, no batch submitted; so is a run without --batch."""
    cfg = write(tmp_path / "c.yaml", config(3, stand_in.url))
    first = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--batch", "-o",
                                     str(tmp_path / "a.json")])
    assert first.exit_code in (0, 100), first.output
    submitted = len(stand_in.batch_lines)
    for extra in (["--batch"], []):
        again = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", *extra, "-o",
                                         str(tmp_path / "b.json")])
        assert again.exit_code in (0, 100), again.output
    assert len(stand_in.batch_lines) == submitted
    a, b = (json.loads((tmp_path / n).read_text())["results"]["results"] for n in ("a.json", "b.json"))
    assert verdicts(a) == verdicts(b) and all(r["response"]["cached"] for r in b)


@pytest.mark.filterwarnings("ignore:the grader openai")
def test_evaluate_takes_batch(tmp_path, stand_in):
    import factcli

    cfg = write(tmp_path / "c.yaml", config(2, stand_in.url))
    run = factcli.evaluate(str(cfg), batch=True, cache=False)
    assert run.row_count == 2 and len(stand_in.batches) == 3


def test_a_server_without_a_batch_api_stops_the_run_in_one_line(tmp_path, fake_openai, monkeypatch):
    """An OpenAI-compatible server that has no /v1/files nor /v1/batches (vLLM, llama.cpp) answers 404: the
    run stops at once (exit 3), saying how to run without batches, instead of one error per row."""
    for k, v in FAST.items():
        monkeypatch.setenv(k, v)
    fake_openai.add_rule(".", scripted)
    write(tmp_path / "c.yaml", config(3, fake_openai.url))
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--no-progress-bar", "--batch"])
    assert result.exit_code == 3, result.output
    flat = " ".join(result.output.split())
    assert "has no batch API (HTTP 404" in flat and "batch: false" in flat, result.output
    assert "Traceback" not in result.output


def test_a_batch_recorded_but_never_received_is_submitted_again(stand_in):
    """The store holds a batch under its made-up id (the run stopped before the vendor answered the
    submission) that the vendor never got: its lines are submitted again, once, and answered."""
    import asyncio

    from factcli.providers.base import RenderedPrompt
    from factcli.providers.registry import create_provider
    from factcli.providers.request import CallRequest
    from factcli.run.calling.batches import Batcher, Journal
    from factcli.types import ProviderSpec

    provider = create_provider(ProviderSpec(id="openai:chat:gpt-4o-mini", config={"apiBaseUrl": stand_in.url}))
    prompt = RenderedPrompt(messages=[{"role": "user", "content": "Question 7: hi"}], text="Question 7: hi",
                            label="p")
    cid = Batcher()._custom_id(provider.endpoint(), provider.batch_body(CallRequest(prompt)))

    class Stored(Journal):
        forgotten: list = []

        def lines(self):
            return {cid: "pending-neverarrived"}

        def batches(self):
            return {"pending-neverarrived": {"round": 1}}

        def forget(self, pending):
            self.forgotten.append(pending)

    async def go():
        batcher = Batcher(True, Stored())
        try:
            return await batcher.call(provider, CallRequest(prompt))
        finally:
            await batcher.aclose()

    resp = asyncio.run(go())
    assert resp.error is None and resp.output == scripted({"messages": [{"content": "Question 7: hi"}]})
    assert Stored.forgotten == ["pending-neverarrived"] and stand_in.batch_lines == [cid + "_r1"]


def test_a_vendor_out_of_reach_for_a_while_is_polled_until_it_answers(tmp_path, stand_in):
    """Reads of a batch that fail beyond the SDK's own retries (5 attempts) are polled again, not given up:
    giving up would submit every line again, billed twice."""
    _, direct = run_eval(tmp_path, stand_in, name="direct.json", rows=2)
    stand_in.poll_faults = 8
    _, batched = run_eval(tmp_path, stand_in, "--batch", name="batch.json", rows=2)
    assert stand_in.poll_faults == 0 and verdicts(batched) == verdicts(direct)
    assert len(stand_in.batch_lines) == len(set(stand_in.batch_lines)) == 2 + 6 + 4  # nothing submitted twice


def test_a_grader_of_its_own_can_ask_for_batches(tmp_path, stand_in):
    """`batch: true` in an assertion's grader sends that grader's calls in batches without --batch; the model
    under test is called directly."""
    cfg = config(2, stand_in.url).replace(
        "{type: factuality, value:",
        '{type: factuality, provider: {id: "openai:chat:gpt-4o-mini", config: {batch: true, apiBaseUrl: "'
        + stand_in.url + '"}}, value:')
    write(tmp_path / "c.yaml", cfg)
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--no-progress-bar", "--no-cache"])
    assert result.exit_code in (0, 100), result.output
    assert len(stand_in.batch_lines) == 2  # the two factuality gradings, in one batch
    assert all("<submitted_answer>" in b["messages"][-1]["content"] for b in stand_in.line_bodies)


def test_a_stage_past_the_vendors_limit_goes_in_as_few_batches_as_it_allows(tmp_path, stand_in, monkeypatch):
    from factcli.providers.batch_openai import OpenAIBatches

    monkeypatch.setattr(OpenAIBatches, "max_lines", 4)  # OpenAI's is 50,000 lines (and 200 MB)
    _, direct = run_eval(tmp_path, stand_in, name="direct.json")
    result, batched = run_eval(tmp_path, stand_in, "--batch", name="batch.json")
    assert verdicts(batched) == verdicts(direct)
    sizes = [b["request_counts"]["total"] for b in sorted(stand_in.batches.values(), key=lambda b: b["id"])]
    # stages of 6, 18 and 12 lines, each cut at 4: ceil(6/4) + ceil(18/4) + ceil(12/4) = 10 batches; the
    # batches of a stage end one by one, and the next stage's lines wait for the last of them
    flat = " ".join(result.output.split())
    assert sorted(sizes) == [2, 2] + [4] * 8, (sizes, flat[flat.find("batch mode"):][:200])  # (either order)
    flat = " ".join(result.output.split())
    assert "round 1: 2 batch(es), round 2: 5 batch(es), round 3: 3 batch(es)" in flat, flat[flat.find("batch mode"):][:300]


@pytest.mark.parametrize("where, config, said", [
    ("model", "batch: 'yes'", "providers[0].config.batch: expected true or false, got 'yes'"),
    ("model", "cache: 'no'", "providers[0].config.cache: expected true or false, got 'no'"),
    ("model", "cacheReadCost: -1", "providers[0].config.cacheReadCost: expected a price in USD per token"),
    ("model", "batchInputCost: cheap", "providers[0].config.batchInputCost: expected a price in USD per token"),
    ("grader", "batch: 'yes'", "tests[0].assert[0] (its grader openai:chat:judge).config.batch: expected true or false"),
    ("grader", "maxConcurrency: -2", "(its grader openai:chat:judge).config.maxConcurrency: expected a positive whole"),
])
def test_a_bad_batch_cache_or_price_key_is_one_line(tmp_path, where, config, said):
    """A provider's or a grader's `batch`, `cache` and cache or batch prices are factcli's: a value it would
    read as something else is a config error naming the key, before any call (exit 1)."""
    model = f"{{id: 'openai:chat:m', config: {{apiKey: sk-x{', ' + config if where == 'model' else ''}}}}}"
    grader = f"{{id: 'openai:chat:judge', config: {{apiKey: sk-x{', ' + config if where == 'grader' else ''}}}}}"
    write(tmp_path / "c.yaml", f"prompts: ['hi {{{{x}}}}']\nproviders: [{model}]\n"
                               f"defaultTest: {{options: {{provider: {grader}}}}}\n"
                               "tests: [{vars: {x: 1}, assert: [{type: llm-rubric, value: ok}]}]\n")
    result = CliRunner().invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--dry-run", "--no-progress-bar"])
    assert result.exit_code == 1, result.output
    lines = [ln for ln in result.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and said in lines[0], result.output


def test_a_batchs_stored_texts_hold_no_secret(tmp_path):
    """The journal's endpoint, base URL and a vendor's error go through the secrets rule by shape, as
    every stored text does (a key echoed in an error body, a key in a gateway's query string)."""
    import factcli
    from factcli.providers.batch_api import BatchState
    from factcli.store.batches import BatchJournal, run_batches
    from factcli.store.database import Store

    db = tmp_path / "runs.db"
    run = factcli.evaluate({"prompts": ["x"], "providers": ["echo"], "tests": [{"vars": {"a": "1"}}]}, db=str(db))
    key = "sk-proj-" + "A1b2C3d4" * 5
    with Store.open(str(db)) as store:
        journal = BatchJournal(store, run.run_id)
        journal.intent("pending-t", "openai", f"http://gw.local/v1?api_key={key} gpt-4o-mini", 1, ["c1"],
                       f"http://gw.local/v1?api_key={key}")
        journal.state("pending-t", BatchState("ended", "failed", 1, 0, 1, f"Incorrect API key provided: {key}"))
        stored = run_batches(store, run.run_id)
    assert len(stored) == 1 and key not in json.dumps(stored)
    assert stored[0]["error"].startswith("Incorrect API key provided:") and stored[0]["status"] == "failed"
