"""Scoring edge cases through the CLI, table-driven.

Every expected (success, score, reason, namedScores) below is what promptfoo 0.121.20 gives for the
same test with the `echo` provider (checked by running it); the wider parity goldens are in
tests/parity/. Covered elsewhere and not repeated here: a nested assert-set in `tests`
(test_config.py), a non-numeric `__config` cell (test_config.py), weights -1/+1 without a
threshold, `threshold: 0` and weight-0-only tests (tests/parity/golden.json).
"""

import json
import textwrap

import pytest
from typer.testing import CliRunner

from conftest import write
from factcli.cli import app

runner = CliRunner()

HEAD = 'prompts: ["{{out}}"]\nproviders: [echo]\n'


def run_rows(tmp_path, config: str, files: dict[str, str] | None = None) -> list[dict]:
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    write(tmp_path / "c.yaml", HEAD + textwrap.dedent(config))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "-o", str(out), "--no-table",
                                 "--no-progress-bar", "--no-write"])
    assert result.exit_code in (0, 100), result.output
    return json.loads(out.read_text())["results"]["results"]


def outcome(row: dict) -> tuple:
    grading = row["gradingResult"]
    return (row["success"], round(row["score"], 4), grading["reason"],
            {k: round(v, 4) for k, v in row["namedScores"].items()})


FAIL_Z = 'Expected output to contain "z"'

# (id, test body with out = "abc", expected outcome)
CASES = [
    ("weights sum to zero, all pass, no threshold: score 0 but a pass", """
        assert:
          - {type: contains, value: a, weight: 1}
          - {type: contains, value: b, weight: -1}
     """, (True, 0, "All assertions passed", {})),
    ("weights sum to zero under threshold 0", """
        threshold: 0
        assert:
          - {type: contains, value: a, weight: 1}
          - {type: contains, value: z, weight: -1}
     """, (True, 0, "Aggregate score 0.00 ≥ 0 threshold", {})),
    ("weights sum to zero under threshold 0.5", """
        threshold: 0.5
        assert:
          - {type: contains, value: a, metric: m}
          - {type: contains, value: z, weight: -1, metric: m}
     """, (False, 0, "Aggregate score 0.00 < 0.5 threshold", {"m": 0})),
    ("a negative weight can push the score above 1", """
        threshold: 0
        assert:
          - {type: contains, value: a, weight: 2}
          - {type: contains, value: z, weight: -1}
     """, (True, 2, "Aggregate score 2.00 ≥ 0 threshold", {})),
    ("a failing weight-0 assertion never fails the test", """
        assert:
          - {type: contains, value: a, metric: m}
          - {type: contains, value: z, weight: 0, metric: m}
     """, (True, 1, "All assertions passed", {"m": 1})),
    ("only weight-0 assertions under a threshold fail: the score is 0", """
        threshold: 0.5
        assert:
          - {type: contains, value: a, weight: 0}
     """, (False, 0, "Aggregate score 0.00 < 0.5 threshold", {})),
    ("threshold 0 passes although every assertion fails", """
        threshold: 0
        assert:
          - {type: contains, value: z}
          - {type: contains, value: y}
     """, (True, 0, "Aggregate score 0.00 ≥ 0 threshold", {})),
    ("without a threshold one failure fails the test whatever the score", """
        assert:
          - {type: contains, value: a, weight: 3}
          - {type: contains, value: z}
     """, (False, 0.75, FAIL_Z, {})),
    ("with a threshold the same assertions pass on the score", """
        threshold: 0.7
        assert:
          - {type: contains, value: a, weight: 3}
          - {type: contains, value: z}
     """, (True, 0.75, "Aggregate score 0.75 ≥ 0.7 threshold", {})),
    ("a threshold equal to the score passes", """
        threshold: 0.75
        assert:
          - {type: contains, value: a, weight: 3}
          - {type: contains, value: z}
     """, (True, 0.75, "Aggregate score 0.75 ≥ 0.75 threshold", {})),
    ("threshold 1 with every assertion passing", """
        threshold: 1
        assert:
          - {type: contains, value: a}
     """, (True, 1, "Aggregate score 1.00 ≥ 1 threshold", {})),
    ("assert-set with its own threshold, weight and metric", """
        assert:
          - type: assert-set
            threshold: 0.5
            weight: 2
            metric: set
            assert:
              - {type: contains, value: a, metric: child}
              - {type: contains, value: z}
          - {type: contains, value: b}
     """, (True, 0.6667, "All assertions passed", {"set": 0.5, "child": 1})),
    ("assert-set below its threshold fails the test with the set's reason", """
        assert:
          - type: assert-set
            threshold: 0.9
            assert:
              - {type: contains, value: a}
              - {type: contains, value: z}
          - {type: contains, value: b}
     """, (False, 0.75, "Aggregate score 0.50 < 0.9 threshold", {})),
    ("assert-set without threshold: weighted children, a failing child fails the set", """
        threshold: 0.1
        assert:
          - type: assert-set
            metric: s
            assert:
              - {type: contains, value: a, metric: c}
              - {type: contains, value: z, weight: 3, metric: c}
     """, (True, 0.25, "Aggregate score 0.25 ≥ 0.1 threshold", {"s": 0.25, "c": 0.25})),
    ("an assert-set of weight 0 is not forced to pass, unlike a plain assertion", """
        assert:
          - type: assert-set
            weight: 0
            assert:
              - {type: contains, value: z}
          - {type: contains, value: a}
     """, (False, 1, FAIL_Z, {})),
    ("assert-set with threshold 0 passes although its children fail", """
        assert:
          - type: assert-set
            threshold: 0
            weight: 2
            assert:
              - {type: contains, value: z}
          - {type: contains, value: a}
     """, (True, 0.3333, "All assertions passed", {})),
]


@pytest.mark.parametrize("body, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_scoring_edge(tmp_path, body, expected):
    test = "tests:\n  - vars: {out: abc}\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"
    [row] = run_rows(tmp_path, test)
    assert outcome(row) == expected


def test_weight_zero_component_keeps_its_real_score(tmp_path):
    [row] = run_rows(tmp_path, """
        tests:
          - vars: {out: abc}
            assert:
              - {type: contains, value: z, weight: 0, metric: m}
    """)
    [component] = row["gradingResult"]["componentResults"]
    assert (component["pass"], component["score"]) == (True, 0)
    assert row["gradingResult"]["namedScoreWeights"] == {"m": 0}


def test_default_test_threshold_applies_and_a_test_threshold_wins(tmp_path):
    rows = run_rows(tmp_path, """
        defaultTest:
          threshold: 0.9
        tests:
          - vars: {out: abc}
            assert: [{type: contains, value: a, weight: 9}, {type: contains, value: z}]
          - vars: {out: abc}
            threshold: 0.95
            assert: [{type: contains, value: a, weight: 9}, {type: contains, value: z}]
    """)
    assert [outcome(r)[:3] for r in rows] == [
        (True, 0.9, "Aggregate score 0.90 ≥ 0.9 threshold"),
        (False, 0.9, "Aggregate score 0.90 < 0.95 threshold"),
    ]


def test_csv_empty_expected_cells(tmp_path):
    """Empty and whitespace-only `__expected` cells are skipped, and `__config:__expectedN` counts only
    the cells that are left (promptfoo-semantics §7)."""
    csv_text = ("out,__expected,__expected1,__expected2,__config:__expected1:threshold\n"
                "kitten,,   ,levenshtein:sitting,3\n"      # index 0 is the levenshtein cell
                "abc,, ,,1\n"                              # nothing left: no assertions
                "abc,contains:a,,contains:z,1\n")
    rows = run_rows(tmp_path, "tests: file://t.csv\n", {"t.csv": csv_text})
    assert [outcome(r)[:3] for r in rows] == [
        (True, 1, "All assertions passed"),
        (True, 1, "No assertions"),
        (False, 0.5, FAIL_Z),
    ]
    lev = rows[0]["gradingResult"]["componentResults"][0]["assertion"]
    assert (lev["type"], lev["threshold"]) == ("levenshtein", 3)
    assert rows[0]["testCase"]["metadata"] == {"threshold": 3}
    assert rows[2]["gradingResult"]["componentResults"][0]["assertion"]["threshold"] == 1


def test_csv_cells_default_thresholds_differ_from_yaml(tmp_path):
    """`levenshtein:x` from CSV gets threshold 0.75 (an exact match); in YAML the default is 5."""
    rows = run_rows(tmp_path, """
        tests:
          - file://t.csv
          - vars: {out: kitten}
            assert: [{type: levenshtein, value: sitting}]
    """, {"t.csv": "out,__expected\nkitten,levenshtein:sitting\nkitten,levenshtein(3):sitting\n"})
    assert [r["success"] for r in rows] == [False, True, True]
    assert rows[0]["gradingResult"]["reason"] == "Levenshtein distance 3 is greater than threshold 0.75"


def test_csv_warnings_for_look_alike_columns(tmp_path):
    write(tmp_path / "t.csv", "out,_expected,__metadata\nabc,contains:a,x\n")
    write(tmp_path / "c.yaml", HEAD + "tests: file://t.csv\n")
    result = runner.invoke(app, ["eval", "-c", str(tmp_path / "c.yaml"), "--no-table", "--no-progress-bar",
                                 "--no-write", "-o", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert 'column "_expected" has a single underscore; did you mean "__expected"?' in result.output
    assert 'the "__metadata" column needs a key' in result.output
    row = json.loads((tmp_path / "r.json").read_text())["results"]["results"][0]
    assert row["vars"] == {"out": "abc", "_expected": "contains:a"}
    assert row["gradingResult"]["reason"] == "No assertions"


@pytest.mark.parametrize("csv_text, expected", [
    ("out,__expected,__config:__expected1:threshold\nabc,contains:a,\n",
     "t.csv: row 1, column __config:__expected1:threshold: invalid numeric value '' for threshold"),
    ("out,__expected,__config:__expected1:threshold\nabc,contains:a,1\nabc,contains:a,0.5x\n",
     "t.csv: row 2, column __config:__expected1:threshold: invalid numeric value '0.5x' for threshold"),
    ("out,__expected,__config:__expected1:weight\nabc,contains:a,1\n",
     "t.csv: row 1, column __config:__expected1:weight: invalid config key 'weight' (only 'threshold' is allowed)"),
    ("out,__expected,__config:__expected0:threshold\nabc,contains:a,1\n",
     "t.csv: row 1, column __config:__expected0:threshold: invalid expected key '__expected0'"),
    ('out,__expected\nabc,"contains-any:""a,b"\n',
     "t.csv: row 1, column __expected: Unterminated quoted field in contains assertion value"),
    ('out,__expected2\nabc,"icontains-all:""a"" b,c"\n',
     "t.csv: row 1, column __expected2: Expected comma after quoted field in contains assertion value"),
])
def test_bad_csv_cells_are_one_line_errors(tmp_path, monkeypatch, csv_text, expected):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "t.csv", csv_text)
    write(tmp_path / "c.yaml", HEAD + "tests: file://t.csv\n")
    result = runner.invoke(app, ["eval", "-c", "c.yaml", "--no-progress-bar", "--no-write"])
    assert result.exit_code == 1, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: " + expected), result.output
    assert "Traceback" not in result.output


def test_nested_assert_set_in_default_test_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "c.yaml", HEAD + textwrap.dedent("""
        defaultTest:
          assert:
            - type: assert-set
              assert:
                - type: assert-set
                  assert: [{type: contains, value: x}]
        tests: [{vars: {out: x}}]
    """))
    result = runner.invoke(app, ["eval", "-c", "c.yaml", "--no-progress-bar", "--no-write"])
    assert result.exit_code == 1
    assert result.output.strip() == ("error: c.yaml: defaultTest.assert[0].assert[0].type: assert-set cannot be "
                                     "nested inside another assert-set")
