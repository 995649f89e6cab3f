"""`factcli calibrate`: metrics against hand computations and the FACTS paper, scripted judges side by
side, bad label files, the stored run, and the shipped TruthfulQA calibration set."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.labels import load_items, parse_label, plan
from factcli.stats.agreement import binary_metrics

runner = CliRunner()


def cli(*args, env=None):
    return runner.invoke(app, [*map(str, args)], env=env)


def calibrate(*args, env=None):
    return cli("calibrate", "--no-progress-bar", *args, env=env)


# ---------------------------------------------------------------- the formulas


def test_metrics_match_hand_computation():
    # TP 5, FN 1, FP 1, TN 3 (10 items, 6 gold pass)
    m = binary_metrics(5, 1, 1, 3)
    assert m["n"] == 10 and m["confusion"] == {"tp": 5, "fn": 1, "fp": 1, "tn": 3}
    assert m["accuracy"] == pytest.approx(0.8)
    assert m["fpr"] == pytest.approx(1 / 4)
    assert m["fnr"] == pytest.approx(1 / 6)
    assert m["f1Positive"] == pytest.approx(10 / 12)  # 2TP / (2TP + FP + FN)
    assert m["f1Negative"] == pytest.approx(6 / 8)  # 2TN / (2TN + FN + FP)
    assert m["macroF1"] == pytest.approx((10 / 12 + 6 / 8) / 2)
    # chance agreement: P(pred+)P(gold+) + P(pred-)P(gold-) = .6*.6 + .4*.4 = .52
    assert m["kappa"] == pytest.approx((0.8 - 0.52) / (1 - 0.52))
    # the grader passes 6/10, people passed 6/10: no error in the aggregate despite 2 mistakes
    assert m["errorRate"] == pytest.approx(0) and m["bias"] == pytest.approx(0)


def test_metrics_of_a_grader_that_passes_everything():
    m = binary_metrics(5, 0, 4, 0)
    assert m["accuracy"] == pytest.approx(5 / 9)
    assert (m["fpr"], m["fnr"]) == (1.0, 0.0)
    assert m["f1Negative"] == 0.0 and m["macroF1"] == pytest.approx(5 / 14)
    assert m["kappa"] == pytest.approx(0.0)  # no better than chance
    assert m["errorRate"] == pytest.approx(4 / 9) and m["bias"] == pytest.approx(4 / 9)


def test_undefined_metrics_are_none_not_zero():
    m = binary_metrics(3, 1, 0, 0)  # no gold negatives: no FPR, but the one negative verdict was wrong
    assert m["fpr"] is None and m["f1Negative"] == 0.0 and m["macroF1"] == pytest.approx(3 / 7)
    assert m["kappa"] == pytest.approx(0.0)
    none_negative = binary_metrics(3, 0, 0, 0)  # no negatives anywhere: F1(-) is 0/0
    assert none_negative["f1Negative"] is None and none_negative["macroF1"] is None
    empty = binary_metrics(0, 0, 0, 0)
    assert empty["accuracy"] is None and empty["errorRate"] is None and empty["kappa"] is None
    both_all_pass = binary_metrics(4, 0, 0, 0)
    assert both_all_pass["kappa"] is None  # chance agreement is 1: kappa is 0/0


@pytest.mark.parametrize("tp, fn, fp, tn, row", [
    # FACTS Grounding, Table 2 (percent): Macro-F1, Acc., FPR, FNR, F1(+), F1(-).
    # The rates pin the table down: 62 gold-negative and 344 gold-positive responses (406, where
    # the caption says N=402), e.g. FPR 56.45 = 35/62 and FNR 5.23 = 18/344.
    (326, 18, 35, 27, (71.47, 86.95, 56.45, 5.23, 92.48, 50.47)),  # Gemini 1.5 Pro, JSON
    (267, 77, 13, 49, (68.85, 77.83, 20.97, 22.38, 85.58, 52.13)),  # Claude 3.5 Sonnet, span-level
    (285, 59, 20, 42, (69.68, 80.54, 32.26, 17.15, 87.83, 51.53)),  # GPT-4o, JSON
])
def test_metrics_reproduce_the_facts_paper(tp, fn, fp, tn, row):
    m = binary_metrics(tp, fn, fp, tn)
    got = tuple(round(m[k] * 100 + 1e-9, 2) for k in ("macroF1", "accuracy", "fpr", "fnr", "f1Positive",
                                                       "f1Negative"))
    assert got == row


@pytest.mark.parametrize("value, gold", [
    ("pass", True), ("FAIL", False), ("True", True), ("false", False), (" yes ", True), ("No", False),
    ("1", True), ("0", False), (True, True), (False, False), (1, True), (0, False),
    ("maybe", None), (2, None), ("", None), (None, None), ("passed", None),
])
def test_labels(value, gold):
    assert parse_label(value) is gold


# ---------------------------------------------------------------- scripted judges

# judge1 answers D (disagree) when the output carries [J1-no], else A; judge2 answers A to
# everything except [J2-bad], where its reply has no category (a grading error).
ITEMS = [
    ("q1", "pass", "[J1-yes] [J2-bad]"), ("q2", "yes", "[J1-yes]"), ("q3", True, "[J1-yes]"),
    ("q4", "1", "[J1-yes]"), ("q5", "TRUE", "[J1-yes]"), ("q6", "pass", "[J1-no]"),
    ("q7", "fail", "[J1-yes]"), ("q8", "no", "[J1-no]"), ("q9", 0, "[J1-no]"), ("q10", "False", "[J1-no]"),
]
JUDGE = '{id: "openai:chat:%s", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'
CONFIG = f"""
description: two scripted judges
labels: labels.jsonl
graders:
  - label: judge one
    type: factuality
    provider: {JUDGE % "judge1"}
  - type: factuality
    provider: {JUDGE % "judge2"}
"""


def script_judges(server):
    server.add_rule(r"\[J1-no\]", '{"category": "D", "reason": "disagrees"}', model="judge1")
    server.add_rule(".", '{"category": "A", "reason": "consistent"}', model="judge1")
    server.add_rule(r"\[J2-bad\]", "I cannot decide.", model="judge2")
    server.add_rule(".", '{"category": "B", "reason": "more detail"}', model="judge2")


def labels_file(path: Path, items=ITEMS) -> Path:
    lines = [json.dumps({"id": i, "question": f"Question {i}?", "output": f"Answer {i} {tag}",
                         "reference": f"Reference {i}", "label": label}) for i, label, tag in items]
    return write(path, "\n".join(lines) + "\n")


def test_two_judges_side_by_side(fake_openai, tmp_path):
    script_judges(fake_openai)
    labels_file(tmp_path / "labels.jsonl")
    cfg = write(tmp_path / "graders.yaml", CONFIG)
    out = tmp_path / "metrics.json"
    result = calibrate("-c", cfg, "-o", out, env={"COLUMNS": "160"})
    assert result.exit_code == 100, result.output  # judge2 had a grading error
    rep = json.loads(out.read_text())
    assert rep["items"] == 10 and rep["gold"] == {"positive": 6, "negative": 4, "positiveRate": 0.6}
    one, two = rep["graders"]
    assert one["label"] == "judge one"
    assert two["label"] == "factuality · openai:chat:judge2"
    assert one["confusion"] == {"tp": 5, "fn": 1, "fp": 1, "tn": 3} and one["gradingErrors"] == 0
    assert one["macroF1"] == pytest.approx((10 / 12 + 6 / 8) / 2)
    assert (one["fpr"], one["fnr"]) == (pytest.approx(0.25), pytest.approx(1 / 6))
    assert one["kappa"] == pytest.approx(0.28 / 0.48)
    assert one["errorRate"] == pytest.approx(0)
    # judge2: q1 is a grading error, counted apart and not as a prediction
    assert two["gradingErrors"] == 1 and two["errors"][0]["id"] == "q1"
    assert two["n"] == 9 and two["confusion"] == {"tp": 5, "fn": 0, "fp": 4, "tn": 0}
    assert (two["fpr"], two["fnr"], two["kappa"]) == (1.0, 0.0, pytest.approx(0.0))
    assert two["errorRate"] == pytest.approx(4 / 9) and two["bias"] == pytest.approx(4 / 9)
    # one table, both graders, with the grading error reported by item
    text = result.output
    assert "judge one" in text and "factuality · openai:chat:judge2" in text
    assert re.search(r"judge one\s+10\s+79\.17\s+80\.00\s+25\.00\s+16\.67\s+83\.33\s+75\.00\s+0\.583\s+0\.00", text)
    assert "Grading errors [factuality · openai:chat:judge2]: q1:" in text
    # too narrow for graders as rows: graders become columns
    narrow = calibrate("-c", cfg, "--no-write", env={"COLUMNS": "80"}).output
    assert re.search(r"Macro-F1\s+79\.17\s+35\.71", narrow) and re.search(r"ER\s+0\.00\s+44\.44 \+", narrow)
    # 20 grader calls, each with the question and the reference; the second calibration reads them from
    # the cache but for q1's unreadable reply, which a failure is never kept and is asked again
    judged = [r["json"] for r in fake_openai.requests if r["json"].get("model") in ("judge1", "judge2")]
    assert len(judged) == 21
    assert all("Reference" in m["content"] and "Question" in m["content"]
               for b in judged for m in b["messages"][-1:])


def test_calibration_is_a_stored_run(fake_openai, tmp_path):
    script_judges(fake_openai)
    labels_file(tmp_path / "labels.jsonl")
    cfg = write(tmp_path / "graders.yaml", CONFIG)
    result = calibrate("-c", cfg)
    run_id = re.search(r"Stored as run (\S+):", result.output).group(1)
    view = cli("view", run_id, "--json")
    assert view.exit_code == 0, view.output
    doc = json.loads(view.output)
    labels = [c.get("provider_label") or c.get("label") or json.dumps(c) for c in doc["columns"]]
    assert any("judge one" in x for x in labels) and any("judge2" in x for x in labels)
    assert doc["run"]["description"] == "two scripted judges"
    assert len(doc["tests"]) == 10 and "q6 (gold: pass)" in json.dumps(doc["tests"])
    plain = cli("view", run_id)
    assert plain.exit_code == 0 and "judge one" in plain.output
    assert run_id in cli("list").output
    # each column was graded by its own judge only
    show = json.loads(cli("show", run_id, "0", "--json").output)
    assert "judge1" in json.dumps(show) and "judge2" in json.dumps(show)
    # a second calibration is answered from the cache, but for q1's unreadable reply (a failure is never
    # cached: it is asked again); --resume is refused in one line
    before = len(fake_openai.requests)
    assert calibrate("-c", cfg).exit_code == 100
    again = fake_openai.requests[before:]
    assert len(again) == 1 and again[0]["json"]["model"] == "judge2" and "q1" in json.dumps(again[0]["json"])
    resumed = cli("eval", "--retry-errors", run_id, "--no-progress-bar")
    assert resumed.exit_code == 1 and "is a calibration" in resumed.output
    assert len(resumed.output.strip().splitlines()) == 1


def test_cli_flags_cross_types_and_graders(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    script_judges(fake_openai)
    fake_openai.add_rule(".", '{"pass": true, "score": 1, "reason": "ok"}', model="judge3")
    items = [x for x in ITEMS if x[0] != "q1"]
    labels = labels_file(tmp_path / "labels.jsonl", items)
    out = tmp_path / "m.json"
    result = calibrate(labels, "--grader", "openai:chat:judge1", "--grader", "openai:chat:judge2", "-o", out,
                       "--no-write")
    assert result.exit_code == 0, result.output  # every item got a verdict from both
    rep = json.loads(out.read_text())
    assert [g["label"] for g in rep["graders"]] == ["factuality · openai:chat:judge1",
                                                    "factuality · openai:chat:judge2"]
    assert rep["graders"][0]["confusion"] == {"tp": 4, "fn": 1, "fp": 1, "tn": 3}
    assert "Stored as run" not in result.output
    # --filter-first-n and an assertion type from the command line
    out2 = tmp_path / "m2.json"
    r2 = calibrate(labels, "--assert", "llm-rubric", "--grader", "openai:chat:judge3", "--filter-first-n", "3",
                   "-o", out2, "--no-write")
    assert r2.exit_code == 0, r2.output
    g = json.loads(out2.read_text())["graders"][0]
    assert g["label"] == "llm-rubric · openai:chat:judge3" and g["n"] == 3
    # with no value, llm-rubric's rubric is the item's question and reference, never empty
    sent = [json.dumps(r) for r in fake_openai.requests if "judge3" in json.dumps(r)]
    assert len(sent) == 3 and all("It agrees with the reference answer:" in s for s in sent)


def test_prompt_variants_get_distinct_labels(fake_openai, tmp_path):
    script_judges(fake_openai)
    labels_file(tmp_path / "labels.jsonl", ITEMS[1:4])
    cfg = write(tmp_path / "g.yaml", f"""
labels: labels.jsonl
graders:
  - {{type: factuality, provider: {JUDGE % "judge1"}}}
  - type: factuality
    provider: {JUDGE % "judge1"}
    rubricPrompt: "Q <<input>> REF <<ideal>> ANS <<completion>> -- reply JSON with category"
    options: {{factuality: {{subset: 0}}}}
""")
    out = tmp_path / "m.json"
    assert calibrate("-c", cfg, "-o", out, "--no-write").exit_code == 0
    first, second = json.loads(out.read_text())["graders"]
    assert second["label"] == first["label"] + " #2"
    assert first["confusion"]["tp"] == 3 and second["confusion"]["fn"] == 3  # A scored 0 by the variant
    prompts = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests]
    assert any(p.startswith("Q Question q2? REF Reference q2") for p in prompts)


def test_rejected_credentials_abort_with_exit_3(fake_openai, tmp_path):
    script_judges(fake_openai)
    fake_openai.enqueue_fault(status=401, times=50)
    labels_file(tmp_path / "labels.jsonl")
    cfg = write(tmp_path / "graders.yaml", CONFIG)
    out = tmp_path / "m.json"
    result = calibrate("-c", cfg, "-j", "1", "-o", out)
    assert result.exit_code == 3, result.output
    assert "Aborted" in result.output and json.loads(out.read_text())["factcli"]["status"] == "aborted"


@pytest.mark.parametrize("name, text, where", [
    ("bad.jsonl", '{"output": "a", "label": "pass"}\n\n{"output": "b", "label": "maybe"}\n', "line 3: label 'maybe'"),
    ("bad.jsonl", '{"output": "a", "label": "pass"}\n{"output": "b"}\n', "line 2: missing 'label'"),
    ("bad.jsonl", '{"output": "a", "lable": "pass"}\n', "line 1: missing 'label'"),
    ("bad.jsonl", '{"label": "no"}\n', "line 1: missing 'output'"),
    ("bad.jsonl", '{"output": "a", "label": "no"\n', "line 1: invalid JSON"),
    ("bad.jsonl", '["a", "pass"]\n', "line 1: expected a JSON object"),
    ("bad.jsonl", '{"id": 1, "output": "a", "label": 1}\n{"id": 1, "output": "b", "label": 0}\n',
     "line 2: id '1' is used twice"),
    ("bad.csv", "output,label\nfine,pass\nnot fine,2\n", "row 2: label '2'"),
    ("bad.csv", "output,gold\nfine,pass\n", "line 1: the header has no 'label' column"),
    ("bad.csv", "output,label\nfine,pass,extra\n", "row 1: the row has more cells"),
    ("bad.txt", "x", "a labels file is .jsonl or .csv"),
    ("empty.jsonl", "\n", "no labeled items"),
])
def test_bad_label_file_is_one_line(fake_openai, tmp_path, name, text, where, monkeypatch):
    monkeypatch.setenv("FACTCLI_GRADER", "openai:chat:judge1")
    path = write(tmp_path / name, text)
    result = calibrate(path, "--no-write")
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and where in lines[0], lines
    assert fake_openai.requests == []


def test_inputs_a_grader_needs(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_GRADER", "openai:chat:judge1")
    path = write(tmp_path / "l.csv", "id,question,output,reference,label\na,Q?,x,ref,pass\nb,Q?,y,,fail\n")
    result = calibrate(path, "--no-write")
    assert result.exit_code == 1
    assert f"{path}: row 2: no 'reference', which factuality · openai:chat:judge1" in result.output
    nq = write(tmp_path / "n.jsonl", '{"output": "x", "reference": "r", "label": "yes"}\n')
    assert "line 1: no 'question'" in calibrate(nq, "--no-write").output
    assert fake_openai.requests == []


def test_config_errors(tmp_path, monkeypatch):
    labels = write(tmp_path / "l.jsonl", '{"question": "q", "output": "x", "reference": "r", "label": "yes"}\n')
    r = calibrate(labels, "--no-write")  # no grader anywhere
    assert r.exit_code == 1 and "--assert factuality: no grader" in r.output
    monkeypatch.setenv("FACTCLI_GRADER", "openai:chat:judge1")
    bad = write(tmp_path / "g.yaml", "graders:\n  - {type: factuallity}\n")
    r = calibrate(labels, "-c", bad)
    assert r.exit_code == 1 and f"{bad}: graders[0].type: unknown assertion type 'factuallity'" in r.output
    dup = write(tmp_path / "d.yaml",
                "graders:\n  - {type: factuality, label: x}\n  - {type: icontains, value: a, label: x}\n")
    assert "graders[1].label: label 'x' is already used by graders[0]" in calibrate(labels, "-c", dup).output
    sb = write(tmp_path / "s.yaml", "graders:\n  - {type: select-best, value: best}\n")
    assert "graders[0].type: 'select-best' compares" in calibrate(labels, "-c", sb).output
    key = write(tmp_path / "k.yaml", "graders:\n  - {type: factuality, lable: x}\n")
    assert "graders[0].lable: unknown key 'lable' (did you mean 'label'?)" in calibrate(labels, "-c", key).output
    nolabels = write(tmp_path / "n.yaml", "graders:\n  - {type: factuality}\n")
    assert "no labels file" in calibrate("-c", nolabels).output
    assert "-o m.csv: calibrate writes its metrics as JSON" in calibrate(labels, "-o", "m.csv").output
    assert calibrate(labels, "--bogus").exit_code == 2


def test_a_deterministic_check_is_a_baseline(tmp_path):
    labels = write(tmp_path / "l.csv", "output,label\nParis,pass\nLyon,fail\nparis!,yes\nRome,no\n")
    cfg = write(tmp_path / "g.yaml", "graders:\n  - {type: icontains, value: paris}\n")
    out = tmp_path / "m.json"
    r = calibrate(labels, "-c", cfg, "-o", out, "--no-write")
    assert r.exit_code == 0, r.output
    g = json.loads(out.read_text())["graders"][0]
    assert g["label"] == "icontains" and g["accuracy"] == 1.0 and g["kappa"] == 1.0


def test_docs_document_calibrate():
    readme = (ROOT / "docs" / "commands.md").read_text()
    assert "### `factcli calibrate`" in readme
    section = readme.split("### `factcli calibrate`", 1)[1].split("\n### ", 1)[0]
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", section, flags=re.S))
    for flag in re.findall(r"(--[a-z][a-z-]+|-[a-z])\b", cli("calibrate", "--help").output):
        if flag != "--help":
            assert any(re.search(rf"(^|[\s,]){re.escape(flag)}\b", s) for s in spans), flag


# ---------------------------------------------------------------- the shipped sets

CAL = ROOT / "configs" / "calibration"


def test_shipped_truthfulqa_calibration_set():
    items = load_items(CAL / "truthfulqa-150.jsonl")
    assert len(items) == 150 and sum(it.gold for it in items) == 75
    assert len({it.question for it in items}) == 150  # one answer per question
    assert all(it.question and it.reference and it.output for it in items)
    p = plan(CAL / "factuality.yaml", None, [], [], None)
    assert p.labels.resolve() == (CAL / "truthfulqa-150.jsonl").resolve()
    assert [g.assertion.type for g in p.graders] == ["factuality"] and p.graders[0].assertion.provider is None


def test_offline_baselines_on_the_shipped_set(tmp_path):
    out = tmp_path / "m.json"
    result = calibrate("-c", CAL / "baseline.yaml", "-o", out, "--no-write")
    assert result.exit_code == 0, result.output
    rouge, lev = json.loads(out.read_text())["graders"]
    assert rouge["confusion"] == {"tp": 41, "fn": 34, "fp": 30, "tn": 45}  # the figures in its README
    assert round(rouge["macroF1"] * 100, 2) == 57.30 and round(rouge["kappa"], 3) == 0.147
    assert round(rouge["errorRate"] * 100, 2) == 2.67 and rouge["bias"] < 0
    assert lev["confusion"] == {"tp": 18, "fn": 57, "fp": 11, "tn": 64}


def test_truthfulqa_set_rebuilds_from_the_source():
    data = ROOT.parent / "shared" / "data" / "truthfulqa"
    if not (data / "finetune_truth.jsonl").is_file():
        pytest.skip("the TruthfulQA source files are not next to this checkout")
    rebuilt = subprocess.run([sys.executable, str(CAL / "build_truthfulqa.py"), "--data", str(data), "--stdout"],
                             capture_output=True, text=True, check=True).stdout
    assert rebuilt == (CAL / "truthfulqa-150.jsonl").read_text(encoding="utf-8")


def test_truthfulqa_factuality_suite_loads_offline():
    from factcli.run import runner

    suite = runner.load([ROOT / "configs" / "truthfulqa" / "factuality.yaml"])
    assert len(suite.tests) == 50
    assert all(t.assertions[0].type == "factuality" and t.vars["best_answer"] for t in suite.tests)
