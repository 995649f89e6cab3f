"""Code a resumed run would take from the store is data until the user says otherwise (issue 39): a
stored config edited in the database (an inline Python assertion added, its config file pointed
elsewhere) is refused with the code listed, and runs only with --trust-stored-code; a run whose
config files are still here runs their code as before."""

import json
import sqlite3

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.stored_code import code_in

runner = CliRunner()
CONFIG = "prompts: ['Say {{w}}']\nproviders: [echo]\ntests:\n" + "".join(
    f"  - vars: {{w: w{i}}}\n    assert: [{{type: contains, value: w{i}}}]\n" for i in range(4))


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


def _tamper(db, marker) -> str:
    """What an attacker with write access to the store does: code into the stored config, the config
    file pointed elsewhere, and the run made resumable with test 3 still to run."""
    with sqlite3.connect(db) as conn:
        run_id, cfg = conn.execute("SELECT id, config_json FROM runs").fetchone()
        cfg = json.loads(cfg)
        cfg["tests"][3]["assert"].append(
            {"type": "python", "value": f"__import__('pathlib').Path({marker.name!r}).write_text('ran') > 0"})
        cfg["extensions"] = ["file:///tmp/elsewhere/hooks.py:hook"]
        conn.execute("UPDATE runs SET config_json = ?, config_files_json = ?, status = 'interrupted' WHERE id = ?",
                     (json.dumps(cfg), json.dumps(["/nowhere/promptfooconfig.yaml"]), run_id))
        conn.execute("DELETE FROM results WHERE run_id = ? AND test_idx = 3", (run_id,))
    return run_id


@pytest.mark.parametrize("flag", ["--resume", "--retry-errors"])
def test_a_tampered_stored_config_is_refused_with_its_code_listed(flag, tmp_path, isolated_home, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("eval", "-c", write(tmp_path / "c.yaml", CONFIG), "--no-progress-bar").exit_code == 0
    marker = tmp_path / "ran"
    run_id = _tamper(isolated_home / "factcli.db", marker)

    refused = cli("eval", flag, run_id, "--no-progress-bar")
    assert refused.exit_code == 1, refused.output
    lines = refused.output.strip().splitlines()
    assert lines[0].startswith(f"error: run {run_id} would run code taken from the store") and "--trust-stored-code" in lines[0]
    assert lines[1:] == [
        "  - tests[3].assert[1]: inline python assertion: __import__('pathlib').Path('ran').write_text('ran') > 0",
        "  - extensions[0]: code file file:///tmp/elsewhere/hooks.py:hook"], refused.output
    assert not marker.exists()


def test_trusted_stored_code_runs(tmp_path, isolated_home, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("eval", "-c", write(tmp_path / "c.yaml", CONFIG), "--no-progress-bar").exit_code == 0
    marker = tmp_path / "ran"
    run_id = _tamper(isolated_home / "factcli.db", marker)
    with sqlite3.connect(isolated_home / "factcli.db") as conn:  # no hook file to load: only the assertion
        cfg = json.loads(conn.execute("SELECT config_json FROM runs").fetchone()[0])
        del cfg["extensions"]
        conn.execute("UPDATE runs SET config_json = ?", (json.dumps(cfg),))
    trusted = cli("eval", "--resume", run_id, "--trust-stored-code", "--no-progress-bar")
    assert trusted.exit_code == 0, trusted.output
    assert marker.read_text() == "ran"


def test_code_in_the_users_own_config_files_needs_no_trust(tmp_path, isolated_home, monkeypatch):
    """The config files are here and identical: their code is the user's own, as for a plain eval."""
    marker = tmp_path / "ran"
    cfg = write(tmp_path / "c.yaml", CONFIG.replace(
        "value: w3}", f"value: w3}}, {{type: python, value: \"__import__('pathlib').Path({str(marker)!r})"
                      ".write_text('ran') > 0\"}"))
    assert cli("eval", "-c", cfg, "--no-progress-bar").exit_code == 0
    marker.unlink()
    with sqlite3.connect(isolated_home / "factcli.db") as conn:
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
        conn.execute("UPDATE runs SET status = 'interrupted'")
        conn.execute("DELETE FROM results WHERE test_idx = 3")
    resumed = cli("eval", "--resume", run_id, "--no-progress-bar")
    assert resumed.exit_code == 0, resumed.output
    assert marker.read_text() == "ran"


def test_code_in_the_stored_options_is_refused_even_where_the_config_files_are(tmp_path, isolated_home, monkeypatch):
    """--providers, --grader and --var of the first run are stored with it: a resume takes them from
    the store, so code they name is refused too (here a provider edited into `exec:`)."""
    monkeypatch.chdir(tmp_path)
    assert cli("eval", "-c", write(tmp_path / "c.yaml", CONFIG), "--no-progress-bar", "-r", "echo").exit_code == 0
    marker = tmp_path / "ran"
    with sqlite3.connect(isolated_home / "factcli.db") as conn:
        run_id, opts = conn.execute("SELECT id, options_json FROM runs").fetchone()
        opts = json.loads(opts)
        assert opts["providers"] == ["echo"]
        opts["providers"] = [f"exec: touch {marker}"]
        opts["vars"] = {"extra": "file://fetch.py"}
        conn.execute("UPDATE runs SET options_json = ?, status = 'interrupted'", (json.dumps(opts),))
        conn.execute("DELETE FROM results WHERE test_idx = 3")
    refused = cli("eval", "--resume", run_id, "--no-progress-bar")
    assert refused.exit_code == 1, refused.output
    lines = refused.output.strip().splitlines()
    assert "(its stored options)" in lines[0] and lines[1:] == [
        "  - --var.extra: code file file://fetch.py", f"  - --providers[0]: runs a command: touch {marker}"]
    assert not marker.exists()


def test_every_kind_of_code_is_found():
    config = {
        "prompts": ["file://prompts.py:make", "Say {{x}}"],
        "providers": ["exec: ./run.sh", {"id": "file://provider.js", "transform": "output.trim()"}, "python:p.py"],
        "tests": ["file://generate.py:tests", "file://tests.csv",
                  {"vars": {"doc": "file://fetch.py", "name": "report.js"},
                   "options": {"transformVars": "return vars"},
                   "assert": [{"type": "javascript", "value": "output.length > 3"},
                              {"type": "python", "value": "file://check.py:grade"},
                              {"type": "contains", "value": "fn: not code"},
                              {"type": "equals", "value": "x", "contextTransform": "ctx.doc"}]}],
        "defaultTest": {"assert": ["fn: output === 'x'"]},
        "extensions": ["file://hooks.js:hook"],
        "nunjucksFilters": {"shout": "filters/shout.js"},
    }
    assert code_in(config) == [
        "prompts[0]: code file file://prompts.py:make",
        "providers[0]: runs a command: ./run.sh",
        "providers[1].id: code file file://provider.js",
        "providers[1].transform: inline transform: output.trim()",
        "providers[2]: code file python:p.py",
        "tests[0]: code file file://generate.py:tests",
        "tests[2].vars.doc: code file file://fetch.py",
        "tests[2].options.transformVars: inline transformVars: return vars",
        "tests[2].assert[0]: inline javascript assertion: output.length > 3",
        "tests[2].assert[1].value: code file file://check.py:grade",
        "tests[2].assert[3].contextTransform: inline contextTransform: ctx.doc",
        "defaultTest.assert[0]: inline code: fn: output === 'x'",
        "extensions[0]: code file file://hooks.js:hook",
        "nunjucksFilters.shout: filter code filters/shout.js",
    ]
    assert code_in({"prompts": ["Hi"], "providers": ["echo"], "tests": [{"vars": {"a": "b.py is a file"}}]}) == []
