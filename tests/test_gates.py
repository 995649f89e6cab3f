"""Release gates (issue 44): `gates:` in the config and `--gate` on the command line pass at their
edge and fail past it, name the gate and the margin, exit 100; `diff --fail-on-regression` fails on a
drop beyond noise and passes on noise, with an exported results JSON as either side."""

import json

import pytest
import yaml
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()

# two tests, one passing: quality's mean is 0.5, the pass rate 50%
HALF = """
prompts: ["Q: {{q}}"]
providers: [echo]
tests:
  - vars: {q: one}
    assert: [{type: contains, value: one, metric: quality}]
  - vars: {q: two}
    assert: [{type: contains, value: one, metric: quality}]
"""


def _eval(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", *map(str, args)])


def _said(result) -> str:
    return " ".join(result.output.split())


@pytest.mark.parametrize("gate, code", [
    ("quality>=0.5", 0), ("quality>=0.51", 100), ("quality<=0.5", 0), ("quality<=0.49", 100),
    ("pass-rate>=50%", 0), ("pass-rate>=0.5001", 100), ("score>=0.5", 0), ("cost<=0", 0), ("latency<=60000", 0),
])
def test_command_line_gates_pass_at_their_edge_and_fail_past_it(tmp_path, gate, code):
    result = _eval("-c", write(tmp_path / "c.yaml", HALF), "--gate", gate)
    assert result.exit_code == code, result.output  # with gates, the implicit 100% pass rate does not apply
    assert ("FAILED" in result.output) == bool(code)


def test_config_gates_name_the_gate_and_the_margin(tmp_path):
    cfg = write(tmp_path / "c.yaml", HALF + "gates:\n  - {metric: quality, min: 0.85}\n  - {metric: quality, max: 1}\n")
    out = tmp_path / "r.json"
    result = _eval("-c", cfg, "-o", out)
    assert result.exit_code == 100, result.output
    said = _said(result)
    assert "Gate quality >= 0.85 FAILED: quality 0.5 < 0.85 (short by 0.35)" in said
    assert "Gate quality <= 1 passed: quality 0.5 ≤ 1 (by 0.5)" in said
    gates = json.loads(out.read_text())["factcli"]["gates"]
    assert [(g["gate"], g["passed"], g["margin"]) for g in gates] == [("quality >= 0.85", False, -0.35),
                                                                     ("quality <= 1", True, 0.5)]


def test_a_bound_gate_holds_the_end_of_the_interval(tmp_path):
    cfg = write(tmp_path / "c.yaml", HALF)
    out = tmp_path / "r.json"
    _eval("-c", cfg, "-o", out)
    low = json.loads(out.read_text())["factcli"]["columns"][0]["passRateCi95"][0]
    assert 0 <= low < 0.5
    assert _eval("-c", cfg, "--gate", f"pass-rate[lower]>={low!r}").exit_code == 0
    failed = _eval("-c", cfg, "--gate", f"pass-rate[lower]>={low + 0.001!r}")
    assert failed.exit_code == 100 and "lower end of its 95% interval" in _said(failed)
    bounded = write(tmp_path / "b.yaml", HALF + "gates: [{metric: quality, min: 0.01, bound: upper}]\n")
    assert _eval("-c", bounded).exit_code == 0


def test_each_column_is_gated_and_named(tmp_path):
    cfg = yaml.safe_load(HALF)
    cfg["providers"] = [{"id": "echo", "label": "a"}, {"id": "echo", "label": "b"}]
    cfg["tests"][1]["assert"][0]["value"] = "Q"  # both pass in every column
    result = _eval("-c", write(tmp_path / "c.yaml", yaml.safe_dump(cfg)), "--gate", "quality>=1")
    assert result.exit_code == 0, result.output
    assert "Gate quality >= 1 ([a]) passed" in _said(result) and "Gate quality >= 1 ([b]) passed" in _said(result)


@pytest.mark.parametrize("args, message", [
    (["--gate", "qualty>=0.5"], "no assertion names the metric 'qualty' (did you mean quality?)"),
    (["--gate", "quality>0.5"], "expected METRIC>=X or METRIC<=X"),
    (["--gate", "latency[lower]<=5"], "latency has no interval"),
    (["--gate", "pass-rate>=90"], "a pass rate is between 0 and 1"),
])
def test_bad_gates_are_refused_before_any_call(tmp_path, args, message):
    result = _eval("-c", write(tmp_path / "c.yaml", HALF), *args)
    assert result.exit_code == 1 and message in _said(result), result.output


@pytest.mark.parametrize("gates, message", [
    ("[{metric: quality}]", "a gate takes one of min or max"),
    ("[{metric: quality, min: 1, max: 2}]", "a gate takes one of min or max"),
    ("[{metric: quality, min: high}]", "gates[0].min: expected a number"),
    ("[{metric: quality, min: 0.5, bound: lowest}]", "gates[0].bound: expected one of mean, lower, upper"),
    ("[{metrc: quality, min: 0.5}]", "metrc"),
])
def test_bad_config_gates_are_config_errors(tmp_path, gates, message):
    result = _eval("-c", write(tmp_path / "c.yaml", HALF + f"gates: {gates}\n"))
    assert result.exit_code == 1 and message in _said(result), result.output


def test_a_gate_no_row_was_judged_on_is_not_judged_and_the_run_exits_4(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    fake_openai.enqueue_fault(500, times=2)
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q: {{q}}"]
providers: [echo]
defaultTest: {options: {provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}}}
tests:
  - vars: {q: one}
    assert: [{type: llm-rubric, value: polite, metric: polite}]
gates: [{metric: polite, min: 0.9}]
""")
    result = _eval("-c", cfg)
    assert result.exit_code == 4, result.output
    assert ("Gate polite >= 0.9 not judged: polite has 0 of 1 rows judged; the gate needs every row judged "
            "(min_judged)") in _said(result)


# ---------------------------------------------------------------- diff --fail-on-regression


def _suite(tmp_path, name: str, failing: set[int]) -> str:
    """30 tests; the ones in `failing` look for a word their output lacks."""
    tests = [{"description": f"t{i}", "vars": {"q": f"item {i}"},
              "assert": [{"type": "contains", "value": "zzz" if i in failing else "item", "metric": "quality"}]}
             for i in range(30)]
    return write(tmp_path / f"{name}.yaml", yaml.safe_dump({"prompts": ["Q: {{q}}"], "providers": ["echo"],
                                                             "tests": tests}))


def test_diff_fails_on_a_regression_beyond_noise_with_an_exported_json_as_one_side(tmp_path):
    release = tmp_path / "release.json"
    assert _eval("-c", _suite(tmp_path, "good", set()), "-o", release).exit_code == 0
    _eval("-c", _suite(tmp_path, "bad", set(range(0, 30, 3))))  # a third of the tests now fail
    result = runner.invoke(app, ["diff", str(release), "latest", "--fail-on-regression"])
    assert result.exit_code == 100, result.output
    said = _said(result)
    assert "Regression: [echo] Q: {{q}}: pass rate dropped -33.3 pts" in said
    assert "quality dropped -0.333" in said and "beyond noise" in said
    assert runner.invoke(app, ["diff", str(release), "latest"]).exit_code == 0  # without the flag: a report
    flipped = json.loads(runner.invoke(app, ["diff", str(release), "latest", "--json"]).output)
    assert flipped["regressions"] == 10 and flipped["columns"][0]["metrics"]["quality"]["beyondNoise"] is True


def test_diff_passes_on_noise_and_takes_json_on_both_sides(tmp_path):
    release, candidate = tmp_path / "release.json", tmp_path / "candidate.json"
    _eval("-c", _suite(tmp_path, "good", set()), "-o", release)
    _eval("-c", _suite(tmp_path, "noise", {4}), "-o", candidate)  # one test of 30 flipped: within noise
    result = runner.invoke(app, ["diff", str(release), str(candidate), "--fail-on-regression"])
    assert result.exit_code == 0, result.output
    assert "1 row flipped (1 regression, 0 fixes), 29 unchanged" in _said(result)
    assert runner.invoke(app, ["diff", "latest", str(release), "--fail-on-regression"]).exit_code == 0  # a fix


def test_diff_refuses_a_json_that_is_no_results_file(tmp_path):
    bogus = write(tmp_path / "x.json", '{"hello": 1}')
    result = runner.invoke(app, ["diff", str(bogus), str(bogus)])
    assert result.exit_code == 1 and "not a results JSON" in result.output


def test_a_gated_runs_verdicts_are_stored_with_it(tmp_path):
    """Issue 51 item 6: export, show and view of a stored run tell the gate verdicts its eval told."""
    cfg = write(tmp_path / "c.yaml", HALF.replace("  - vars: {q: two}\n", "  - vars: {q: two}\n    critical: true\n")
                + "gates:\n  - {metric: quality, min: 0.85}\n  - {metric: quality, max: 1}\n")
    out = tmp_path / "r.json"
    result = _eval("-c", cfg, "-o", out)
    assert result.exit_code == 100, result.output
    said = json.loads(out.read_text())["factcli"]["gates"]
    assert [g["gate"] for g in said] == ["quality >= 0.85", "quality <= 1", "critical <= 0"]
    exported, html = tmp_path / "x.json", tmp_path / "x.html"
    assert runner.invoke(app, ["export", "latest", "-o", str(exported), "-o", str(html)]).exit_code == 0
    assert json.loads(exported.read_text())["factcli"]["gates"] == said
    page = " ".join(html.read_text().split())
    assert "Gate quality &gt;= 0.85 FAILED: quality 0.5 &lt; 0.85 (short by 0.35)" in page
    assert "Gate critical tests FAILED: 1 critical test failed: test 1" in page
    for command in (["show", "latest"], ["view", "latest"]):
        shown = runner.invoke(app, command)
        assert shown.exit_code == 0, shown.output
        assert "Gate quality >= 0.85 FAILED: quality 0.5 < 0.85 (short by 0.35)" in _said(shown), command
        assert "Gate quality <= 1 passed: quality 0.5 ≤ 1 (by 0.5)" in _said(shown), command
    header = json.loads(runner.invoke(app, ["show", "latest", "--json"]).output)["run"]
    assert header["gates"] == said


def test_a_run_without_gates_stores_none(tmp_path):
    assert _eval("-c", write(tmp_path / "c.yaml", HALF)).exit_code == 100
    exported = tmp_path / "x.json"
    assert runner.invoke(app, ["export", "latest", "-o", str(exported)]).exit_code == 0
    assert "gates" not in json.loads(exported.read_text())["factcli"]
    assert "gates" not in json.loads(runner.invoke(app, ["show", "latest", "--json"]).output)["run"]
