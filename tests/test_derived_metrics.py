"""derivedMetrics in mathjs syntax: arithmetic, functions, and the conditional and comparisons that
promptfoo's own F-score example uses (`tp + fp > 0 ? tp / (tp + fp) : 0`)."""

import json

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.scoring.metrics import DerivedMetricError, compile_expression, evaluate

runner = CliRunner()


@pytest.mark.parametrize("expr, names, expected", [
    ("tp + fp > 0 ? tp / (tp + fp) : 0", {"tp": 1, "fp": 3}, 0.25),
    ("tp + fp > 0 ? tp / (tp + fp) : 0", {"tp": 0, "fp": 0}, 0),
    ("a > 1 ? b > 1 ? 10 : 20 : 30", {"a": 2, "b": 5}, 10),  # the conditional nests to the right
    ("a > 1 ? (b > 1 ? 10 : 20) : 30", {"a": 0, "b": 5}, 30),
    ("(a > 0 ? 1 : 2) + 1", {"a": 0}, 3),
    ("max(a, b) == 3 and not (a > 2)", {"a": 1, "b": 3}, 1),  # a comparison counts as 1 or 0
    ("a != b", {"a": 1, "b": 1}, 0),
    ("2 ^ 3 % 5", {}, 3),
])
def test_expressions(expr, names, expected):
    assert evaluate(compile_expression(expr), names) == pytest.approx(expected)


@pytest.mark.parametrize("expr", ["a ? b", "a : b", "a ? b : c : d", "(a ? b) : c"])
def test_a_broken_conditional_is_refused(expr):
    with pytest.raises(DerivedMetricError, match="invalid expression"):
        compile_expression(expr)


def test_promptfoos_f_score_example_loads_and_computes(tmp_path):
    cfg = write(tmp_path / "c.yaml", """
prompts: ["{{label}}"]
providers: [echo]
defaultTest:
  assert:
    - {type: equals, value: pos, metric: tp}
derivedMetrics:
  - name: share
    value: 'tp > 0 ? tp / __count : 0'
  - name: unknown_name_leaves_it_unchanged
    value: 'fp > 0 ? tp / fp : 1'
tests:
  - vars: {label: pos}
  - vars: {label: neg}
""")
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-table"])
    assert result.exit_code == 100, result.output
    named = json.loads(out.read_text())["results"]["prompts"][0]["metrics"]["namedScores"]
    assert named["tp"] == 1 and named["share"] == 0.5 and named["unknown_name_leaves_it_unchanged"] == 0
