"""Configs in the style users write for promptfoo (tests/user_configs/), run end to end against the fake
OpenAI server from where their owners run them: their own folder layouts, providers in JavaScript and
TypeScript that call the API themselves, prompts and tests from files, JavaScript derived metrics,
commandLineOptions, and results written to folders that do not exist yet (issue 42)."""

import csv
import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factcli.cli import app
from factcli.scripting import node

USER_CONFIGS = Path(__file__).parent / "user_configs"
sys.path.insert(0, str(Path(__file__).parent / "promptfoo_configs"))
from trim import trim  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="their providers are JavaScript")
runner = CliRunner()


@pytest.fixture
def repo(tmp_path, monkeypatch, fake_openai):
    """A copy of the configs, as the root of the user's repository (the current directory)."""
    root = tmp_path / "repo"
    shutil.copytree(USER_CONFIGS, root)
    monkeypatch.chdir(root)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    return root


def _eval(*args: str):
    return runner.invoke(app, ["eval", "--no-progress-bar", *args])


def test_support_bot_from_the_repository_root(repo, fake_openai):
    """`factcli eval -c support-bot/evals/promptfooconfig.yaml` from the repository's root, as its CI does:
    `{label, raw: file://prompts/system.txt}` sends the file's text; the JavaScript wrapper (with `model:` in
    its config, which factcli once took for a misspelt `models`) calls the API itself; outputPath lands
    in eval_artifacts/ under the current directory, a folder that did not exist; maxConcurrency 2 and
    cache false come from commandLineOptions. promptfoo 0.121.20 gave the same rows (its golden)."""
    assert not (repo / "eval_artifacts").exists()
    result = _eval("-c", "support-bot/evals/promptfooconfig.yaml")
    assert result.exit_code == 0, result.output
    assert "Wrote eval_artifacts/promptfoo.json" in result.output
    doc = json.loads((repo / "eval_artifacts" / "promptfoo.json").read_text())
    ours, golden = trim(doc), json.loads((repo / "support-bot" / "promptfoo-golden.json").read_text())
    key = lambda r: (r["testIdx"], r["promptIdx"])  # noqa: E731
    for mine, theirs in zip(sorted(ours["results"], key=key), sorted(golden["results"], key=key)):
        for field in ("output", "success", "score", "cost", "tokenUsage"):
            assert mine[field] == theirs[field], (field, mine, theirs)
        if theirs["provider"]["label"] == "wrapped-gpt":  # (promptfoo's own openai provider adds its HTTP headers)
            assert mine["metadata"] == theirs["metadata"]
    # the wrapper's requests and the openai provider's: 3 questions x 2 prompts each, none from a cache
    bodies = [r["json"] for r in fake_openai.requests if r["path"].endswith("/chat/completions")]
    assert len(bodies) == 12 and {b["model"] for b in bodies} == {"gpt-4o-mini"}
    assert all("file://" not in b["messages"][-1]["content"] for b in bodies)
    assert sum(b["messages"][-1]["content"].startswith("You are the support assistant") for b in bodies) == 6
    # derivedMetrics written as a JavaScript function body: 3 of 3 correct (promptfoo: 0, see
    # tests/test_promptfoo_configs.py)
    assert {p["metrics"]["namedScores"]["accuracy"] for p in doc["results"]["prompts"]} == {1}
    assert {p["namedScores"]["accuracy"] for p in golden["prompts"]} == {0}


def test_classifier_without_prompts_and_with_named_exports(repo):
    """No `prompts:` (each test's `prompt` var is sent), providers named by their export in an ES module
    (a class and a plain function), results as CSV and HTML in reports/2026-11/."""
    result = _eval("-c", "classifier/promptfooconfig.yaml", "--no-write")
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    rows = list(csv.DictReader((repo / "reports" / "2026-11" / "classifier.csv").open(encoding="utf-8")))
    assert [r["prompt"] for r in rows] == ["My card was charged twice", "The app crashes on start",
                                           "Do you ship to Norway?"]
    assert [(r["[file://lib/provider.mjs:KeywordClassifier] {{prompt}}"], r["[function-classifier] {{prompt}}"])
            for r in rows] == [("billing", "billing"), ("bug", "bug"), ("other", "other")]
    assert "<html" in (repo / "reports" / "2026-11" / "classifier.html").read_text()


def test_a_typescript_provider(repo, monkeypatch):
    """A TypeScript class as the default export, through the `typescript` package the project has
    installed (or Node's own type stripping where the installed Node has it)."""
    modules = Path(__file__).parent / ".npm" / "typescript" / "node_modules"
    if (modules / "typescript" / "package.json").is_file():
        (repo / "ts-agent" / "node_modules").symlink_to(modules, target_is_directory=True)
    node.shutdown()  # a worker of its own: where `typescript` is found is the worker's
    node._TS_ROOTS.clear()
    try:
        result = _eval("-c", "ts-agent/promptfooconfig.yaml", "--no-write")
        if result.exit_code == 1 and "is TypeScript: it runs with Node.js 22.6 or later" in result.output:
            pytest.skip("neither Node's type stripping nor the typescript package: bash tests/npm_packages.sh")
        assert result.exit_code == 0, result.output
        row = json.loads((repo / "out" / "ts" / "results.json").read_text())["results"]["results"][0]
        assert row["response"]["output"] == "SUMMARY: The quick brown fox" and row["success"]
    finally:
        node.shutdown()
        node._TS_ROOTS.clear()


def test_a_broken_provider_is_named_before_any_call(repo, fake_openai):
    wrapper = repo / "support-bot" / "evals" / "providers" / "openai_wrapper.js"
    wrapper.write_text(wrapper.read_text().replace("module.exports = OpenAIWrapper;", "module.exports = {};"))
    result = _eval("-c", "support-bot/evals/promptfooconfig.yaml", "--no-write")
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert ("providers[0] wrapped-gpt: openai_wrapper.js must export a provider class (with callApi) or a function "
            "as its default export (found a object; name another export with file://openai_wrapper.js:Name)") in text
    assert "nothing was sent" in text and fake_openai.request_count == 0
