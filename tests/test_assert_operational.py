"""latency, cost, finish-reason, perplexity, perplexity-score, is-refusal and webhook score as
promptfoo 0.121.20 does.

Every expected number and reason in ROWS was produced by promptfoo 0.121.20's assertion handlers on
the same assertion and provider response; tests/parity/similarity/golden-operational.json is
`promptfoo eval` on tests/parity/similarity/operational.yaml (a scripted python provider and the
webhook judge in tests/parity/similarity/webhook_server.py).
"""

import asyncio
import importlib.util
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import factcli.assertions  # noqa: F401  (registers the handlers)
from factcli.scoring.registry import AssertionError_
from factcli.scoring.scorer import run_assertion
from factcli.assertions.operational import REFUSAL_PHRASES, REFUSAL_PREFIXES, is_basic_refusal
from factcli.types import Assertion, ProviderResponse
from factcli.types import TestCase as Case
from test_assert_similarity import run_parity

PARITY = Path(__file__).parent / "parity" / "similarity"


def grade(type_, value, threshold, output, response=None, vars=None, prompt="p"):
    a = Assertion(type=type_, value=value, threshold=threshold)
    response = response or ProviderResponse(output=output)
    return asyncio.run(run_assertion(a, output=output, test=Case(vars=vars or {}), variables=vars or {},
                                     prompt=prompt, response=response))


def response(output, fields: dict) -> ProviderResponse:
    return ProviderResponse(output=output, latency_ms=fields.get("latencyMs", 0), cost=fields.get("cost"),
                            finish_reason=fields.get("finishReason"), logprobs=fields.get("logProbs"),
                            cached=fields.get("cached", False))


# (type, value, threshold, output, provider response) -> (pass, score, reason), from promptfoo 0.121.20
ROWS = [
    ('latency', None, 500, 'x', {'latencyMs': 120}, True, 1.0, 'Assertion passed'),
    ('latency', None, 100, 'x', {'latencyMs': 120}, False, 0.0, 'Latency 120ms is greater than threshold 100ms'),
    ('not-latency', None, 500, 'x', {'latencyMs': 120}, False, 0.0, 'Latency 120ms is less than or equal to threshold 500ms'),
    ('not-latency', None, 100, 'x', {'latencyMs': 120}, True, 1.0, 'Assertion passed'),
    ('latency', None, 120, 'x', {'latencyMs': 120}, True, 1.0, 'Assertion passed'),
    ('cost', None, 0.05, 'x', {'cost': 0.0123}, True, 1.0, 'Assertion passed'),
    ('cost', None, 0.01, 'x', {'cost': 0.0123}, False, 0.0, 'Cost 0.012 is greater than threshold 0.01'),
    ('not-cost', None, 0.05, 'x', {'cost': 0.0123}, False, 0.0, 'Cost 0.012 is less than or equal to threshold 0.05'),
    ('cost', None, 100, 'x', {'cost': 123}, False, 0.0, 'Cost 1.2e+2 is greater than threshold 100'),
    ('cost', None, 1e-05, 'x', {'cost': 1.2345e-05}, False, 0.0, 'Cost 0.000012 is greater than threshold 0.00001'),
    ('cost', None, 0, 'x', {'cost': 0.995}, False, 0.0, 'Cost 0.99 is greater than threshold 0'),
    ('cost', None, 1e-07, 'x', {'cost': 3e-07}, False, 0.0, 'Cost 3.0e-7 is greater than threshold 1e-7'),
    ('not-cost', None, 5e-05, 'x', {'cost': 0}, False, 0.0, 'Cost 0.0 is less than or equal to threshold 0.00005'),
    ('finish-reason', 'stop', None, 'x', {'finishReason': 'stop'}, True, 1.0, 'Assertion passed'),
    ('finish-reason', 'STOP', None, 'x', {'finishReason': 'stop'}, True, 1.0, 'Assertion passed'),
    ('finish-reason', 'length', None, 'x', {'finishReason': 'stop'}, False, 0.0, 'Expected finish reason "length" but got "stop"'),
    ('not-finish-reason', 'stop', None, 'x', {'finishReason': 'Stop'}, False, 0.0, 'Expected finish reason not "stop" but got "Stop"'),
    ('not-finish-reason', 'length', None, 'x', {'finishReason': 'stop'}, True, 1.0, 'Assertion passed'),
    ('finish-reason', 'stop', None, 'x', {}, False, 0.0, 'Provider did not supply stop/finish reason'),
    ('finish-reason', 'stop', None, 'x', {'finishReason': ''}, False, 0.0, 'Provider did not supply stop/finish reason'),
    ('not-finish-reason', 'stop', None, 'x', {}, True, 1.0, 'Assertion passed'),
    ('perplexity', None, 2, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, True, 1.0, 'Assertion passed'),
    ('perplexity', None, 1.2, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, False, 0.0, 'Perplexity 1.59 is greater than threshold 1.2'),
    ('not-perplexity', None, 2, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, False, 0.0, 'Perplexity 1.59 is less than or equal to threshold 2'),
    ('not-perplexity', None, 1.2, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, True, 1.0, 'Assertion passed'),
    ('perplexity', None, None, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, True, 1.0, 'Assertion passed'),
    ('not-perplexity', None, None, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, True, 1.0, 'Assertion passed'),
    ('perplexity', None, 1, 'x', {'logProbs': [0, 0]}, True, 1.0, 'Assertion passed'),
    ('perplexity-score', None, 0.5, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, False, 0.3863929221952217, 'Perplexity score 0.39 is less than threshold 0.5'),
    ('perplexity-score', None, 0.3, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, True, 0.3863929221952217, 'Assertion passed'),
    ('not-perplexity-score', None, 0.5, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, True, 0.6136070778047783, 'Assertion passed'),
    ('not-perplexity-score', None, 0.3, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, False, 0.6136070778047783, 'Perplexity score 0.39 is greater than or equal to threshold 0.3'),
    ('perplexity-score', None, None, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, True, 0.3863929221952217, 'Assertion passed'),
    ('not-perplexity-score', None, None, 'x', {'logProbs': [-0.1, -0.5, -0.05, -1.2]}, True, 0.6136070778047783, 'Assertion passed'),
    ('perplexity-score', None, 0.5, 'x', {'logProbs': [0.0]}, True, 0.5, 'Assertion passed'),
    ('is-refusal', None, None, "I'm sorry, but I can't help with that.", {}, True, 1.0, 'Assertion passed'),
    ('is-refusal', None, None, 'I’m sorry, but no.', {}, True, 1.0, 'Assertion passed'),
    ('is-refusal', None, None, '  SORRY, no', {}, True, 1.0, 'Assertion passed'),
    ('is-refusal', None, None, 'Sure! As an AI language model, here it is.', {}, True, 1.0, 'Assertion passed'),
    ('is-refusal', None, None, 'That is not appropriate.', {}, True, 1.0, 'Assertion passed'),
    ('is-refusal', None, None, 'That is notappropriate.', {}, False, 0.0, 'Expected output to be a refusal'),
    ('is-refusal', None, None, 'I don′t feel comfortable with that', {}, True, 1.0, 'Assertion passed'),
    ('is-refusal', None, None, 'Sorrynotsorry', {}, True, 1.0, 'Assertion passed'),
    ('is-refusal', None, None, 'The capital of France is Paris.', {}, False, 0.0, 'Expected output to be a refusal'),
    ('not-is-refusal', None, None, 'The capital of France is Paris.', {}, True, 1.0, 'Assertion passed'),
    ('not-is-refusal', None, None, 'I cannot do that', {}, False, 0.0, 'Expected output to not be a refusal'),
    ('is-refusal', None, None, '', {}, True, 0.0, 'Empty response treated as refusal'),
    ('is-refusal', None, None, ' \n ', {}, True, 0.0, 'Empty response treated as refusal'),
    ('not-is-refusal', None, None, '', {}, False, 0.0, 'Expected output to not be a refusal'),
    ('is-refusal', None, None, None, {}, True, 0.0, 'No value provided, assumed to be a refusal'),
    ('not-is-refusal', None, None, None, {}, False, 0.0, 'Expected output to not be a refusal'),
    ('is-refusal', None, None, {'answer': 'I cannot'}, {}, True, 0.0, 'No value provided, assumed to be a refusal'),
]


@pytest.mark.parametrize("type_,value,threshold,output,fields,passed,score,reason", ROWS)
def test_scores_like_promptfoo(type_, value, threshold, output, fields, passed, score, reason):
    r = grade(type_, value, threshold, output, response(output, fields))
    assert r.passed is passed
    assert r.score == pytest.approx(score, abs=1e-12)
    assert reason in r.reason


def test_latency_judges_a_cached_response_by_its_recorded_latency():
    # promptfoo 0.121.20 passes the cached response's stored latencyMs to the assertion, so its
    # "does not support cached results" error never fires from `promptfoo eval`
    cached = response("x", {"latencyMs": 120, "cached": True})
    assert grade("latency", None, 500, "x", cached).passed
    r = grade("latency", None, 100, "x", cached)
    assert (r.passed, r.reason) == (False, "Latency 120ms is greater than threshold 100ms")


ERRORS = [
    ("latency", None, None, {"latencyMs": 5}, "Latency assertion must have a threshold in milliseconds"),
    ("latency", None, 10, {"latencyMs": None}, "Latency assertion does not support cached results"),
    ("cost", None, None, {"cost": 0.1}, "Cost assertion must have a threshold"),
    ("cost", None, 1, {}, "Cost assertion does not support providers that do not return cost"),
    ("perplexity", None, 1, {}, "Perplexity assertion does not support providers that do not return logProbs"),
    ("perplexity", None, 1, {"logProbs": []}, "Perplexity assertion does not support providers"),
    ("perplexity-score", None, 1, {}, "perplexity-score assertion does not support providers that do not return logProbs"),
    ("finish-reason", 3, None, {"finishReason": "stop"}, '"finish-reason" assertion type must have a string value'),
    ("webhook", 3, None, {}, '"webhook" assertion type must have a URL value'),
    ("webhook", "", None, {}, '"webhook" assertion type must have a URL value'),
]


@pytest.mark.parametrize("type_,value,threshold,fields,message", ERRORS)
def test_invalid_input_makes_an_error(type_, value, threshold, fields, message):
    with pytest.raises(AssertionError_, match=re.escape(message)):
        grade(type_, value, threshold, "x", response("x", fields))


def test_refusal_lists_are_promptfoos():
    assert len(REFUSAL_PREFIXES) == 14 and len(REFUSAL_PHRASES) == 136
    assert is_basic_refusal("My apologies, that is out of scope")
    assert is_basic_refusal("ok. I want to be direct with you: no")
    assert not is_basic_refusal("the word cannot_help is one token")  # \b needs a non-word character


# ------------------------------------------------------------------ webhook


class _Judge(BaseHTTPRequestHandler):
    requests: list = []
    reply: object = {"pass": True}
    status = 200
    delay = 0.0

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
        time.sleep(type(self).delay)
        reply = type(self).reply
        data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
        try:
            self.send_response(type(self).status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout test)
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def judge():
    _Judge.requests, _Judge.reply, _Judge.status, _Judge.delay = [], {"pass": True}, 200, 0.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield _Judge, f"http://127.0.0.1:{server.server_address[1]}/judge"
    server.shutdown()
    server.server_close()


def test_webhook_posts_output_prompt_and_vars(judge):
    handler, url = judge
    handler.reply = {"pass": True, "score": 0.8, "reason": "fine"}
    r = grade("webhook", url, None, {"answer": 42}, vars={"topic": "x"}, prompt="the prompt")
    assert (r.passed, r.score, r.reason) == (True, 0.8, "fine")
    (req,) = handler.requests
    assert req["path"] == "/judge"
    assert req["headers"]["Content-Type"] == "application/json"
    assert req["body"] == {"output": {"answer": 42}, "context": {"prompt": "the prompt", "vars": {"topic": "x"}}}


# reply -> (pass, score, reason) for webhook and not-webhook: promptfoo 0.121.20 against the same reply
WEBHOOK = [
    ({"pass": True, "score": 0.8}, (True, 0.8, "Assertion passed"), (False, 0.19999999999999996, "Webhook returned true")),
    ({"pass": False, "score": 0.25}, (False, 0.25, "Webhook returned false"), (True, 0.75, "Assertion passed")),
    ({"pass": True}, (True, 1.0, "Assertion passed"), (False, 0.0, "Webhook returned true")),
    ({"pass": False, "reason": "nope"}, (False, 0.0, "nope"), (True, 1.0, "nope")),
    ({"pass": "false"}, (True, 1.0, "Assertion passed"), (True, 1.0, "Assertion passed")),  # `!==` on a string
    ({"score": 0.3}, (True, 0.3, "Assertion passed"), (True, 0.7, "Assertion passed")),  # missing pass
    ([1, 2], (True, 1.0, "Assertion passed"), (True, 1.0, "Assertion passed")),
    ({"pass": True, "reason": ""}, (True, 1.0, "Assertion passed"), (False, 0.0, "Webhook returned true")),
]


@pytest.mark.parametrize("reply,plain,inverse", WEBHOOK)
def test_webhook_reply(judge, reply, plain, inverse):
    handler, url = judge
    handler.reply = reply
    for type_, expected in (("webhook", plain), ("not-webhook", inverse)):
        r = grade(type_, url, None, "out")
        assert (r.passed, r.reason) == expected[::2]
        assert r.score == pytest.approx(expected[1], abs=1e-12)


def test_webhook_http_error_and_bad_json_fail_the_assertion(judge):
    handler, url = judge
    handler.status = 500
    r = grade("webhook", url, None, "out")
    assert (r.passed, r.score, r.reason) == (False, 0.0, "Webhook error: Webhook response status: 500")
    handler.status, handler.reply = 200, b"not json"
    r = grade("not-webhook", url, None, "out")
    assert not r.passed and r.reason.startswith("Webhook error: ")


def test_webhook_timeout_is_bounded(judge, monkeypatch):
    handler, url = judge
    handler.delay = 2.0
    monkeypatch.setenv("FACTCLI_WEBHOOK_TIMEOUT_MS", "200")
    start = time.monotonic()
    r = grade("webhook", url, None, "out")
    assert time.monotonic() - start < 1.5
    assert (r.passed, r.score, r.reason) == (False, 0.0, "Webhook error: Request timed out after 200 ms")


def test_webhook_timeout_falls_back_to_promptfoos_variable(monkeypatch):
    from factcli.assertions.operational import webhook_timeout_s

    assert webhook_timeout_s() == 5.0
    monkeypatch.setenv("WEBHOOK_TIMEOUT", "750")
    assert webhook_timeout_s() == 0.75
    monkeypatch.setenv("FACTCLI_WEBHOOK_TIMEOUT_MS", "300")
    assert webhook_timeout_s() == 0.3


def test_webhook_unreachable_fails_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: nothing listens there
    start = time.monotonic()
    r = grade("webhook", f"http://127.0.0.1:{port}/judge", None, "out")
    assert time.monotonic() - start < 3
    assert not r.passed and r.score == 0 and r.reason.startswith("Webhook error: ")


# ------------------------------------------------------------------ parity with `promptfoo eval`


def _webhook_server_module():
    spec = importlib.util.spec_from_file_location("parity_webhook_server", PARITY / "webhook_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parity_with_promptfoo(tmp_path, monkeypatch):
    server = _webhook_server_module().start(0)
    try:
        monkeypatch.setenv("PARITY_WEBHOOK_URL", f"http://127.0.0.1:{server.server_address[1]}")
        assert run_parity(PARITY / "operational.yaml", PARITY / "golden-operational.json", tmp_path) == []
    finally:
        server.shutdown()
        server.server_close()
