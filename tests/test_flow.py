"""The one eval flow (factcli/run/flow.py): `factcli eval` and `factcli.evaluate()` run the same stages
with the same typed options, and the store is opened at the store stage, not before."""

import sqlite3

from conftest import write
from typer.testing import CliRunner

import factcli
from factcli.cli import app
from factcli.run.flow import EvalOptions, Flow

CONFIG = """
prompts: ["Say {{word}}"]
providers: [echo]
tests:
  - vars: {word: one}
    assert: [{type: contains, value: one}]
  - vars: {word: two}
    assert: [{type: contains, value: three}]
"""


def _spy(monkeypatch) -> list:
    seen = []
    prepare, execute = Flow.prepare, Flow.execute

    def spy_prepare(self):
        seen.append(("prepare", self.options))
        return prepare(self)

    async def spy_execute(self):
        seen.append(("execute", self.options))
        return await execute(self)

    monkeypatch.setattr(Flow, "prepare", spy_prepare)
    monkeypatch.setattr(Flow, "execute", spy_execute)
    return seen


def test_the_cli_and_the_api_run_the_same_flow_with_the_same_options(tmp_path, monkeypatch):
    cfg = write(tmp_path / "c.yaml", CONFIG)
    seen = _spy(monkeypatch)
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "-j", "2", "--repeat", "2", "--var", "x=1",
                                      "--no-progress-bar", "--no-table", "--db", str(tmp_path / "a.db")])
    assert result.exit_code == 100, result.output
    run = factcli.evaluate(str(cfg), max_concurrency=2, repeat=2, vars={"x": "1"}, db=tmp_path / "b.db")
    assert [stage for stage, _ in seen] == ["prepare", "execute", "prepare", "execute"]
    cli_options, api_options = seen[0][1], seen[2][1]
    assert isinstance(cli_options, EvalOptions) and isinstance(api_options, EvalOptions)
    assert cli_options.run == api_options.run  # the same RunOptions from flags and from keywords
    assert run.successes == 2 and run.failures == 2
    for db in ("a.db", "b.db"):
        with sqlite3.connect(tmp_path / db) as conn:
            assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 4


def test_a_dry_run_or_a_failed_check_stores_nothing(tmp_path):
    """The store stage comes after the preflight: neither a dry run nor a config that fails its
    checks creates the database."""
    db = tmp_path / "runs.db"
    cfg = write(tmp_path / "c.yaml", CONFIG)
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--dry-run", "--db", str(db)])
    assert result.exit_code == 0 and "Dry run: 2 rows" in result.output, result.output
    assert not db.exists()
    write(tmp_path / "blocker", "a file where a folder should be")  # (a missing folder would be made)
    bad = write(tmp_path / "bad.yaml", CONFIG + "outputPath: " + str(tmp_path / "blocker" / "dir" / "r.json"))
    result = CliRunner().invoke(app, ["eval", "-c", str(bad), "--db", str(db), "--no-progress-bar"])
    assert result.exit_code == 1 and not db.exists(), result.output
