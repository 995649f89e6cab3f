"""`factcli calibrate --benchmark`: a judge scored on LLM-AggreFact / HaluBench served by a stand-in
datasets-server (gated like the real one), against a scripted grader with a known confusion per
dataset; balanced accuracy, its intervals and the mean checked against hand computations; sampling,
a kill and a resume, the dry run, the budget, and a local file read offline with --columns."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, write
from fake_hub import FakeHub
from typer.testing import CliRunner

from factcli.cli import app
from factcli.methods.facts_parsing import split_sentences

runner = CliRunner()
TOKEN = "hf_test_token_5b2e8a41"
AGGREFACT = "lytang/LLM-AggreFact"
HALUBENCH = "PatronusAI/HaluBench"


def cli(*args, env=None):
    return runner.invoke(app, [*map(str, args)], env={"COLUMNS": "160", **(env or {})})


def calibrate(*args, env=None):
    return cli("calibrate", "--no-progress-bar", *args, env=env)


# ---------------------------------------------------------------- the scripted judge

def make_judge(tag: str = "J"):
    """A judge that reads the claim's tag: [J:no] -> unsupported, [J:bad] -> a reply that is no
    judgment, else supported (every sentence of the response labelled alike); it answers in the
    format asked (structured output, or JSON lines without it)."""

    def judge(body: dict) -> str:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        m = re.search(r"<(?:test_)?response>\n(.*?)\n</(?:test_)?response>", users[-1], re.S)
        response = m.group(1)
        if f"[{tag}:bad]" in response:
            return "I would rather not say."
        label = "unsupported" if f"[{tag}:no]" in response else "supported"
        items = [{"sentence": s, "label": label, "rationale": "scripted", "excerpt": ""}
                 for s in split_sentences(response)]
        if body.get("response_format"):
            return json.dumps({"sentences": items})
        return "\n".join(json.dumps(x) for x in items)

    return judge


judge = make_judge("J")


@pytest.fixture
def hub(monkeypatch):
    for name in ("HF_TOKEN", "HF_API_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with FakeHub() as server:
        monkeypatch.setenv("FACTCLI_HF_DATASETS_SERVER", server.url)
        yield server


@pytest.fixture
def grader(fake_openai, monkeypatch):
    """The scripted judge as gpt-4o-mini (a model litellm's table prices) at the stand-in."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule(".", judge)
    return fake_openai


def aggrefact_rows(spec: dict) -> list[dict]:
    """spec: dataset -> [(label, tag, count), ...] in LLM-AggreFact's exact schema."""
    rows = []
    for ds, parts in spec.items():
        k = 0
        for label, tag, count in parts:
            for _ in range(count):
                rows.append({"dataset": ds, "doc": f"Doc of {ds} number {k}. " + "The sky is blue. " * 20,
                             "claim": f"Claim {ds}-{k} {tag}", "label": label,
                             "contamination_identifier": f"{k:064d}"})
                k += 1
    return rows


# The known confusion: per dataset (supported & judged supported, supported & judged unsupported,
# unsupported & judged supported, unsupported & judged unsupported), plus grading errors.
CONFUSION = {"AggreFact-CNN": (9, 3, 2, 6), "Wice": (10, 0, 5, 5), "ExpertQA": (3, 3, 1, 13)}


def known_spec() -> dict:
    spec = {ds: [(1, "[J:yes]", tp), (1, "[J:no]", fn), (0, "[J:yes]", fp), (0, "[J:no]", tn)]
            for ds, (tp, fn, fp, tn) in CONFUSION.items()}
    spec["AggreFact-CNN"].append((1, "[J:bad]", 1))  # a grading error: counted apart, never as wrong
    return spec


# ---------------------------------------------------------------- hand computations


def wilson(x: int, n: int) -> tuple[float, float]:
    z = 1.96
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def bacc_by_hand(tp, fn, fp, tn):
    tpr, tnr = tp / (tp + fn), tn / (tn + fp)
    (l1, u1), (l2, u2) = wilson(tp, tp + fn), wilson(tn, tn + fp)
    b = (tpr + tnr) / 2
    return (b, b - math.sqrt((tpr - l1) ** 2 + (tnr - l2) ** 2) / 2,
            b + math.sqrt((u1 - tpr) ** 2 + (u2 - tnr) ** 2) / 2)


def pct(v):
    return f"{v * 100:.1f}"


# ---------------------------------------------------------------- the figures


def test_llm_aggrefact_figures_equal_hand_computations(hub, grader, tmp_path, monkeypatch):
    hub.add_dataset(AGGREFACT, aggrefact_rows(known_spec()), split="test", gated_token=TOKEN)
    # gated: without a token, one line naming the dataset, its terms page and HF_TOKEN, and no model call
    r = calibrate("--benchmark", "llm-aggrefact", "--grader", "openai:chat:gpt-4o-mini")
    assert r.exit_code == 1, r.output
    assert r.output.strip().splitlines() == [
        "error: --benchmark llm-aggrefact: lytang/LLM-AggreFact is gated on the Hugging Face Hub: set HF_TOKEN and "
        "accept its terms at https://huggingface.co/datasets/lytang/LLM-AggreFact (no model was called)"]
    assert grader.requests == []
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    out = tmp_path / "m.json"
    r = calibrate("--benchmark", "llm-aggrefact", "--grader", "openai:chat:gpt-4o-mini", "-o", out)
    assert r.exit_code == 100, r.output  # a grading error
    assert len([q for q in hub.rows_requests() if q.headers.get("Authorization")]) == 1  # 61 rows: one page
    text = r.output
    rep = json.loads(out.read_text())
    (g,) = rep["graders"]
    by_name = {d["dataset"]: d for d in g["datasets"]}
    parts = []
    for ds, (tp, fn, fp, tn) in CONFUSION.items():
        b, lo, hi = bacc_by_hand(tp, fn, fp, tn)
        d = by_name[ds]
        assert d["confusion"] == {"tp": tp, "fn": fn, "fp": fp, "tn": tn}
        assert (d["bacc"], d["low"], d["high"]) == (pytest.approx(b), pytest.approx(lo), pytest.approx(hi))
        line = (rf"{ds}\s+{tp + fn + fp + tn}\s+{tp} {fn} {fp} {tn}\s+{pct(tp / (tp + fn))}\s+{pct(tn / (tn + fp))}"
                rf"\s+{pct(b)}\s+\[{pct(lo)}, {pct(hi)}\]\s+{1 if ds == 'AggreFact-CNN' else 0}")
        assert re.search(line, text), (line, text)
        parts.append((b, lo, hi))
    # the mean of the 3 datasets, and its MOVER interval from theirs
    m = sum(b for b, _, _ in parts) / 3
    m_lo = m - math.sqrt(sum((b - lo) ** 2 for b, lo, _ in parts)) / 3
    m_hi = m + math.sqrt(sum((hi - b) ** 2 for b, _, hi in parts)) / 3
    assert (g["mean"]["value"], g["mean"]["low"], g["mean"]["high"]) == (
        pytest.approx(m), pytest.approx(m_lo), pytest.approx(m_hi))
    assert re.search(rf"mean of 3\s+{pct(m)}\s+\[{pct(m_lo)}, {pct(m_hi)}\]\s+1", text), text
    # e.g. AggreFact-CNN: TPR 9/12 = 75.0, TNR 6/8 = 75.0, BAcc 75.0
    assert by_name["AggreFact-CNN"]["bacc"] == pytest.approx(0.75)
    # the grading error is apart: named, not counted in any figure
    assert g["gradingErrors"] == 1 and g["errors"][0]["dataset"] == "AggreFact-CNN"
    assert "Grading errors (not counted as wrong" in text and "AggreFact-CNN/" in text
    # the leaderboard beside it, with its source and date; this judge's mean among the rows
    assert "Published (https://llm-aggrefact.github.io/, 2024-08;" in text
    assert re.search(rf"{m * 100:5.1f}\s+your judge: facts-grounding · openai:chat:gpt-4o-mini\s+\[", text)
    # 3 of the 11 datasets measured: each published row is shown as its mean over these 3, e.g. Claude-3.5
    # Sonnet (67.6 + 77.7 + 60.9) / 3 = 68.7, its published 77.2 after it
    assert re.search(r"68\.7\s+Claude-3\.5 Sonnet\s+\(77\.2 over 11\)", text), text
    assert re.search(r"AggreFact-CNN\s+20\s+.*51\.1–69\.9", text)  # the published range on the dataset
    # tokens and cost (gpt-4o-mini is in litellm's price table)
    assert g["tokens"]["total"] > 0 and g["cost"] > 0 and "Grader tokens:" in text
    # one grader call per row (facts-grounding's grounding phase; no eligibility phase for a claim)
    assert len(grader.requests) == 61
    assert all("Doc of" in json.dumps(x["json"]) for x in grader.requests)
    # a run like any other: view/show give the document, the claim, the label, the verdict and its reason
    run_id = re.search(r"Stored as run (\S+):", text).group(1)
    shown = cli("show", run_id, "0", "--json")
    assert shown.exit_code == 0, shown.output
    row = json.dumps(json.loads(shown.output))
    assert "Doc of AggreFact-CNN number 0" in row and "Claim AggreFact-CNN-0" in row
    assert '"supported"' in row and "scripted" in row
    html = tmp_path / "r.html"
    assert cli("export", run_id, "-o", html).exit_code == 0 and "Claim Wice-0" in html.read_text()


def test_halubench_rows_and_its_published_figure(hub, grader, tmp_path):
    rows = []
    for source, (tp, fn, fp, tn) in {"DROP": (4, 1, 2, 3), "covidQA": (5, 0, 0, 5)}.items():
        for i, (label, tag) in enumerate([("PASS", "[J:yes]")] * tp + [("PASS", "[J:no]")] * fn +
                                         [("FAIL", "[J:yes]")] * fp + [("FAIL", "[J:no]")] * tn):
            rows.append({"id": f"{source}-{i}", "passage": f"Passage {source} {i}.", "question": f"What is {i}?",
                         "answer": f"It is {i}. {tag}", "label": label, "source_ds": source})
    hub.add_dataset(HALUBENCH, rows, split="test")  # not gated
    out = tmp_path / "h.json"
    r = calibrate("--benchmark", "halubench", "--grader", "openai:chat:gpt-4o-mini", "-o", out)
    assert r.exit_code == 0, r.output
    g = json.loads(out.read_text())["graders"][0]
    drop = next(d for d in g["datasets"] if d["dataset"] == "DROP")
    b, lo, hi = bacc_by_hand(4, 1, 2, 3)
    assert drop["confusion"] == {"tp": 4, "fn": 1, "fp": 2, "tn": 3} and drop["bacc"] == pytest.approx(b)
    assert re.search(rf"DROP\s+10\s+4 1 2 3\s+80\.0\s+60\.0\s+70\.0\s+\[{pct(lo)}, {pct(hi)}\]", r.output)
    # the question is the judge's user request; HaluBench's own ids name the rows
    assert any("What is 3?" in json.dumps(x["json"]) for x in grader.requests)
    assert "Lynx (70B)" in r.output and "accuracy (%) over all of HaluBench, not balanced accuracy" in r.output
    # beside a published accuracy, this judge's accuracy over all its rows: (4 + 3 + 5 + 5) / 20
    lo, hi = wilson(17, 20)
    assert re.search(rf"85\.0\s+your judge: facts-grounding · openai:chat:gpt-4o-mini \(accuracy\)\s+"
                     rf"\[{pct(lo)}, {pct(hi)}\]", r.output), r.output
    assert re.search(r"87\.4\s+Lynx \(70B\)", r.output)


# ---------------------------------------------------------------- sampling, dry run, kill and resume


def sampled_hub(hub):
    spec = {ds: [(1, "[J:yes]", 20), (1, "[J:no]", 10), (0, "[J:yes]", 5), (0, "[J:no]", 20)]
            for ds in ("AggreFact-CNN", "Wice", "RAGTruth")}
    hub.add_dataset(AGGREFACT, aggrefact_rows(spec), split="test", gated_token=TOKEN)


def test_per_dataset_sample_is_stratified_and_seeded(hub, grader, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    sampled_hub(hub)
    args = ("--benchmark", "llm-aggrefact", "--grader", "openai:chat:gpt-4o-mini", "--per-dataset", "20", "--seed", "1")
    dry = calibrate(*args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    for ds in ("AggreFact-CNN", "Wice", "RAGTruth"):
        assert f"{ds}: 10 supported + 10 unsupported of 55" in dry.output
    # the dry run prices the 60 grader calls, each with its document, and calls nothing
    assert grader.requests == []
    assert "Dry run: 60 rows, no call made." in dry.output
    assert re.search(r"grader openai:chat:gpt-4o-mini: 60 calls; .* cost \$[0-9.]+ – \$[0-9.]+", dry.output), dry.output
    out = tmp_path / "m.json"
    r = calibrate(*args, "-o", out)
    assert r.exit_code == 0, r.output
    for g in json.loads(out.read_text())["graders"][0]["datasets"]:
        c = g["confusion"]
        assert c["tp"] + c["fn"] == 10 and c["fp"] + c["tn"] == 10
    asked = [json.dumps(x["json"]) for x in grader.requests]
    assert len(asked) == 60
    assert sum("Doc of Wice " in a for a in asked) == 20
    # the same seed picks the same rows; another seed others; unknown dataset names are one line
    from factcli.config.benchmarks import Selection, load

    from factcli.config import remote

    with remote.downloading(None):
        first = [it.id for it in load(Selection("llm-aggrefact", per_dataset=20, seed=1)).items]
        again = [it.id for it in load(Selection("llm-aggrefact", per_dataset=20, seed=1)).items]
        other = [it.id for it in load(Selection("llm-aggrefact", per_dataset=20, seed=2)).items]
    assert first == again and first != other
    bad = calibrate(*args, "--datasets", "wice,RagTruht", "--dry-run")
    assert bad.exit_code == 1
    assert "--datasets: no dataset 'RagTruht' (did you mean 'RAGTruth'?)" in bad.output
    # --json: the report alone on stdout (the table on stderr), the same figures as -o
    as_json = runner.invoke(app, ["calibrate", "--no-progress-bar", *args, "--json", "--no-write"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)["graders"][0]["datasets"] == json.loads(out.read_text())["graders"][0]["datasets"]
    picked = calibrate(*args, "--datasets", "wice", "--dry-run")
    assert "Wice: 10 supported + 10 unsupported of 55" in picked.output and "RAGTruth" not in picked.output


def test_a_killed_run_resumes_without_asking_twice(hub, grader, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    sampled_hub(hub)
    # five replies, then a reply that hangs: the run is killed while it waits for it
    grader.clear_rules()
    grader.enqueue(*([judge] * 5))
    grader.enqueue_hang(30)
    grader.add_rule(".", judge)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["calibrate", "--benchmark", "llm-aggrefact", "--grader", "openai:chat:gpt-4o-mini", "--per-dataset", "4",
            "--seed", "3", "--no-progress-bar", "-j", "1"]
    proc = subprocess.Popen([sys.executable, "-m", "factcli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while len(grader.requests) < 6 and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the five rows' group commit has happened
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(grader.requests) == 6
    run_id = re.search(r"eval-\S+", cli("list").output).group(0)
    hung = json.dumps(grader.requests[5]["json"])
    before = len(grader.requests)
    # eval --resume points at calibrate --resume
    ev = cli("eval", "--resume", run_id)
    assert ev.exit_code == 1 and f"resume it with factcli calibrate --resume {run_id}" in ev.output
    r = calibrate("--resume", run_id)
    assert r.exit_code == 0, r.output
    assert "Resuming run" in r.output or "kept" in r.output
    after = [json.dumps(x["json"]) for x in grader.requests[before:]]
    # 12 rows in all: the five answered are not asked again; the one whose reply never came is
    assert len(after) == 12 - 5 and hung in after
    claims = [re.search(r"Claim \S+", a).group(0) for a in [json.dumps(x["json"]) for x in grader.requests]]
    assert len(set(claims)) == 12 and len(claims) == 13
    rep_line = [ln for ln in r.output.splitlines() if ln.startswith("Wice")]
    assert re.search(r"Wice\s+4\s+", rep_line[-1])
    # resuming takes the stored selection: flags that would change it are refused in one line
    again = calibrate("--resume", run_id, "--per-dataset", "6")
    assert again.exit_code == 1 and "drop --per-dataset" in again.output


def test_max_cost_stops_before_a_call_that_could_pass_it(hub, grader, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    sampled_hub(hub)
    r = calibrate("--benchmark", "llm-aggrefact", "--grader", "openai:chat:gpt-4o-mini", "--per-dataset", "4",
                  "--max-cost", "0.0000001", "-j", "1")
    assert r.exit_code == 130, r.output
    assert len(grader.requests) == 0
    run_id = re.search(r"calibrate --resume (\S+) --max-cost USD", r.output).group(1)
    # a larger budget goes on from where it stopped: the 12 rows, each asked once
    r = calibrate("--resume", run_id, "--max-cost", "1")
    assert r.exit_code == 0, r.output
    assert len(grader.requests) == 12 and len({json.dumps(x["json"]) for x in grader.requests}) == 12
    assert re.search(r"RAGTruth\s+4\s+", r.output)


def test_a_labels_file_calibration_resumes_too(grader, tmp_path):
    labels = write(tmp_path / "l.jsonl", "".join(
        json.dumps({"id": f"q{i}", "question": f"Q{i}?", "output": f"A{i}", "reference": f"R{i}",
                    "context": f"Doc {i}.", "label": "pass"}) + "\n" for i in range(4)))
    grader.clear_rules()
    grader.add_rule(".", json.dumps({"reason": "ok", "pass": True, "score": 1}))
    r = calibrate(labels, "--assert", "llm-rubric", "--grader", "openai:chat:gpt-4o-mini", "--max-cost", "0.0000001")
    assert r.exit_code == 130 and len(grader.requests) == 0, r.output
    run_id = re.search(r"calibrate --resume (\S+)", r.output).group(1)
    again = calibrate("--resume", run_id)  # the run keeps its budget: stopped again, nothing called
    assert again.exit_code == 130 and len(grader.requests) == 0
    r = calibrate("--resume", run_id, "--max-cost", "1")
    assert r.exit_code == 0, r.output
    assert len(grader.requests) == 4 and "Calibration on" in r.output


# ---------------------------------------------------------------- a local labeled file, offline


def test_local_file_with_columns(grader, tmp_path):
    data = tmp_path / "set.csv"
    write(data, "passage,statement,verdict,topic\n"
                "Paris is in France.,Paris is in France. [J:yes],supported,geo\n"
                "Paris is in France.,Paris is in Spain. [J:no],unsupported,geo\n"
                "Water boils at 100 C.,Water boils at 50 C. [J:yes],no,science\n"
                "Water boils at 100 C.,Water boils at 100 C. [J:yes],yes,science\n")
    out = tmp_path / "m.json"
    r = calibrate("--benchmark", data, "--columns", "doc=passage,claim=statement,label=verdict,dataset=topic",
                  "--grader", "openai:chat:gpt-4o-mini", "-o", out, "--no-write")
    assert r.exit_code == 0, r.output
    geo, sci = json.loads(out.read_text())["graders"][0]["datasets"]
    assert geo["bacc"] == 1.0 and sci["confusion"] == {"tp": 1, "fn": 0, "fp": 1, "tn": 0} and sci["bacc"] == 0.5
    assert "Published" not in r.output  # no leaderboard for a file of one's own
    # unless asked for: then printed for scale, marked as measured on other data, with no per-dataset range
    r = calibrate("--benchmark", data, "--columns", "doc=passage,claim=statement,label=verdict,dataset=topic",
                  "--grader", "openai:chat:gpt-4o-mini", "--no-write", "--leaderboard", "llm-aggrefact")
    assert r.exit_code == 0, r.output
    assert "(measured on llm-aggrefact, not on the rows judged here: for scale only, not a comparison)" in r.output
    assert "77.2  Claude-3.5 Sonnet" in r.output and "published" not in r.output.split("Published")[0]
    assert "75.0  your judge: factuality" not in r.output and "over 2 datasets\n" in r.output
    # a missing column map, an unknown column, an unreadable label: one line each, no call
    before = len(grader.requests)
    r = calibrate("--benchmark", data, "--grader", "openai:chat:gpt-4o-mini")
    assert r.exit_code == 1 and "--columns must name doc=COLUMN, claim=COLUMN, label=COLUMN" in r.output
    r = calibrate("--benchmark", data, "--columns", "doc=pasage,claim=statement,label=verdict",
                  "--grader", "openai:chat:gpt-4o-mini")
    assert r.exit_code == 1 and "row 1: no column 'pasage' (for doc) (did you mean 'passage'?)" in r.output
    bad = write(tmp_path / "bad.jsonl", '{"d": "x", "c": "y", "l": "maybe"}\n')
    r = calibrate("--benchmark", bad, "--columns", "doc=d,claim=c,label=l", "--grader", "openai:chat:gpt-4o-mini")
    assert r.exit_code == 1 and f"{bad}: row 1: label 'maybe' in 'l' is not one of" in r.output
    r = calibrate("--benchmark", "llm-agrefact")
    assert r.exit_code == 1 and "(did you mean 'llm-aggrefact'?)" in r.output
    assert len(grader.requests) == before


def test_truthfulqa_set_as_a_benchmark_dry_run():
    """The shipped TruthfulQA labels read as a benchmark (the documented example command), offline."""
    r = calibrate("--benchmark", ROOT / "configs" / "calibration" / "truthfulqa-150.jsonl", "--columns",
                  "doc=correct_answers,claim=output,question=question,label=label,dataset=category",
                  "--per-dataset", "4", "--grader", "openai:chat:gpt-4o-mini", "--datasets", "Misconceptions",
                  "--dry-run")
    assert r.exit_code == 0, r.output
    assert re.search(r"Misconceptions: 2 supported \+ 2 unsupported of \d+", r.output)
    assert "Dry run: 4 rows, no call made." in r.output


# ---------------------------------------------------------------- --tune-threshold dev


def rubric_judge(body: dict) -> str:
    """An llm-rubric judge that passes everything, with the score the claim's [S:x] tag names."""
    score = float(re.search(r"\[S:([0-9.]+)\]", json.dumps(body)).group(1))
    return json.dumps({"reason": "scripted", "pass": True, "score": score})


def test_threshold_tuned_on_dev_then_reported_on_test(hub, grader, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    grader.clear_rules()
    grader.add_rule(r"\[S:", rubric_judge)

    def rows(pos, neg):
        return [{"dataset": "Wice", "doc": f"Doc {i}.", "claim": f"Claim {i} [S:{s}]", "label": label,
                 "contamination_identifier": "0" * 64}
                for i, (s, label) in enumerate([(s, 1) for s in pos] + [(s, 0) for s in neg])]

    # dev: every threshold in (0.5, 0.6] separates the classes; candidates are the scores seen: 0.6
    hub.add_dataset(AGGREFACT, rows([0.9, 0.8, 0.7, 0.6], [0.5, 0.3, 0.2, 0.1]), split="dev", gated_token=TOKEN)
    hub.add_dataset(AGGREFACT, rows([0.9, 0.55, 0.7], [0.58, 0.2, 0.65]), split="test", gated_token=TOKEN)
    args = ("--benchmark", "llm-aggrefact", "--assert", "llm-rubric", "--grader", "openai:chat:gpt-4o-mini")
    out = tmp_path / "t.json"
    r = calibrate(*args, "--tune-threshold", "dev", "-o", out)
    assert r.exit_code == 0, r.output
    assert "dev Wice: 4 supported + 4 unsupported of 8" in r.output and "test Wice: 3 supported + 3 unsupported" in r.output
    assert "Threshold tuned on the dev split: score >= 0.6 passes (dev mean BAcc 100.0); the figures below are " \
           "the test split's with it." in r.output
    # test with 0.6: supported 0.9, 0.7 pass and 0.55 fails; unsupported 0.65 passes, 0.58 and 0.2 fail
    assert re.search(r"Wice\s+6\s+2 1 1 2\s+66\.7\s+66\.7\s+66\.7", r.output), r.output
    g = json.loads(out.read_text())["graders"][0]
    assert g["threshold"] == {"tunedOn": "dev", "threshold": 0.6, "bacc": 1.0}
    # the judge's own verdicts (it passes everything) score 50 on the same test rows
    plain = calibrate(*args, "--no-write")
    assert re.search(r"Wice\s+6\s+3 0 3 0\s+100\.0\s+0\.0\s+50\.0", plain.output), plain.output
    # the rubric the judge read holds the document
    assert any("Doc 1." in json.dumps(x["json"]) for x in grader.requests)
    assert calibrate(*args, "--tune-threshold", "test").exit_code == 1
    bad = calibrate("--benchmark", "halubench", "--tune-threshold", "dev", "--grader", "openai:chat:gpt-4o-mini")
    assert bad.exit_code == 1 and "halubench has no dev split" in bad.output


# ---------------------------------------------------------------- two judges diffed


def test_two_judges_diffed_paired_by_row(hub, fake_openai, monkeypatch, tmp_path):
    from factcli.stats.intervals import newcombe_paired

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule(".", make_judge("J"), model="gpt-4o-mini")  # judge A
    fake_openai.add_rule(".", make_judge("K"), model="gpt-4o")  # judge B
    # per dataset, (A's verdict, B's verdict) -> count, on gold-supported and gold-unsupported rows
    plan = {"Wice": {1: {("yes", "yes"): 6, ("yes", "no"): 2, ("no", "yes"): 1, ("no", "no"): 1},
                     0: {("yes", "yes"): 1, ("yes", "no"): 3, ("no", "no"): 6}},
            "ExpertQA": {1: {("yes", "yes"): 5, ("no", "yes"): 3, ("no", "no"): 2},
                         0: {("yes", "yes"): 2, ("yes", "no"): 1, ("no", "yes"): 1, ("no", "no"): 6}}}
    rows = []
    for ds, by_label in plan.items():
        for label, cells in by_label.items():
            for (va, vb), count in cells.items():
                for _ in range(count):
                    rows.append({"dataset": ds, "doc": f"Doc {len(rows)}.", "claim": f"Claim {len(rows)} [J:{va}] [K:{vb}]",
                                 "label": label, "contamination_identifier": "0" * 64})
    rows.append({"dataset": "Wice", "doc": "Doc x.", "claim": "Claim x [J:yes] [K:bad]", "label": 1,
                 "contamination_identifier": "0" * 64})  # B cannot grade it
    hub.add_dataset(AGGREFACT, rows, split="test", gated_token=TOKEN)
    ids = []
    for model in ("gpt-4o-mini", "gpt-4o"):
        r = calibrate("--benchmark", "llm-aggrefact", "--grader", f"openai:chat:{model}")
        assert r.exit_code in (0, 100), r.output
        ids.append(re.search(r"Stored as run (\S+):", r.output).group(1))
    r = cli("diff", ids[0], ids[1], "--json")
    assert r.exit_code in (0, 1), r.output
    (j,) = json.loads(r.output)["judges"]
    expected = []
    for ds, by_label in plan.items():
        pos = [(va == "yes", vb == "yes") for (va, vb), n in by_label[1].items() for _ in range(n)]
        neg = [(va == "no", vb == "no") for (va, vb), n in by_label[0].items() for _ in range(n)]  # right = fails it
        d1, d2 = newcombe_paired(pos), newcombe_paired(neg)
        (l1, u1), (l2, u2) = d1["ci95"], d2["ci95"]
        d = (d1["delta"] + d2["delta"]) / 2
        lo = d - math.sqrt((d1["delta"] - l1) ** 2 + (d2["delta"] - l2) ** 2) / 2
        hi = d + math.sqrt((u1 - d1["delta"]) ** 2 + (u2 - d2["delta"]) ** 2) / 2
        got = next(x for x in j["datasets"] if x["dataset"] == ds)
        assert got["n"] == len(pos) + len(neg)
        assert (got["delta"], got["ci95"][0], got["ci95"][1]) == (pytest.approx(d), pytest.approx(lo), pytest.approx(hi))
        expected.append((d, lo, hi))
    # Wice by hand: A's TPR 8/10, TNR 6/10 -> 70.0; B's TPR 7/10, TNR 9/10 -> 80.0; B − A = +10.0
    wice = next(x for x in j["datasets"] if x["dataset"] == "Wice")
    assert (wice["baccA"], wice["baccB"], wice["delta"]) == (pytest.approx(0.7), pytest.approx(0.8), pytest.approx(0.1))
    m = sum(d for d, _, _ in expected) / 2
    m_lo = m - math.sqrt(sum((d - lo) ** 2 for d, lo, _ in expected)) / 2
    m_hi = m + math.sqrt(sum((hi - d) ** 2 for d, _, hi in expected)) / 2
    assert (j["mean"]["delta"], j["mean"]["ci95"][0], j["mean"]["ci95"][1]) == (
        pytest.approx(m), pytest.approx(m_lo), pytest.approx(m_hi))
    # the row B could not grade is apart, in neither side's figures
    assert j["gradingErrors"] == {"a": 0, "b": 1}
    text = cli("diff", ids[0], ids[1], env={"COLUMNS": "200"}).output
    assert re.search(r"Wice\s+20\s+70\.0\s+80\.0\s+\+10\.0\s+\[", text), text
    assert re.search(rf"mean of 2\s+{re.escape(f'{m * 100:+.1f}')}\s+"
                     + re.escape(f"[{m_lo * 100:+.1f}, {m_hi * 100:+.1f}]"), text), text
    assert "Grading errors, left out of the pairing (not counted as wrong): A 0, B 1 (Wice/" in text


def test_cells_the_server_cuts_short_are_read_whole(hub, grader, monkeypatch, tmp_path):
    """The datasets-server truncates long cells to keep a page small: such a row is asked for alone."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    rows = aggrefact_rows({"Wice": [(1, "[J:yes]", 3), (0, "[J:no]", 3)]})
    hub.add_dataset(AGGREFACT, rows, split="test", gated_token=TOKEN)
    hub.page_bytes = 1000
    out = tmp_path / "m.json"
    args = ("--benchmark", "llm-aggrefact", "--grader", "openai:chat:gpt-4o-mini", "--no-write")
    r = calibrate(*args, "--per-dataset", "2", "-o", out)
    assert r.exit_code == 0, r.output
    # one page, then only the two sampled rows (every row's document was cut), each on its own
    pages = [q.query for q in hub.rows_requests() if q.headers.get("Authorization")]
    assert [q["length"] for q in pages] == ["100", "1", "1"]
    sent = " ".join(json.dumps(x["json"]) for x in grader.requests)
    assert sum(row["doc"] in sent for row in rows) == 2 and "The sky is blue. " * 20 in sent  # whole documents
    assert json.loads(out.read_text())["graders"][0]["datasets"][0]["bacc"] == 1.0
    # all rows: the other four are read whole too; the ones read before come from the download cache
    r = calibrate(*args)
    assert r.exit_code == 0, r.output
    pages = [q.query for q in hub.rows_requests() if q.headers.get("Authorization")]
    assert [q["length"] for q in pages] == ["100", "1", "1", "1", "1", "1", "1"]
    sent = " ".join(json.dumps(x["json"]) for x in grader.requests)
    assert all(row["doc"] in sent for row in rows)


def test_the_shipped_leaderboard_snapshot():
    """Figures and model names only, each with its source and date; the per-dataset rows average to
    the published means (the brief's August 2024 figures)."""
    from factcli.report.benchmark import leaderboard

    board = leaderboard("llm-aggrefact")
    assert board["source"] == "https://llm-aggrefact.github.io/" and board["date"] == "2024-08"
    means = {r["model"]: r["value"] for r in board["rows"]}
    assert means == {"Claude-3.5 Sonnet": 77.2, "Bespoke-MiniCheck-7B": 77.1, "Mistral-Large 2": 76.5,
                     "gpt-4-turbo": 76.2, "gpt-4o": 75.9, "MiniCheck-Flan-T5-L": 75.0, "gpt-4o-mini": 74.0,
                     "AlignScore": 70.5, "SummaC-ZS": 67.7}
    for r in board["rows"]:
        assert len(r["datasets"]) == 11 and abs(sum(r["datasets"].values()) / 11 - r["value"]) < 0.1
    halu = leaderboard("halubench")
    assert halu["rows"] == [{"model": "Lynx (70B)", "value": 87.4}] and "not balanced accuracy" in halu["metric"]
    assert leaderboard("my-own-set") is None


@pytest.mark.parametrize("args, says", [
    (["l.jsonl", "--benchmark", "halubench"], "--benchmark reads its rows from NAME; drop LABELS"),
    (["l.jsonl", "--per-dataset", "4"], "--per-dataset select rows of a benchmark: add --benchmark NAME"),
    (["l.jsonl", "--tune-threshold", "dev"], "--tune-threshold needs --benchmark"),
    (["--ratings", "r1", "--benchmark", "halubench"], "it does not take --benchmark"),
    (["--benchmark", "halubench", "--columns", "doc=a,text"], "--columns: expected ROLE=COLUMN, got 'text'"),
    (["--benchmark", "halubench", "--columns", "clam=a"], "unknown role 'clam' (did you mean 'claim'?)"),
    (["--benchmark", "halubench", "--split", "train"], "--split: halubench has no split 'train' (splits: test)"),
    (["--benchmark", "l.jsonl", "--leaderboard", "aggrefact"], "--leaderboard aggrefact: no such leaderboard"),
    (["l.jsonl", "--leaderboard", "halubench"], "--leaderboard prints published rows beside a benchmark's figures"),
])
def test_options_that_do_not_go_together_are_one_line(args, says, tmp_path, monkeypatch, fake_openai):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "l.jsonl", '{"output": "a", "label": "pass"}\n')
    r = calibrate(*args)
    assert r.exit_code == 1 and says in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and fake_openai.requests == []


def test_any_hub_dataset_or_url_with_columns(hub, grader, tmp_path):
    rows = [{"premise": f"Doc {i}.", "hypothesis": f"Claim h{i} [J:{'yes' if i % 2 else 'no'}]", "gold": i % 2}
            for i in range(6)]
    hub.add_dataset("acme/grounding", rows, split="validation")
    cols = "doc=premise,claim=hypothesis,label=gold"
    out = tmp_path / "h.json"
    r = calibrate("--benchmark", "huggingface://datasets/acme/grounding", "--split", "validation", "--columns", cols,
                  "--grader", "openai:chat:gpt-4o-mini", "-o", out, "--no-write")
    assert r.exit_code == 0, r.output
    assert "grounding: 3 supported + 3 unsupported of 6" in r.output
    assert json.loads(out.read_text())["graders"][0]["datasets"][0]["bacc"] == 1.0
    # the same rows as a JSONL file at a URL
    hub.add_file("set.jsonl", "".join(json.dumps(x) + "\n" for x in rows).encode())
    r = calibrate("--benchmark", hub.file_url("set.jsonl"), "--columns", cols, "--grader", "openai:chat:gpt-4o-mini",
                  "--no-write")
    assert r.exit_code == 0 and "set: 3 supported + 3 unsupported of 6" in r.output, r.output
    # a Hub dataset that is not there (or private) is one line naming its page, before any call
    before = len(grader.requests)
    r = calibrate("--benchmark", "huggingface://datasets/acme/nothing", "--columns", cols,
                  "--grader", "openai:chat:gpt-4o-mini")
    assert r.exit_code == 1 and len(r.output.strip().splitlines()) == 1, r.output
    assert "acme/nothing" in r.output and len(grader.requests) == before
