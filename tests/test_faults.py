"""Fault injection: a fixed fraction of the fake server's replies are faults of every kind.

Whatever the faults, the eval finishes, every row is present exactly once (results JSON and the
store), a row is ERROR only when its retries ran out, and retries are bounded and reported.
The server's fault log (`faults_served`) says which prompt each fault hit, so each row's fate
can be checked against what the server actually did to it.
"""

import collections
import json
import sqlite3

import pytest
from typer.testing import CliRunner

from conftest import write
from factcli.cli import app
from factcli.run.calling import clock

runner = CliRunner()
N = 30
# "429-retry-after:soon": an unreadable Retry-After falls back to the ordinary backoff
HANG_TIMEOUT_MS = "1000"  # the server's hangs last 5 s
ALL_KINDS = ["429", "429-retry-after:0", "429-retry-after:soon", "500", "503", "hang", "drop", "malformed"]

CONFIG = """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
""" + "".join(f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q: {i}'}}]\n" for i in range(N))


@pytest.fixture(autouse=True)
def fast_clock(monkeypatch):
    """The run's clock (run/calling/clock.py) 50 times fast: a 429's slowed pace (a gap of up to 2 s between
    calls, limits.MIN_RATE) and the backoff pass in a fiftieth of the time, the limiter deciding
    exactly as in real time. The per-attempt timeout stays real (a hang still costs FACTCLI_TIMEOUT_MS),
    so the circuit breaker's window is stretched by the same factor: 20 s of real time, as before."""
    monkeypatch.setattr(clock, "speed", 50.0)
    monkeypatch.setenv("FACTCLI_BREAKER_SECONDS", str(20 * 50))


def run_eval(tmp_path, *args):
    cfg = write(tmp_path / "c.yaml", CONFIG)
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-cache", "--no-progress-bar",
                                 "--no-table", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result, json.loads(out.read_text())


def prompt_of(body) -> str:
    return body["messages"][-1]["content"]


def server_view(fake_openai):
    """Per prompt: how many requests the server got, and how many of them it answered with a fault."""
    asked = collections.Counter(prompt_of(r["json"]) for r in fake_openai.requests if r["json"])
    faulted = collections.Counter(prompt_of(f["json"]) for f in fake_openai.faults_served)
    return asked, faulted


def hangs_of(fake_openai):
    """Per prompt: how many of its requests hung past the timeout (a timed-out call is retried once)."""
    return collections.Counter(prompt_of(f["json"]) for f in fake_openai.faults_served if f["kind"] == "hang")


def store_rows(home):
    with sqlite3.connect(home / "factcli.db") as conn:
        rows = conn.execute("SELECT test_idx, prompt_idx, repeat_idx, failure_reason, extra_json FROM results").fetchall()
        run = conn.execute("SELECT status, retries, calls, rows_done, errors FROM runs").fetchall()
    return rows, run


def check_exactly_once(doc, home):
    rows = doc["results"]["results"]
    keys = [(r["testIdx"], r["promptIdx"]) for r in rows]
    assert sorted(keys) == [(i, 0) for i in range(N)], keys
    stored, runs = store_rows(home)
    assert sorted((t, p, r) for t, p, r, _, _ in stored) == [(i, 0, 0) for i in range(N)]
    assert len(runs) == 1 and runs[0][0] == "complete" and runs[0][3] == N
    return rows, stored, runs[0]


@pytest.mark.parametrize("kind", ALL_KINDS + ["mixed"])
def test_every_fault_kind_is_retried_to_success(tmp_path, fake_openai, monkeypatch, isolated_home, kind):
    # The server (a thread of this process) shares the GIL with the eval: only a hang needs a short
    # timeout, and 1 s keeps a merely slow reply on a loaded machine from being counted as a retry.
    monkeypatch.setenv("FACTCLI_TIMEOUT_MS", HANG_TIMEOUT_MS if kind in ("hang", "mixed") else "30000")
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "10")
    kinds = ALL_KINDS if kind == "mixed" else [kind]
    fake_openai.set_fault_rate(0.3, kinds, seed=7, hang_seconds=5)
    result, doc = run_eval(tmp_path, "-j", "4")
    rows, stored, run = check_exactly_once(doc, isolated_home)

    asked, faulted = server_view(fake_openai)
    hangs = hangs_of(fake_openai)
    faults = len(fake_openai.faults_served)
    assert faults > 0  # the fraction really hit some calls
    timed_out = 0  # rows whose call hung twice: a timed-out call is retried once, not ten times
    for r in rows:
        prompt = f"Q: {r['testIdx']}"
        if hangs[prompt] >= 2:
            timed_out += 1
            assert r["success"] is False and "twice (a timed-out call is retried once)" in r["error"], r
            assert "timeoutMs" in r["error"] and "FACTCLI_TIMEOUT_MS" in r["error"]
            assert asked[prompt] == faulted[prompt] and r["factcli"]["retries"] == faulted[prompt] - 1
        else:
            assert r["success"], r
            assert asked[prompt] == faulted[prompt] + 1  # the last request succeeded, the others were faults
            assert r["factcli"]["retries"] == faulted[prompt] <= 10
    assert result.exit_code == (100 if timed_out else 0), result.output
    if "hang" not in kinds:
        assert timed_out == 0
    assert fake_openai.request_count == N + faults - timed_out  # each retried fault cost one extra request
    # reported for the run: results JSON, the store (run and rows) and the summary line
    assert doc["factcli"]["retries"] == faults - timed_out
    assert run[1] == faults - timed_out and run[2] == N + faults - timed_out
    assert sum(json.loads(x)["response"]["retries"] for *_, x in stored) == faults - timed_out
    assert f"{faults - timed_out} retries" in result.output


@pytest.mark.parametrize("max_retries, rate", [(0, 0.3), (2, 0.6)])
def test_rows_error_only_when_retries_are_exhausted(tmp_path, fake_openai, monkeypatch, isolated_home,
                                                    max_retries, rate):
    monkeypatch.setenv("FACTCLI_TIMEOUT_MS", HANG_TIMEOUT_MS)
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", str(max_retries))
    fake_openai.set_fault_rate(rate, ALL_KINDS, seed=11, hang_seconds=5)
    result, doc = run_eval(tmp_path, "-j", "4")
    rows, stored, run = check_exactly_once(doc, isolated_home)

    asked, faulted = server_view(fake_openai)
    hangs = hangs_of(fake_openai)
    errors = 0
    for r in rows:
        prompt = f"Q: {r['testIdx']}"
        assert asked[prompt] <= max_retries + 1  # bounded
        if hangs[prompt] >= 2:  # a second timeout ends the call whatever the retry budget
            errors += 1
            assert r["failureReason"] == 2 and r["success"] is False, r
            assert asked[prompt] == faulted[prompt] and r["factcli"]["retries"] == faulted[prompt] - 1
            assert "retried once" in r["error"]
        elif faulted[prompt] == max_retries + 1:  # every attempt was a fault: retries exhausted
            errors += 1
            assert r["failureReason"] == 2 and r["success"] is False, r
            assert r["factcli"]["retries"] == max_retries
            if max_retries and "timed out" not in r["error"]:
                assert f"after {max_retries} retries" in r["error"]
        else:
            assert r["success"] is True, r  # a fault that was retried never shows
            assert asked[prompt] == faulted[prompt] + 1
            assert r["factcli"]["retries"] == faulted[prompt]
    assert 0 < errors < N  # both outcomes happened with this seed and rate
    assert doc["results"]["stats"]["errors"] == errors == run[4]
    assert result.exit_code == 100
    assert doc["factcli"]["retries"] == run[1] == len(fake_openai.faults_served) - errors
    # the ERROR rows are what --retry-errors would re-run; with the faults gone they pass
    fake_openai.set_fault_rate(0)
    fake_openai.reset()
    again = runner.invoke(app, ["eval", "--retry-errors", "latest", "--no-progress-bar", "--no-table",
                                "-o", str(tmp_path / "r.json")])  # (-o again: the store's list is not trusted)
    assert again.exit_code == 0, again.output
    assert fake_openai.request_count == errors
    stored, runs = store_rows(isolated_home)
    assert len(stored) == N and all(fr == 0 for *_, fr, _ in stored)


def test_a_400_is_never_retried(tmp_path, fake_openai, monkeypatch, isolated_home):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "3")
    # 400 is the caller's fault: never retried, whatever the retry budget
    fake_openai.set_fault_rate(0.3, ["400"], seed=3)
    result, doc = run_eval(tmp_path, "-j", "4")
    rows, _, run = check_exactly_once(doc, isolated_home)
    asked, faulted = server_view(fake_openai)
    assert fake_openai.request_count == N and run[1] == 0
    assert {r["testIdx"] for r in rows if not r["success"]} == {int(p[3:]) for p in faulted}
    assert all(r["factcli"]["retries"] == 0 for r in rows)


# ---------------------------------------------------------------- graders: bad replies and faults

JUDGE = '{id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'
GRADED = """
prompts: ["Q: {{{{question}}}}"]
providers: [{{id: "openai:chat:m", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
tests:
  - vars: {{question: "capital of France?"}}
    assert: [{{type: {type}, value: {value}, provider: {judge}}}]
"""
VALUES = {"factuality": "Paris", "llm-rubric": "names the capital", "model-graded-closedqa": "names a city",
          "g-eval": "names the capital"}
# A reply each grader would accept: cut off (finish_reason=length), it must not count.
WOULD_PASS = {"factuality": '{"category": "C", "reason": "Same answer."}',
              "llm-rubric": '{"pass": true, "score": 1, "reason": "It does."}',
              "model-graded-closedqa": '{"reasoning": "It names Paris.", "verdict": "Y"}',  # as its schema asks
              "g-eval": '{"score": 9, "reason": "Names it."}'}
WRONG_SCHEMA = {"factuality": ['{"category": "Z", "reason": "?"}', '{"verdict": "same"}'],
                "llm-rubric": ['["pass", 1]', '"it passes"'],
                "model-graded-closedqa": ['{"answer": "Y"}', '{"meets": true}'],
                "g-eval": ['{"score": "ten", "reason": "Names it."}', '{"score": 42, "reason": "Too good."}',
                           '{"score": 7}', '[7, "fine"]']}
GEVAL_STEPS = '{"steps": ["Check that the reply names the capital."]}'
BAD_REPLIES = [(t, kind, reply) for t in VALUES
               for kind, reply in [("garbage", "I would rather not say."), ("empty", ""),
                                   ("truncated", {"content": WOULD_PASS[t], "finish_reason": "length"})]
               + [("wrong-schema", r) for r in WRONG_SCHEMA[t]]]
BAD_REPLIES += [("g-eval", f"steps-{kind}", reply) for kind, reply in [
    ("garbage", "Step one: think."), ("empty", ""), ("truncated", {"content": GEVAL_STEPS, "finish_reason": "length"}),
    ("wrong-schema", '{"steps": "just one"}'), ("wrong-schema", '{"stages": ["a"]}')]]


@pytest.mark.parametrize("typ, kind, reply", BAD_REPLIES, ids=[f"{t}-{k}-{i}" for i, (t, k, _) in enumerate(BAD_REPLIES)])
def test_bad_grader_replies_are_grading_errors_with_the_raw_text_kept(tmp_path, fake_openai, typ, kind, reply):
    fake_openai.add_rule("capital", "Paris.", model="m")
    if typ == "g-eval":  # two calls: steps from the criteria, then the evaluation
        steps, evaluation = (reply, WOULD_PASS[typ]) if kind.startswith("steps-") else (GEVAL_STEPS, reply)
        fake_openai.add_rule("Evaluation steps:", evaluation, model="judge")
        fake_openai.add_rule("Evaluation criteria:", steps, model="judge")
    else:
        fake_openai.add_rule(".", reply, model="judge")
    cfg = write(tmp_path / "c.yaml", GRADED.format(type=typ, value=json.dumps(VALUES[typ]), judge=JUDGE))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-table"])
    assert result.exit_code == 4, result.output  # the row could not be judged (contract §2)
    doc = json.loads(out.read_text())
    row = doc["results"]["results"][0]
    comp = row["gradingResult"]["componentResults"][0]
    meta = comp.get("metadata") or {}
    assert comp["pass"] is False and comp["score"] == 0, comp
    assert meta.get("graderError") is True, comp
    raw = reply["content"] if isinstance(reply, dict) else reply
    assert meta.get("graderRaw") == raw, comp  # the judge's own words, for the user to see what went wrong
    if kind.endswith("truncated"):
        assert "finish_reason=length" in comp["reason"]
    assert row["failureReason"] == 1  # promptfoo's layout: a failure there; factcli's own field says more
    assert row["factcli"]["notJudged"] is True and doc["factcli"]["notJudged"] == 1
    assert doc["factcli"]["columns"][0]["gradingErrors"] == 1


@pytest.mark.parametrize("typ", list(VALUES))
def test_grader_calls_are_retried_through_faults(tmp_path, fake_openai, monkeypatch, typ):
    """Faults hit the provider's calls and the judge's alike: every grade still arrives, none is an error."""
    monkeypatch.setenv("FACTCLI_TIMEOUT_MS", HANG_TIMEOUT_MS)
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "10")
    fake_openai.add_rule("capital", "Paris.", model="m")
    if typ == "g-eval":
        fake_openai.add_rule("Evaluation steps:", WOULD_PASS[typ], model="judge")
        fake_openai.add_rule("Evaluation criteria:", GEVAL_STEPS, model="judge")
    else:
        fake_openai.add_rule(".", WOULD_PASS[typ], model="judge")
    tests = "".join(f'  - vars: {{question: "capital of France? ({i})"}}\n' for i in range(8))
    cfg = write(tmp_path / "c.yaml", GRADED.format(type=typ, value=json.dumps(VALUES[typ]), judge=JUDGE)
                .split("tests:")[0] + "defaultTest:\n  assert: [{type: " + typ + ", value: " + json.dumps(VALUES[typ])
                + ", provider: " + JUDGE + "}]\ntests:\n" + tests)
    fake_openai.set_fault_rate(0.3, ALL_KINDS, seed=5, hang_seconds=5)
    out = tmp_path / "r.json"
    # -j 1: calls arrive in a fixed order, so which of them the seeded faults hit is fixed too
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-cache", "--no-progress-bar",
                                 "--no-table", "-j", "1"])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    faults = len(fake_openai.faults_served)
    judged = [f for f in fake_openai.faults_served if f["json"]["model"] == "judge"]
    assert judged, "no fault hit a judge call; pick another seed"
    assert doc["factcli"]["columns"][0]["gradingErrors"] == 0
    assert doc["factcli"]["retries"] == faults  # the run's count includes the judges' retries
