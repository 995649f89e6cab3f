"""Judge trouble is its own outcome (issue 44): a row the judge could not judge (HTTP errors after the
retries, a reply its step's schema does not allow, a reply cut off) is an ERROR, not a failure or a
pass. It is left out of pass rates and metric means (said beside them), re-run by --retry-errors,
never kept in the response cache at any step, and ends the run with exit 4 (contract §2); 100 wins."""

import asyncio
import json

import pytest
from conftest import write
from test_factual_correctness import BAD, GOOD, REFERENCE, scripted_judge
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()

JUDGE = '{id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'
PASS = '{"reason": "fine", "pass": true, "score": 1}'

HEAD = f"""
prompts: ["Q: {{{{q}}}}"]
providers: [echo]
defaultTest: {{options: {{provider: {JUDGE}}}}}
tests:
"""
RUBRIC = HEAD + """\
  - vars: {q: one}
    assert: [{type: llm-rubric, value: "is polite", metric: quality}]
  - vars: {q: two}
    assert: [{type: llm-rubric, value: "is polite", metric: quality}]
  - vars: {q: three}
    assert: [{type: llm-rubric, value: "is polite", metric: quality}]
"""


def _eval(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", *map(str, args)])


def _said(result) -> str:
    return " ".join(result.output.split())


def _judge_calls(server) -> int:
    return sum(1 for r in server.requests if r["json"].get("model") == "judge")


def test_a_judge_outage_is_not_judged_exits_4_and_retry_errors_judges_the_rows(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "1")
    monkeypatch.setenv("FACTCLI_BACKOFF_MS", "1")
    cfg = write(tmp_path / "c.yaml", RUBRIC)
    fake_openai.enqueue_fault(500, times=6)  # every call and its retry
    out = tmp_path / "r.json"
    first = _eval("-c", cfg, "-o", out)
    said = _said(first)
    assert first.exit_code == 4, first.output
    assert "Successes: 0 Failures: 0 Errors: 3 (3 not judged) Pass rate: n/a (no row was judged)" in said
    assert "Retry errors: factcli eval --retry-errors" in said
    doc = json.loads(out.read_text())
    # promptfoo's layout keeps its own counts (a grading failure is a failed row there); factcli's say more
    assert doc["results"]["stats"]["failures"] == 3 and doc["results"]["stats"]["errors"] == 0
    assert [r["success"] for r in doc["results"]["results"]] == [False] * 3
    assert all(r["factcli"]["notJudged"] for r in doc["results"]["results"])
    assert doc["factcli"]["notJudged"] == 3 and doc["factcli"]["passRate"] is None
    assert doc["factcli"]["columns"][0]["notJudged"] == 3
    view = _said(runner.invoke(app, ["view", "latest"]))
    assert "3 error (3 not judged) · pass rate n/a" in view, view
    assert "ERROR" in _said(runner.invoke(app, ["show", "latest", "0"]))
    (shown,) = json.loads(runner.invoke(app, ["show", "latest", "0", "--json"]).output)
    assert (shown["failureReason"], shown["notJudged"]) == (1, True)

    fake_openai.add_rule(".", PASS, model="judge")  # the judge is back
    second = _eval("--retry-errors", "latest", "-o", out)  # (-o again: the store's list is not trusted)
    said = _said(second)
    assert second.exit_code == 0, second.output
    assert "0 of 3 rows kept, 3 to run" in said
    assert "Successes: 3 Failures: 0 Errors: 0 Pass rate: 100.00%" in said


def test_rows_not_judged_are_left_out_of_the_pass_rate_and_the_metric_means(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    cfg = write(tmp_path / "c.yaml", RUBRIC)
    fake_openai.add_rule("one", PASS, model="judge")
    fake_openai.add_rule("two", "I would say it is polite enough.", model="judge")  # prose, JSON was asked
    fake_openai.add_rule("three", PASS, model="judge")
    out = tmp_path / "r.json"
    result = _eval("-c", cfg, "-o", out)
    said = _said(result)
    assert result.exit_code == 4, result.output  # every row judged passed; one could not be judged
    assert "Successes: 2 Failures: 0 Errors: 1 (1 not judged) Pass rate: 100.00%" in said
    assert "over the 2 rows judged" in said
    assert "1.000 (2 of 3 judged)" in said  # quality's mean, over the rows judged
    doc = json.loads(out.read_text())
    row = doc["results"]["results"][1]
    component = row["gradingResult"]["componentResults"][0]
    assert component["metadata"]["graderError"] is True
    # neither the step's schema nor its text form (promptfoo's JSON): refused in promptfoo's words
    assert component["reason"] == "Could not extract JSON from llm-rubric response"
    assert doc["factcli"]["columns"][0]["namedNotJudged"] == {"quality": 1}
    footer = _said(runner.invoke(app, ["view", "latest"]))
    assert "1.000 (2 of 3 judged)" in footer and "2/0/1 (1 not judged)" in footer


MIXED = HEAD + """\
  - vars: {q: one}
    assert: [{type: llm-rubric, value: "is polite"}, {type: contains, value: "nowhere"}]
  - vars: {q: two}
    assert: [{type: llm-rubric, value: "is polite"}]
"""


@pytest.mark.parametrize("threshold, said, code", [
    # row one fails on `contains` whatever the judge says: a failure, and 100 wins over 4
    (None, "Successes: 0 Failures: 1 Errors: 1 (1 not judged) Pass rate: 0.00%", 100),
    # with a threshold the judge's verdict could have made row one pass: it is not judged either
    (0.5, "Successes: 0 Failures: 0 Errors: 2 (2 not judged) Pass rate: n/a", 4),
])
def test_a_failure_the_judge_could_not_change_beats_a_grading_error(fake_openai, tmp_path, monkeypatch,
                                                                    threshold, said, code):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    text = MIXED if threshold is None else MIXED.replace("  - vars: {q: one}\n", f"  - vars: {{q: one}}\n    threshold: {threshold}\n")
    fake_openai.add_rule(".", "no verdict here", model="judge")
    result = _eval("-c", write(tmp_path / "c.yaml", text))
    assert said in _said(result)
    assert result.exit_code == code, result.output


# ---------------------------------------------------------------- the response cache


FC = f"""
prompts: ["Tell me about Paris ({{{{which}}}})."]
providers: [{{id: "openai:chat:m", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
defaultTest: {{options: {{provider: {JUDGE}}}}}
tests:
  - vars: {{which: bad}}
    assert: [{{type: factual-correctness, value: "{REFERENCE}"}}]
  - vars: {{which: good}}
    assert: [{{type: factual-correctness, value: "{REFERENCE}"}}]
"""


def _fc_models(server):
    server.add_rule(r"\(bad\)", BAD, model="m")
    server.add_rule(r"\(good\)", GOOD, model="m")


def _broken_then_fixed(server, tmp_path, broken):
    """A run with the broken judge (its rows not judged), then one with the judge fixed: -> (judge calls
    before the second run, the second run's result)."""
    _fc_models(server)
    server.add_rule(".", broken, model="judge")
    cfg = write(tmp_path / "c.yaml", FC)
    first = _eval("-c", cfg)
    assert first.exit_code == 4 and "Errors: 2 (2 not judged)" in _said(first), first.output
    server.clear_rules()
    _fc_models(server)
    server.add_rule(".", scripted_judge, model="judge")
    asked = _judge_calls(server)
    second = _eval("-c", cfg)
    assert second.exit_code == 0, second.output
    return asked, second


def test_an_unreadable_decomposition_is_not_served_from_the_cache_next_run(fake_openai, tmp_path):
    """The issue's trial: decomposition replies with no JSON, the judge fixed, the eval run again."""

    def broken(body):
        text = body["messages"][-1]["content"]
        if text.startswith("<text>") and REFERENCE in text:
            return "Sure! The reference says two things about Paris."
        return scripted_judge(body)

    asked, second = _broken_then_fixed(fake_openai, tmp_path, broken)
    assert "Successes: 2" in _said(second)
    # the reference is decomposed again (once: both rows ask for the same reply), not read from the cache
    again = [r for r in fake_openai.requests if r["json"]["model"] == "judge"][asked:]
    assert sum(REFERENCE in r["json"]["messages"][-1]["content"]
               and r["json"]["messages"][-1]["content"].startswith("<text>") for r in again) == 1


def test_a_reply_that_fits_its_schema_but_cannot_be_used_leaves_the_cache(fake_openai, tmp_path):
    """One verdict for two claims fits the verification step's schema; the step cannot use it,
    so the grading fails and none of the replies it read stays cached."""

    def short(body):
        reply = json.loads(scripted_judge(body))
        if "verdicts" in reply:
            reply["verdicts"] = reply["verdicts"][:1]
        return json.dumps(reply)

    asked, _ = _broken_then_fixed(fake_openai, tmp_path, short)
    # every step asked again: three decompositions (the reference's shared) and four verifications
    assert _judge_calls(fake_openai) - asked == 7
    third = _eval("-c", tmp_path / "c.yaml")  # now every reply was usable: all from the cache
    assert third.exit_code == 0 and _judge_calls(fake_openai) - asked == 7


CLAIM_LEVEL = ("factual-correctness", "factscore", "safe", "facts-grounding", "simpleqa", "context-faithfulness",
               "context-recall", "context-relevance", "answer-relevance", "citations", "context-precision",
               "noise-sensitivity")


def _claim_level_steps():
    from factcli.scoring import replies
    from factcli.scoring.registry import lookup

    for kind in CLAIM_LEVEL:
        try:
            lookup(kind)  # registers the family's steps
        except Exception:
            pass
    return sorted(name for name, r in replies.REPLIES.items() if set(r.types) & set(CLAIM_LEVEL))


STEPS = _claim_level_steps()


def test_every_claim_level_method_has_its_steps_checked():
    from factcli.scoring import replies

    kinds = {t for name in STEPS for t in replies.REPLIES[name].types}
    assert {"factual-correctness", "factscore", "safe", "facts-grounding", "simpleqa", "context-faithfulness",
            "context-recall", "context-relevance"} <= kinds


@pytest.mark.parametrize("step", STEPS)
def test_no_step_keeps_an_unreadable_or_cut_off_reply_in_the_cache(step, fake_openai, tmp_path):
    """Every step of every claim-level method, through the path every grader call takes (Grader.complete
    -> run/calling/caller.Caller -> the response cache): prose where its JSON was asked is a grading error and
    is asked again; so is a reply cut off; a reply that fits is kept."""
    from factcli.run.calling.cache import ResponseCache
    from factcli.run.calling.caller import Caller, RetryPolicy
    from factcli.scoring import replies
    from factcli.providers.openai_provider import aclose_all
    from factcli.scoring.grading import Grader
    from factcli.types import ProviderSpec

    reply = replies.REPLIES[step]
    spec = ProviderSpec(id="openai:chat:judge", config={"apiBaseUrl": fake_openai.url})
    messages = [{"role": "user", "content": f"step {step}"}]

    async def ask():
        cache = ResponseCache(tmp_path / "cache")
        try:
            return await Grader(Caller(cache, RetryPolicy(max_retries=0))).complete(spec, messages, reply=reply)
        finally:
            cache.close()
            await aclose_all()  # this loop's HTTP session, as a run closes it (runner.execute)

    # a baseline response is free text by design, and the statements step's text form is its lines (its
    # prompt asks for one statement a line): both read any text but a blank one
    free = ("baseline_response", "faithfulness_statements")
    prose = "   " if step in free else "Sure, here is my analysis: it all looks fine to me."
    fake_openai.add_rule(".", prose, model="judge")
    first = asyncio.run(ask())
    assert first.error and first.refused and first.parsed is None
    # a step with a text form (scoring/replies.py: `protocol`) refuses it in its own words
    assert reply.protocol is not None or "does not fit" in first.error, first.error
    asyncio.run(ask())
    assert _judge_calls(fake_openai) == 2  # asked again: the prose was not kept
    fake_openai.clear_rules()
    fake_openai.add_rule(".", {"content": '{"', "finish_reason": "length"}, model="judge")
    assert "cut off" in asyncio.run(ask()).error
    asyncio.run(ask())
    assert _judge_calls(fake_openai) == 4  # a reply cut off is not kept either
    fake_openai.clear_rules()
    good = json.dumps(_valid(reply.shape))
    fake_openai.add_rule(".", good, model="judge")
    assert asyncio.run(ask()).parsed is not None
    assert asyncio.run(ask()).parsed is not None
    assert _judge_calls(fake_openai) == 5  # the reply that fits is kept


def _valid(shape):
    """The smallest value a step's shape allows."""
    from factcli.scoring import replies as r

    if isinstance(shape, r.Obj):
        return {k: _valid(s) for k, s in shape.fields.items()}
    if isinstance(shape, r.ListOf):
        return [_valid(shape.item) for _ in range(shape.min_items)]
    if isinstance(shape, r.Maybe):
        return None
    if isinstance(shape, r.Choice):
        return shape.values[0]
    if isinstance(shape, r.Flag):
        return True
    if isinstance(shape, r.Int):
        return shape.low or 0
    if isinstance(shape, r.Number):
        return shape.low if shape.low is not None else 0.5
    return "text"


def test_a_failing_step_cancels_its_siblings_and_every_step_is_still_counted():
    """claims.gather_calls: once one step of a row fails (the row is a grading error), its other steps
    stop calling the judge; what each spent is still merged into the row's call."""
    import asyncio

    from factcli.methods.claims import JudgeCall, JudgeError, gather_calls

    seen = []

    async def fails(sub):
        sub.cost += 1
        raise JudgeError("unreadable")

    async def slow(sub):
        sub.cost += 2
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        seen.append("finished")

    call = JudgeCall()

    async def main():
        with pytest.raises(JudgeError):
            await gather_calls(call, fails, slow)
        assert seen == ["cancelled"]  # before the failure reached the caller, not at the loop's end

    asyncio.run(main())
    assert call.cost == 3


def test_a_rows_assertions_stop_calling_once_one_of_them_fails():
    """scoring.gather.gather_all, which the scorer runs a row's assertions with: a failure (a budget stop,
    an aborting run) cancels the row's other assertions before it reaches the caller, so none of them
    calls a model after the run has closed its HTTP sessions."""
    import asyncio

    from factcli.scoring.gather import gather_all

    seen = []

    async def fails():
        raise RuntimeError("budget reached")

    async def slow():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def quick():
        return 1

    async def main():
        assert await gather_all([quick(), quick()]) == [1, 1]
        with pytest.raises(RuntimeError):
            await gather_all([slow(), fails()])
        assert seen == ["cancelled"]

    asyncio.run(main())
