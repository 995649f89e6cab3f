"""`factcli diff` and the web Compare page across a change of prompt or provider: columns pair by
label, else by position when the runs have the same layout; what changed is said; flipped rows show
both outputs side by side."""

import json
import warnings

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.store.database import Store

runner = CliRunner()

CONFIG = """
prompts: [{prompts}]
providers: [{providers}]
tests:
  - vars: {{question: capital of France}}
    assert: [{{type: equals, value: Paris}}]
  - vars: {{question: capital of Japan}}
    assert: [{{type: icontains, value: tokyo}}]
  - vars: {{question: capital of Italy}}
    assert: [{{type: icontains, value: rome}}]
"""
MODEL = '{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'
OTHER = '{id: "openai:chat:m2", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'


def _run(tmp_path, prompts: str, providers: str = MODEL) -> str:
    cfg = write(tmp_path / "c.yaml", CONFIG.format(prompts=prompts, providers=providers))
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table"])
    assert result.exit_code in (0, 100), result.output
    with Store.open(None) as store:
        return store.resolve(None)["id"]


def _rules(server):
    server.add_rule(r"one word.*France|France.*one word", "Paris")
    server.add_rule(r"France", "The capital of France is Paris.")
    server.add_rule(r"one word.*Japan|Japan.*one word", "Kyoto")
    server.add_rule(r"Japan", "Tokyo.")
    server.add_rule(r"Italy", "Rome.")


def test_diff_after_a_prompt_change_pairs_the_column_and_says_what_changed(fake_openai, tmp_path):
    _rules(fake_openai)
    a = _run(tmp_path, '"What is the {{question}}?"')
    b = _run(tmp_path, '"What is the {{question}}? Answer in one word."')
    result = runner.invoke(app, ["diff", a, b], env={"COLUMNS": "200"})
    out = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "2 rows flipped (1 regression, 1 fix), 1 unchanged, 0 only in A, 0 only in B" in out
    assert 'prompt changed: "What is the {{question}}?" → "What is the {{question}}? Answer in one word."' in out
    assert "pass rate" in out and "66.7%" in out
    doc = json.loads(runner.invoke(app, ["diff", a, b, "--json"]).output)
    assert [c["changed"] for c in doc["columns"]] == [["prompt"]]
    flips = {f["test"]: f for f in doc["flips"]}
    japan = flips['{"question": "capital of Japan"}']
    assert japan["kind"] == "regression" and japan["outputA"] == "Tokyo." and japan["outputB"] == "Kyoto"


def test_diff_after_a_provider_change_and_by_label(fake_openai, tmp_path):
    _rules(fake_openai)
    a = _run(tmp_path, '{raw: "What is the {{question}}?", label: brief}')
    b = _run(tmp_path, '{raw: "What is the {{question}}? Answer in one word.", label: brief}', OTHER)
    doc = json.loads(runner.invoke(app, ["diff", a, b, "--json"]).output)
    assert [c["changed"] for c in doc["columns"]] == [["prompt", "provider"]]
    assert doc["unchanged"] + len(doc["flips"]) == 3 and doc["onlyInA"] == doc["onlyInB"] == 0
    out = " ".join(runner.invoke(app, ["diff", a, b], env={"COLUMNS": "200"}).output.split())
    assert "provider changed: openai:chat:m → openai:chat:m2" in out


def test_columns_that_cannot_pair_are_named(fake_openai, tmp_path):
    _rules(fake_openai)
    a = _run(tmp_path, '"What is the {{question}}?"')
    b = _run(tmp_path, '"What is the {{question}}? Answer in one word.", "Name the {{question}}."')
    doc = json.loads(runner.invoke(app, ["diff", a, b, "--json"]).output)
    assert doc["columns"] == [] and doc["onlyInA"] == 3 and doc["onlyInB"] == 6
    assert doc["unpairedA"] == ["[openai:chat:m] What is the {{question}}?"] and len(doc["unpairedB"]) == 2
    out = " ".join(runner.invoke(app, ["diff", a, b], env={"COLUMNS": "200"}).output.split())
    assert "Only in A (no column of the other run to compare with): [openai:chat:m] What is the {{question}}?" in out


def test_the_compare_page_after_a_prompt_change(fake_openai, tmp_path):
    warnings.filterwarnings("ignore", message=".*httpx.*")
    from starlette.testclient import TestClient

    from factcli.settings import home
    from factcli.web.app import create_app

    _rules(fake_openai)
    a = _run(tmp_path, '"What is the {{question}}?"')
    b = _run(tmp_path, '"What is the {{question}}? Answer in one word."')
    client = TestClient(create_app(home() / "factcli.db", token="t"))
    html = client.get(f"/compare?a={a}&b={b}").text
    assert "<b>2</b> rows flipped" in html
    assert "<b>prompt changed</b>: <code>What is the {{question}}?</code> → " \
           "<code>What is the {{question}}? Answer in one word.</code>" in html
    assert '<pre class="output-a">Tokyo.</pre>' in html and '<pre class="output-b">Kyoto</pre>' in html
    assert f'href="/runs/{a}/cell/1/0/0"' in html and f'href="/runs/{b}/cell/1/0/0"' in html


UNRELATED_A = """
prompts: ["Q: {{q}}"]
providers: [echo]
tests:
  - vars: {q: one}
    assert: [{type: contains, value: one}]
  - vars: {q: two}
    assert: [{type: contains, value: two}]
"""
UNRELATED_B = """
prompts: ["Tell me about {{topic}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
  - vars: {topic: cats}
    assert: [{type: contains, value: dogs}]
  - vars: {topic: dogs}
    assert: [{type: contains, value: dogs}]
"""


def test_diff_of_two_unrelated_runs_says_so_first_and_asks_for_force_or_pairs(fake_openai, tmp_path):
    """Issue 40: two runs with no config file, prompt, test or provider in common are not compared
    silently by position; --force compares them with a warning first, --pair pairs by hand."""
    fake_openai.add_rule(r"dogs", "Dogs are loyal.")
    for name, text in (("a.yaml", UNRELATED_A), ("b.yaml", UNRELATED_B)):
        result = runner.invoke(app, ["eval", "-c", str(write(tmp_path / name, text)), "--no-progress-bar", "--no-table"])
        assert result.exit_code in (0, 100), result.output
    refused = runner.invoke(app, ["diff", "latest~1", "latest"], env={"COLUMNS": "300"})
    assert refused.exit_code == 1
    assert "share nothing: no config file, prompt, test or provider in common" in refused.output
    assert "--force" in refused.output and "--pair A=B" in refused.output and "pass rate" not in refused.output
    forced = runner.invoke(app, ["diff", "latest~1", "latest", "--force"], env={"COLUMNS": "300"})
    assert forced.exit_code == 0, forced.output
    lines = forced.output.splitlines()
    assert lines[0].startswith("Diff ") and lines[1].startswith("These runs share nothing")
    assert "0 rows flipped" in forced.output and "2 only in A, 2 only in B" in forced.output
    doc = json.loads(runner.invoke(app, ["diff", "latest~1", "latest", "--force", "--json"]).output)
    assert doc["unrelated"] and doc["shared"] == {"config": False, "prompts": False, "tests": False, "providers": False}
    assert doc["columns"][0]["passRate"]["method"] == "newcombe"  # no row pairs: two independent samples
    paired = runner.invoke(app, ["diff", "latest~1", "latest", "--pair", "0=0"], env={"COLUMNS": "300"})
    assert paired.exit_code == 0 and "columns paired with --pair" in paired.output
    assert runner.invoke(app, ["diff", "latest~1", "latest", "--pair", "0=3"]).exit_code == 1
    assert "expected A=B" in runner.invoke(app, ["diff", "latest~1", "latest", "--pair", "x"]).output
    # a run and itself share everything: no warning, no flag needed
    same = runner.invoke(app, ["diff", "latest", "latest"])
    assert same.exit_code == 0 and "share nothing" not in same.output


SCORED = """
prompts: ["Say {{n}}"]
providers: [echo]
defaultTest:
  assert: [{type: llm-rubric, value: "is fine", provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}}]
tests:
%s
"""


def test_a_row_judged_in_one_run_only_keeps_the_delta_inside_its_interval(fake_openai, tmp_path, monkeypatch):
    """Row r0 scored 0.9 in A and not judged in B (its grader's reply is no verdict), the other nine 0.5
    in both: A's mean is 0.54, B's 0.5, Δ −0.04. Pairing the nine rows judged in both gave the interval
    [+0.000, +0.000] with Δ −0.04 outside it; the rows do not pair, so each run is resampled on its own,
    around the same Δ the table prints."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = write(tmp_path / "c.yaml", SCORED % "".join(f"  - vars: {{n: r{i}}}\n" for i in range(10)))
    ids = []
    for first in ('{"pass": true, "score": 0.9, "reason": "good"}', "I cannot decide."):
        fake_openai.clear_rules()
        fake_openai.add_rule("r0", first)
        fake_openai.add_rule(".", '{"pass": true, "score": 0.5, "reason": "fine"}')
        result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table", "--no-cache"])
        assert result.exit_code in (0, 4), result.output  # 4: B's row not judged
        with Store.open(None) as store:
            ids.append(store.resolve(None)["id"])
    doc = json.loads(runner.invoke(app, ["diff", *ids, "--json"]).output)["columns"][0]
    mean = doc["meanScore"]
    assert mean["delta"] == pytest.approx(-0.04) and mean["method"] == "bootstrap"
    assert mean["ci95"][0] <= mean["delta"] <= mean["ci95"][1] and mean["verdict"] == "within noise"
    rate = doc["passRate"]  # 10/10 against 9/9: the two samples apart, around Δ 0
    assert rate["delta"] == 0 and rate["method"] == "newcombe" and rate["ci95"][0] < 0 < rate["ci95"][1]
