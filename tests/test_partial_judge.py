"""A judge that fails partly (issue 52): each metric over the assertions it judged, with its judged
count; a gate on a metric not judged on every row is "not judged" (exit 4), never passed or failed;
--retry-errors re-runs every errored assertion; diff never fails open; provider errors and critical
tests fail a gated run; thresholds and gates out of a metric's range are refused before any call."""

import json

import pytest

from aiohttp import web
from conftest import write
from test_facts_grounding import scripted_judge
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
JUDGE = '{id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'
PASSAGES = ["Alpha is red.", "Beta is blue.", "Delta is yellow."]
# an unchanged bot: the same answer and passages for every question; row 4's answer holds a sentence no
# passage supports (it fails facts-grounding on the judge's verdict, as in the release)
BOT = f'''
def call_api(prompt, options, context):
    answer = "Alpha is red. Gamma is green." if "q4" in prompt else "Alpha is red. Beta is blue."
    return {{"output": answer, "metadata": {{"contexts": {PASSAGES!r}}}}}
'''
CONFIG = f"""
prompts: ["Request: {{{{query}}}}"]
providers: [file://bot.py]
defaultTest:
  options: {{provider: {JUDGE}}}
  assert:
    - {{type: facts-grounding, metric: grounding, contextTransform: "file://t.py:passages"}}
    - {{type: context-relevance, metric: ctx_relevance, threshold: 0.3, contextTransform: "file://t.py:passages"}}
tests:
""" + "".join(f"  - vars: {{query: q{i}}}\n" for i in range(5)) + """
gates:
  - {metric: grounding, min: 0.5}
  - {metric: ctx_relevance, min: 0.3}
  - {metric: pass-rate, min: 0.6}
"""


def _eval(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", *map(str, args)])


def _said(result) -> str:
    return " ".join(result.output.split())


def _judge(fake_openai, relevance_down: bool):
    facts = scripted_judge({"Gamma": ("No Issues", ["supported", "unsupported"]),
                            "Beta": ("No Issues", ["supported", "supported"])})

    def reply(body):
        user = body["messages"][-1]["content"]
        if "<query>" in user:  # context-relevance's step
            if relevance_down:
                raise web.HTTPInternalServerError()
            return json.dumps({"sentences": ["Alpha is red."]})
        return facts(body)

    fake_openai.clear_rules()
    fake_openai.refuse_response_format("json_schema", "json_object")
    fake_openai.add_rule(".", reply, model="judge")


def _setup(tmp_path):
    write(tmp_path / "bot.py", BOT)
    write(tmp_path / "t.py", "def passages(output, context):\n    return context['metadata']['contexts']\n")
    return write(tmp_path / "c.yaml", CONFIG)


def _figures(path) -> dict:
    doc = json.loads(path.read_text())
    col = doc["factcli"]["columns"][0]
    return {"passRate": doc["factcli"]["passRate"], "named": col.get("namedScores"),
            "gates": [(g["gate"], g["value"], g["passed"]) for g in doc["factcli"]["gates"]],
            "methods": col.get("methods"), "stats": doc["results"]["stats"]["notJudged"]}


def test_one_judge_step_down_is_not_judged_and_retry_errors_gives_a_clean_runs_figures(
        fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    cfg = _setup(tmp_path)
    _judge(fake_openai, relevance_down=False)
    clean = tmp_path / "clean.json"
    first = _eval("-c", cfg, "-o", clean)
    assert first.exit_code == 0, first.output

    _judge(fake_openai, relevance_down=True)
    partial = tmp_path / "partial.json"
    result = _eval("-c", cfg, "-o", partial, "--no-cache")
    said = _said(result)

    assert result.exit_code == 4, result.output
    assert "FAILED" not in said
    fig = _figures(partial)


    # the figures: each metric over the rows judged on it; grounding judged on every row
    assert "ctx_relevance (mean) | — (0 of 5 judged)" in result.output.replace("  ", " ") or \
        "— (0 of 5 judged)" in said
    assert fig["named"] == {"grounding": 0.8, "ctx_relevance": None}
    assert fig["gates"] == [("grounding >= 0.5", 0.8, True), ("ctx_relevance >= 0.3", None, None),
                            ("pass-rate >= 0.6", 0.0, None)]
    assert "Gate ctx_relevance >= 0.3 not judged: ctx_relevance has 0 of 5 rows judged" in said
    assert "Gate pass-rate >= 0.6 not judged: pass-rate has 1 of 5 rows judged" in said
    doc = json.loads(partial.read_text())
    # promptfoo's layout keeps its count; factcli's beside it, for a script
    assert doc["results"]["stats"]["failures"] == 5 and doc["results"]["stats"]["notJudged"] == 4
    assert doc["factcli"]["columns"][0]["namedJudged"] == {"grounding": [5, 5], "ctx_relevance": [0, 5]}

    # one figure per metric on every screen: view, the HTML report, the web view
    run_id = doc["factcli"]["runId"]
    view = _said(runner.invoke(app, ["view", run_id]))
    assert "— (0 of 5 judged)" in view and "0.800" in view and "n/a (0 of 5 judged)" not in view, view
    html = tmp_path / "r.html"
    assert runner.invoke(app, ["export", run_id, "-o", str(html)]).exit_code == 0
    assert "— (0 of 5 judged)" in html.read_text()
    from starlette.testclient import TestClient

    from factcli.store.database import default_target
    from factcli.web.app import create_app

    page = TestClient(create_app(default_target())).get(f"/runs/{run_id}").text
    assert "(0 of 5 judged)" in page

    # the judge is back: --retry-errors re-runs the 4 rows not judged and row 4 (it failed facts-grounding,
    # its context-relevance errored): every figure is the clean run's
    _judge(fake_openai, relevance_down=False)
    run_id = doc["factcli"]["runId"]
    kept = tmp_path / "candidate.json"  # (the retry writes the run's -o files again)
    kept.write_text(partial.read_text())
    retried = tmp_path / "retried.json"
    again = _eval("--retry-errors", run_id, "-o", retried)
    assert again.exit_code == 0, again.output
    assert "0 of 5 rows kept, 5 to run" in _said(again)
    assert _figures(retried) == _figures(clean)
    assert _figures(clean)["named"] == {"grounding": 0.8, "ctx_relevance": 1 / 3}

    # diff: the release against the half-judged candidate names what is missing and never passes
    cmp = runner.invoke(app, ["diff", str(clean), str(kept), "--fail-on-regression"])
    said = _said(cmp)
    assert cmp.exit_code == 4, cmp.output
    assert "run B" in said and "was not judged for pass rate on 4 of 5 rows" in said
    assert "ctx_relevance on 5 of 5 rows" in said and "--allow-partial" in said
    assert runner.invoke(app, ["diff", str(clean), str(kept), "--fail-on-regression",
                               "--allow-partial"]).exit_code == 0
    assert runner.invoke(app, ["diff", str(clean), str(retried), "--fail-on-regression"]).exit_code == 0


RUBRIC = f"""
prompts: ["Q: {{{{q}}}}"]
providers: [echo]
defaultTest:
  options: {{provider: {JUDGE}}}
  assert: [{{type: llm-rubric, value: polite, metric: polite}}]
tests:
""" + "".join(f"  - vars: {{q: item {i}}}\n" for i in range(10))


def test_a_never_judged_candidate_makes_diff_fail_on_regression_exit_4(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    monkeypatch.setenv("FACTCLI_BREAKER_FAILURES", "0")  # every row judged or not: not stopped early (run/calling/breaker)
    cfg = write(tmp_path / "c.yaml", RUBRIC)
    fake_openai.add_rule(".", '{"reason": "fine", "pass": true, "score": 1}', model="judge")
    release = tmp_path / "release.json"
    assert _eval("-c", cfg, "-o", release).exit_code == 0
    fake_openai.clear_rules()
    fake_openai.enqueue_fault(500, times=10)  # the judge is down for the candidate's whole run
    candidate = tmp_path / "candidate.json"
    assert _eval("-c", cfg, "-o", candidate, "--no-cache").exit_code == 4
    result = runner.invoke(app, ["diff", str(release), str(candidate), "--fail-on-regression"])
    said = _said(result)
    assert result.exit_code == 4, result.output
    assert "10 rows flipped (0 regressions, 0 fixes, 10 not judged)" in said
    assert "was not judged for pass rate on 10 of 10 rows, mean score on 10 of 10 rows, polite on 10 of 10 rows" in said
    doc = json.loads(runner.invoke(app, ["diff", str(release), str(candidate), "--json"]).output)
    assert doc["columns"][0]["notJudged"]["b"] == {"rows": 10, "figures": {"passRate": 10, "meanScore": 10,
                                                                          "polite": 10}}
    assert doc["columns"][0]["notJudged"]["a"] == {"rows": 10, "figures": {}}
    # without the flag diff is a report: it says what is missing and exits 0
    plain = runner.invoke(app, ["diff", str(release), str(candidate)])
    assert plain.exit_code == 0 and "Not judged:" in _said(plain)


# ---------------------------------------------------------------- errors and critical tests in gates

CRASHY = """
def call_api(prompt, options, context):
    if "crash" in prompt:
        raise RuntimeError("the bot crashed")
    return {"output": prompt}
"""
FIVE = """
prompts: ["Q: {{q}}"]
providers: [file://bot.py]
tests:
  - {vars: {q: one}, assert: [{type: contains, value: one}]}
  - {vars: {q: two}, assert: [{type: contains, value: two}]}
  - {vars: {q: three}, assert: [{type: contains, value: three}]}
  - {vars: {q: four}, assert: [{type: contains, value: four}]}
  - {vars: {q: five}, assert: [{type: contains, value: "LAST"}]}
"""


def test_a_bot_crash_fails_a_gated_run_unless_an_errors_gate_allows_it(tmp_path):
    write(tmp_path / "bot.py", CRASHY)
    cfg = write(tmp_path / "c.yaml", FIVE.replace("q: four", "q: crash four")
                + "gates: [{metric: pass-rate, min: 0.5}]\n")
    out = tmp_path / "r.json"
    result = _eval("-c", cfg, "-o", out)
    said = _said(result)
    assert result.exit_code == 100, result.output  # the pass rate (3 of 5) holds; the crash does not pass
    assert "Gate pass-rate >= 0.5 passed" in said
    assert ("Gate errors <= 0 FAILED: 1 row ended in an error (a provider's, or an assertion that could not run); "
            "a gated run fails on them unless a gate allows some (errors<=N)") in said
    allowed = _eval("-c", cfg, "--gate", "errors<=1")
    assert allowed.exit_code == 0, allowed.output
    assert "Gate errors <= 1 passed: errors 1 ≤ 1 (by 0)" in _said(allowed)
    assert _eval("-c", cfg, "--gate", "errors<=0").exit_code == 100
    refused = _eval("-c", cfg, "--gate", "errors>=1")
    assert refused.exit_code == 1 and "an errors gate is a most" in _said(refused)


def test_the_pass_rate_gate_passes_at_its_bound_exactly_and_fails_just_above_it(tmp_path):
    write(tmp_path / "bot.py", CRASHY)
    cfg = write(tmp_path / "c.yaml", FIVE)  # 4 of 5 pass: 80.00%
    at = _eval("-c", cfg, "--gate", "pass-rate>=0.8")
    assert at.exit_code == 0 and "pass-rate 80.00% ≥ 80.00% (by 0.00%)" in _said(at), at.output
    assert _eval("-c", cfg, "--gate", "pass-rate>=80%").exit_code == 0
    above = _eval("-c", cfg, "--gate", "pass-rate>=0.8001")
    assert above.exit_code == 100 and "pass-rate 80.00% < 80.01%" in _said(above), above.output


def test_a_critical_test_that_fails_fails_the_gates_whatever_the_means(tmp_path):
    write(tmp_path / "bot.py", CRASHY)
    text = FIVE.replace("  - {vars: {q: five},", "  - {description: refund policy, critical: true, vars: {q: five},")
    cfg = write(tmp_path / "c.yaml", text + "gates: [{metric: pass-rate, min: 0.8}]\n")
    out = tmp_path / "r.json"
    result = _eval("-c", cfg, "-o", out)
    said = _said(result)
    assert result.exit_code == 100, result.output
    assert "Gate pass-rate >= 0.8 passed" in said
    assert ("Gate critical tests FAILED: 1 critical test failed: test 4 (refund policy) (factcli show RUN TEST_IDX "
            "says why)") in said
    gates = json.loads(out.read_text())["factcli"]["gates"]
    assert [(g["metric"], g["passed"]) for g in gates] == [("pass-rate", True), ("critical", False)]
    # without gates, with a lower pass-rate threshold, the critical test still fails the run
    assert runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "-c",
                               str(write(tmp_path / "n.yaml", text))],
                         env={"FACTCLI_PASS_RATE_THRESHOLD": "50"}).exit_code == 100
    bad = _eval("-c", write(tmp_path / "b.yaml", text.replace("critical: true", "critical: yes please")))
    assert bad.exit_code == 1 and "tests[4].critical: expected true or false" in _said(bad), bad.output


# ---------------------------------------------------------------- bounds out of a metric's range

FC = f"""
prompts: ["Tell me about Paris."]
providers: [{{id: "openai:chat:m", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}]
defaultTest: {{options: {{provider: {JUDGE}}}}}
tests:
  - assert: [{{type: factual-correctness, value: "Paris is in France.", metric: fc, threshold: THRESHOLD}}]
"""


@pytest.mark.parametrize("threshold, args, message", [
    ("80", [], "tests[0].assert[0].threshold: a threshold on factual-correctness's score is between 0 and 1, "
               "got 80; did you mean 0.8?"),
    ("80%", [], "tests[0].assert[0].threshold: expected a number, got '80%' (did you mean 0.8?)"),
    ("0.5", ["--gate", "fc>=80"], "--gate 'fc>=80': fc (a score) is between 0 and 1, got 80; did you mean 0.8?"),
    ("0.5", ["--gate", "pass-rate>=90"], "a pass rate is between 0 and 1, got 90; did you mean 0.9?"),
])
def test_bounds_out_of_the_metrics_range_are_refused_before_any_call(fake_openai, tmp_path, threshold, args,
                                                                    message):
    cfg = write(tmp_path / "c.yaml", FC.replace("THRESHOLD", threshold))
    result = _eval("-c", cfg, *args)
    assert result.exit_code == 1 and message in _said(result), result.output
    assert not fake_openai.requests  # nothing was called


@pytest.mark.parametrize("gate, message", [
    ("{metric: fc, min: 80}", "gates[0].min: fc (a score) is between 0 and 1, got 80; did you mean 0.8?"),
    ("{metric: fc, min: 80%}", "gates[0].min: expected a number, got '80%' (did you mean 0.8?)"),
    ("{metric: fc, min: 0.8, min_judged: 90}", "gates[0].min_judged: expected the share of rows"),
])
def test_config_gates_out_of_range_are_refused_before_any_call(fake_openai, tmp_path, gate, message):
    cfg = write(tmp_path / "c.yaml", FC.replace("THRESHOLD", "0.5") + f"gates: [{gate}]\n")
    result = _eval("-c", cfg)
    assert result.exit_code == 1 and message in _said(result), result.output
    assert not fake_openai.requests


def test_the_python_api_gives_each_named_metrics_mean_and_its_judged_count():
    import factcli

    run = factcli.evaluate({"prompts": ["Q: {{q}}"], "providers": ["echo"],
                            "tests": [{"vars": {"q": q},
                                       "assert": [{"type": "contains", "value": "yes", "metric": "fc"}]}
                                      for q in ("yes", "no", "yes", "no", "no")]})
    (summary,) = run.column_summaries
    assert summary["namedScores"] == {"fc": 0.4} and summary["namedJudged"] == {"fc": [5, 5]}


def test_retry_errors_runs_a_failed_row_again_for_its_errored_assertion(fake_openai, tmp_path, monkeypatch):
    """A row that failed on `contains` whatever the judge says is a failure, not an error; its llm-rubric
    was still not judged: out of `polite`'s mean, exit 100 (a failure wins over 4), and --retry-errors
    runs it again though the run has no ERROR row."""
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    monkeypatch.setenv("FACTCLI_BREAKER_FAILURES", "0")  # every row judged or not: not stopped early (run/calling/breaker)
    cfg = write(tmp_path / "c.yaml", f"""
prompts: ["Q: {{{{q}}}}"]
providers: [echo]
defaultTest: {{options: {{provider: {JUDGE}}}}}
tests:
  - vars: {{q: one}}
    assert: [{{type: contains, value: nowhere}}, {{type: llm-rubric, value: polite, metric: polite}}]
  - vars: {{q: two}}
    assert: [{{type: llm-rubric, value: polite, metric: polite}}]
""")
    fake_openai.add_rule("one", "", model="judge")  # an empty reply: not a judgment
    fake_openai.add_rule(".", '{"reason": "fine", "pass": true, "score": 1}', model="judge")
    out = tmp_path / "r.json"
    first = _eval("-c", cfg, "-o", out)
    said = _said(first)
    assert first.exit_code == 100, first.output
    assert "Successes: 1 Failures: 1 Errors: 0" in said and "1.000 (1 of 2 judged)" in said
    doc = json.loads(out.read_text())
    assert doc["factcli"]["columns"][0]["namedScores"] == {"polite": 1.0}  # not (1 + 0) / 2
    listed = json.loads(runner.invoke(app, ["view", doc["factcli"]["runId"], "--errors", "--json"]).output)
    assert [t["testIdx"] for t in listed["tests"]] == [0], listed  # what --retry-errors will run again
    fake_openai.clear_rules()
    fake_openai.add_rule(".", '{"reason": "fine", "pass": true, "score": 1}', model="judge")
    again = _eval("--retry-errors", doc["factcli"]["runId"], "-o", out)
    assert again.exit_code == 100 and "1 of 2 rows kept, 1 to run" in _said(again), again.output
    assert "judged)" not in _said(again)
    column = json.loads(out.read_text())["factcli"]["columns"][0]  # (the retry writes the -o files given again)
    assert column["namedScores"] == {"polite": 1.0} and column["namedJudged"] == {"polite": [2, 2]}
    assert column["gradingErrors"] == 0


@pytest.mark.parametrize("min_judged, line", [
    (0.8, "Gate polite >= 0.9 passed: polite 1 ≥ 0.9 (by 0.1)"),
    (0.9, "Gate polite >= 0.9 not judged: polite has 8 of 10 rows judged (polite 1 over them); the gate needs "
          "90% judged (min_judged)"),
])
def test_min_judged_says_how_much_of_a_figure_must_be_judged_to_hold_its_gate(fake_openai, tmp_path, monkeypatch,
                                                                            min_judged, line):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    fake_openai.add_rule(r"item [01]\b", "", model="judge")  # two rows' judgings are not judgments
    fake_openai.add_rule(".", '{"reason": "fine", "pass": true, "score": 1}', model="judge")
    cfg = write(tmp_path / "c.yaml", RUBRIC + f"gates: [{{metric: polite, min: 0.9, min_judged: {min_judged}}}]\n")
    result = _eval("-c", cfg)
    assert result.exit_code == 4, result.output  # held or not, two assertions were not judged
    assert line in _said(result)
