"""Fast paths taken for speed (benchmarks/README.md) give exactly what the slow paths give."""

import hashlib
import json
import math

import pytest

from factcli.store.encode import finite
from factcli.store.redact import Scrubber


def slow_dumps(scrub: Scrubber, value):
    return json.dumps(finite(scrub.data(value)), ensure_ascii=False, default=str)


CONFIG = {"providers": [{"id": "openai:chat:m", "config": {"apiKey": "literal-key-123456",
                                                            "headers": {"X-Token": "hdr-secret-99"}}}]}
VALUES = [
    {"output": "plain text", "n": 1, "f": 0.5, "none": None, "list": [1, "two", {"three": 3}]},
    {"score": math.nan, "inf": math.inf, "nested": [{"x": -math.inf}]},
    {"text": "contains literal-key-123456 inside"},
    {"text": "the env secret sk-env-abcdef0123 leaks"},
    {"text": 'quoted "sk-env-abcdef0123" and \\ backslash'},
    {"api_key": "whatever", "other": 1},
    {"API-KEY": "x1234567"},
    {"\u212aey": 1, "api\u212aey": "kelvin-sign key"},  # IGNORECASE folds the Kelvin sign onto k
    {"Authorization": "Bearer abcdefghijkl"},
    {"headers": {"anything": "goes"}, "extra_headers": {"a": "b"}},
    {"max_tokens": 10, "maxTokens": 5, "tokenUsage": {"total": 3}},
    {"unicode": "naïve café ✓", "password_hint": "none"},
    {"obj": ValueError("sk-env-abcdef0123")},  # encoded by default=str
    {"tuple": (1, 2)},
    {3: "int key"},
    ["a", "b", {"secret": "s3cr3t-value"}],
    "just a string with sk-env-abcdef0123",
    "just a string",
    12.5,
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_scrubber_dumps_matches_the_walk(monkeypatch, value):
    monkeypatch.setenv("MY_API_KEY", "sk-env-abcdef0123")
    scrub = Scrubber(CONFIG)
    assert scrub.dumps(value) == slow_dumps(scrub, value)


def test_scrubber_dumps_still_redacts(monkeypatch):
    monkeypatch.setenv("MY_API_KEY", "sk-env-abcdef0123")
    scrub = Scrubber(CONFIG)
    out = scrub.dumps({"a": "sk-env-abcdef0123", "b": "literal-key-123456", "apiKey": "zzzzzzzz", "s": math.nan})
    assert "sk-env-abcdef0123" not in out and "literal-key-123456" not in out and "zzzzzzzz" not in out
    assert json.loads(out)["s"] is None


def whole_file_pass(scrub: Scrubber, text: str) -> str:
    for value, replacement in scrub.variants:
        text = text.replace(value, replacement)
    return text


@pytest.mark.parametrize("chunk", [1, 5, 7, 16, 1 << 20])
def test_scrubber_file_reads_in_chunks_and_misses_no_secret(tmp_path, monkeypatch, chunk):
    """The export pass reads a file a chunk at a time: secrets across chunk edges, at both ends,
    back to back and in their JSON and XML forms are replaced exactly as a whole-text pass would."""
    monkeypatch.setenv("MY_API_KEY", "sk-env-abc&def\"0123")
    scrub = Scrubber(CONFIG)
    monkeypatch.setattr(Scrubber, "FILE_CHUNK", chunk)
    text = ("literal-key-123456 start\r\n" + "x" * 13 + "hdr-secret-99hdr-secret-99 é ✓\n"
            + json.dumps("sk-env-abc&def\"0123") + " sk-env-abc&amp;def&quot;0123 " * 3 + "y" * 50
            + "sk-env-abc&def\"0123")
    path = tmp_path / "export.txt"
    path.write_text(text, encoding="utf-8", newline="")
    path.chmod(0o644)
    scrub.file(path)
    out = path.read_bytes().decode("utf-8")
    assert out == whole_file_pass(scrub, text)
    assert "0123" not in out and "literal-key" not in out and "hdr-secret" not in out and "\r\n" in out
    assert path.stat().st_mode & 0o777 == 0o644 and list(tmp_path.iterdir()) == [path]
    clean = tmp_path / "clean.txt"
    clean.write_text("nothing to hide\n" * 100, encoding="utf-8")
    before = clean.stat().st_mtime_ns
    scrub.file(clean)
    assert clean.stat().st_mtime_ns == before and len(list(tmp_path.iterdir())) == 2


def test_a_run_imports_only_the_assertion_families_it_uses():
    import subprocess
    import sys

    code = ("import sys\nfrom factcli.scoring.registry import lookup\n"
            "assert lookup('not-icontains').name == 'icontains'\n"
            "print(sorted(m for m in sys.modules if m.startswith('factcli.assertions.')))\n"
            "assert lookup('no-such-type') is None\n"
            "print('factcli.assertions.structured' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "['factcli.assertions.text']"
    assert out[1] == "True"  # an unknown name loads every family before giving up


TEMPLATE_VALUES = {"q": "question 1", "n": 3, "f": 1.5, "b": True, "none": None, "l": [1, "a", None],
                   "d": {"a": 1, "b": [1, 2]}, "nan": math.nan, "big": 1e21, "neg": -0.0, "u": "é\n"}
SIMPLE = ["Answer: {{q}}", "{{ n }} and {{f}} {{b}}", "{{l}}|{{d}}|{{nan}}|{{big}}|{{neg}}", "x {{ u }} y\n",
          "a}}{{q}}", "{{q}}{{q}}", "<<q>> and {{ n }}", "{{\tq\t}}", "{{q}}}}", "\\<<q>> {{q}}",
          "{{ missing }} {{ q }}"]  # (an undefined name: the fast path hands the row to Jinja)
# constants, self, comments, raw blocks, CRLF, `{{{`: never the fast path
NOT_SIMPLE = ["{{ true }}", "{{ none }}", "{{ self }}", "{% raw %}{{q}}{% endraw %}", "{{ q }}{#c#}",
              "{{q}}\r\nx", "x {{{ q }} }"]


@pytest.mark.parametrize("template", SIMPLE + NOT_SIMPLE)
def test_templates_without_control_flow_render_as_jinja_renders_them(template):
    """templating.render's fast path (literal text and `{{ name }}`) gives Jinja's own output."""
    from factcli import templating

    assert (templating._simple(template) is not None) == (template in SIMPLE)
    missing: list = []
    try:
        expected = templating._compile(template).render(TEMPLATE_VALUES)
    except Exception:  # noqa: BLE001 - a template Jinja refuses is refused by render too
        with pytest.raises(templating.TemplateError):
            templating.render(template, TEMPLATE_VALUES, missing)
        return
    assert templating.render(template, TEMPLATE_VALUES, missing) == expected
    assert missing == (["missing"] if "missing" in template else [])


def _grading(score=1.0, passed=True, reason="Assertion passed", **kw):
    from factcli.types import Assertion, GradingResult

    return GradingResult(passed, score, reason, kw.pop("assertion", None) or Assertion("contains", "x", raw={
        "type": "contains", "value": "x"}), **kw)


def test_a_kept_grading_text_is_the_text_of_its_json():
    """store/row_text.RowTexts keeps a grading's text by its leaves' assertions and verdicts: the text
    json gives the whole, for leaves that repeat, differ only by the type or sign of their score,
    carry tokens, metadata or named scores, nest, or cannot be encoded (NaN: the same error)."""
    from factcli.store.redact import keys_clean
    from factcli.store.row_text import RowTexts
    from factcli.types import Assertion, GradingResult, TokenUsage, grading_json

    shared = Assertion("regex", r"q \d+", raw={"type": "regex", "value": r"q \d+", "weight": 2})
    leaves = [_grading(assertion=shared), _grading(1, assertion=shared), _grading(True, assertion=shared),
              _grading(0.0, False, 'Expected output to contain "ü"', assertion=shared),
              _grading(-0.0, False, 'Expected output to contain "ü"', assertion=shared),
              _grading(0, False, 'Expected output to contain "ü"', assertion=shared),
              _grading(tokens_used=TokenUsage(1, 2, 3)), _grading(tokens_used=TokenUsage(reasoning=4)),
              _grading(metadata={"category": "A"}),
              _grading(named_scores={"m": 0.5}, named_score_weights={"m": 2.0}),
              GradingResult(True, 1.0, "set", component_results=[_grading(), _grading(0.5)])]
    tops = [GradingResult(True, 1.0, "All assertions passed", component_results=leaves * 2),
            GradingResult(False, 0.25, "x", named_scores={"m": 1}, named_score_weights={"m": 1.0},
                          tokens_used=TokenUsage(5, 5, 10), component_results=leaves[:3]),
            GradingResult(True, 1.0, "meta", metadata={"graderCalls": 1}, component_results=leaves[:2]),
            GradingResult(True, 1.0, "none"), GradingResult(True, 1, "none"), GradingResult(1, 1.0, "none")]
    tops += [GradingResult(True, 1.0, "one", component_results=[leaf]) for leaf in leaves]
    keyed = Assertion("llm-rubric", "x", raw={"type": "llm-rubric", "value": "x", "provider": {"config": {
        "apiKey": "zzzzzzzz"}}})
    tops.append(GradingResult(True, 1.0, "keyed", component_results=[_grading(assertion=keyed), leaves[0]]))
    texts = RowTexts()
    for _ in range(2):  # the second time from kept texts
        for g in tops:
            text, residue = texts.grading(g)
            assert text == json.dumps(grading_json(g, top=True), ensure_ascii=False, default=str, allow_nan=False)
            assert residue in ("", text) and keys_clean(residue) == keys_clean(text)
    assert texts.grading(tops[-1])[1] == texts.grading(tops[-1])[0]  # a secret-looking key: looked at whole
    for bad in (GradingResult(True, math.nan, "x", component_results=leaves),
                GradingResult(True, 1.0, "x", component_results=[_grading(math.nan)])):
        for _ in range(2):
            with pytest.raises(ValueError):
                texts.grading(bad)


@pytest.mark.parametrize("value", VALUES + [{"x": {1: 2, "a": [1.5, -0.0, 1e300]}, "s": "é\u2028\x00"}],
                         ids=range(len(VALUES) + 1))
def test_the_stored_encoder_is_json_encode(value):
    from factcli.types import test_key

    if isinstance(value, dict):  # test_key: the sorted form
        try:
            blob = json.dumps({"d": "", "v": value}, sort_keys=True, ensure_ascii=False, default=str)
        except TypeError:  # keys that do not sort
            with pytest.raises(TypeError):
                test_key(None, value)
        else:
            assert test_key(None, value) == hashlib.sha256(blob.encode()).hexdigest()[:16]
    from factcli.store.redact import _encode
    from factcli.types import json_encoder

    acyclic = json_encoder(allow_nan=False, check_circular=False)  # (store/records.RowEncoder: a row's vars)
    try:
        expected = json.JSONEncoder(ensure_ascii=False, default=str, allow_nan=False).encode(value)
    except ValueError:
        for encode in (_encode, acyclic):
            with pytest.raises(ValueError):
                encode(value)
        return
    assert _encode(value) == expected == acyclic(value)


@pytest.mark.parametrize("variables", [v for v in VALUES if isinstance(v, dict)] + [
    {}, {"q": "question 1"}, {"b": "2", "a": "1"}, {"a": 1, "b": True, "c": None, "d": 1.5, "e": "é"},
    {"q": {"z": 1, "a": 2}}, {"q": [{"z": 1, "a": 2}]}, {2: "b", 1: "a"}, {1: "a", "b": 2}, {True: 1, "x": 2}])
@pytest.mark.parametrize("description", [None, "", "Row #1", "naïve \u2028 \"q\""])
def test_a_test_key_from_the_vars_text_is_the_test_key(variables, description):
    """types.test_key_of reuses the vars' stored JSON as their sorted form when it is that: the key is
    test_key's, or the same error."""
    from factcli.store.redact import _encode
    from factcli.types import test_key, test_key_of

    try:
        text = _encode(variables)
    except ValueError:  # NaN: the row takes the general way
        return
    try:
        expected = test_key(description, variables)
    except TypeError:  # keys that do not sort
        with pytest.raises(TypeError):
            test_key_of(description, variables, text)
        return
    assert test_key_of(description, variables, text) == expected


def _reference_fields(scrub: Scrubber, r) -> dict:
    """A stored row's JSON fields as the walk makes them from the row's values."""
    from factcli.types import grading_json

    step, resp = r.step, r.response
    extra = {"testCase": {k: (None if k == "vars" else v) for k, v in step.test.raw.items()},
             "metadata": dict(step.test.metadata),
             "response": {"present": resp.error is None or resp.output is not None, "error": resp.error,
                          "finishReason": resp.finish_reason, "metadata": dict(resp.metadata),
                          "tokenUsage": resp.token_usage.to_json(), "latencyMs": resp.latency_ms,
                          "retries": resp.retries},
             "exact": {"score": r.score, "latencyMs": r.latency_ms, "cost": resp.cost}}
    if r.conversation is not None:
        extra["conversation"] = r.conversation
    return {"named": slow_dumps(scrub, dict(r.named_scores)),
            "grading": None if r.grading is None else slow_dumps(scrub, grading_json(r.grading, top=True)),
            "vars": slow_dumps(scrub, dict(step.vars)), "extra": slow_dumps(scrub, extra)}


def _rows():
    from factcli.types import (Assertion, EvalResult, EvalStep, GradingResult, Prompt, ProviderResponse,
                               ProviderSpec, TestCase, TokenUsage, compact_row)

    shared = [Assertion("contains", "A", raw={"type": "contains", "value": "A"}),
              Assertion("regex", r"\d", raw={"type": "regex", "value": r"\d"})]
    raws = [a.raw for a in shared]
    rows = []
    variants = [
        {}, {"score": 1}, {"passed": False}, {"error": "sk-env-abcdef0123 failed"}, {"tokens": TokenUsage(3, 4, 7)},
        {"metadata": {"model": "m"}}, {"conversation": {"id": None, "turn": 2}}, {"latency": 12.5},
        {"finish": None}, {"raw_extra": {"headers": {"X": "y"}}}, {"raw_extra": {"apiKey": "literal-key-123456"}},
        {"score": math.nan}, {"raw_extra": {3: "int key"}}, {"vars": {"q": "literal-key-123456"}},
        {"description": "api_key test"}, {"named": {"m": 0.5}}, {"compact": True}, {"cost": None},
        # the quick way's own edges (records._texts): zeros that JSON signs, numbers of other types,
        # values of a test's own keys that are not strings, vars that are not flat or not in key order
        {"score": 0.0}, {"score": -0.0}, {"score": 0.0, "passed": False}, {"score": True}, {"score": 1}, {"cost": 3},
        {"cost": -0.0}, {"cost": math.inf}, {"latency": 0.0}, {"latency": -0.0}, {"latency": 7}, {"latency": True},
        {"raw_extra": {"threshold": 0.5, "options": {"provider": "echo"}, "tags": ["a", 1], "x": None}},
        {"raw_extra": {"Authorization": "Bearer abcdefghijkl"}}, {"raw_extra": {"options": {"headers": {"a": 1}}}},
        {"vars": {"b": "2", "a": "1"}}, {"vars": {"a": "1", "b": "2", "c": 3, "d": True, "e": None, "f": 1.5}},
        {"vars": {"q": {"z": 1, "a": 2}}}, {"vars": {"q": ["x", {"z": 1, "a": 2}]}}, {"vars": {2: "b", 1: "a"}},
        {"vars": {"q": math.nan}}, {"vars": {}}, {"description": None},
        {"description": "naïve ✓ \u2028"}, {"vars": {"q": "naïve ✓"}}, {"output": {"answer": "sk-env-abcdef0123"}},
        {"output": ["a", 1.5]}, {"output": ""}, {"output": None}, {"named": {}, "compact": True},
        {"prompt": "Answer: literal-key-123456", "output": "plain"}, {"description": "sk-env-abcdef0123", "output": 1},
        {"error": "literal-key-123456", "output": None},
    ]
    for i, v in enumerate(variants * 2):  # twice: the second time from kept texts
        test = TestCase(description=v.get("description", f"Row #{i}"), vars=v.get("vars", {"q": f"question {i}"}),
                        assertions=shared, metadata={"m": 1} if i % 3 == 0 else {},
                        raw={"vars": {"q": "x"}, "assert": raws, "options": {}, "description": f"Row #{i}",
                             **v.get("raw_extra", {})})
        step = EvalStep(i, 0, 0, test, test.vars, Prompt("Answer: {{q}}", "p"), ProviderSpec("echo"))
        score = v.get("score", 1.0)
        leaves = [GradingResult(v.get("passed", True), score, "Assertion passed", shared[0]),
                  GradingResult(True, 1.0, "Assertion passed", shared[1])]
        grading = GradingResult(v.get("passed", True), score, "All assertions passed",
                                named_scores=v.get("named", {}), component_results=leaves)
        resp = ProviderResponse(output=v.get("output", "Answer sk-env-abcdef0123"), error=v.get("error"), token_usage=v.get("tokens", TokenUsage()),
                                cost=v.get("cost", 0.0), latency_ms=v.get("latency", 0),
                                finish_reason=v.get("finish", "stop"), metadata=v.get("metadata", {}))
        r = EvalResult(step, v.get("prompt", "Answer: x"), resp, grading, True, score, dict(v.get("named", {})), 0,
                       conversation=v.get("conversation"))
        if v.get("compact"):
            compact_row(r)
        rows.append(r)
    return rows


@pytest.mark.parametrize("secrets", [True, False])
def test_a_stored_row_has_the_fields_the_walk_makes(monkeypatch, secrets):
    """store/records.RowEncoder makes its grading and extra fields from kept texts (store/row_text.py):
    the same bytes as encoding and scrubbing the whole values, for rows that repeat, carry secrets,
    secret-looking keys, headers, tokens, metadata, NaN, keys that are not strings, conversations."""
    from factcli.store.records import RowEncoder
    from factcli.types import test_key

    if secrets:
        monkeypatch.setenv("MY_API_KEY", "sk-env-abcdef0123")
    scrub = Scrubber(CONFIG if secrets else {})
    encoder = RowEncoder(scrub)
    for r in _rows():
        row = encoder.row("run", r, 1, created_at="t")
        expected = _reference_fields(scrub, r)
        assert (row[14], row[15], row[23], row[25]) == (expected["named"], expected["grading"], expected["vars"],
                                                        expected["extra"])
        assert row[6] == test_key(r.step.test.description, r.step.vars)
        assert row[7] == scrub.text(r.step.test.description) and row[24] == scrub.text(r.rendered_prompt)
        assert row[11] == scrub.text(r.error)
        output = r.response.output
        assert row[12:14] == ((scrub.text(output), 0) if output is None or isinstance(output, str)
                              else (slow_dumps(scrub, output), 1))
        assert row[10] == (None if isinstance(r.score, bool) or not math.isfinite(r.score) else r.score)
        assert row[21] == (None if r.response.cost is None or not math.isfinite(r.response.cost)
                           else r.response.cost)


def test_an_in_process_call_gives_what_the_full_path_gives(monkeypatch):
    """run/calling/caller.py calls an in-process provider (echo) without pacing, timeout or retries: the reply,
    its retries and latency, the error scrubbed and the call counted are what the full path gives;
    a limit set on it or a budget takes the full path."""
    import asyncio

    from factcli.providers.base import RenderedPrompt
    from factcli.providers.echo import EchoProvider
    from factcli.providers.request import CallRequest
    from factcli.run.calling.budget import Budget
    from factcli.run.calling.caller import Caller
    from factcli.run.calling.limits import Limiters
    from factcli.types import ProviderResponse, ProviderSpec

    monkeypatch.setenv("MY_API_KEY", "sk-env-abcdef0123")

    class Clock:  # every look at the clock 2 ms later: a latency that load on the machine cannot move
        now = 0.0

        def __getattr__(self, name):
            return getattr(time, name)

        def perf_counter(self):
            Clock.now += 0.002
            return Clock.now

    import time

    from factcli.run.calling import caller as calls

    monkeypatch.setattr(calls, "time", Clock())

    class Failing(EchoProvider):
        async def call(self, request):
            return ProviderResponse(error="refused sk-env-abcdef0123", cost=0.0)

    prompt = CallRequest(RenderedPrompt(text="Answer: 1", messages=[{"role": "user", "content": "Answer: 1"}]))
    for kind in (EchoProvider, Failing):
        for config in ({}, {"maxConcurrency": 2}):
            for budget in (None, 1.0):
                replies = []
                for in_process in (True, False):
                    monkeypatch.setattr(kind, "in_process", in_process)
                    caller = Caller(None, limiters=Limiters(4), budget=None if budget is None else Budget(budget))
                    resp = asyncio.run(caller.call(kind(ProviderSpec("echo", config=config)), prompt))
                    replies.append((resp.output, resp.error, resp.retries, resp.latency_ms, resp.cost, caller.calls,
                                    caller.retries))
                assert replies[0] == replies[1]
                assert "sk-env" not in str(replies)
    assert replies[0][1] == "refused ${MY_API_KEY}" and replies[0][5] == 1


def test_an_assertion_looked_up_once_still_sees_its_type_and_value_change():
    """The scorer keeps each assertion's registered type and static value (scorer._plan): an assertion
    whose type or value is set anew is scored with the new one, a templated value is rendered per row."""
    import asyncio

    from factcli.scoring.scorer import run_assertions
    from factcli.types import Assertion, ProviderResponse, TestCase

    a = Assertion("contains", "Answer")
    templated = Assertion("contains", "{{q}}")
    test = TestCase(assertions=[a, templated])

    def score(output: str, q: str) -> list[bool]:
        g = asyncio.run(run_assertions(test, output=output, variables={"q": q}, prompt="p",
                                       response=ProviderResponse(output=output)))
        return [c.passed for c in g.component_results]

    assert score("Answer: 1", "1") == [True, True]
    assert score("Answer: 1", "2") == [True, False]
    a.value = "Question"
    assert score("Answer: 1", "1") == [False, True]
    a.type = "not-contains"
    assert score("Answer: 1", "1") == [True, True]


def _prebound_cases():
    """(assertion lists, whether every list is prebound) for scoring's fast path."""
    from factcli.types import Assertion

    def a(type_, value=None, **kw):
        raw = {"type": type_, "value": value, **kw}
        return Assertion(type_, value, raw=raw, **kw)

    fast = [
        [a("contains", "Answer"), a("regex", r"question \d+"), a("not-icontains", "ZEBRA")],
        [a("icontains", "answer"), a("not-contains", "Answer"), a("not-regex", r"\d"), a("starts-with", "Ans")],
        [a("equals", "Answer: question 1"), a("not-equals", "x"), a("equals", 5), a("equals", {"a": 1}),
         a("equals", [1, 2])],
        [a("contains-any", "foo, Answer"), a("contains-any", ["x", "y"]), a("icontains-any", '"ANSWER", z'),
         a("not-contains-any", ["question"])],
        [a("contains-all", ["Answer", "question", "zz", "yy"]), a("icontains-all", "answer,QUESTION"),
         a("not-icontains-all", ["a", "b"])],
        [a("contains", "Answer", weight=0), a("contains", "nope", weight=0), a("contains", "nope", weight=2),
         a("contains", "Answer", weight=3)],
        [a("contains", "Answer", metric="m"), a("regex", "nope", metric="m", weight=2), a("contains", 1, metric="n"),
         a("contains", "x", metric="z", weight=0)],
        [a("contains", "say {not} this"), a("not-contains", "say {not} this"), a("contains", 1.5)],
        [a("contains", "Answer", threshold=0.5), a("contains-all", [1, "a", None, True])],
        # values and metric names rendered per row
        [a("contains", "{{q}}"), a("regex", r"\d"), a("not-icontains", "{{ q }}x", weight=0),
         a("contains", "Answer", metric="{{q}}"), a("contains", "nope", metric="{{q}}", weight=2)],
        [a("contains-any", ["{{q}}", "zz"]), a("equals", "Answer: {{q}}"), a("regex", "({{q}}"),
         a("contains", "x", metric="m"), a("regex", "(nope", metric="m", weight=0)],
        [a("contains", "Answer"), a("contains", "{{missing}}")],  # rendered empty: the row is an ERROR
        [a("starts-with", "{{q}}"), a("contains", "{{q}}", metric="{{q}}", threshold=0.5)],
    ]
    fast += [[a("regex", "(unclosed")], [a("contains", "x"), a("contains", "")], [a("contains", ["a"])],
             [a("starts-with", 3)], [a("contains-any", [])]]  # refused values: their handler's own result or error
    general = [
        [a("contains", "x"), a("is-json")],  # a type without a rule
        [a("contains", "Answer", transform="output.upper()")],
        [a("select-best", "x")],
    ]
    return fast, general


@pytest.mark.parametrize("output", ["Answer: question 1", "nothing", "ANSWER 5 {\"a\": 1}", {"a": 1}, [1, 2], 5,
                                    None, "say not this 1.5 Answer True null"])
@pytest.mark.parametrize("threshold", [None, 0.5, 1, math.nan])
def test_prebound_checks_score_as_the_handlers_do(monkeypatch, output, threshold):
    """scorer.score_now (a test's assertions prebound once, scored without a coroutine) gives what the
    general path (a handler and a context per assertion) gives: every field of the result
    and of each component, in order, the same assertion objects, the same errors; a list that cannot be
    prebound takes the general path."""
    import asyncio

    from factcli.scoring import scorer
    from factcli.types import ProviderResponse, TestCase

    fast, general = _prebound_cases()

    def score(test):
        try:
            g = asyncio.run(scorer.run_assertions(test, output=output, variables={"q": "question 1"}, prompt="p",
                                                  response=ProviderResponse(output=output)))
        except Exception as exc:  # noqa: BLE001 - both paths must refuse alike
            return f"{type(exc).__name__}: {exc}", None
        return repr(g), [c.assertion for c in g.component_results]

    for assertions in fast + general:
        test = TestCase(assertions=assertions, threshold=threshold, raw={})
        try:
            prebound = scorer.score_now(test, output, {"q": "question 1"}, "p", ProviderResponse()) is not None
        except Exception:  # noqa: BLE001 - an ERROR row (compared below)
            prebound = True
        assert prebound == (assertions in fast), assertions
        got = [score(test), score(test)]  # (the second time from the kept checks)
        with monkeypatch.context() as m:
            m.setattr(scorer, "score_now", lambda *args: None)
            expected = score(test)
        assert got[0] == expected and got[1] == expected
        if expected[1] is not None and prebound:
            assert all(x is y for x, y in zip(expected[1], got[0][1]))


def test_prebound_checks_follow_a_changed_assertion_list():
    """The checks kept for a list are made again when the list or one of its assertions changes."""
    import asyncio

    from factcli.scoring import scorer
    from factcli.types import Assertion, ProviderResponse, TestCase

    test = TestCase(assertions=[Assertion("contains", "Answer")], raw={})

    def score_now(test, output):
        return scorer.score_now(test, output, {}, "p", ProviderResponse())

    assert score_now(test, "Answer").passed
    test.assertions[0].weight = 0
    test.assertions[0].value = "nope"
    assert score_now(test, "Answer").component_results[0].metadata == {"weightZeroFailed": True}
    test.assertions[0].transform = "output"
    assert score_now(test, "Answer") is None
    test.assertions[0].transform = None
    test.assertions.append(Assertion("not-contains", "Answer"))
    assert score_now(test, "Answer").reason == "Expected output to not contain \"Answer\""
    test.raw["assertScoringFunction"] = "file:///nowhere.py"
    assert score_now(test, "Answer") is None
    listed = TestCase(assertions=[Assertion("contains-any", ["nope"])], raw={})
    assert not score_now(listed, "Answer").passed
    listed.assertions[0].value.append("Answer")  # changed in place: seen, as the general path sees it
    assert score_now(listed, "Answer").passed
    empty = TestCase(raw={})
    assert score_now(empty, "x") is None
    assert asyncio.run(scorer.run_assertions(empty, output="x", variables={}, prompt="p",
                                             response=ProviderResponse())).reason == "No assertions"


def test_a_row_scored_by_prebound_checks_is_the_row_of_the_general_path(monkeypatch):
    """run/executor scores a row by scorer.score_now when it can (no grader ledger, no coroutine) and
    by run_assertions otherwise: the same EvalResult either way, an ERROR row included."""
    import asyncio

    from factcli.run import executor as executor_mod
    from factcli.run import runner
    from factcli.run.calling.caller import Caller
    from factcli.run.executor import Executor
    from factcli.run.calling.limits import Limiters
    from factcli.providers.registry import create_provider
    from factcli.scoring import scorer

    suite = runner.load({
        "prompts": ["Answer: {{q}}"], "providers": ["echo"],
        "defaultTest": {"assert": [{"type": "contains", "value": "Answer", "metric": "m"},
                                   {"type": "regex", "value": r"question \d+", "weight": 2}]},
        "tests": [{"vars": {"q": "question 1"}},
                  {"vars": {"q": "nothing"}, "assert": [{"type": "not-icontains", "value": "{{q}}"}]},
                  {"vars": {"q": "x"}, "assert": [{"type": "contains", "value": "{{q}}"}], "threshold": 0.5},
                  # rendered empty: an ERROR row
                  {"vars": {"q": "y"}, "assert": [{"type": "contains", "value": "{{ undefined_zzz }}"}]}],
    })

    def rows() -> list[str]:
        run = runner.prepare(suite, runner.RunOptions())
        caller = Caller(None, limiters=Limiters(4))
        ex = Executor(caller, {i: create_provider(s, suite.base_dir) for i, s in enumerate(suite.providers)},
                      eval_id="e", conversations=run.conversations)
        out: list = []
        asyncio.run(ex.run(list(run.steps), out.append))
        return sorted(repr(r) for r in out)

    fast = rows()
    monkeypatch.setattr(executor_mod, "score_now", lambda *args: None)
    monkeypatch.setattr(scorer, "score_now", lambda *args: None)  # (run_assertions' own use of it)
    assert rows() == fast
    assert sum("rendered empty" in r and "failure_reason=2" in r for r in fast) == 1
    assert sum("failure_reason=1" in r for r in fast) == 1


@pytest.mark.parametrize("output", ["Answer: question 1", "nothing", {"a": 1}, None])
@pytest.mark.parametrize("threshold", [None, 0.5])
def test_a_recorded_rows_prebound_leaves_share_the_empties_a_recorded_row_gets(output, threshold):
    """score_now(recorded=True), the executor's: the same result, field by field and by repr, as the
    grading handed to a caller (check(), run_assertions); its leaves hold the shared read-only empties
    compact_row gives a recorded row (a failed weight-0 leaf its own metadata), the aggregate keeps
    containers of its own (select-best and max-score append to them), and a caller's grading keeps
    plain ones throughout."""
    from factcli.scoring import scorer
    from factcli.types import EMPTY_DICT, EMPTY_LIST, ZERO_TOKENS, GradingResult, ProviderResponse, TestCase, \
        TokenUsage, compact_row

    assert repr(ZERO_TOKENS) == repr(TokenUsage()) and ZERO_TOKENS == TokenUsage()
    fast, _ = _prebound_cases()
    for assertions in fast:
        test = TestCase(assertions=assertions, threshold=threshold, raw={})

        def score(recorded):
            try:
                return scorer.score_now(test, output, {"q": "question 1"}, "p", ProviderResponse(), None, None,
                                        recorded)
            except Exception as exc:  # noqa: BLE001 - both refuse alike
                return f"{type(exc).__name__}: {exc}"

        shared, own = score(True), score(False)
        assert repr(shared) == repr(own) and shared == own, assertions
        if not isinstance(own, GradingResult):
            continue
        assert [c.assertion for c in shared.component_results] == [c.assertion for c in own.component_results]
        for g in (shared, own):  # the aggregate: its own containers
            assert type(g.component_results) is list and type(g.tokens_used) is TokenUsage
            assert all(type(getattr(g, k)) is dict for k in ("named_scores", "named_score_weights", "metadata"))
        for c in own.component_results:
            assert all(type(getattr(c, k)) is dict for k in ("named_scores", "named_score_weights", "metadata"))
            assert type(c.tokens_used) is TokenUsage and type(c.component_results) is list
        checks = scorer._checks(assertions)
        for c, check in zip(shared.component_results, checks, strict=True):
            if check[7] is not None:  # a value rendered per row: its handler's own result
                continue
            assert c.named_scores is EMPTY_DICT and c.named_score_weights is EMPTY_DICT
            assert c.tokens_used is ZERO_TOKENS and c.component_results is EMPTY_LIST
            assert c.metadata is EMPTY_DICT or c.metadata == {"weightZeroFailed": True}
        row = type("Row", (), {})()  # what compact_row leaves of either is the same
        for g in (shared, own):
            row.named_scores, row.response, row.grading = {}, ProviderResponse(), g
            compact_row(row)
        assert repr(shared) == repr(own)
