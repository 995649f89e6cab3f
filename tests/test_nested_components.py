"""Nested componentResults returned by `javascript` and `python` assertions (promptfoo-features B §2,
experiments ncr01/ncr02): only the parent scores the row; the results list each result, its children
still inside it, then its direct children under the parent's assertion; the columns count them."""

import json
import shutil

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")

NESTED_JS = """
module.exports.mixed = () => ({
  pass: true, score: 0.75, reason: 'parent ok',
  componentResults: [
    { pass: true,  score: 1, reason: 'child A passes', namedScores: { childA: 1 } },
    { pass: false, score: 0, reason: 'child B fails',  namedScores: { childB: 0.25 } },
  ],
});
module.exports.failingParent = () => ({
  pass: false, score: 0.2, reason: 'parent says no',
  componentResults: [{ pass: true, score: 1, reason: 'a child is happy' }],
});
module.exports.topNamed = () => ({
  pass: true, score: 0.5, reason: 'top', namedScores: { topA: 0.4, topB: 1 }, namedScoreWeights: { topB: 3 },
  componentResults: [{ pass: true, score: 1, reason: 'c' }],
});
module.exports.deep = () => ({
  pass: true, score: 1, reason: 'L1',
  componentResults: [{ pass: true, score: 1, reason: 'L2',
    componentResults: [{ pass: false, score: 0, reason: 'L3',
      componentResults: [{ pass: false, score: 0, reason: 'L4' }] }] }],
});
module.exports.junk = () => ({
  pass: true, score: 1, reason: 'parent',
  componentResults: [{ reason: 'no pass' }, 'a string child', null,
                     { pass: true, score: 1, reason: 'own', assertion: { type: 'custom', metric: 'own' } }],
});
"""

SNAKE_PY = """
def snake(output, context):
    return {"pass_": True, "score": 0.75, "reason": "py parent",
            "named_scores": {"pyTop": 0.5},
            "component_results": [
                {"pass_": True, "score": 1, "reason": "py child ok"},
                {"pass": False, "score": 0, "reason": "py child bad",
                 "component_results": [{"pass_": False, "score": 0, "reason": "py grandchild"}]}]}


def low(output, context):
    return {"pass": True, "score": 0.3, "reason": "low",
            "componentResults": [{"pass": True, "score": 1, "reason": "kid"}]}
"""


def _run(tmp_path, asserts: str, text: str = "bananas are yellow") -> tuple[dict, dict]:
    """-> (the row, the column's metrics) of a one-test eval with the echo provider."""
    write(tmp_path / "nested.js", NESTED_JS)
    write(tmp_path / "snake.py", SNAKE_PY)
    cfg = write(tmp_path / "c.yaml", f'prompts: ["{{{{text}}}}"]\nproviders: [echo]\n'
                                     f"tests:\n  - vars: {{text: {text}}}\n    assert:\n{asserts}")
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-table"])
    assert result.exit_code in (0, 100), result.output
    doc = json.loads(out.read_text())
    (row,) = doc["results"]["results"]
    return row, doc["results"]["prompts"][0]["metrics"]


def _brief(c: dict) -> tuple:
    return c["pass"], c["score"], c["reason"]


@needs_node
def test_ncr01_javascript_children_are_listed_and_counted_but_never_score(tmp_path):
    row, metrics = _run(tmp_path, "      - type: javascript\n        value: file://nested.js:mixed\n"
                                  "        metric: parentMetric\n")
    assert (row["success"], row["score"], row["namedScores"], row["failureReason"]) == (
        True, 0.75, {"parentMetric": 0.75}, 0)
    g = row["gradingResult"]
    assert _brief(g) == (True, 0.75, "All assertions passed")
    assert g["namedScores"] == {"parentMetric": 0.75} and g["namedScoreWeights"] == {"parentMetric": 1}
    parent_assertion = {"type": "javascript", "value": "file://nested.js:mixed", "metric": "parentMetric"}
    parent, a, b = g["componentResults"]
    assert _brief(parent) == (True, 0.75, "parent ok") and parent["assertion"] == parent_assertion
    nested = parent["componentResults"]  # the children stay inside the parent, as returned
    assert [_brief(c) for c in nested] == [(True, 1, "child A passes"), (False, 0, "child B fails")]
    assert [c["namedScores"] for c in nested] == [{"childA": 1}, {"childB": 0.25}]
    assert all("assertion" not in c for c in nested)
    # then each direct child, under the parent's assertion
    assert [_brief(c) for c in (a, b)] == [(True, 1, "child A passes"), (False, 0, "child B fails")]
    assert a["assertion"] == b["assertion"] == parent_assertion
    assert a["namedScores"] == {"childA": 1}
    # promptfoo's column for this row: children count as assertions, and under the parent's metric
    assert (metrics["assertPassCount"], metrics["assertFailCount"]) == (2, 1)
    assert metrics["namedScores"] == {"parentMetric": 0.75}
    assert metrics["namedScoresCount"] == {"parentMetric": 3}
    assert metrics["namedScoreWeights"] == {"parentMetric": 1}
    assert (metrics["testPassCount"], metrics["testFailCount"]) == (1, 0)


@needs_node
def test_a_failing_parent_fails_the_row_whatever_its_children_say(tmp_path):
    row, metrics = _run(tmp_path, "      - type: javascript\n        value: file://nested.js:failingParent\n")
    assert (row["success"], row["score"], row["gradingResult"]["reason"]) == (False, 0.2, "parent says no")
    assert (metrics["assertPassCount"], metrics["assertFailCount"]) == (1, 1)


@needs_node
def test_the_parents_named_scores_count_and_the_childrens_do_not(tmp_path):
    row, metrics = _run(tmp_path, "      - type: javascript\n        value: file://nested.js:topNamed\n"
                                  "        metric: pm\n        weight: 2\n")
    g = row["gradingResult"]
    assert g["namedScores"] == {"pm": 0.5, "topA": 0.4, "topB": 1}
    assert g["namedScoreWeights"] == {"pm": 2, "topA": 2, "topB": 6}
    assert metrics["namedScores"] == {"pm": 1, "topA": pytest.approx(0.8), "topB": 6}


@needs_node
def test_grandchildren_stay_inside_their_parent(tmp_path):
    row, metrics = _run(tmp_path, "      - type: javascript\n        value: file://nested.js:deep\n")
    l1, l2 = row["gradingResult"]["componentResults"]
    assert (l1["reason"], l2["reason"]) == ("L1", "L2")
    (l3,) = l2["componentResults"]
    assert l3["reason"] == "L3" and l3["componentResults"][0]["reason"] == "L4"
    assert l1["componentResults"][0]["componentResults"][0]["reason"] == "L3"
    assert (metrics["assertPassCount"], metrics["assertFailCount"]) == (2, 0)  # L3 and L4 are not listed


@needs_node
def test_not_and_weight_zero_change_only_the_parent(tmp_path):
    row, metrics = _run(tmp_path, "      - type: not-javascript\n        value: file://nested.js:mixed\n")
    parent, a, b = row["gradingResult"]["componentResults"]
    assert _brief(parent) == (False, 0.75, "Custom function returned true")
    assert (a["pass"], b["pass"]) == (True, False)
    row, metrics = _run(tmp_path, "      - type: javascript\n        value: file://nested.js:failingParent\n"
                                  "        weight: 0\n")
    parent, child = row["gradingResult"]["componentResults"]
    assert parent["pass"] is True and child["reason"] == "a child is happy"


@needs_node
def test_inside_an_assert_set_only_the_parent_scores_the_set(tmp_path):
    row, metrics = _run(tmp_path, "      - type: assert-set\n        assert:\n"
                                  "          - type: javascript\n            value: file://nested.js:mixed\n"
                                  "          - type: contains\n            value: bananas\n")
    g = row["gradingResult"]
    the_set, js, a, b, contains = g["componentResults"]
    assert the_set["score"] == pytest.approx(0.875) and the_set["pass"] is True
    assert [c["reason"] for c in the_set["componentResults"]] == [
        "parent ok", "child A passes", "child B fails", "Assertion passed"]
    assert js["reason"] == "parent ok" and len(js["componentResults"]) == 2
    assert [c["reason"] for c in (a, b)] == ["child A passes", "child B fails"]
    assert contains["assertion"]["type"] == "contains"
    assert (row["success"], row["score"]) == (True, pytest.approx(0.875))
    assert (metrics["assertPassCount"], metrics["assertFailCount"]) == (4, 1)


@needs_node
def test_malformed_children_are_failed_components(tmp_path):
    row, metrics = _run(tmp_path, "      - type: javascript\n        value: file://nested.js:junk\n")
    assert row["success"] is True and row["failureReason"] == 0  # promptfoo: a null child is an ERROR row
    parent, no_pass, string, null, own = row["gradingResult"]["componentResults"]
    assert (no_pass["pass"], no_pass["reason"]) == (False, "no pass")
    assert (string["pass"], string["reason"]) == (
        False, 'componentResults[1] is not a grading result: "a string child"')
    assert (null["pass"], null["reason"]) == (False, "componentResults[2] is not a grading result: null")
    assert own["assertion"] == {"type": "custom", "metric": "own"}  # a child's own assertion is kept
    assert no_pass["assertion"]["type"] == "javascript"
    assert (metrics["assertPassCount"], metrics["assertFailCount"]) == (2, 3)


def test_ncr02_python_snake_case_children(tmp_path):
    row, metrics = _run(tmp_path, "      - type: python\n        value: file://snake.py:snake\n"
                                  "        metric: pyMetric\n")
    assert (row["success"], row["score"]) == (True, 0.75)
    assert row["namedScores"] == {"pyMetric": 0.75, "pyTop": 0.5}
    parent, ok, bad = row["gradingResult"]["componentResults"]
    assert _brief(parent) == (True, 0.75, "py parent")
    assert [_brief(c) for c in parent["componentResults"]] == [(True, 1, "py child ok"), (False, 0, "py child bad")]
    assert [_brief(c) for c in (ok, bad)] == [(True, 1, "py child ok"), (False, 0, "py child bad")]
    assert ok["assertion"]["metric"] == bad["assertion"]["metric"] == "pyMetric"
    (grandchild,) = bad["componentResults"]  # mapped from pass_, and not listed on its own
    assert _brief(grandchild) == (False, 0, "py grandchild")
    assert (metrics["assertPassCount"], metrics["assertFailCount"]) == (2, 1)
    assert metrics["namedScoresCount"]["pyMetric"] == 3


def test_python_threshold_fails_the_parent_and_keeps_the_children(tmp_path):
    row, metrics = _run(tmp_path, "      - type: python\n        value: file://snake.py:low\n"
                                  "        threshold: 0.5\n")
    parent, kid = row["gradingResult"]["componentResults"]
    assert _brief(parent) == (False, 0.3, "Python score 0.3 is less than threshold 0.5: low")
    assert kid["pass"] is True and row["success"] is False


def test_inline_python_returning_children(tmp_path):
    code = ('{"pass": True, "score": 1, "reason": "ok", '
            '"componentResults": [{"pass": False, "score": 0, "reason": "inline kid"}]}')
    row, metrics = _run(tmp_path, f"      - type: python\n        value: '{code}'\n")
    parent, kid = row["gradingResult"]["componentResults"]
    assert parent["reason"] == "ok" and kid["reason"] == "inline kid"
    assert row["success"] is True and (metrics["assertPassCount"], metrics["assertFailCount"]) == (1, 1)
