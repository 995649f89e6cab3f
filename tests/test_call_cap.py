"""`-j N` caps the calls in flight for the whole run (run/calling/caller.CallCap): model, grader and search calls
together, the claim-level methods' inner calls included, per-endpoint limits under it. Measured where
it matters, at the servers: two fake OpenAI servers counting the requests they are answering at once."""

import asyncio
import json
import time

import pytest
from conftest import write
from fake_openai import FakeOpenAI, InFlight
from test_factual_correctness import scripted_judge
from typer.testing import CliRunner

from factcli.cli import app
from factcli.providers.base import TRANSIENT, Provider, ProviderCallError, ProviderSpec, RenderedPrompt
from factcli.providers.request import CallRequest
from factcli.run.calling.caller import Caller, RetryPolicy
from factcli.run.calling.limits import Limiters
from factcli.types import ProviderResponse

CONFIG = """
prompts: ["Tell me about Paris ({{n}})."]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  vars: {context: "Paris is the capital of France. The Eiffel Tower was completed in 1889."}
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "%(judge_url)s"%(judge_config)s}}
  assert:
    - {type: llm-rubric, value: "is about Paris"}
    - {type: factual-correctness, value: "Paris is the capital of France. The Eiffel Tower was completed in 1889."}
    - {type: facts-grounding}
tests:
%(tests)s
"""


def judge(body):
    """Claims and verdicts for factual-correctness; a passing verdict for the rest (what it says
    matters less here than that every step of every method is asked)."""
    text = body["messages"][-1]["content"]
    if text.startswith("<text>") or "<premise>" in text:
        return scripted_judge(body)
    return json.dumps({"pass": True, "score": 1, "reason": "about Paris"})


@pytest.fixture
def two_servers(fake_openai, monkeypatch):
    """The model on the session's server, the grader on a second one; one count for both."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule(".", "Paris is the capital of France. The Eiffel Tower was completed in 1889.", model="m")
    with FakeOpenAI() as grader_server:
        grader_server.add_rule(".", judge, model="judge")
        grader_server.in_flight = fake_openai.in_flight
        for server in (fake_openai, grader_server):
            server.latency = 0.2  # long enough for calls to overlap
        yield fake_openai, grader_server


def _eval(tmp_path, grader_url: str, *args: str, judge_config: str = "", rows: int = 6):
    tests = "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(rows))
    cfg = write(tmp_path / "c.yaml", CONFIG % {"judge_url": grader_url, "judge_config": judge_config, "tests": tests})
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-cache", "--no-progress-bar",
                                      "--no-table", *args])
    assert "Traceback" not in result.output, result.output
    return result, json.loads(out.read_text())


def test_j_caps_model_grader_and_claim_level_calls_together(two_servers, tmp_path):
    model_server, grader_server = two_servers
    result, doc = _eval(tmp_path, grader_server.url, "-j", "4")
    rows = doc["results"]["results"]
    assert len(rows) == 6 and all(len(r["gradingResult"]["componentResults"]) == 3 for r in rows), result.output
    assert model_server.request_count == 6 and grader_server.request_count > 6 * 3  # the methods' inner calls
    assert model_server.in_flight.most == 4  # the cap, reached and never passed
    assert model_server.in_flight.now == 0


def test_an_endpoints_limit_applies_under_the_cap(two_servers, tmp_path):
    """The grader's maxConcurrency 1 under -j 3: its calls go one at a time, all calls stay within 3."""
    model_server, grader_server = two_servers
    grader_server.in_flight = InFlight(also=model_server.in_flight)  # its own count, added to the shared one
    result, doc = _eval(tmp_path, grader_server.url, "-j", "3", judge_config=", maxConcurrency: 1", rows=3)
    assert len(doc["results"]["results"]) == 3, result.output
    assert grader_server.in_flight.most == 1 and grader_server.request_count > 3 * 3
    assert model_server.in_flight.most == 3


class _Timed(Provider):
    """A provider that answers after `seconds`, noting when each request went out."""

    cacheable = False

    def __init__(self, pid: str, seconds: float, starts: list, config: dict | None = None, fail_first: int = 0):
        super().__init__(ProviderSpec(pid, config=config or {}))
        self.seconds, self.starts, self.fail_first = seconds, starts, fail_first
        self.now = self.most = 0

    async def call(self, request):
        self.starts.append((self.id, time.monotonic()))
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.now -= 1
        if self.fail_first:
            self.fail_first -= 1
            raise ProviderCallError("busy", TRANSIENT, status=503)
        return ProviderResponse(output="ok")


PROMPT = CallRequest(RenderedPrompt(text="q", messages=[{"role": "user", "content": "q"}]))


def test_calls_the_cap_lets_go_together_keep_their_endpoints_spacing():
    """Two slow calls of one endpoint hold both places of a cap of 2; two calls of an endpoint at 600 rpm
    (0.1 s apart) wait for them, are let go together, and still start at least 0.1 s apart."""
    starts: list = []
    slow = _Timed("slow", 0.3, starts)
    paced = _Timed("paced", 0.01, starts, config={"rpm": 600})

    async def main():
        caller = Caller(None, RetryPolicy(max_retries=0), Limiters(2), cap=2)
        first = [asyncio.create_task(caller.call(slow, PROMPT)) for _ in range(2)]
        await asyncio.sleep(0.05)  # the slow calls hold both places
        await asyncio.gather(*first, *(caller.call(paced, PROMPT) for _ in range(2)))

    asyncio.run(main())
    times = [t for pid, t in starts if pid == "paced"]
    assert len(times) == 2 and times[0] >= starts[0][1] + 0.3 - 0.01  # held back by the cap
    assert times[1] - times[0] >= 0.1 / 1.05 - 0.005


def test_a_call_waiting_to_retry_holds_no_place():
    """A cap of 1: a call that failed and waits 0.5 s for its retry lets another call go meanwhile."""
    starts: list = []
    flaky = _Timed("flaky", 0.01, starts, fail_first=1)
    quick = _Timed("quick", 0.01, starts)

    async def main():
        caller = Caller(None, RetryPolicy(max_retries=1, backoff_base_s=0.5), Limiters(1), cap=1)
        retried = asyncio.create_task(caller.call(flaky, PROMPT))
        await asyncio.sleep(0.1)  # flaky failed once and sleeps before its retry
        answered = await caller.call(quick, PROMPT)
        assert not retried.done() and answered.output == "ok"
        assert (await retried).output == "ok" and (await retried).retries == 1

    asyncio.run(main())
    assert [pid for pid, _ in starts] == ["flaky", "quick", "flaky"]


def test_check_caps_its_calls_as_an_eval_at_its_default_j(two_servers):
    """check() is one row of an eval at the default -j (4): its assertions' calls, the methods' inner
    ones included, never more than 4 in flight together."""
    import factcli

    _, grader_server = two_servers
    grader = {"id": "openai:chat:judge", "config": {"apiBaseUrl": grader_server.url}}
    fact = "Paris is the capital of France. The Eiffel Tower was completed in 1889."
    assertions = [{"type": "llm-rubric", "value": "is about Paris"}, {"type": "llm-rubric", "value": "is short"},
                  {"type": "llm-rubric", "value": "names a city"}, {"type": "factual-correctness", "value": fact},
                  {"type": "facts-grounding"}, {"type": "llm-rubric", "value": "is in English"}]
    result = factcli.check(fact, assertions, vars={"context": fact}, grader=grader, prompt="Tell me about Paris.",
                           cache=False)
    assert result.score > 0, result.reason  # graded (whether each step's reply fits matters less here)
    assert grader_server.request_count > 6  # the methods' inner calls
    assert grader_server.in_flight.most == 4


# ---------------------------------------------------------------- every mix, measured at the servers

FACT = "Paris is the capital of France. The Eiffel Tower was completed in 1889."
MIXES = {
    "rubric": ["llm-rubric"],
    "rubric+fc+grounding": ["llm-rubric", "factual-correctness", "facts-grounding"],
    "factscore+rubric": ["factscore", "llm-rubric"],
    "all four": ["llm-rubric", "factual-correctness", "facts-grounding", "factscore"],
}


def any_judge(body):
    """Every step of the four methods answered in its schema (factscore's: the facts of each sentence,
    each fact supported), the rest as `judge` does."""
    from test_factscore import _block, _numbered

    text = body["messages"][-1]["content"]
    if "<sentences>" in text:
        return json.dumps({"facts": [s for s in _numbered(_block(text, "sentences"))]})
    if "<passages>" in text:
        return json.dumps({"verdicts": [{"fact": f, "verdict": True, "reason": "scripted", "evidence": 1}
                                        for f in _numbered(_block(text, "facts"))]})
    if text.startswith("Instruction-following check"):
        return json.dumps({"reasoning": "asks about Paris", "Instruction Following": "No Issues"})
    if text.startswith("Grounding check: label every sentence"):
        from factcli.stats.text import split_sentences
        from test_facts_grounding import _tag

        return json.dumps({"sentences": [{"sentence": s, "label": "supported", "rationale": "in the document",
                                          "excerpt": s} for s in split_sentences(_tag(text, "response"))]})
    return judge(body)


def _assertion(kind: str, grader: str) -> str:
    provider = f'provider: {{id: "openai:chat:judge", config: {{apiBaseUrl: "{grader}"}}}}'
    if kind == "llm-rubric":
        return f'{{type: llm-rubric, value: "is about Paris", {provider}}}'
    if kind == "factual-correctness":
        return f'{{type: factual-correctness, value: "{FACT}", {provider}}}'
    if kind == "factscore":
        return f'{{type: factscore, value: Paris, config: {{knowledge: "%(kb)s", k: 1}}, {provider}}}'
    return f"{{type: {kind}, {provider}}}"


@pytest.mark.parametrize("endpoints", ["one", "two"])
@pytest.mark.parametrize("mix", list(MIXES))
@pytest.mark.parametrize("j", [1, 2, 4])
def test_no_mix_of_model_graders_and_methods_passes_j(fake_openai, tmp_path, monkeypatch, j, mix, endpoints):
    """The model and the graders on one server, or the graders split over a second one (llm-rubric and
    factscore on the model's server, the other methods on the second): the calls both servers are
    answering at once never pass -j, for every mix of model-graded assertions and claim-level methods."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    kb = tmp_path / "kb.jsonl"
    kb.write_text(json.dumps({"title": "Paris", "text": FACT}) + "\n")
    fake_openai.add_rule(".", FACT, model="m")
    fake_openai.add_rule(".", any_judge, model="judge")
    with FakeOpenAI() as second:
        second.add_rule(".", any_judge, model="judge")
        second.in_flight = fake_openai.in_flight  # one count for both servers
        for server in (fake_openai, second):
            server.latency = 0.05
        near, far = fake_openai.url, (second.url if endpoints == "two" else fake_openai.url)
        graders = [_assertion(kind, near if kind in ("llm-rubric", "factscore") else far) % {"kb": kb}
                   for kind in MIXES[mix]]
        tests = "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(4))
        cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Tell me about Paris ({{{{n}}}})."]
providers: [{{id: "openai:chat:m", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
defaultTest:
  vars: {{context: "{FACT}"}}
  assert: [{", ".join(graders)}]
tests:
{tests}""")
        out = tmp_path / "r.json"
        result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-cache", "--no-progress-bar",
                                          "--no-table", "-j", str(j)])
        rows = json.loads(out.read_text())["results"]["results"]
        graded = [c for r in rows for c in r["gradingResult"]["componentResults"]]
        assert len(rows) == 4 and len(graded) == 4 * len(MIXES[mix]), result.output
        assert not [c["reason"] for c in graded if (c.get("metadata") or {}).get("graderError")]
        calls = fake_openai.request_count + second.request_count
        assert calls >= 4 * (1 + len(MIXES[mix]))
        assert fake_openai.in_flight.most <= j, (fake_openai.in_flight.most, calls)
        assert fake_openai.in_flight.now == 0


@pytest.mark.parametrize("kind, own_limit, most", [
    ("llm-rubric", None, 12),  # a row's assertions at once (promptfoo's limit of 3 a row is not factcli's)
    ("factscore", None, 12),  # the sentences decomposed at once: no limit of the method's own (it was 8)
    ("factscore", 3, 3),  # the method's config.maxConcurrency, when set, bounds one assertion's calls
])
def test_j_is_the_only_limit_a_row_and_its_methods_meet(fake_openai, tmp_path, monkeypatch, kind, own_limit, most):
    """One row at -j 12: its grader calls fill every place -j gives, however they are made (13
    assertions of the row, or 13 decompositions of one factscore; the endpoint's first structured
    request goes alone, run/calling/caller.FormatMemory, then 12 at once), unless the method's own
    maxConcurrency says fewer."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    sentences = " ".join(f"Paris has sight number {i}." for i in range(13))
    fake_openai.add_rule(".", sentences, model="m")
    fake_openai.add_rule(".", any_judge, model="judge")
    fake_openai.latency = 0.2
    kb = tmp_path / "kb.jsonl"
    kb.write_text(json.dumps({"title": "Paris", "text": sentences}) + "\n")
    grader = f'provider: {{id: "openai:chat:judge", config: {{apiBaseUrl: "{fake_openai.url}"}}}}'
    if kind == "llm-rubric":
        asserts = ", ".join(f'{{type: llm-rubric, value: "criterion {i}", {grader}}}' for i in range(13))
    else:
        limit = f", maxConcurrency: {own_limit}" if own_limit else ""
        asserts = f'{{type: factscore, value: Paris, config: {{knowledge: "{kb}", decompose: sentence{limit}}}, {grader}}}'
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Tell me about Paris."]
providers: [{{id: "openai:chat:m", config: {{apiBaseUrl: "{fake_openai.url}"}}}}]
tests:
  - assert: [{asserts}]
""")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-cache", "--no-progress-bar",
                                      "--no-table", "-j", "12"])
    graded = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"]
    assert not [c["reason"] for c in graded if (c.get("metadata") or {}).get("graderError")], result.output
    assert fake_openai.request_count >= 14
    assert fake_openai.in_flight.most == most
