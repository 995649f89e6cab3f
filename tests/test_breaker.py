"""The circuit breaker per endpoint (issue 52 item 4, run/calling/breaker.py) and the preflight's connections
(run/planning/preflight.reach), through the CLI against real servers on 127.0.0.1: a judge that answers only 429,
a judge port that closes mid-run, a closed port for the judge or the model under test. Each stops the run
early with one line naming the endpoint and the --resume command (exit 4 for a judge, 1 for the model
under test); --resume with the endpoint back finishes the run and no model call is made twice.

The conftest backs retries off in milliseconds (FACTCLI_BACKOFF_MS, a documented setting); the breaker's
own thresholds stay at their defaults unless a test says otherwise. Bounds are on requests, not time."""

import json
import socket
import threading

import pytest
from conftest import write
from fake_openai import FakeOpenAI
from typer.testing import CliRunner

from factcli.cli import app
from factcli.run.calling import clock
from factcli.run.calling.breaker import CONNECT_FAILURES, DEFAULT_FAILURES, DEFAULT_SECONDS

runner = CliRunner()
PASS = '{"reason": "fine", "pass": true, "score": 1}'
ROWS = 10
JOBS = 4


def _config(tmp_path, judge_url: str, model_url: str, rows: int = ROWS, extra: str = "") -> str:
    tests = "".join(f"  - vars: {{q: 'question {i}'}}\n" for i in range(rows))
    return str(write(tmp_path / "c.yaml", f"""
prompts: ["Q: {{{{q}}}}"]
providers: [{{id: openai:chat:bot, config: {{apiBaseUrl: "{model_url}"}}}}]
defaultTest:
  options: {{provider: {{id: openai:chat:judge, config: {{apiBaseUrl: "{judge_url}"}}}}}}
  assert: [{{type: llm-rubric, value: "is polite", metric: quality}}]
{extra}tests:
{tests}"""))


def _eval(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "-j", str(JOBS), *map(str, args)])


def _said(result) -> str:
    return " ".join(result.output.split())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model_calls(server) -> int:
    return sum(1 for r in server.requests if r["json"].get("model") == "bot")


@pytest.fixture
def judge():
    with FakeOpenAI() as server:
        yield server


def test_a_judge_answering_only_429_stops_the_run_exit_4_and_resume_finishes_it(tmp_path, fake_openai, judge,
                                                                               monkeypatch):
    # the limiter paces an endpoint that answers 429 down to a call every 2 s, so at the default settings
    # it is the breaker's time (20 s on the run's clock) that stops it; the clock runs 50 times fast here
    monkeypatch.setattr(clock, "speed", 50.0)
    judge.set_fault_rate(1.0, ("429",))  # every request, no Retry-After: the backoff's own waits
    cfg = _config(tmp_path, judge.url, fake_openai.url)
    out = tmp_path / "r.json"
    first = _eval("-c", cfg, "-o", out)
    said = _said(first)
    assert first.exit_code == 4, first.output
    run_id = json.loads(out.read_text())["evalId"]
    stopped = f"Stopped: the judge openai:chat:judge at {judge.url} was stopped by the circuit breaker: "
    assert (f"{stopped}no call answered for {DEFAULT_SECONDS:.0f} s, every attempt failed" in said
            or f"{stopped}{DEFAULT_FAILURES} calls in a row failed after their retries" in said), said
    assert f"once it answers again: factcli eval --resume {run_id}" in said
    # paced at 0.5 requests a second at the slowest, the judge saw about one request per 2 s of the run's
    # 20 s, plus the first burst of the calls under way and their first retries
    assert judge.request_count <= DEFAULT_SECONDS / 2 + 3 * JOBS, judge.request_count
    first_model = _model_calls(fake_openai)
    assert first_model < ROWS  # the rows after the stop were not started: their models were not paid
    rows = json.loads(out.read_text())["results"]["results"]
    assert rows and all("stopped by the circuit breaker" in r["error"] or "Rate limit" in r["error"] for r in rows)
    listed = _said(runner.invoke(app, ["list"]))
    assert "interrupted" in listed, listed

    judge.set_fault_rate(0)
    judge.add_rule(".", PASS, model="judge")  # the judge is back
    second = _eval("--resume", run_id, "-o", out)
    said = _said(second)
    assert second.exit_code == 0, second.output
    assert f"Successes: {ROWS} Failures: 0 Errors: 0" in said
    # every row's model was called once over both runs: the rows the breaker ended were judged with the
    # reply the response cache kept
    assert _model_calls(fake_openai) == ROWS


def test_a_long_retry_after_does_not_hold_the_run_past_the_breakers_time(tmp_path, fake_openai, judge, monkeypatch):
    judge.set_fault_rate(1.0, ("429-retry-after:60",))  # each call would wait 60 s before its retry
    monkeypatch.setenv("FACTCLI_BREAKER_SECONDS", "0.5")
    cfg = _config(tmp_path, judge.url, fake_openai.url)
    result = _eval("-c", cfg)
    said = _said(result)
    assert result.exit_code == 4, result.output
    assert "no call answered for 1 s, every attempt failed" in said or "no call answered for 0 s" in said, said
    assert judge.request_count <= JOBS  # the first attempts; the retries 60 s later were never sent


def test_evaluate_options_set_the_breaker_and_zero_turns_it_off(tmp_path, fake_openai, judge):
    judge.set_fault_rate(1.0, ("500",))
    extra = "evaluateOptions: {breakerFailures: 0, breakerSeconds: 0}\n"
    cfg = _config(tmp_path, judge.url, fake_openai.url, rows=8, extra=extra)
    result = _eval("-c", cfg)
    said = _said(result)
    assert result.exit_code == 4, result.output
    assert "circuit breaker" not in said
    assert "Errors: 8 (8 not judged)" in said  # every row ran, each judged call failed after its retries
    bad = write(tmp_path / "bad.yaml", "prompts: [hi]\nproviders: [echo]\nevaluateOptions: {breakerFailures: -1}\n"
                                       "tests: [{vars: {a: 1}}]\n")
    refused = _eval("-c", bad)
    assert refused.exit_code == 1
    assert "evaluateOptions.breakerFailures: expected a whole number of calls (0 or more), got -1" in _said(refused)


class OneConnection:
    """A port that takes one connection (the preflight's) and is closed after it: every later
    connection is refused, as when a judge server dies after the run began."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.sock.accept()
        conn.close()
        self.sock.close()


def test_a_judge_port_that_closes_mid_run_stops_the_run_at_its_first_refusals(tmp_path, fake_openai):
    port = OneConnection()
    cfg = _config(tmp_path, f"http://127.0.0.1:{port.port}/v1", fake_openai.url)
    result = _eval("-c", cfg)
    said = _said(result)
    port.thread.join(5)
    assert result.exit_code == 4, result.output
    assert f"{CONNECT_FAILURES} attempts in a row could not connect" in said, said
    assert "once it answers again: factcli eval --resume" in said
    assert _model_calls(fake_openai) <= JOBS + 1  # the rows under way when the judge went; no more started


def test_the_preflight_finds_a_closed_judge_port_before_any_model_is_paid(tmp_path, fake_openai):
    port = _closed_port()
    judge_url = f"http://127.0.0.1:{port}/v1"
    cfg = _config(tmp_path, judge_url, fake_openai.url)
    out = tmp_path / "r.json"
    first = _eval("-c", cfg, "-o", out)
    said = _said(first)
    assert first.exit_code == 4, first.output
    assert fake_openai.request_count == 0  # no model call: nothing billed
    assert (f"the judge openai:chat:judge at {judge_url} was stopped by the circuit breaker: could not connect to "
            f"127.0.0.1:{port} before any call (connection refused)") in said, said
    run_id = json.loads(out.read_text())["evalId"]
    # the line gives the run's -o again: a resume writes only the -o files given to it (run/recording/trust.py)
    assert f"0 of {ROWS} rows stored; once it answers again: factcli eval --resume {run_id} -o {out}" in said

    with FakeOpenAI(port=port) as judge:  # the judge is up
        judge.add_rule(".", PASS, model="judge")
        second = _eval("--resume", run_id, "-o", out)
        assert second.exit_code == 0, second.output
        assert f"Successes: {ROWS} Failures: 0 Errors: 0" in _said(second)
        assert _model_calls(fake_openai) == ROWS


def test_a_closed_port_for_the_model_under_test_exits_1_at_once_with_the_resume_line(tmp_path, fake_openai):
    port = _closed_port()
    cfg = _config(tmp_path, fake_openai.url, f"http://127.0.0.1:{port}/v1")
    result = _eval("-c", cfg)
    said = _said(result)
    assert result.exit_code == 1, result.output
    assert (f"the model under test openai:chat:bot at http://127.0.0.1:{port}/v1 was stopped by the circuit breaker: "
            f"could not connect to 127.0.0.1:{port} before any call") in said, said
    assert "once it answers again: factcli eval --resume" in said
    assert fake_openai.request_count == 0


def test_the_rules_count_calls_after_their_retries_and_any_answer_resets_them():
    from factcli.run.calling.breaker import Breakers

    class P:
        id, label = "openai:chat:judge", None

        @staticmethod
        def endpoint():
            return "http://127.0.0.1:1/v1 judge"

    breakers = Breakers(failures=3, seconds=0)
    b = breakers.of(P)
    for _ in range(20):  # a burst of 429s answered together: attempts, not calls that gave up
        b.attempt_failed("HTTP 429", unreachable=False)
    b.call_failed()
    b.call_failed()
    b.answered()  # one reply: the failures before it were no outage
    b.call_failed()
    b.call_failed()
    assert b.trip is None
    b.call_failed()
    assert b.trip is not None and breakers.trip is b.trip and b.trip.judge and b.trip.exit_code == 4
    assert b.trip.why.startswith("3 calls in a row failed after their retries")

    c = Breakers().of(P)
    c.attempt_failed("refused", unreachable=True)
    c.attempt_failed("HTTP 500", unreachable=False)  # it connected in between
    c.attempt_failed("refused", unreachable=True)
    c.attempt_failed("refused", unreachable=True)
    assert c.trip is None
    c.attempt_failed("refused", unreachable=True)
    assert c.trip is not None and c.trip.why.startswith(f"{CONNECT_FAILURES} attempts in a row could not connect")


def test_the_time_rule_needs_calls_under_way():
    import asyncio

    from factcli.run.calling.breaker import Breakers

    class P:
        id, label = "openai:chat:bot", None

        @staticmethod
        def endpoint():
            return "http://127.0.0.1:1/v1 bot"

    async def scenario(pending: int):
        breakers = Breakers(failures=0, seconds=0.05)
        breakers.models = {P.endpoint()}
        b = breakers.of(P)
        b.pending = pending
        b.attempt_failed("HTTP 503", unreachable=False)
        await asyncio.sleep(0.2)
        return b

    waiting = asyncio.run(scenario(1))
    assert waiting.trip is not None and not waiting.trip.judge and waiting.trip.exit_code == 1
    idle = asyncio.run(scenario(0))  # the call gave up and none came after: no outage to time
    assert idle.trip is None and idle.since is None


def test_a_model_under_test_failing_every_call_ends_its_rows_as_errors_exit_1_and_resume_runs_them(
        tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("FACTCLI_BREAKER_FAILURES", "2")  # the documented setting, small for a short test
    fake_openai.set_fault_rate(1.0, ("503",))
    tests = "".join(f"  - vars: {{q: 'question {i}'}}\n" for i in range(ROWS))
    cfg = write(tmp_path / "c.yaml", f'prompts: ["Q: {{{{q}}}}"]\nproviders: [{{id: openai:chat:bot, config: '
                                     f'{{apiBaseUrl: "{fake_openai.url}"}}}}]\n'
                                     f'defaultTest: {{assert: [{{type: contains, value: "Q:"}}]}}\ntests:\n{tests}')
    out = tmp_path / "r.json"
    first = _eval("-c", cfg, "-o", out)
    said = _said(first)
    assert first.exit_code == 1, first.output
    assert ("the model under test openai:chat:bot at " + fake_openai.url + " was stopped by the circuit breaker: "
            "2 calls in a row failed after their retries") in said, said
    rows = json.loads(out.read_text())["results"]["results"]
    # provider errors: the rows under way when the second call gave up, and at most one started meanwhile
    assert 2 <= len(rows) <= JOBS + 1 and all(r["error"] for r in rows)
    assert fake_openai.request_count <= (JOBS + 1) * 5  # each call with at most its 4 retries

    fake_openai.set_fault_rate(0)  # the server is back
    second = _eval("--resume", json.loads(out.read_text())["evalId"], "-o", out)
    assert second.exit_code == 0, second.output
    assert f"Successes: {ROWS} Failures: 0 Errors: 0" in _said(second)
