"""Pass rates corrected for the judge's measured errors: the Rogan-Gladen estimate and its interval by
hand, the chance-level and clipping cases, config errors before any call, the mismatch warning, and
the figures of a real run in the results JSON, the summary, `view` and `diff`."""

import json
import math

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.stats.judge import describe, rogan_gladen

runner = CliRunner()


def _by_formula(p, n, se, sp, n_pos, n_neg):
    j = se + sp - 1
    theta = min(1.0, max(0.0, (p + sp - 1) / j))
    v = (p * (1 - p) / n + theta ** 2 * se * (1 - se) / n_pos + (1 - theta) ** 2 * sp * (1 - sp) / n_neg) / j ** 2
    return theta, [max(0.0, theta - 1.96 * math.sqrt(v)), min(1.0, theta + 1.96 * math.sqrt(v))]


def test_the_issue_example_by_hand():
    """TP=40, FN=10, FP=15, TN=35; 36 of 50 rows pass: Se 0.8, Sp 0.7, θ = (0.72 + 0.7 − 1) / 0.5 = 0.84."""
    r = rogan_gladen(36, 50, tp=40, fn=10, fp=15, tn=35)
    assert r["sensitivity"] == 0.8 and r["specificity"] == 0.7 and r["observedPassRate"] == 0.72
    assert r["correctedPassRate"] == pytest.approx(0.84)
    # V = [0.72·0.28/50 + 0.84²·0.8·0.2/50 + 0.16²·0.7·0.3/50] / 0.5² = 0.02558976
    margin = 1.96 * math.sqrt(0.02558976)
    assert r["ci95"] == pytest.approx([0.84 - margin, 1.0])  # the upper bound is clipped at 1
    assert r["ci95"] == pytest.approx(_by_formula(0.72, 50, 0.8, 0.7, 50, 50)[1])
    assert r["calibrationN"] == {"pass": 50, "fail": 50} and r["method"] == "rogan-gladen"


def test_a_judge_no_better_than_chance_gets_no_number():
    r = rogan_gladen(30, 50, tp=55, fn=45, fp=50, tn=50)  # Se 0.55, Sp 0.5: J = 0.05
    assert r["correctedPassRate"] is None and r["ci95"] is None
    assert "no better than chance" in r["note"]
    line = describe({"assertion": "factuality", **r})
    assert line.startswith("factuality 60.0% → n/a corrected for the judge: the judge is no better than chance")


def test_clipping_at_0_and_1():
    low = rogan_gladen(5, 50, tp=40, fn=10, fp=15, tn=35)  # p = 0.1 < 1 − Sp: below what the judge alone passes
    assert low["correctedPassRate"] == 0.0 and low["ci95"][0] == 0.0
    high = rogan_gladen(50, 50, tp=40, fn=10, fp=15, tn=35)  # p = 1 > Se
    assert high["correctedPassRate"] == 1.0 and high["ci95"][1] == 1.0
    assert high["ci95"] == pytest.approx(_by_formula(1.0, 50, 0.8, 0.7, 50, 50)[1])


REPORT = {"graders": [
    {"label": "strict", "grader": "openai:chat:judge", "assertion": {"type": "factuality", "value": "{{reference}}"},
     "confusion": {"tp": 40, "fn": 10, "fp": 15, "tn": 35}},
    {"label": "lenient", "grader": "openai:chat:judge", "assertion": {"type": "factuality"},
     "confusion": {"tp": 48, "fn": 2, "fp": 30, "tn": 20}},
]}

CONFIG = """
prompts: ["Q: <<question>>"]
providers: [echo]
defaultTest:
  options:
    provider: {{id: "openai:chat:{judge}", config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}"}}}}
  assert:
    - type: factuality
      value: "<<answer>>"
      config: {{calibration: file://report.json, calibrationLabel: {label}}}
tests:
{tests}
"""


def _config(tmp_path, label="strict", judge="judge", n=10, passing=6):
    write(tmp_path / "report.json", json.dumps(REPORT))
    tests = "\n".join(f"  - vars: {{question: q{i} {'good' if i < passing else 'bad'}, answer: a{i}}}" for i in range(n))
    return write(tmp_path / "c.yaml", CONFIG.format(label=label, judge=judge, tests=tests))


@pytest.fixture
def judged(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule(r"Q: q\d+ good", '{"category": "A", "reason": "agrees"}')
    fake_openai.add_rule(r"Q: q\d+ bad", '{"category": "D", "reason": "disagrees"}')
    return fake_openai


def test_a_run_carries_the_corrected_rate(judged, tmp_path):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(_config(tmp_path)), "-o", str(out), "--no-progress-bar"])
    assert result.exit_code == 100, result.output
    (entry,) = json.loads(out.read_text())["factcli"]["columns"][0]["judgeCorrected"]
    expected = rogan_gladen(6, 10, tp=40, fn=10, fp=15, tn=35)
    assert entry == {"assertion": "factuality", "calibrationLabel": "strict", **expected}
    assert entry["correctedPassRate"] == pytest.approx((0.6 + 0.7 - 1) / 0.5)
    shown = " ".join(result.output.split())
    assert "factuality 60.0% → 60.0% corrected for the judge [" in shown
    assert "corrected for the judge [" in " ".join(runner.invoke(app, ["view", "latest"]).output.split())
    # a second run with fewer passes: diff compares the corrected rates
    out2 = tmp_path / "r2.json"
    assert runner.invoke(app, ["eval", "-c", str(_config(tmp_path, passing=8)), "-o", str(out2),
                               "--no-progress-bar"]).exit_code == 100
    doc = json.loads(runner.invoke(app, ["diff", json.loads(out.read_text())["evalId"], "latest", "--json"]).output)
    d = doc["columns"][0]["judgeCorrected"]["factuality"]
    assert d["a"] == pytest.approx(0.6) and d["b"] == pytest.approx(1.0) and d["delta"] == pytest.approx(0.4)


def test_a_grading_error_is_left_out_of_n(judged, tmp_path):
    judged.clear_rules()  # the first matching rule answers: the unreadable reply goes first
    judged.add_rule(r"Q: q9 ", "no category at all")
    judged.add_rule(r"Q: q\d+ good", '{"category": "A", "reason": "agrees"}')
    out = tmp_path / "r.json"
    runner.invoke(app, ["eval", "-c", str(_config(tmp_path, passing=9)), "-o", str(out), "--no-progress-bar"])
    (entry,) = json.loads(out.read_text())["factcli"]["columns"][0]["judgeCorrected"]
    assert entry["n"] == 9 and entry["observedPassRate"] == 1.0


def test_a_judge_other_than_the_calibrated_one_is_warned_about(judged, tmp_path):
    result = runner.invoke(app, ["eval", "-c", str(_config(tmp_path, judge="other")), "--no-progress-bar",
                                 "--no-table"])
    warning = " ".join(result.output.split())
    assert ("the calibration 'strict'" in warning and "grader openai:chat:judge there, openai:chat:other here"
            in warning)
    assert warning.index("warning:") < warning.index("Run ")  # before the run, not after


@pytest.mark.parametrize("change, message", [
    ({"calibration": "file://missing.json"}, "calibration report not found"),
    ({"calibrationLabel": "strikt"}, "no grader configuration labelled 'strikt' (did you mean 'strict'?)"),
    ({"calibrationLabel": None}, "holds 2 grader configurations: name one with config.calibrationLabel"),
    ({"calibration": "file://notes.json"}, "is not a calibration report"),
    ({"calibration": "file://broken.json"}, "broken.json: invalid JSON: line 1"),
])
def test_config_errors_before_any_call(judged, tmp_path, change, message):
    import yaml

    cfg = _config(tmp_path)
    write(tmp_path / "notes.json", json.dumps({"items": 3}))
    write(tmp_path / "broken.json", "{not json")
    data = yaml.safe_load(cfg.read_text())
    config = data["defaultTest"]["assert"][0]["config"]
    config.update(change)
    if change.get("calibrationLabel", "") is None:
        del config["calibrationLabel"]
    cfg.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar"])
    assert result.exit_code == 1 and message in result.output, result.output
    assert "defaultTest.assert[0].config.calibration" in result.output
    assert judged.requests == []


def test_only_a_judged_type_takes_a_calibration(fake_openai, tmp_path):
    write(tmp_path / "report.json", json.dumps(REPORT))
    cfg = write(tmp_path / "c.yaml", "prompts: [x]\nproviders: [echo]\ntests:\n  - assert:\n"
                "      - {type: contains, value: x, config: {calibration: file://report.json, calibrationLabel: strict}}\n")
    result = runner.invoke(app, ["eval", "-c", str(cfg)])
    assert result.exit_code == 1 and "'contains' has no judge" in result.output


def test_a_label_without_a_report_is_a_config_error(fake_openai, tmp_path):
    cfg = write(tmp_path / "c.yaml", "prompts: [x]\nproviders: [echo]\ntests:\n  - assert:\n"
                "      - {type: factuality, value: x, provider: echo, config: {calibrationLabel: strict}}\n")
    result = runner.invoke(app, ["eval", "-c", str(cfg)])
    assert result.exit_code == 1
    assert "tests[0].assert[0].config.calibrationLabel: calibrationLabel needs config.calibration" in result.output
