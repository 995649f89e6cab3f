"""Code a resumed run would take from the store is data until the user says otherwise (issues 39, 48): a
stored config edited in the database (an inline Python assertion added, its config file pointed
elsewhere) is refused with the code listed, and runs only with --trust-stored-config (or its older
name, --trust-stored-code); a run whose config files are still here, unchanged, runs their code as
before. What is listed is the walk of the config-key table (config/stored_trust.py); the bypasses of
issue 48 are tests/test_stored_trust.py."""

import json
import sqlite3

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.stored_trust import what_it_would_do

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
    assert lines[0].startswith(f"error: run {run_id} would be rebuilt from what the store says, not from your files "
                               "(/nowhere/promptfooconfig.yaml is not here") and "--trust-stored-config" in lines[0]
    assert lines[1:] == [
        "  - runs code: tests[3].assert[1].value: inline python assertion: "
        "__import__('pathlib').Path('ran').write_text('ran') > 0",
        "  - runs code: extensions[0]: code file file:///tmp/elsewhere/hooks.py:hook"], refused.output
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
    trusted = cli("eval", "--resume", run_id, "--trust-stored-config", "--no-progress-bar")
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
    assert "(its stored options --var, --providers" in lines[0], lines[0]
    # (the stored providers replace the config file's: the files no longer give the stored config either)
    assert lines[1:5] == [
        "  - option: --var: extra=file://fetch.py", "  - runs code: --var.extra: code file file://fetch.py",
        f"  - option: --providers: exec: touch {marker}",
        f"  - runs code: --providers[0]: provider exec: touch {marker}"]
    assert not marker.exists()


def test_every_kind_of_code_is_found():
    config = {
        "prompts": ["file://prompts.py:make", "Say {{x}}"],
        "providers": ["exec: ./run.sh", {"id": "file://provider.js", "transform": "output.trim()"}, "python:p.py"],
        "tests": ["file://generate.py:tests", "file://tests.csv",
                  {"vars": {"doc": "file://fetch.py", "name": "report.js"},
                   "options": {"transformVars": "return vars", "postprocess": "output.js"},
                   "assert": [{"type": "javascript", "value": "output.length > 3"},
                              {"type": "python", "value": "file://check.py:grade"},
                              {"type": "contains", "value": "fn: not code"},
                              {"type": "equals", "value": "x", "contextTransform": "ctx.doc"}]},
                  {"path": "file://gen.py:make", "config": {"n": 2}}],
        "defaultTest": {"assert": [{"type": "not-python", "value": "check.py"}]},
        "extensions": ["file://hooks.js:hook"],
        "nunjucksFilters": {"shout": "filters/shout.js"},
    }
    assert what_it_would_do(config) == [
        "runs code: prompts[0]: code file file://prompts.py:make",
        "runs code: providers[0]: provider exec: ./run.sh",
        "runs code: providers[1].id: provider file://provider.js",
        "runs code: providers[1].transform: inline transform: output.trim()",
        "runs code: providers[2]: provider python:p.py",
        "runs code: tests[0]: code file file://generate.py:tests",
        "reads: tests[1]: file://tests.csv (more config: it may hold code)",
        "runs code: tests[2].vars.doc: code file file://fetch.py",
        "runs code: tests[2].options.transformVars: inline transformVars: return vars",
        "runs code: tests[2].options.postprocess: inline postprocess: output.js",
        "runs code: tests[2].assert[0].value: inline javascript assertion: output.length > 3",
        "runs code: tests[2].assert[1].value: code file file://check.py:grade",
        "runs code: tests[2].assert[3].contextTransform: inline contextTransform: ctx.doc",
        "runs code: tests[3].path: code file file://gen.py:make",
        "runs code: defaultTest.assert[0].value: inline python assertion: check.py",
        "runs code: extensions[0]: code file file://hooks.js:hook",
        "runs code: nunjucksFilters.shout: code file filters/shout.js",
    ]
    plain = {"prompts": ["Hi"], "providers": ["echo"], "tests": [{"vars": {"a": "b.py is a file"}}]}
    assert what_it_would_do(plain) == []


def test_what_else_a_config_would_do_is_found():
    """Files and URLs it reads, endpoints that get a credential, paths it writes, env vars."""
    config = {
        "prompts": ["file://p.txt", "Hi {{ env.HOME_DIR }} ${TOKEN}"],
        "providers": [{"id": "openai:chat:m", "config": {"apiBaseUrl": "http://evil/v1", "apiKeyEnvar": "MY_KEY"},
                       "env": {"OPENAI_BASE_URL": "http://evil"}}, "file://providers.yaml"],
        "tests": "https://example.org/t.yaml",
        "defaultTest": "file://default.yaml",
        "scenarios": ["file://s.yaml"],
        "outputPath": ["out.json", "/etc/passwd"],
        "commandLineOptions": {"output": "/tmp/x.csv", "envPath": ".env.other", "grader": "exec: judge"},
        "env": {"X": "1"},
        "derivedMetrics": [{"name": "m", "value": "a / 2"}],
        "assertionTemplates": {"judge": {"type": "webhook", "value": "http://10.0.0.9/judge"}},
    }
    assert what_it_would_do(config) == [
        "reads: prompts[0]: file://p.txt",
        "env: prompts[1]: reads TOKEN", "env: prompts[1]: reads HOME_DIR",
        "sends your credential to: providers[0].config.apiBaseUrl: http://evil/v1",
        "env: providers[0].config.apiKeyEnvar: reads MY_KEY",
        "env: providers[0].env.OPENAI_BASE_URL: sets OPENAI_BASE_URL",
        "reads: providers[1]: file://providers.yaml (more config: it may hold code)",
        "reads: tests: https://example.org/t.yaml (more config: it may hold code)",
        "reads: defaultTest: file://default.yaml (more config: it may hold code)",
        "reads: scenarios[0]: file://s.yaml (more config: it may hold code)",
        "writes: outputPath[0]: out.json", "writes: outputPath[1]: /etc/passwd",
        "writes: commandLineOptions.output: /tmp/x.csv", "reads: commandLineOptions.envPath: .env.other",
        "runs code: commandLineOptions.grader: provider exec: judge",
        "env: env.X: sets X",
        "sends outputs and vars to: assertionTemplates.judge.value: http://10.0.0.9/judge",
    ]
