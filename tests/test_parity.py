"""factcli scores the parity config exactly as promptfoo 0.121.20 did (tests/parity/golden.json)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from factcli.cli import app
from parity_compare import differences

PARITY = Path(__file__).parent / "parity"


def test_parity_with_promptfoo(fake_openai, tmp_path, monkeypatch):
    for pattern, reply, model in json.loads((PARITY / "rules.json").read_text()):
        fake_openai.add_rule(pattern, reply, model=model)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    out = tmp_path / "ours.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(PARITY / "promptfooconfig.yaml"), "-o", str(out),
                                      "--no-table", "--no-progress-bar"])
    assert result.exit_code == 100, result.output  # some rows fail, as in promptfoo
    ours = json.loads(out.read_text())
    golden = json.loads((PARITY / "golden.json").read_text())
    assert differences(ours, golden) == []
    stats, gstats = ours["results"]["stats"], golden["results"]["stats"]
    assert (stats["successes"], stats["failures"], stats["errors"]) == (
        gstats["successes"], gstats["failures"], gstats["errors"])
    # every request went through the real HTTP client with the provider's parameters
    bodies = [r["json"] for r in fake_openai.requests if r["path"].endswith("/chat/completions")]
    # 36 rows, but identical requests (same model and prompt) are made once: 2 x 2 x 6 questions
    assert len(bodies) == 24
    assert len({(b["model"], b["messages"][0]["content"]) for b in bodies}) == 24
    assert {b["model"] for b in bodies} == {"model-a", "model-b"}
    assert all(b.get("temperature") == 0 for b in bodies if b["model"] == "model-a")
    assert all(b.get("max_tokens") == 64 for b in bodies if b["model"] == "model-b")


def test_parity_compare_detects_a_difference():
    golden = json.loads((PARITY / "golden.json").read_text())
    changed = json.loads((PARITY / "golden.json").read_text())
    changed["results"]["results"][3]["score"] += 0.5
    changed["results"]["prompts"][1]["metrics"]["namedScores"]["accuracy"] += 1
    diffs = differences(changed, golden)
    assert len(diffs) == 2
