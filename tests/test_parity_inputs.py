"""factcli reads CSV tests and `--assertions/--model-outputs` inputs exactly as promptfoo 0.121.20 does.

The goldens under tests/parity/csv/ and tests/parity/model-outputs/ are promptfoo's own results on
the same inputs (how they were made: the README in each folder).
"""

import json
from pathlib import Path

from typer.testing import CliRunner

from factcli.cli import app
from parity_compare import differences

PARITY = Path(__file__).parent / "parity"
runner = CliRunner()


def _stats(doc: dict) -> tuple:
    s = doc["results"]["stats"]
    return s["successes"], s["failures"], s["errors"]


def test_csv_tests_match_promptfoo(fake_openai, tmp_path, monkeypatch):
    folder = PARITY / "csv"
    for pattern, reply, model in json.loads((folder / "rules.json").read_text()):
        fake_openai.add_rule(pattern, reply, model=model)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    out = tmp_path / "ours.json"
    result = runner.invoke(app, ["eval", "-c", str(folder / "promptfooconfig.yaml"), "-o", str(out),
                                 "--no-table", "--no-progress-bar", "--no-write"])
    assert result.exit_code == 100, result.output
    ours = json.loads(out.read_text())
    golden = json.loads((folder / "golden.json").read_text())
    assert differences(ours, golden) == []
    assert _stats(ours) == _stats(golden)
    # what promptfoo made of each CSV row, beyond what the scores show
    ours_rows = {r["testIdx"]: r for r in ours["results"]["results"]}
    for row in golden["results"]["results"]:
        mine = ours_rows[row["testIdx"]]
        assert mine["testCase"].get("description") == row["testCase"].get("description")
        assert mine["vars"] == row["vars"]
        assert (mine["testCase"].get("metadata") or {}) == (row["testCase"].get("metadata") or {})
        assert mine["testCase"].get("threshold") == row["testCase"].get("threshold")
        assert _assertions(mine) == _assertions(row), row["testIdx"]
    # __providerOutput rows never reach the server; __prefix/__suffix wrap the prompt template
    prompts = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests
               if r["path"].endswith("/chat/completions")]
    assert not any(p == "Q: ignored" for p in prompts)
    assert "PRE Q: Tell me a joke POST" in prompts


def _assertions(row: dict) -> list:
    """The assertions as each component ran them (None for an assert-set's own entry)."""
    out = []
    for c in (row.get("gradingResult") or {}).get("componentResults") or []:
        a = c.get("assertion")
        out.append(None if a is None else {k: a[k] for k in ("type", "value", "threshold", "metric", "weight")
                                           if a.get(k) is not None})
    return out


def test_model_outputs_match_promptfoo(tmp_path, monkeypatch):
    folder = PARITY / "model-outputs"
    # relative paths from the fixture folder, as promptfoo was run
    monkeypatch.chdir(folder)
    out = tmp_path / "ours.json"
    result = runner.invoke(app, ["eval", "--assertions", "asserts.yaml", "--model-outputs", "outputs.json",
                                 "-o", str(out), "--no-table", "--no-progress-bar", "--no-write"])
    assert result.exit_code == 100, result.output
    ours = json.loads(out.read_text())
    golden = json.loads((folder / "golden.json").read_text())
    assert differences(ours, golden) == []
    assert _stats(ours) == _stats(golden)
    ours_rows = {r["testIdx"]: r for r in ours["results"]["results"]}
    for row in golden["results"]["results"]:
        mine = ours_rows[row["testIdx"]]
        assert mine["vars"] == row["vars"]  # `tags` joined with ", ", and "" for an empty list
        assert _assertions(mine) == _assertions(row), row["testIdx"]
    assert [p["raw"] for p in ours["results"]["prompts"]] == ["{{output}}"]
    assert [p["provider"] for p in ours["results"]["prompts"]] == ["echo"]


# ---------------------------------------------------------------- CSV cells promptfoo reads silently (issue 52 item 8)

def _csv_eval(tmp_path, text: str, *args: str):
    from conftest import write

    write(tmp_path / "t.csv", text)
    cfg = write(tmp_path / "c.yaml", "prompts: ['About {{topic}}']\nproviders: [openai:chat:gpt-4o-mini]\n"
                                     "tests: file://t.csv\n")
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--no-write", "-o", str(out),
                                 *args])
    return result, out


def test_a_near_miss_expected_prefix_is_warned_and_read_as_promptfoo_reads_it(fake_openai, tmp_path, monkeypatch):
    """promptfoo 0.121.20 reads `contians: cats` as an equals value (checked: `Expected output "About cats" to
    equal "contians: cats"`), silently; factcli reads it the same and says so before any call."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    text = ("topic,__expected\ncats,contians: cats\ndogs,Contains: dogs\nbirds,contains: birds\n"
            "fish,not-contians: fish\nmice,contians: mice\nnewts,The answer: 42\n")
    result, _ = _csv_eval(tmp_path, text, "--dry-run")
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and fake_openai.request_count == 0, result.output
    assert (f"{tmp_path / 't.csv'}: row 1 and 1 more, column __expected: 'contians:' is no assertion type, so the "
            "whole cell is an equals value (as promptfoo reads it); did you mean 'contains:'?") in said
    assert "row 2, column __expected: 'Contains:' is no assertion type" in said and "did you mean 'contains:'?" in said
    assert "row 4, column __expected: 'not-contians:' is no assertion type" in said and "'not-contains:'?" in said
    assert "'The answer:'" not in said and said.count("is no assertion type") == 3  # birds is a type; newts no near miss
    fake_openai.add_rule(".", "About whatever")
    result, out = _csv_eval(tmp_path, text)
    reasons = [r["gradingResult"]["reason"] for r in json.loads(out.read_text())["results"]["results"]]
    assert reasons[0] == 'Expected output "About whatever" to equal "contians: cats"'


def test_rows_of_empty_cells_are_run_as_promptfoo_runs_them_and_said_before_any_call(fake_openai, tmp_path,
                                                                                      monkeypatch):
    """promptfoo 0.121.20 (checked): a `,` row is a test with empty vars, sent; a whitespace-only line of a
    one-column file too. A blank line it refuses in a file of two columns (Invalid Record Length) and runs
    as an empty row in a file of one: factcli leaves blank lines out (docs/promptfoo-departures.md)."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    text = "topic,other\ncats,x\n,\n\ndogs,y\n,\n\n"
    result, _ = _csv_eval(tmp_path, text, "--dry-run")
    assert result.exit_code == 0 and fake_openai.request_count == 0, result.output
    assert (f"{tmp_path / 't.csv'}: rows 2, 4: every cell is empty or blank; promptfoo runs such a row too (empty "
            "vars, a call each): delete them to leave them out") in " ".join(result.output.split())
    result, out = _csv_eval(tmp_path, text)
    rows = json.loads(out.read_text())["results"]["results"]
    assert [(r["vars"]["topic"], r["testCase"]["description"]) for r in rows] == [
        ("cats", "Row #1"), ("", "Row #2"), ("dogs", "Row #3"), ("", "Row #4")]
    assert sorted(r["json"]["messages"][-1]["content"] for r in fake_openai.requests) == [
        "About ", "About ", "About cats", "About dogs"]
    result, _ = _csv_eval(tmp_path, "topic\ncats\n   \n", "--dry-run")
    assert "t.csv: row 2: every cell is empty or blank" in " ".join(result.output.split())
    assert "delete it to leave it out" in " ".join(result.output.split())
